"""A job spec as a file: JSON, or YAML (a superset people can comment) by its suffix."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml


class SpecFileError(Exception):
    """The file cannot be read or is not a JSON/YAML object; the message says why."""


def read_spec_file(path: Path) -> dict[str, Any]:
    """The spec document in `path` (`.yaml`/`.yml`: YAML; anything else: JSON)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecFileError(f"cannot read the job spec {path}: {exc}") from exc
    is_yaml = path.suffix.lower() in (".yaml", ".yml")
    try:
        doc = yaml.safe_load(text) if is_yaml else json.loads(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise SpecFileError(f"{path} is not valid {'YAML' if is_yaml else 'JSON'}: {exc}") from exc
    if not isinstance(doc, dict):
        raise SpecFileError(f"{path} must hold one object (the job spec), not {type(doc).__name__}")
    return doc
