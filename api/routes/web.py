"""The web app: static files from `api/web/`, the page at `/` and its assets under `/app/`.

Plain files, no build step; everything the page loads comes from this server (the content
security policy forbids anything else), so a running app never downloads from elsewhere.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, HTTPException
from fastapi.responses import FileResponse

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
