"""A data shard: one input file, named by URI and pinned by its SHA-256."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator

from proofnet.messages.fields import Frozen, Hex64

_DATA_URI = re.compile(r"[a-z][a-z0-9+.-]*://\S+")


def _data_uri(value: str) -> str:
    if len(value) > 2048 or not _DATA_URI.fullmatch(value):
        raise ValueError(f"data uri must be 'scheme://...' without spaces, got {value[:120]!r}")
    return value


DataUri = Annotated[str, AfterValidator(_data_uri)]


class DataShard(Frozen):
    """One input file; the worker refuses it when its SHA-256 differs."""

    uri: DataUri
    sha256: Hex64
