"""`proofnet worker status`: what this worker has earned on chain, what is pending, and its
latest payouts with their transactions.

Asks the API over HTTP (`GET /api/v1/worker/earnings`, signed with the worker key), which
answers from the earnings record its chain watcher keeps: payouts are counted when a
settlement transaction of the deployment paid this worker's payout address on chain, never
on anyone's say-so. Pending is what the oracle verified and the chain has not paid yet.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import typer

from proofnet.redaction import redact_credentials

EARNINGS_PATH = "/api/v1/worker/earnings"
SHOWN_PAYOUTS = 10


class StatusError(Exception):
    """The status could not be read; the message says why and what to do."""


def fetch_earnings(api_url: str, key_file: Path, network: str) -> dict[str, Any]:
    """The API's earnings answer for the worker key in `key_file`, with the API's view of
    this worker's GPUs under "gpu_checks" (offered or not, and why)."""
    from proofnet.messages.gpu_challenge import WORKER_GPUS_PATH
    from worker.api_client import ApiClient, ApiClientError, ApiRefused
    from worker.identity import IdentityError, load_key

    try:
        key = load_key(key_file)
    except IdentityError as e:
        raise StatusError(f"{e} (--key-file, or PROOFNET_WORKER_KEY_FILE)") from e
    try:
        with ApiClient(api_url, key, network) as api:
            body = api.request("GET", EARNINGS_PATH).json()
            if isinstance(body, dict):
                body["gpu_checks"] = api.request("GET", WORKER_GPUS_PATH).json()
    except ApiRefused as e:
        hint = " (run `proofnet worker onboard --api-url ...` first)" if e.status == 403 else ""
        raise StatusError(f"{e}{hint}") from e
    except (ApiClientError, ValueError) as e:
        raise StatusError(f"{e} (--api-url, or PROOFNET_API_URL)") from e
    if not isinstance(body, dict):
        raise StatusError("the API answered the earnings request with something else")
    return body


def _ntx(amount: dict[str, Any]) -> str:
    value = amount.get("ntx")
    text = "unknown" if value is None else f"{value:,} NTX"
    note = amount.get("note")
    return f"{text} ({note})" if note else text


def _when(text: str | None) -> str:
    if not text:
        return "?"
    return datetime.fromisoformat(text).strftime("%Y-%m-%d %H:%M:%SZ")


def render(body: dict[str, Any], api_url: str) -> list[str]:
    """The human-readable status, one line per fact."""
    payouts = list(body.get("payouts") or [])
    earned = body.get("earned") or {}
    lines = [
        f"worker {body.get('worker_key', '?')[:16]}... at {redact_credentials(api_url)}",
        f"payout address   {body.get('payout_address')}",
        f"earned           {_ntx(earned)}",
        f"pending          {_ntx(body.get('pending_settlement') or {})}",
    ]
    slashed = (body.get("slashed") or {}).get("ntx")
    if slashed:
        lines.append(f"slashed          {slashed:,} NTX")
    recorded_to = body.get("recorded_to_block")
    if recorded_to is None:
        lines.append("chain record     not started (the API's chain watcher has not run yet)")
    else:
        lines.append(
            f"chain record     up to block {recorded_to} (tip {body.get('tip_block')}), "
            f"as of {_when(body.get('recorded_at'))}"
        )
    lines.extend(_gpu_lines(body.get("gpu_checks") or {}))
    if not payouts:
        lines.append("payouts          none yet")
        return lines
    lines.append("latest payouts:")
    for p in payouts[:SHOWN_PAYOUTS]:
        confirmations = p.get("confirmations")
        depth = "unconfirmed" if confirmations is None else f"{confirmations} confirmation(s)"
        lines.append(
            f"  {_when(p.get('confirmed_at'))}  {p.get('amount', 0):,} NTX  "
            f"job {str(p.get('job_id', ''))[:12]}  block {p.get('block_height')}, {depth}"
        )
        lines.append(f"    tx {p.get('tx_hash')}")
        for name, url in (p.get("explorer") or {}).items():
            lines.append(f"    {name}: {url}")
    return lines


def _gpu_lines(checks: dict[str, Any]) -> list[str]:
    """One line per GPU: offered or not, and why (the API's own challenge decides)."""
    gpus = list(checks.get("gpus") or [])
    if not gpus:
        return []
    lines = ["GPUs (as the API checked them):"]
    for g in gpus:
        state = "offered" if g.get("offered") else "NOT offered"
        lines.append(f"  {g.get('index')}  {g.get('model')}  {g.get('uuid')}  {state}")
        lines.append(f"    {g.get('why')}")
    return lines


def status(
    api_url: str | None = typer.Option(None, "--api-url", help="the proofnet API"),
    key_file: Path | None = typer.Option(None, "--key-file", help="the worker key"),
    network: str | None = typer.Option(None, "--network", help="devnet, preprod, preview, mainnet"),
    json_out: bool = typer.Option(False, "--json", help="print the API's answer as JSON"),
) -> None:
    """What this worker earned on chain, what is pending, and its latest payouts."""
    from proofnet.settings import build_settings

    settings = build_settings()
    url = api_url or settings.api_url
    try:
        body = fetch_earnings(
            url, key_file or settings.worker_key_file, network or settings.network
        )
    except StatusError as e:
        typer.secho(f"worker status unavailable: {e}", fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from e
    if json_out:
        typer.echo(json.dumps(body, indent=2))
        return
    for line in render(body, url):
        typer.echo(line)
