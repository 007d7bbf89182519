"""Where the read-only reference tree (`shared/`) is: importable by any test module."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def shared_dir() -> Path:
    """$PROOFNET_SHARED_DIR, else `shared/` inside or beside the repository."""
    override = os.environ.get("PROOFNET_SHARED_DIR")
    candidates = [Path(override)] if override else []
    candidates += [REPO / "shared", REPO.parent / "shared"]
    for candidate in candidates:
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(
        "shared fixtures not found; set PROOFNET_SHARED_DIR (looked in: "
        + ", ".join(str(c) for c in candidates)
        + ")"
    )
