"""`proofnet --help` lists every role without importing one: the heavy libraries behind the
roles (each a second or more to import) stay unloaded, so the answer is quick on any machine.

An import assertion, not a timing one: the figure is in docs/benchmarks.md, with the command
that measures it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from proofnet.cli import ROLES

HEAVY = ("pycardano", "fastapi", "sqlalchemy", "sqlmodel", "docker", "opshin", "uvicorn")
ROLE_MODULES = tuple(module for _name, module, _attr, _help in ROLES)

_PROBE = """
import json, sys
from proofnet.cli import app
try:
    app(sys.argv[1:], prog_name="proofnet")
except SystemExit as exc:
    code = exc.code
print(json.dumps({"code": code, "loaded": sorted(m for m in HEAVY if m in sys.modules),
                  "roles": sorted(m for m in ROLE_MODULES if m in sys.modules)}),
      file=sys.stderr)
"""


def _probe(*argv: str) -> dict[str, object]:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            f"HEAVY = {HEAVY!r}\nROLE_MODULES = {ROLE_MODULES!r}\n{_PROBE}",
            *argv,
        ],
        capture_output=True,
        text=True,
        timeout=300,  # a hang bound, not a budget
        check=False,
    )
    last = done.stderr.strip().splitlines()[-1]
    return {**json.loads(last), "stdout": done.stdout}


@pytest.mark.parametrize("argv", [("--help",), ()])
def test_the_root_help_imports_no_role(argv: tuple[str, ...]) -> None:
    got = _probe(*argv)
    assert got["loaded"] == [] and got["roles"] == [], got
    for role in ("api", "approvals", "audit", "chain", "devnet", "job", "oracle", "worker"):
        assert f" {role} " in str(got["stdout"])  # still listed, with its help


def test_a_role_is_imported_when_it_is_asked_for() -> None:
    """The honest twin: asking for a role's help does load it (the probe sees imports)."""
    got = _probe("job", "--help")
    assert got["code"] == 0 and got["roles"] == ["api.client_cli"], got
    assert "pycardano" in got["loaded"], got  # type: ignore[operator]
