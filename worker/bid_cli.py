"""`proofnet worker bid` and `proofnet worker reveal`: take part in a job's sealed-bid auction.

`bid` draws a random salt, seals the bid (its commitment is all the API sees while bidding is
open) and keeps the bid in the worker's work dir; `reveal` signs the kept bid with the
worker key and opens it once bidding closed. Under a second-price rule the best bid is the
provider's true cost of running the job: it never pays more to bid lower, and never loses a
job it would profit from by bidding its cost (docs/pricing.md).
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:  # the command module stays cheap to import: `proofnet --help` loads it
    from proofnet.messages.auction import Bid


class BidError(Exception):
    """The bid could not be made or revealed; the message says why."""


def bid_file(work_dir: Path, job_id: str) -> Path:
    if len(job_id) != 64 or any(c not in "0123456789abcdef" for c in job_id):
        raise BidError(f"JOB_ID must be 64 lowercase hex digits, got {job_id!r}")
    return work_dir / "bids" / f"{job_id}.json"


def keep_bid(path: Path, bid: Bid) -> None:
    """Write the bid where `reveal` finds it, atomically and readable by this user only."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(bid.canonical_bytes())
    os.replace(tmp, path)


def load_bid(path: Path) -> Bid:
    from proofnet.messages.auction import AuctionError, parse_bid_bytes

    try:
        return parse_bid_bytes(path.read_bytes())
    except FileNotFoundError:
        raise BidError(f"no bid kept at {path}: bid with `proofnet worker bid` first") from None
    except (OSError, AuctionError) as e:
        raise BidError(f"the kept bid {path} is unusable: {e}") from e


def bid(
    job_id: str = typer.Argument(..., help="the auction-priced job's id"),
    amount: int = typer.Option(..., "--amount", min=1, help="NTX base units you ask to be paid"),
    api_url: str | None = typer.Option(None, "--api-url", help="the proofnet API"),
    key_file: Path | None = typer.Option(None, "--key-file", help="the worker key"),
    network: str | None = typer.Option(None, "--network", help="devnet, preprod, preview, mainnet"),
) -> None:
    """Seal a bid for an auction-priced job (reveal it with `proofnet worker reveal`)."""
    from proofnet.messages.auction import AuctionError, new_bid
    from proofnet.settings import build_settings
    from worker.api_client import ApiClient, ApiClientError
    from worker.identity import IdentityError, load_key

    settings = build_settings()
    try:
        key = load_key(key_file or settings.worker_key_file)
        path = bid_file(settings.worker_work_dir, job_id)
        sealed = new_bid(job_id, key.public_key_hex, amount, secrets.token_bytes(32))
        keep_bid(path, sealed)  # kept before it is sent: a sent bid can always be revealed
        with ApiClient(api_url or settings.api_url, key, network or settings.network) as api:
            api.commit_bid(job_id, sealed.commitment)
    except (IdentityError, BidError, AuctionError, ApiClientError, OSError) as e:
        typer.secho(f"bid not made: {e}", fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from e
    typer.echo(f"sealed bid {sealed.commitment} for job {job_id}; kept at {path}")


def reveal(
    job_id: str = typer.Argument(..., help="the auction-priced job's id"),
    api_url: str | None = typer.Option(None, "--api-url", help="the proofnet API"),
    key_file: Path | None = typer.Option(None, "--key-file", help="the worker key"),
    network: str | None = typer.Option(None, "--network", help="devnet, preprod, preview, mainnet"),
) -> None:
    """Open the bid kept for JOB_ID, signed by the worker key (after bidding closed)."""
    from proofnet.messages.auction import AuctionError, sign_bid
    from proofnet.settings import build_settings
    from worker.api_client import ApiClient, ApiClientError
    from worker.identity import IdentityError, load_key

    settings = build_settings()
    try:
        key = load_key(key_file or settings.worker_key_file)
        kept = load_bid(bid_file(settings.worker_work_dir, job_id))
        revealed = sign_bid(kept, key.signing_key)
        with ApiClient(api_url or settings.api_url, key, network or settings.network) as api:
            api.reveal_bid(job_id, revealed.model_dump(mode="json"))
    except (IdentityError, BidError, AuctionError, ApiClientError) as e:
        typer.secho(f"bid not revealed: {e}", fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from e
    typer.echo(json.dumps({"job_id": job_id, "amount": kept.amount, "revealed": True}))


def auctions(
    api_url: str | None = typer.Option(None, "--api-url", help="the proofnet API"),
    job_id: str | None = typer.Option(None, "--job", help="one job's auction, with its bids"),
) -> None:
    """List the auctions open for bids (or one job's auction, with its bids and winner)."""
    import httpx

    from proofnet.settings import build_settings

    base = (api_url or build_settings().api_url).rstrip("/")
    path = "/api/v1/auctions" if job_id is None else f"/api/v1/jobs/{job_id}/auction"
    try:
        answer = httpx.get(base + path, timeout=30)
    except httpx.HTTPError as e:
        typer.secho(f"cannot reach the API at {base}: {e}", fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from e
    if answer.status_code != 200:
        detail = (
            answer.json().get("detail")
            if answer.headers.get("content-type", "").startswith("application/json")
            else answer.text[:200]
        )
        typer.secho(f"the API refused: {detail}", fg=typer.colors.RED, err=True)
        raise typer.Exit(2)
    body = answer.json()
    if job_id is not None:
        typer.echo(json.dumps(body, indent=2))
        return
    if not body["data"]:
        typer.echo("no auction is open now")
    for a in body["data"]:
        closes = a["bids_close_at"] if a["phase"] == "bidding" else a["reveals_close_at"]
        typer.echo(
            f"{a['job_id']}  {a['phase']:<9} {a['gpus']} GPU x {a['gpu_memory_mb']} MB  "
            f"reserve {a['reserve']}  closes {closes}  bids {a['commitments']}"
        )
