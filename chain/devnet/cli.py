"""`proofnet devnet ...`: run the local devnet and administer it over HTTP.

`up` runs the ledger, its block producer and the Blockfrost-compatible server in one process;
the other commands talk to a running devnet through its REST API (`--url`, default
`PROOFNET_DEVNET_URL`), so they work against a devnet on another machine too.
"""

from __future__ import annotations

import contextlib
import json
import logging
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer

app = typer.Typer(
    no_args_is_help=True,
    help="Run and administer the local Cardano devnet.",
    pretty_exceptions_show_locals=False,
)

LOVELACE_PER_ADA = 1_000_000


class DevnetCliError(Exception):
    """A request to the devnet failed; the message says why."""


def _settings() -> Any:
    from proofnet.settings import build_settings

    return build_settings()


def _url(url: str | None) -> str:
    return (url or _settings().devnet_url).rstrip("/")


def _token(token: str | None) -> str | None:
    return token if token is not None else (_settings().devnet_admin_token or None)


def _request(
    method: str, url: str, path: str, *, token: str | None = None, payload: Any = None
) -> Any:
    import httpx

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        response = httpx.request(method, f"{url}{path}", json=payload, headers=headers, timeout=30)
    except httpx.HTTPError as exc:
        raise DevnetCliError(f"cannot reach the devnet at {url}: {exc}") from None
    try:
        body = response.json()
    except ValueError:
        body = None
    if response.status_code != 200:
        message = body.get("message") if isinstance(body, dict) else response.text
        raise DevnetCliError(f"{method} {path} failed ({response.status_code}): {message}")
    return body


@contextlib.contextmanager
def _signals_noted() -> Iterator[list[int]]:
    received: list[int] = []
    stop_signals = (signal.SIGINT, signal.SIGTERM)
    previous = {
        s: signal.signal(s, lambda signum, _frame: received.append(signum)) for s in stop_signals
    }
    try:
        yield received
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def _fail(exc: Exception) -> typer.Exit:
    typer.echo(f"error: {exc}", err=True)
    return typer.Exit(code=2)  # an expected failure: one line, exit 2 (proofnet.cli)


@app.command()
def up(
    data_dir: Path | None = typer.Option(None, help="Ledger directory (PROOFNET_DEVNET_DATA_DIR)."),
    host: str | None = typer.Option(None, help="Interface to listen on (PROOFNET_DEVNET_HOST)."),
    port: int | None = typer.Option(None, help="Port (PROOFNET_DEVNET_PORT)."),
    block_time: float | None = typer.Option(None, help="Seconds between blocks."),
    enable_faults: bool | None = typer.Option(
        None, "--enable-faults/--no-faults", help="Allow rollback/pause/... admin endpoints."
    ),
    admin_token: str | None = typer.Option(None, help="Bearer token for /admin endpoints."),
    profile: str | None = typer.Option(
        None,
        help="Protocol parameters: mainnet (default for a new devnet), preprod or pv10; "
        "given for an existing devnet, it switches to them (PROOFNET_DEVNET_PROFILE).",
    ),
) -> None:
    """Run the devnet (ledger + block producer + Blockfrost API) until SIGINT/SIGTERM."""
    import uvicorn

    from chain.devnet.ledger import Ledger
    from chain.devnet.producer import BlockProducer
    from chain.devnet.profiles import UnknownProfile, profile_params
    from chain.devnet.server import API_PREFIX, create_app
    from proofnet.serving import HttpLimits, uvicorn_config

    settings = _settings()
    chosen = profile or settings.devnet_profile
    try:
        params = profile_params(chosen) if chosen else None
    except UnknownProfile as exc:
        raise _fail(exc) from None
    directory = data_dir or settings.devnet_data_dir
    bind = host or settings.devnet_host
    listen = port if port is not None else settings.devnet_port
    interval = block_time if block_time is not None else settings.devnet_block_time
    faults = settings.devnet_enable_faults if enable_faults is None else enable_faults
    token = _token(admin_token)
    if interval <= 0:
        raise _fail(ValueError("--block-time must be positive"))

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    ledger = Ledger.open(Path(directory), params=params, enable_faults=faults)
    producer = BlockProducer(ledger, interval)
    try:
        app_ = create_app(ledger, enable_faults=faults, admin_token=token)
        tip = ledger.tip()
        typer.echo(
            f"devnet: {directory} at height {tip.height}; faucet {ledger.faucet_address()}\n"
            f"devnet: protocol {ledger.protocol_params().protocol_major_ver}."
            f"{ledger.protocol_params().protocol_minor_ver}"
            f"{f' (profile {chosen})' if chosen else ''}\n"
            f"devnet: Blockfrost API on http://{bind}:{listen}{API_PREFIX} "
            f"(blocks every {interval}s, faults {'on' if faults else 'off'})"
        )
        producer.start()
        # Slow clients time out and connections are capped, as for every role.
        limits = HttpLimits.from_settings(settings)
        server = uvicorn.Server(
            uvicorn_config(
                app_, host=bind, port=listen, limits=limits, log_level="info", access_log=False
            )
        )
        # uvicorn handles SIGINT/SIGTERM itself (stop accepting, drain requests), then
        # restores the handlers it found and re-raises the signal. Installing no-op handlers
        # first makes that re-raise harmless, so control comes back here and the producer
        # stops before the ledger flushes and closes.
        with _signals_noted():
            server.run()
    finally:
        producer.stop()
        ledger.close()
        typer.echo("devnet: stopped; state saved")


@app.command("node-bridge")
def node_bridge_command(
    url: str | None = typer.Option(None, "--url", help="The devnet (PROOFNET_DEVNET_URL)."),
    host: str = typer.Option("127.0.0.1", help="Interface to listen on."),
    ogmios_port: int = typer.Option(1337, help="Ogmios' port (websocket)."),
    kupo_port: int = typer.Option(1442, help="Kupo's port (HTTP)."),
) -> None:
    """Serve Ogmios chain-sync and Kupo in front of a running devnet, until SIGINT/SIGTERM:
    the chain watcher, the auditor and the oracle's escrow checks through
    PROOFNET_CHAIN_BACKEND=ogmios, tried locally. Submission and mempool membership are
    forwarded to the devnet; no UTxO or protocol-parameter queries (build transactions
    through the devnet)."""
    import threading

    from chain.devnet.node_bridge import node_bridge

    devnet = _url(url)
    _request("GET", devnet, "/health")  # one line when the devnet is not running
    stop = threading.Event()
    try:
        with node_bridge(devnet, host=host, ogmios_port=ogmios_port, kupo_port=kupo_port) as node:
            typer.echo(
                f"node bridge over {devnet}:\n"
                f"PROOFNET_OGMIOS_URL={node.ogmios_url}\nPROOFNET_KUPO_URL={node.kupo_url}"
            )
            with _signals_noted() as received:
                while not received:
                    stop.wait(0.2)
    except OSError as exc:  # a port in use
        raise _fail(OSError(f"cannot listen on {host}: {exc}")) from None
    typer.echo("node bridge: stopped")


@app.command()
def fund(
    address: str = typer.Argument(..., help="bech32 address to pay."),
    ada: float | None = typer.Option(None, help="ADA to send."),
    lovelace: int | None = typer.Option(None, help="Lovelace to send (adds to --ada)."),
    asset: list[str] = typer.Option(
        [], help="NAME_HEX=QTY minted under the faucet policy (repeatable)."
    ),
    url: str | None = typer.Option(None, help="Devnet API URL (…/api/v0)."),
    admin_token: str | None = typer.Option(None, help="Bearer token for /admin endpoints."),
) -> None:
    """Pay ADA and/or freshly minted test tokens from the faucet."""
    try:
        total = int(round((ada or 0) * LOVELACE_PER_ADA)) + (lovelace or 0)
        assets = dict(_parse_asset(a) for a in asset)
        if total <= 0 and not assets:
            raise DevnetCliError("nothing to send: give --ada, --lovelace or --asset")
        body = _request(
            "POST",
            _url(url),
            "/admin/fund",
            token=_token(admin_token),
            payload={"address": address, "lovelace": total, "assets": assets},
        )
    except DevnetCliError as exc:
        raise _fail(exc) from None
    typer.echo(f"funded {address}: {total} lovelace" + (f", assets {assets}" if assets else ""))
    if assets:
        typer.echo(f"policy id: {body['policy_id']}")
    typer.echo(f"tx: {body['tx_hash']}")


def _parse_asset(text: str) -> tuple[str, int]:
    name, sep, qty = text.partition("=")
    name = name.strip().lower()
    if not sep or not qty.strip().isdigit():
        raise DevnetCliError(f"--asset {text!r}: expected NAME_HEX=QTY")
    try:
        bytes.fromhex(name)
    except ValueError:
        raise DevnetCliError(f"--asset {text!r}: asset name must be hex") from None
    return name, int(qty)


@app.command()
def status(
    url: str | None = typer.Option(None, help="Devnet API URL (…/api/v0)."),
    as_json: bool = typer.Option(False, "--json", help="Print the raw status JSON."),
) -> None:
    """Show the tip, the mempool size and whether block production is paused."""
    try:
        body = _request("GET", _url(url), "/admin/status")
    except DevnetCliError as exc:
        raise _fail(exc) from None
    if as_json:
        typer.echo(json.dumps(body, indent=2))
        return
    tip = body["tip"]
    typer.echo(f"tip: height {tip['height']} slot {tip['slot']} hash {tip['hash']}")
    typer.echo(f"mempool: {body['mempool_size']} transaction(s)")
    typer.echo(
        f"paused: {'yes' if body['paused'] else 'no'}; faults {'on' if body['faults_enabled'] else 'off'}"
    )
    typer.echo(f"faucet: {body['faucet_address']} (policy {body['faucet_policy_id']})")


@app.command("check-vectors")
def check_vectors(
    directory: Path = typer.Argument(..., help="Folder of *.json ledger vectors."),
) -> None:
    """Check the devnet's script contexts against conformance vectors (exit 1 on a mismatch)."""
    from chain.devnet.vectors import check_vectors_dir

    try:
        results = check_vectors_dir(directory)
    except (FileNotFoundError, NotADirectoryError) as exc:
        raise _fail(exc) from None
    for result in results:
        typer.echo(("PASS " if result.ok else "FAIL ") + result.describe())
    failed = sum(not r.ok for r in results)
    typer.echo(f"{len(results) - failed}/{len(results)} vectors match")
    if failed:
        raise typer.Exit(code=1)


def _admin(path: str, url: str | None, token: str | None, payload: Any = None) -> Any:
    try:
        return _request(
            "POST", _url(url), f"/admin/{path}", token=_token(token), payload=payload or {}
        )
    except DevnetCliError as exc:
        raise _fail(exc) from None


@app.command()
def rollback(
    depth: int = typer.Option(1, min=1, help="How many blocks to undo."),
    from_height: int | None = typer.Option(
        None, min=1, help="Undo every block at or above this height (instead of --depth)."
    ),
    drop: bool = typer.Option(False, help="Drop their transactions instead of re-queuing them."),
    url: str | None = typer.Option(None, help="Devnet API URL (…/api/v0)."),
    admin_token: str | None = typer.Option(None, help="Bearer token for /admin endpoints."),
) -> None:
    """Undo the last DEPTH blocks (needs a devnet started with --enable-faults)."""
    undo: dict[str, object] = (
        {"from_height": from_height} if from_height is not None else {"depth": depth}
    )
    body = _admin("rollback", url, admin_token, {**undo, "drop": drop})
    verb = "dropped" if drop else "returned to the mempool"
    typer.echo(f"rolled back to height {body['tip']['height']}")
    typer.echo(f"{len(body['rolled_back_txs'])} transaction(s) {verb}")


@app.command()
def pause(
    url: str | None = typer.Option(None, help="Devnet API URL (…/api/v0)."),
    admin_token: str | None = typer.Option(None, help="Bearer token for /admin endpoints."),
) -> None:
    """Stop sealing blocks (transactions keep queuing)."""
    _admin("pause", url, admin_token)
    typer.echo("block production paused")


@app.command()
def resume(
    url: str | None = typer.Option(None, help="Devnet API URL (…/api/v0)."),
    admin_token: str | None = typer.Option(None, help="Bearer token for /admin endpoints."),
) -> None:
    """Resume sealing blocks."""
    _admin("resume", url, admin_token)
    typer.echo("block production resumed")


@app.command("produce-block")
def produce_block(
    url: str | None = typer.Option(None, help="Devnet API URL (…/api/v0)."),
    admin_token: str | None = typer.Option(None, help="Bearer token for /admin endpoints."),
) -> None:
    """Seal the mempool into a block now."""
    body = _admin("produce-block", url, admin_token)
    block = body["block"]
    if block is None:
        typer.echo("no block: production is paused")
    else:
        typer.echo(
            f"block {block['height']} with {block['tx_count']} transaction(s): {block['hash']}"
        )


@app.command("drop-mempool")
def drop_mempool(
    url: str | None = typer.Option(None, help="Devnet API URL (…/api/v0)."),
    admin_token: str | None = typer.Option(None, help="Bearer token for /admin endpoints."),
) -> None:
    """Discard every pending transaction."""
    body = _admin("drop-mempool", url, admin_token)
    typer.echo(f"dropped {len(body['dropped'])} transaction(s)")
