"""The protocol deployment a service runs with: `GET /api/v1/deployment`.

The API and every oracle answer it, publicly, with the deployment JSON they run with (the
`deployment.json` format of `chain.offchain.builders.deployment`), so an auditor checks a
settlement against the deployment the services actually use rather than a file someone
handed over. The body never changes while a service runs: it is served with a strong ETag
(the body's SHA-256) and may be cached for `MAX_AGE_S`; 503 when the service has no
deployment configured.
"""

from __future__ import annotations

import hashlib
from typing import Final

DEPLOYMENT_PATH: Final = "/api/v1/deployment"
MAX_AGE_S: Final = 300


def deployment_headers(body: bytes) -> dict[str, str]:
    """The caching headers of a deployment answer whose body is `body`."""
    return {
        "ETag": f'"{hashlib.sha256(body).hexdigest()}"',
        "Cache-Control": f"public, max-age={MAX_AGE_S}",
    }


def not_modified(if_none_match: str | None, headers: dict[str, str]) -> bool:
    """Whether a request's If-None-Match names the body these headers describe."""
    if not if_none_match:
        return False
    tags = {t.strip().removeprefix("W/") for t in if_none_match.split(",")}
    return "*" in tags or headers["ETag"] in tags
