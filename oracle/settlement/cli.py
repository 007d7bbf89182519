"""`proofnet oracle settle`: run the settlement engine in the foreground (no HTTP), e.g. next
to `proofnet oracle serve` on the same database, or as the chaos test's oracle process.

Mounted on the oracle's Typer app by `register(app)`; imports stay inside the command so
`proofnet oracle --help` stays fast.
"""

from __future__ import annotations

from pathlib import Path

import typer


def settle(
    deployment: Path = typer.Option(..., "--deployment", help="deployment.json of the protocol"),
    key_file: Path | None = typer.Option(
        None, "--key-file", help="oracle signing key (default: $PROOFNET_ORACLE_KEY_FILE)"
    ),
    database_url: str = typer.Option("", help="oracle database (default: settings)"),
    batch_size: int = typer.Option(16, min=1, help="settle when this many attestations wait"),
    max_wait: float = typer.Option(30.0, min=0, help="... or when the oldest waited this long (s)"),
    interval: float = typer.Option(2.0, min=0.05, help="seconds between scheduler runs"),
    depth: int = typer.Option(3, min=1, help="confirmation depth in blocks"),
    lease_ttl: float = typer.Option(30.0, min=0.5, help="proposer lease lifetime (s)"),
    holder: str = typer.Option("", help="lease holder name (default: host:pid)"),
) -> None:
    """Batch verified attestations into settlement transactions until stopped."""
    import signal
    import threading

    from oracle import logs
    from oracle.keys import OracleKeyError, load_key
    from oracle.storage.db import make_engine
    from proofnet.settings import build_settings

    from .batcher import ProposerLeaseGuard, SettlementScheduler, default_holder
    from .service import SettlementConfig, build_engine

    settings = build_settings()
    try:
        path = key_file or settings.oracle_key_file
        if path is None:
            raise OracleKeyError("no oracle key: pass --key-file or set PROOFNET_ORACLE_KEY_FILE")
        key = load_key(path)
    except OracleKeyError as exc:
        raise typer.BadParameter(str(exc), param_hint="--key-file") from exc
    logs.configure()
    config = SettlementConfig.from_settings(
        settings,
        enabled=True,
        deployment_file=deployment,
        batch_size=batch_size,
        max_wait_s=max_wait,
        interval_s=interval,
        confirmation_depth=depth,
        lease_ttl_s=lease_ttl,
        holder=holder,
    )
    import oracle.settlement.models  # noqa: F401  (registers the tables)
    from oracle.storage.schema import create_tables

    db = make_engine(database_url or settings.database_url)
    create_tables(db)
    engine = build_engine(settings, config, key.signing_key, db)
    name = holder or default_holder()
    scheduler = SettlementScheduler(engine, ProposerLeaseGuard(db, name, lease_ttl), interval)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    scheduler.start()
    try:
        stop.wait()
    finally:
        scheduler.stop()
        db.dispose()


def register(app: typer.Typer) -> None:
    app.command("settle")(settle)
