"""Field types shared by the message models: strict, with errors that name the expected shape."""

from __future__ import annotations

import re
from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

from proofnet.messages.canonical import MAX_INT, MIN_INT

T = TypeVar("T")

_HEX64 = re.compile(r"[0-9a-f]{64}")
_HEX40 = re.compile(r"[0-9a-f]{40}")
_HEX56 = re.compile(r"[0-9a-f]{56}")
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
# A decimal number as text: optional sign, no exponent, no leading zeros, no trailing dot.
_DECIMAL = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?")


class Frozen(BaseModel):
    """Base of every message model: immutable, strict, unknown fields refused."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)


def _list_to_tuple(value: Any) -> Any:
    # Strict mode refuses lists for tuple fields in Python; callers naturally pass lists.
    return tuple(value) if isinstance(value, list) else value


def _pattern(regex: re.Pattern[str], what: str) -> AfterValidator:
    def check(value: str) -> str:
        if not regex.fullmatch(value):
            raise ValueError(f"must be {what}, got {value[:80]!r}")
        return value

    return AfterValidator(check)


def _version(expected: int) -> AfterValidator:
    def check(value: int) -> int:
        if value != expected:
            raise ValueError(f"unknown version {value}; this software reads version {expected}")
        return value

    return AfterValidator(check)


TupleOf = Annotated[tuple[T, ...], BeforeValidator(_list_to_tuple)]
Hex64 = Annotated[str, _pattern(_HEX64, "64 lowercase hex digits (a SHA-256 digest)")]
Hex40 = Annotated[str, _pattern(_HEX40, "40 lowercase hex digits (a git commit id)")]
Hex56 = Annotated[str, _pattern(_HEX56, "56 lowercase hex digits (a Blake2b-224 hash)")]
Digest = Annotated[str, _pattern(_DIGEST, "'sha256:' followed by 64 lowercase hex digits")]
DecimalStr = Annotated[str, _pattern(_DECIMAL, "a decimal string such as '-0.125' (no exponent)")]
# Integers stay inside what canonical JSON accepts, so a valid model always encodes.
Int = Annotated[int, Field(ge=MIN_INT, le=MAX_INT)]
NonNegInt = Annotated[int, Field(ge=0, le=MAX_INT)]
PosInt = Annotated[int, Field(ge=1, le=MAX_INT)]
Version1 = Annotated[int, _version(1)]
