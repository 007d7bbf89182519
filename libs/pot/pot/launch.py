"""Running the network's own harness in a job's environment, whatever the job ships.

The worker (and a verifier) copies this library into a content-addressed directory it
controls (`install`), mounts it read-only into the job's container (first on PYTHONPATH,
its path in PROOFNET_PYTHON_LIB) and runs `harness_argv(...)`: a bootstrap that puts that
directory first on `sys.path`, drops any `pot` module imported before it (an image's
sitecustomize), imports the harness from there and checks it did. A repository or an
image that carries its own `pot` therefore never replaces the harness that trains it and
replays it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

from pot.env import PYTHON_LIB

# Where container runtimes mount the library's directory.
LIB_MOUNT = "/opt/proofnet/lib"
PACKAGE = "pot"
_SUFFIXES = (".py", ".typed")

BOOTSTRAP = (
    "import os, sys\n"
    f"lib = os.environ[{PYTHON_LIB!r}]\n"
    "sys.path.insert(0, lib)\n"
    "for name in [m for m in sys.modules if m == 'pot' or m.startswith('pot.')]:\n"
    "    del sys.modules[name]\n"
    "import pot.cli\n"
    "sys.exit(pot.cli.main(sys.argv[1:], lib=lib))\n"
)


def package_dir() -> Path:
    return Path(__file__).resolve().parent


def _files(root: Path) -> list[Path]:
    return sorted(
        p.relative_to(root)
        for p in root.rglob("*")
        if p.is_file() and p.suffix in _SUFFIXES and "__pycache__" not in p.parts
    )


def package_digest(root: Path | None = None) -> str:
    """SHA-256 over the library's source files (relative names and bytes), in name order:
    which harness a job ran."""
    root = package_dir() if root is None else root
    h = hashlib.sha256()
    for rel in _files(root):
        data = (root / rel).read_bytes()
        h.update(str(rel.as_posix()).encode() + b"\0" + len(data).to_bytes(8, "big") + data)
    return h.hexdigest()


def install(root: Path) -> Path:
    """Copy this library into `root/<digest>/pot` (once; a copy that no longer hashes to
    its name is replaced) and return `root/<digest>`: the directory to put on PYTHONPATH."""
    digest = package_digest()
    lib = Path(root) / digest[:32]
    if (lib / PACKAGE).is_dir() and package_digest(lib / PACKAGE) == digest:
        return lib
    Path(root).mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=root))
    try:
        source = package_dir()
        for rel in _files(source):
            dest = staging / PACKAGE / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source / rel, dest)
        for path in sorted(staging.rglob("*"), reverse=True):
            path.chmod(0o555 if path.is_dir() else 0o444)
        staging.chmod(0o555)
        if lib.exists():
            _remove(lib)
        os.replace(staging, lib)
    except BaseException:
        _remove(staging)
        raise
    return lib


def _remove(path: Path) -> None:
    for p in [path, *path.rglob("*")]:
        if p.is_dir() and not p.is_symlink():
            p.chmod(0o755)
    shutil.rmtree(path, ignore_errors=True)


def harness_argv(python: str, *args: str) -> tuple[str, ...]:
    """The command that runs `python -m pot <args>` from PROOFNET_PYTHON_LIB, and only from
    there."""
    return (python, "-c", BOOTSTRAP, *args)
