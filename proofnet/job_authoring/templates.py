"""`proofnet job init`: a job repository that works as written, for one framework.

The files are `*.tmpl` beside this module (package data), filled with `string.Template`:
a trainer on the `pot` trainer interface with synthetic data drawn from the job seed (so it
trains without a download), a spec with every field commented, a Dockerfile and a README.
Placeholders the author must replace (repository URL, commit, image digest) are ones
`proofnet job validate` names.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path
from string import Template

FRAMEWORKS = ("numpy", "pytorch", "tensorflow")
PLACEHOLDER_REPO = "https://git.example.org/you/proofnet-job.git"
PLACEHOLDER_COMMIT = "0" * 40
PLACEHOLDER_DIGEST = "sha256:" + "0" * 64
_HERE = Path(__file__).resolve().parent


class TemplateError(Exception):
    """The template cannot be written (unknown framework, directory not empty)."""


@dataclass(frozen=True)
class Flavour:
    image: str
    image_needs: str
    model_file: str
    base: str
    install: str
    pip_extra: str
    lr: str
    gpus: int
    gpu_memory_mb: int


FLAVOURS = {
    "numpy": Flavour(
        image="registry.example.org/you/numpy-job:1@" + PLACEHOLDER_DIGEST,
        image_needs="",
        model_file="model.weights",
        base="python:3.11-slim-bookworm",
        install="pip install --no-cache-dir 'numpy>=1.24'",
        pip_extra="",
        lr="0.1",
        gpus=0,
        gpu_memory_mb=0,
    ),
    "pytorch": Flavour(
        image="registry.example.org/you/pytorch-job:1@" + PLACEHOLDER_DIGEST,
        image_needs=" and torch",
        model_file="model.pt",
        # For GPUs, a CUDA base (pytorch/pytorch:<version>-cuda<x>-cudnn<y>-runtime).
        base="python:3.11-slim-bookworm",
        install="pip install --no-cache-dir 'numpy>=1.24' torch "
        "--extra-index-url https://download.pytorch.org/whl/cpu",
        pip_extra="torch",
        lr="0.01",
        gpus=1,
        gpu_memory_mb=4096,
    ),
    "tensorflow": Flavour(
        image="registry.example.org/you/tensorflow-job:1@" + PLACEHOLDER_DIGEST,
        image_needs=" and tensorflow",
        model_file="model.keras",
        # For GPUs: pip install 'tensorflow[and-cuda]'.
        base="python:3.11-slim-bookworm",
        install="pip install --no-cache-dir 'numpy>=1.24' tensorflow",
        pip_extra="tensorflow",
        lr="0.01",
        gpus=1,
        gpu_memory_mb=4096,
    ),
}


def _fill(name: str, values: dict[str, object]) -> str:
    return Template((_HERE / name).read_text()).substitute(values)


def write_template(
    directory: Path,
    framework: str,
    *,
    repo_url: str | None = None,
    seed: int | None = None,
) -> list[Path]:
    """Write the template into `directory` (created; it must not hold files already);
    the paths written."""
    if framework not in FLAVOURS:
        raise TemplateError(
            f"--framework must be one of {', '.join(FRAMEWORKS)}, got {framework!r}"
        )
    flavour = FLAVOURS[framework]
    directory = Path(directory)
    if directory.exists() and any(directory.iterdir()):
        raise TemplateError(f"{directory} is not empty: choose a new directory")
    directory.mkdir(parents=True, exist_ok=True)
    values: dict[str, object] = {
        "framework": framework,
        "repo_url": repo_url or PLACEHOLDER_REPO,
        "commit": PLACEHOLDER_COMMIT,
        "image": flavour.image,
        "image_needs": flavour.image_needs,
        "model_file": flavour.model_file,
        "base": flavour.base,
        "install": flavour.install,
        "pip_extra": f"'{flavour.pip_extra}'" if flavour.pip_extra else "",
        "lr": flavour.lr,
        "gpus": flavour.gpus,
        "gpu_memory_mb": flavour.gpu_memory_mb,
        "seed": secrets.randbelow(2**63) if seed is None else seed,
    }
    files = {
        "trainer.py": (_HERE / f"trainer_{framework}.py.tmpl").read_text(),
        "job.yaml": _fill("job.yaml.tmpl", values),
        "Dockerfile": _fill("Dockerfile.tmpl", values),
        "README.md": _fill("README.md.tmpl", values),
        ".gitignore": (_HERE / "gitignore.tmpl").read_text(),
    }
    written = []
    for name, text in files.items():
        path = directory / name
        path.write_text(text)
        written.append(path)
    return written
