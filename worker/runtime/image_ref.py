"""Parsing of container image references, with the digest pinning jobs rely on."""

from __future__ import annotations

import re
from dataclasses import dataclass

from worker.runtime.base import InvalidRunSpec

_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
# Docker's reference grammar, simplified: optional registry host[:port], then
# lowercase path components separated by "/".
_NAME = re.compile(
    r"^(?:(?P<host>[A-Za-z0-9.-]+(?::[0-9]+)?)/)?"
    r"(?P<path>[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*)$"
)
_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")


@dataclass(frozen=True)
class ImageRef:
    """`name[:tag]@sha256:...`, a bare image ID `sha256:...`, or an unpinned `name[:tag]`."""

    name: str | None
    tag: str | None
    digest: str | None

    @property
    def pinned(self) -> bool:
        return self.digest is not None

    @property
    def is_bare_id(self) -> bool:
        return self.name is None

    def __str__(self) -> str:
        if self.name is None:
            return str(self.digest)
        out = self.name
        if self.tag:
            out += f":{self.tag}"
        if self.digest:
            out += f"@{self.digest}"
        return out


def parse_image_ref(ref: str) -> ImageRef:
    """Parse and validate; digests must be full (a short prefix could match another image)."""
    ref = ref.strip()
    if not ref:
        raise InvalidRunSpec("image reference is empty")
    if ref.startswith("sha256:"):
        if not _DIGEST.match(ref):
            raise InvalidRunSpec(f"image ID must be sha256: followed by 64 hex digits, got {ref!r}")
        return ImageRef(name=None, tag=None, digest=ref)
    digest: str | None = None
    if "@" in ref:
        ref, digest = ref.split("@", 1)
        if not _DIGEST.match(digest):
            raise InvalidRunSpec(
                f"image digest must be sha256: followed by 64 hex digits, got {digest!r}"
            )
    name, tag = ref, None
    last = ref.rsplit("/", 1)[-1]
    if ":" in last:
        name, tag = ref.rsplit(":", 1)
        if not _TAG.match(tag):
            raise InvalidRunSpec(f"invalid image tag {tag!r}")
    if not _NAME.match(name):
        raise InvalidRunSpec(f"invalid image name {name!r}")
    return ImageRef(name=name, tag=tag, digest=digest)
