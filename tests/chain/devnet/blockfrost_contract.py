"""Validate devnet responses against Blockfrost's published OpenAPI schemas.

Schemas are resolved from `tests/fixtures/blockfrost/openapi.yaml` and made strict: an
object may carry only the properties the spec declares (Blockfrost's own schemas allow extra
keys, which would let a misspelt field slip through).
"""

from __future__ import annotations

import copy
from functools import cache
from typing import Any

import yaml
from fixture_paths import BLOCKFROST_OPENAPI
from openapi_schema_validator import OAS30Validator

# Errors outside the spec's per-path list (405, 413, 415) use the same body shape.
GENERIC_ERROR = "400"


@cache
def spec() -> dict[str, Any]:
    return dict(yaml.safe_load(BLOCKFROST_OPENAPI.read_text()))


def _resolve(node: Any, root: dict[str, Any]) -> Any:
    if isinstance(node, dict):
        if "$ref" in node:
            target: Any = root
            for part in node["$ref"].lstrip("#/").split("/"):
                target = target[part]
            return _resolve(target, root)
        out = {k: _resolve(v, root) for k, v in node.items() if k not in ("example", "examples")}
        if out.get("type") == "object" and "properties" in out:
            out.setdefault("additionalProperties", False)
        return out
    if isinstance(node, list):
        return [_resolve(x, root) for x in node]
    return node


@cache
def _schema(template: str, method: str, status: str) -> dict[str, Any]:
    root = spec()
    operation = root["paths"][template][method]
    responses = operation["responses"]
    response = responses.get(status) or root["components"]["responses"][GENERIC_ERROR]
    resolved = _resolve(copy.deepcopy(response), root)
    return dict(resolved["content"]["application/json"]["schema"])


def documented_statuses(template: str, method: str = "get") -> set[str]:
    return set(spec()["paths"][template][method]["responses"])


def has_path(template: str, method: str = "get") -> bool:
    return method in spec()["paths"].get(template, {})


def validate(template: str, status: int, body: Any, method: str = "get") -> None:
    """Raise `jsonschema.ValidationError` unless `body` matches the spec for this response."""
    schema = _schema(template, method, str(status))
    OAS30Validator(schema).validate(body)
    if status >= 400:
        assert body["status_code"] == status, body
