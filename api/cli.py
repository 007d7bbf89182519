"""`proofnet api ...`: serve the API, migrate its database, seed senior members."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlsplit

import typer

app = typer.Typer(
    no_args_is_help=True,
    help="Serve and administer the proofnet API.",
    pretty_exceptions_show_locals=False,
)


def _config():  # type: ignore[no-untyped-def]
    from api.config import ApiConfig
    from proofnet.settings import build_settings

    settings = build_settings()
    return settings, ApiConfig.from_settings(settings)


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Bind address (default: from api_url)")] = None,
    port: Annotated[int | None, typer.Option(help="Port (default: from api_url)")] = None,
    workers: Annotated[
        int | None, typer.Option(min=1, max=64, help="Processes (default: api_workers)")
    ] = None,
    access_log: Annotated[
        bool | None,
        typer.Option("--access-log/--no-access-log", help="Log each request (default: on)"),
    ] = None,
) -> None:
    """Run the API (migrating the database to the latest schema first)."""
    import os

    from proofnet.serving import HttpLimits, serve

    settings, config = _config()
    default = urlsplit(settings.api_url)
    bind = {
        "host": host or default.hostname or "127.0.0.1",
        "port": port or default.port or 8000,
        "access_log": settings.api_access_log if access_log is None else access_log,
        # Slow heads and bodies time out; connections are capped (proofnet.serving).
        "limits": HttpLimits.from_settings(settings),
    }
    processes = workers or settings.api_workers
    if processes == 1:
        from api.app import create_app

        serve(create_app(config=config), **bind)  # type: ignore[arg-type]
        return
    # Several processes: migrate once here, so they never race each other's DDL, then
    # let each build the app from the same environment (uvicorn needs a factory path).
    if config.auto_migrate:
        from api.db import make_engine
        from api.migrate import upgrade_head

        engine = make_engine(config.database_url)
        try:
            upgrade_head(engine)
        finally:
            engine.dispose()
    os.environ["PROOFNET_API_AUTO_MIGRATE"] = "false"
    serve("api.app:create_app", factory=True, workers=processes, **bind)  # type: ignore[arg-type]


@app.command()
def migrate() -> None:
    """Bring the database schema up to date (alembic upgrade head)."""
    from api.db import make_engine
    from api.migrate import current_revision, upgrade_head

    _, config = _config()
    engine = make_engine(config.database_url)
    try:
        upgrade_head(engine)
        typer.echo(f"database at revision {current_revision(engine)}")
    finally:
        engine.dispose()


@app.command("add-senior")
def add_senior(
    address: Annotated[str, typer.Argument(help="bech32 payment address of the member")],
) -> None:
    """Make ADDRESS a senior member: an endorser of new submitters (and a submitter)."""
    from api.clock import utcnow
    from api.db import make_engine, open_session
    from api.errors import ApiError
    from api.migrate import upgrade_head
    from api.services.users import add_senior as add

    _, config = _config()
    engine = make_engine(config.database_url)
    try:
        upgrade_head(engine)
        with open_session(engine) as session:
            user = add(session, config, address, utcnow())
    except ApiError as e:
        typer.echo(f"error: {e.detail}", err=True)
        raise typer.Exit(1) from None
    finally:
        engine.dispose()
    typer.echo(f"{user.address} is a senior member")
