"""`proofnet storage`: serve an S3 endpoint, offer it, and see what this provider holds."""

from __future__ import annotations

import json
import signal
import threading
from pathlib import Path

import typer

app = typer.Typer(
    no_args_is_help=True, help="Offer storage (an S3-compatible endpoint) as a provider."
)


@app.command()
def serve(
    host: str = typer.Option("127.0.0.1", "--host", help="address to listen on"),
    port: int = typer.Option(9000, "--port", min=0, max=65535, help="port (0: any free one)"),
    bucket: str = typer.Option("proofnet-store", "--bucket", help="the bucket to create"),
) -> None:
    """Run an S3-compatible server here (moto's, in memory: devnet and demos; offer MinIO or
    any S3 server for real terms). Prints a ready line once the bucket exists."""
    from proofnet.messages.storage import StorageTerms
    from worker.storage.server import ServeError
    from worker.storage.server import serve as run

    try:
        StorageTerms(
            endpoint=f"http://{host}:{port or 1}",
            bucket=bucket,
            capacity_bytes=2**20,
            ntx_per_gb_month=1,
        )
    except ValueError as exc:
        raise typer.BadParameter(f"--host/--bucket: {_first_error(exc)}") from None
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        run(host, port, bucket, announce=lambda line: typer.echo(line, err=False), stop=stop)
    except ServeError as exc:
        typer.secho(f"storage serve failed: {exc}", fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from exc


def _first_error(exc: ValueError) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        first = errors()[0]
        return f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}"
    return str(exc)


@app.command()
def onboard(
    endpoint: str = typer.Option(..., "--endpoint", help="the S3 endpoint, http(s)://host:port"),
    bucket: str = typer.Option("proofnet-store", "--bucket", help="the bucket placements use"),
    capacity_gb: int = typer.Option(..., "--capacity-gb", help="capacity offered, in GB"),
    price: int = typer.Option(
        ..., "--price", help="NTX base units per GB-month (an integer, at least 1)"
    ),
    payout_address: str = typer.Option(
        ..., "--payout-address", help="bech32 Cardano address that receives storage payouts"
    ),
    access_key: str | None = typer.Option(
        None, "--access-key", envvar="PROOFNET_STORAGE_ACCESS_KEY", help="S3 access key"
    ),
    secret_key: str | None = typer.Option(
        None, "--secret-key", envvar="PROOFNET_STORAGE_SECRET_KEY", help="S3 secret key"
    ),
    api_url: str | None = typer.Option(None, "--api-url", help="the proofnet API"),
    key_file: Path | None = typer.Option(
        None, "--key-file", help="provider key (created if absent)"
    ),
    network: str | None = typer.Option(None, "--network", help="devnet, preprod, preview, mainnet"),
    json_out: bool = typer.Option(False, "--json", help="print the API's record as JSON"),
) -> None:
    """Check the endpoint serves challenge reads, then sign and publish the storage offer."""
    from pydantic import ValidationError

    from proofnet.egress import EgressPolicy
    from proofnet.messages.storage import GB, StorageTerms
    from proofnet.pinned_http import pinned_client
    from proofnet.settings import absolute, build_settings
    from worker.api_client import ApiClient
    from worker.identity import IdentityError, load_or_create_key
    from worker.storage.offer import Credentials, OfferError, probe_endpoint, publish_offer

    if capacity_gb < 1:
        raise typer.BadParameter(f"--capacity-gb must be at least 1, got {capacity_gb}")
    if price < 1:
        raise typer.BadParameter(f"--price must be at least 1 NTX base unit, got {price}")
    try:
        terms = StorageTerms(
            endpoint=endpoint, bucket=bucket, capacity_bytes=capacity_gb * GB,
            ntx_per_gb_month=price,
        )  # fmt: skip
    except ValidationError as exc:
        raise typer.BadParameter(_first_error(exc)) from None
    settings = build_settings()
    try:
        key, _ = load_or_create_key(absolute(key_file) if key_file else settings.worker_key_file)
        # The provider probes its own endpoint, which may well be on this machine.
        with pinned_client(EgressPolicy.allowing(["0.0.0.0/0", "::/0"]), allow_http=True) as http:
            probe_endpoint(terms, Credentials(access_key, secret_key), http)
        with ApiClient(api_url or settings.api_url, key, network or settings.network) as api:
            record = publish_offer(api, terms, payout_address)
    except (IdentityError, OfferError) as exc:
        typer.secho(f"storage offer not made: {exc}", fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from exc
    if json_out:
        typer.echo(json.dumps(record, indent=2, sort_keys=True))
        return
    typer.echo(
        f"storage offer published: {record['capacity_bytes']} bytes at "
        f"{record['ntx_per_gb_month']} NTX per GB-month on {record['endpoint']} "
        f"(bucket {record['bucket']}), provider {record['provider_key']}"
    )


@app.command()
def status(
    api_url: str | None = typer.Option(None, "--api-url", help="the proofnet API"),
    key_file: Path | None = typer.Option(None, "--key-file", help="the provider key"),
    network: str | None = typer.Option(None, "--network", help="devnet, preprod, preview, mainnet"),
    json_out: bool = typer.Option(False, "--json", help="print one JSON document"),
) -> None:
    """This provider's storage offer and the placements it holds, with their status."""
    from proofnet.settings import absolute, build_settings
    from worker.api_client import ApiClient
    from worker.identity import IdentityError, load_key
    from worker.storage.offer import OfferError, provider_status

    settings = build_settings()
    try:
        key = load_key(absolute(key_file) if key_file else settings.worker_key_file)
        with ApiClient(api_url or settings.api_url, key, network or settings.network) as api:
            found = provider_status(api)
    except (IdentityError, OfferError) as exc:
        typer.secho(f"storage status unavailable: {exc}", fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from exc
    if json_out:
        typer.echo(json.dumps(found, indent=2, sort_keys=True))
        return
    offer = found["offer"]
    if offer is None:
        typer.echo(f"provider {found['provider_key']}: no storage offer (proofnet storage onboard)")
    else:
        typer.echo(
            f"provider {found['provider_key']}: {offer['held_bytes']} of "
            f"{offer['capacity_bytes']} bytes held at {offer['ntx_per_gb_month']} NTX per "
            f"GB-month on {offer['endpoint']}"
        )
    earned = sum(p["accrued_ntx"] for p in found["placements"])
    typer.echo(f"earned by answered challenges, pending settlement: {earned} NTX base units")
    for p in found["placements"]:
        typer.echo(
            f"  {p['status']:<7} job {p['job_id'][:12]} {p['kind']:<11} {p['object_key']} "
            f"{p['size']} bytes until {p['ends_at']}, earned {p['accrued_ntx']} NTX"
            + (f" ({p['reason']})" if p["reason"] else "")
            + (f" [{p['strikes']} strike(s): {p['last_failure']}]" if p.get("strikes") else "")
        )


@app.command()
def offers(
    api_url: str | None = typer.Option(None, "--api-url", help="the proofnet API"),
    max_price: int | None = typer.Option(
        None, "--max-price", min=1, help="only offers at most this many NTX per GB-month"
    ),
    json_out: bool = typer.Option(False, "--json", help="print one JSON document"),
) -> None:
    """Every storage offer, cheapest first, with the capacity each still has free (no key
    needed: offers are public)."""
    import httpx

    from proofnet.messages.storage import STORAGE_OFFERS_PATH
    from proofnet.redaction import redact_credentials
    from proofnet.settings import build_settings

    base = (api_url or build_settings().api_url).rstrip("/")
    params = {} if max_price is None else {"max_ntx_per_gb_month": max_price}
    try:
        response = httpx.get(base + STORAGE_OFFERS_PATH, params=params, timeout=30)
        response.raise_for_status()
        listed = response.json()["data"]
    except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
        why = redact_credentials(f"the API at {base} did not list offers: {exc}")
        typer.secho(f"storage offers unavailable: {why}", fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from exc
    if json_out:
        typer.echo(json.dumps(listed, indent=2, sort_keys=True))
        return
    if not listed:
        typer.echo("no storage offers")
    for o in listed:
        typer.echo(
            f"{o['provider_key']}  {o['ntx_per_gb_month']} NTX per GB-month  "
            f"{o['free_bytes']} of {o['capacity_bytes']} bytes free  {o['endpoint']}"
        )
