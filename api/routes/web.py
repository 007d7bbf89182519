"""The web app: static files from `api/web/`, the page at `/` and its assets under `/app/`;
and the OpenAPI reference at `/api/v1/docs` (`/docs` redirects there).

Plain files, no build step; everything the page loads comes from this server (the content
security policy forbids anything else), so a running app never downloads from elsewhere.
Swagger UI's own files come from the `fastapi-offline` package (pinned in the lock), read
from the installed package: nothing is fetched from a CDN at run time.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import APIRouter, HTTPException
from fastapi.responses import FileResponse, RedirectResponse, Response

router = APIRouter(include_in_schema=False)

WEB_DIR = Path(__file__).resolve().parent.parent / "web"

_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
    ".json": "application/json",
    ".txt": "text/plain; charset=utf-8",
}
# The files of Swagger UI the docs page loads, from the fastapi-offline package.
SWAGGER_FILES = {
    "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
    "swagger-ui.css": "text/css; charset=utf-8",
    "favicon.png": "image/png",
}

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; "
        "form-action 'self'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    # Revalidate every load: a deploy must never leave a stale module beside a new one.
    "Cache-Control": "no-cache",
}


def _file(relative: str) -> FileResponse:
    root = WEB_DIR.resolve()
    target = (root / relative).resolve()
    media_type = _TYPES.get(target.suffix.lower())
    if (
        media_type is None
        or not target.is_relative_to(root)
        or any(part.startswith(".") for part in target.relative_to(root).parts)
        or not target.is_file()
    ):
        raise HTTPException(404, f"no such file in the web app: {relative[:100]!r}")
    return FileResponse(target, media_type=media_type, headers=SECURITY_HEADERS)


@router.get("/")
def index() -> FileResponse:
    return _file("index.html")


@router.get("/app/{path:path}")
def asset(path: str) -> FileResponse:
    return _file(path or "index.html")


# Swagger UI sets inline styles; scripts still come from this server only.
DOCS_HEADERS = {
    **SECURITY_HEADERS,
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
        "img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; "
        "frame-ancestors 'none'; form-action 'self'"
    ),
}


@router.get("/api/v1/docs")
def docs() -> FileResponse:
    """The OpenAPI reference (Swagger UI over /api/v1/openapi.json)."""
    return FileResponse(WEB_DIR / "docs.html", media_type=_TYPES[".html"], headers=DOCS_HEADERS)


@router.get("/docs")
def docs_redirect() -> RedirectResponse:
    return RedirectResponse("/api/v1/docs", status_code=308)


@router.get("/api/v1/docs/assets/{name}")
def docs_asset(name: str) -> Response:
    media_type = SWAGGER_FILES.get(name)
    if media_type is None:
        raise HTTPException(404, f"no such file of the API reference: {name[:100]!r}")
    body = (files("fastapi_offline") / "static" / name).read_bytes()
    return Response(
        body,
        media_type=media_type,
        # The file changes only with the pinned package: cache it, but revalidate daily.
        headers={**DOCS_HEADERS, "Cache-Control": "public, max-age=86400"},
    )
