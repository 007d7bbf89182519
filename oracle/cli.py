"""`proofnet oracle ...`: serve the oracle, create its key, list the frauds a bond pays for."""

from __future__ import annotations

from pathlib import Path

import typer

app = typer.Typer(no_args_is_help=True, help="Verify attestations and settle payouts in batches.")


@app.command()
def serve(
    host: str = typer.Option("127.0.0.1", help="interface to listen on"),
    port: int = typer.Option(8100, help="port to listen on"),
    key_file: Path | None = typer.Option(
        None, "--key-file", help="oracle signing key (default: $PROOFNET_ORACLE_KEY_FILE)"
    ),
    workers: int = typer.Option(2, min=1, help="verification threads"),
) -> None:
    """Serve the oracle: attestation intake, verification, metrics."""
    from oracle import logs
    from oracle.app import create_app
    from oracle.keys import OracleKeyError
    from oracle.metrics import OracleMetrics
    from oracle.service import OracleConfigError, context_from_settings, deployment_of, oracle_key
    from proofnet.settings import build_settings

    settings = build_settings()
    try:
        key = oracle_key(settings, key_file)
    except OracleKeyError as exc:
        raise typer.BadParameter(str(exc), param_hint="--key-file") from exc
    if settings.oracle_demo_local_replay and settings.network != "devnet":
        typer.secho(
            "oracle cannot start: PROOFNET_ORACLE_DEMO_LOCAL_REPLAY runs job code on this "
            "host; it is for the local demo on the devnet only",
            fg=typer.colors.RED,
            err=True,
        )
        raise typer.Exit(2)
    try:
        deployment_of(settings)
    except OracleConfigError as exc:
        # Served (health, intake) but verifying nothing until configured: say so loudly.
        typer.echo(f"warning: {exc}; attestations wait unverified until it is set", err=True)
    from oracle.settlement.service import settlement_extensions

    logs.configure()
    metrics = OracleMetrics()
    # Settlement (scheduler, bundle and quorum routes) runs in the same process: it is the
    # only holder of this oracle's key.
    hooks, routers = settlement_extensions(settings, key.signing_key, metrics.registry)
    application = create_app(
        settings,
        context=lambda store: context_from_settings(settings, store, metrics, key=key),
        metrics=metrics,
        workers=workers,
        verifier=key.public_key_hex[:16],
        lifespan_hooks=hooks,
        routers=routers,
    )
    from proofnet.serving import HttpLimits, serve

    limits = HttpLimits.from_settings(settings)  # slow clients time out (proofnet.serving)
    serve(application, host=host, port=port, limits=limits, log_level="warning")


@app.command("keygen")
def keygen(path: Path = typer.Argument(..., help="where to write the new key (0600)")) -> None:
    """Create an oracle signing key; print its public key (the API's
    PROOFNET_API_ORACLE_KEYS), its key hash (`proofnet chain deploy --oracle`) and the
    address to fund for fees and collateral."""
    from pycardano import Address, PaymentSigningKey

    from chain.offchain.backends import pycardano_network
    from oracle.keys import write_key
    from proofnet.settings import build_settings

    if path.exists():
        raise typer.BadParameter(f"{path} exists; refusing to overwrite a key", param_hint="PATH")
    key = write_key(path)
    vkh = PaymentSigningKey(bytes(key.signing_key)).to_verification_key().hash()
    typer.echo(f"public key: {key.public_key_hex}")
    typer.echo(f"key hash:   {vkh.payload.hex()}")
    typer.echo(f"address:    {Address(vkh, network=pycardano_network(build_settings()))}")


@app.command()
def frauds(
    job: str | None = typer.Option(None, help="only this job id (hex)"),
    out: Path | None = typer.Option(
        None, help="write each case's attestation here as <job>.cose.hex (for review)"
    ),
) -> None:
    """Frauds a provider bond may be slashed for (oracle.storage.fraud): provider-signed
    attestations whose spot check failed. `proofnet oracle slash --job JOB` proposes the
    slash; every co-signer checks its own list before it signs."""
    from oracle.storage.db import make_engine
    from oracle.storage.fraud import fraud_cases
    from oracle.storage.store import AttestationStore
    from proofnet.settings import build_settings

    store = AttestationStore(make_engine(build_settings().database_url))
    cases = fraud_cases(store, job)
    for case in cases:
        typer.echo(
            f"attestation {case.attestation_id}: job {case.job_id} root {case.pot_root} "
            f"provider {case.provider} escrow {case.escrow_ref}: {case.reason}"
        )
        if out is not None:
            out.mkdir(parents=True, exist_ok=True)
            (out / f"{case.job_id}.cose.hex").write_text(case.cose.hex() + "\n")
    if not cases:
        typer.echo("no frauds")


@app.command()
def slash(
    job: str = typer.Option(..., help="job id (hex) of a fraud in this oracle's store"),
    bond: str | None = typer.Option(None, help="bond out-ref TXID#INDEX (default: the largest)"),
    key_file: Path | None = typer.Option(
        None, "--key-file", help="oracle signing key (default: $PROOFNET_ORACLE_KEY_FILE)"
    ),
) -> None:
    """Slash the bond of a provider whose attestation failed this oracle's spot check: the
    set share goes to the harmed submitter. This oracle signs and pays the fee; the
    co-signers of PROOFNET_SETTLEMENT_COSIGNERS (up to PROOFNET_SETTLEMENT_THRESHOLD) each
    review it against their own verdicts before they sign (oracle.settlement.slash)."""
    import json

    from pycardano import PaymentSigningKey

    from chain.offchain.backends import chain_context
    from chain.offchain.builders.bond import BondTerms
    from chain.offchain.builders.deployment import Deployment
    from oracle.keys import OracleKeyError
    from oracle.service import oracle_key
    from oracle.settlement.slash import Peer, SlashError, propose_slash
    from oracle.storage.db import make_engine
    from oracle.storage.store import AttestationStore
    from proofnet.settings import build_settings

    settings = build_settings()
    path = settings.settlement_deployment_file
    if path is None:
        raise typer.BadParameter(
            "set PROOFNET_SETTLEMENT_DEPLOYMENT_FILE to the deployment the bond belongs to",
            param_hint="PROOFNET_SETTLEMENT_DEPLOYMENT_FILE",
        )
    try:
        peers = [Peer(c["url"], c["key_hash"]) for c in json.loads(settings.settlement_cosigners)]
    except (ValueError, KeyError, TypeError) as exc:
        raise typer.BadParameter(
            f"not a JSON list of {{url, key_hash}}: {exc}",
            param_hint="PROOFNET_SETTLEMENT_COSIGNERS",
        ) from exc
    if not path.is_file():
        raise typer.BadParameter(
            f"{path}: no such file (check PROOFNET_SETTLEMENT_DEPLOYMENT_FILE)",
            param_hint="PROOFNET_SETTLEMENT_DEPLOYMENT_FILE",
        )
    try:
        key = oracle_key(settings, key_file)
    except OracleKeyError as exc:
        raise typer.BadParameter(str(exc), param_hint="--key-file") from exc
    try:
        proposal = propose_slash(
            chain_context(settings),
            Deployment.load(path),
            BondTerms(settings.bond_unbonding_delay_ms, settings.bond_slash_permille),
            PaymentSigningKey(bytes(key.signing_key)),
            AttestationStore(make_engine(settings.database_url)),
            peers,
            settings.settlement_threshold,
            job,
            bond,
        )
    except SlashError as exc:
        typer.secho(f"slash: {exc}", fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from exc
    typer.echo(
        f"slashed {proposal.share} NTX of bond {proposal.bond} for job {proposal.job_id} "
        f"to {proposal.submitter}: {proposal.tx_id}"
    )


# The settlement engine's commands (`settle`) live beside it.
from oracle.settlement.cli import register as _register_settlement  # noqa: E402

_register_settlement(app)
