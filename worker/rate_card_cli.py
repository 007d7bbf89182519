"""`proofnet worker rate-card`: publish this provider's prices as its rate card document.

The API builds the document from the rates and this worker's key and answers with its
digest; the worker computes the same document itself and refuses an answer that names
another, so what submitters buy by that digest is exactly what the provider asked for.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:  # the command module stays cheap to import: `proofnet --help` loads it
    from proofnet.messages.rate_card import RateCardDocument
    from worker.api_client import ApiClient

RATE_CARD_PATH = "/api/v1/worker/rate-card"


class RateCardPublishError(Exception):
    """The rates could not be published; the message says why."""


def parse_rates(items: list[str]) -> dict[str, int]:
    """`MODEL=NTX_PER_GPU_HOUR` pairs (the GPU model as NVML names it, spaces allowed)."""
    rates: dict[str, int] = {}
    for item in items:
        model, sep, value = item.rpartition("=")
        if not sep or not model or not value.isdigit():
            raise RateCardPublishError(
                f"--rate takes MODEL=NTX_BASE_UNITS_PER_GPU_HOUR (an integer), got {item!r}"
            )
        rates[model] = int(value)
    return rates


def publish_rates(api: ApiClient, rates: Mapping[str, int]) -> RateCardDocument | None:
    """Publish `rates` (none withdraws the current card); the document the API stored."""
    from proofnet.messages.rate_card import RateCardDocument, RateCardError
    from worker.api_client import ApiClientError

    expected = None
    if rates:
        try:
            expected = RateCardDocument.from_dict(
                {"provider": api.key.public_key_hex, "ntx_per_gpu_hour": dict(rates)}
            )
        except RateCardError as e:
            raise RateCardPublishError(str(e)) from e
    body = json.dumps({"rates": dict(rates)}).encode()
    try:
        answer = api.request("PUT", RATE_CARD_PATH, body=body).json()
    except (ApiClientError, ValueError) as e:
        raise RateCardPublishError(f"the API did not publish the rates: {e}") from e
    digest = answer.get("digest") if isinstance(answer, dict) else None
    if digest != (None if expected is None else expected.digest):
        raise RateCardPublishError(
            f"the API answered with rate card {digest!r}, not this worker's document "
            f"{None if expected is None else expected.digest}"
        )
    return expected


def rate_card(
    rate: list[str] = typer.Option(
        [], "--rate", help="MODEL=NTX base units per GPU-hour (repeat); none withdraws"
    ),
    api_url: str | None = typer.Option(None, "--api-url", help="the proofnet API"),
    key_file: Path | None = typer.Option(None, "--key-file", help="the worker key"),
    network: str | None = typer.Option(None, "--network", help="devnet, preprod, preview, mainnet"),
) -> None:
    """Publish this provider's prices; prints the digest specs name in pricing.rate_card."""
    from proofnet.settings import absolute, build_settings
    from worker.api_client import ApiClient
    from worker.identity import IdentityError, load_key

    settings = build_settings()
    try:
        key = load_key(absolute(key_file) if key_file else settings.worker_key_file)
        rates = parse_rates(rate)
        with ApiClient(api_url or settings.api_url, key, network or settings.network) as api:
            document = publish_rates(api, rates)
    except (IdentityError, RateCardPublishError) as e:
        typer.secho(f"rate card not published: {e}", fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from e
    if document is None:
        typer.echo("rate card withdrawn: this provider takes no rate-card jobs")
        return
    typer.echo(document.digest)
    typer.echo(document.canonical_bytes().decode("utf-8"))
