"""Credentials out of text that is shown: logs, error messages, job and lease reasons.

A URL may carry a user and password (`https://user:token@host/...`); git, httpx and our own
messages repeat such URLs verbatim. Whatever is shown to a provider, a submitter or a log
goes through `redact_credentials` first. Pure text in, text out; no I/O.
"""

from __future__ import annotations

import re

# scheme://userinfo@ : the userinfo is everything up to the first '@' before any '/', space
# or quote, so a path or query that contains '@' is left alone.
_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)[^/@\s'\"<>]+@")
REDACTED = "***"


def redact_credentials(text: str) -> str:
    """`text` with the user and password of every URL in it replaced by `***`."""
    return _USERINFO.sub(lambda m: f"{m.group('scheme')}{REDACTED}@", text)


def bounded(text: str, limit: int = 4000) -> str:
    """`text` cut to about `limit` characters, keeping its start and its end (where tools
    put the error that made them stop), with what was cut said in the middle."""
    if len(text) <= limit:
        return text
    keep = max(1, limit // 2)
    cut = len(text) - 2 * keep
    return f"{text[:keep]}\n[... {cut} characters cut ...]\n{text[-keep:]}"
