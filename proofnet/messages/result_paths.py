"""Which files a job spec's result globs declare: one rule for the worker and the API.

A result name is the POSIX path of a file relative to the job's work dir. A glob matches
segment by segment: `*`, `?` and `[...]` never cross a `/`, and a `**` segment matches zero
or more whole segments. Names are refused when they could escape the work dir or could not
be attested (see `Attestation.result_hashes`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from fnmatch import fnmatchcase

MAX_NAME_CHARS = 512
_PRINTABLE = re.compile(r"[^\x00-\x1f\x7f\\]+")


class ResultNameError(ValueError):
    """A result name is not a safe relative path inside the work dir."""


def check_result_name(name: str) -> str:
    """Return `name` when it is a safe relative POSIX path, else raise ResultNameError."""
    if not isinstance(name, str) or not name:
        raise ResultNameError("result name is empty")
    if len(name) > MAX_NAME_CHARS:
        raise ResultNameError(f"result name is longer than {MAX_NAME_CHARS} characters")
    if not _PRINTABLE.fullmatch(name):
        raise ResultNameError(f"result name {name[:80]!r} has control characters or backslashes")
    parts = name.split("/")
    if name.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise ResultNameError(
            f"result name {name[:80]!r} must be relative, without '.', '..' or empty segments"
        )
    return name


def _match(parts: list[str], pattern: list[str]) -> bool:
    if not pattern:
        return not parts
    head, rest = pattern[0], pattern[1:]
    if head == "**":
        return any(_match(parts[i:], rest) for i in range(len(parts) + 1))
    return bool(parts) and fnmatchcase(parts[0], head) and _match(parts[1:], rest)


def glob_matches(glob: str, name: str) -> bool:
    """Whether result glob `glob` declares the file called `name`."""
    return _match(name.split("/"), glob.split("/"))


def declared_by(globs: Iterable[str], name: str) -> str | None:
    """The first glob in `globs` that declares `name`, or None."""
    for glob in globs:
        if glob_matches(glob, name):
            return glob
    return None


# An attempt's proof upload as the oracle feed names it: `attempts/<n>/pot/<file>` (only
# proof files are scoped so: a job's own result named so is never read this way).
ATTEMPT_RESULTS_PREFIX = "attempts/"
_ATTEMPT_NAME = re.compile(r"attempts/([1-9][0-9]{0,8})/(pot/[^/]+)")


def attempt_result_name(attempt: int, name: str) -> str:
    """The feed's name of whole-job attempt `attempt`'s proof upload `name` (`pot/...`)."""
    return f"{ATTEMPT_RESULTS_PREFIX}{attempt}/{name}"


def split_attempt_result_name(name: str) -> tuple[int, str] | None:
    """(attempt, upload name) of an `attempts/<n>/pot/<file>` name; None otherwise."""
    found = _ATTEMPT_NAME.fullmatch(name)
    return None if found is None else (int(found.group(1)), found.group(2))
