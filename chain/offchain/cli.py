"""`proofnet chain ...`: operator commands for the on-chain protocol on any backend.

The backend comes from settings (`PROOFNET_CHAIN_BACKEND`, ...), so the same commands deploy
to the local devnet and to preprod through Blockfrost or Ogmios + Kupo.
"""

from __future__ import annotations

from pathlib import Path

import typer

app = typer.Typer(no_args_is_help=True, help="Deploy and operate the on-chain protocol.")


def _network(settings: object) -> object:
    from chain.offchain.backends import pycardano_network

    return pycardano_network(settings)  # type: ignore[arg-type]


def _wallet(key_file: Path, settings: object) -> object:
    from chain.offchain.builders import BuilderError, KeyWallet

    try:
        return KeyWallet.from_file(key_file, _network(settings))  # type: ignore[arg-type]
    except (BuilderError, OSError, ValueError) as exc:
        raise typer.BadParameter(
            f"{exc} (give a cardano-cli payment .skey, e.g. from `proofnet chain keygen`)",
            param_hint="--key-file",
        ) from exc


def _hex(value: str, option: str, *, size: int | None = None) -> bytes:
    """An option's hex value, or a usage error naming the option."""
    try:
        raw = bytes.fromhex(value)
    except ValueError:
        raise typer.BadParameter(f"{value!r} is not hex", param_hint=option) from None
    if size is not None and len(raw) != size:
        raise typer.BadParameter(
            f"{value!r} is {len(raw)} bytes; expected {size} ({2 * size} hex digits)",
            param_hint=option,
        )
    return raw


def _fail(exc: Exception) -> typer.Exit:
    typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
    return typer.Exit(2)  # an expected failure: one line, exit 2 (proofnet.cli)


@app.command()
def keygen(path: Path = typer.Argument(..., help="where to write the payment key (0600)")) -> None:
    """Create a payment signing key (cardano-cli text envelope) and print its address."""
    import os

    from pycardano import Address, PaymentSigningKey

    from proofnet.settings import build_settings

    if path.exists():
        raise _fail(FileExistsError(f"{path} exists; refusing to overwrite a key"))
    key = PaymentSigningKey.generate()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(key.to_json())
    vkh = key.to_verification_key().hash()
    address = Address(vkh, network=_network(build_settings()))  # type: ignore[arg-type]
    typer.echo(f"key hash: {vkh.payload.hex()}")
    typer.echo(f"address:  {address}")


@app.command()
def deploy(
    key_file: Path = typer.Option(..., help="deployer's payment key (pays ~50 ADA)"),
    oracle: list[str] = typer.Option(..., help="oracle key hash (hex); repeat for each"),
    threshold: int = typer.Option(..., help="oracle signatures needed to settle"),
    admin: list[str] = typer.Option(..., help="admin key hash (hex); repeat for each"),
    admin_threshold: int = typer.Option(..., help="admin signatures needed to reconfigure"),
    ntx_policy: str = typer.Option(..., help="policy id (hex) of the unit that counts as NTX"),
    ntx_name: str = typer.Option("4e5458", help="asset name (hex) of that unit"),
    out: Path = typer.Option(Path("deployment.json"), help="where to write the deployment"),
) -> None:
    """Mint the config NFT, lock the oracle configuration, publish reference scripts and
    register the batch script's stake credential; write deployment.json."""
    from pycardano import VerificationKeyHash

    from chain.offchain.backends import chain_context
    from chain.offchain.builders import BuilderError, OracleSetup
    from chain.offchain.builders import deploy as run_deploy
    from proofnet.settings import build_settings

    settings = build_settings()
    try:
        setup = OracleSetup(
            oracles=tuple(VerificationKeyHash(_hex(k, "--oracle", size=28)) for k in oracle),
            threshold=threshold,
            admins=tuple(VerificationKeyHash(_hex(k, "--admin", size=28)) for k in admin),
            admin_threshold=admin_threshold,
        )
        deployment = run_deploy(
            chain_context(settings),
            _wallet(key_file, settings),  # type: ignore[arg-type]
            setup,
            _hex(ntx_policy, "--ntx-policy", size=28),
            _hex(ntx_name, "--ntx-name"),
        )
    except (BuilderError, ValueError) as exc:
        raise _fail(exc) from exc
    deployment.save(out)
    typer.echo(f"deployment written to {out}")


@app.command("mint-test-ntx")
def mint_test_ntx(
    key_file: Path = typer.Option(..., help="the test policy's admin key"),
    to: str = typer.Option(..., help="bech32 address receiving the tokens"),
    amount: int = typer.Option(..., min=1, help="quantity (base units)"),
    name: str = typer.Option("4e5458", help="asset name (hex)"),
) -> None:
    """Mint test NTX under the admin key's test policy (devnet and preprod only)."""
    from pycardano import Address

    from chain.offchain.backends import chain_context
    from chain.offchain.builders import BuilderError
    from chain.offchain.builders import mint_test_ntx as run_mint
    from proofnet.settings import build_settings

    settings = build_settings()
    if settings.network == "mainnet":
        raise _fail(ValueError("test NTX is not minted on mainnet"))
    try:
        tx_id, result = run_mint(
            chain_context(settings),
            _wallet(key_file, settings),  # type: ignore[arg-type]
            Address.from_primitive(to),
            amount,
            _hex(name, "--name"),
        )
    except (BuilderError, ValueError) as exc:
        raise _fail(exc) from exc
    typer.echo(f"minted {amount} of {result.policy_id.hex()}.{name} to {to}")
    typer.echo(f"tx: {tx_id}")


@app.command()
def refund(
    deployment_file: Path = typer.Option(..., "--deployment", help="deployment.json"),
    key_file: Path = typer.Option(..., help="payer's key (anyone may pay for a refund)"),
    escrow: list[str] = typer.Option(..., help="escrow out-ref TXID#INDEX; repeat for each"),
) -> None:
    """Return escrows whose deadline has passed to their submitters' full addresses."""
    from pycardano import TransactionInput

    from chain.offchain.backends import chain_context
    from chain.offchain.builders import BuilderError, Deployment, build_refund, sign, submit
    from proofnet.settings import build_settings

    settings = build_settings()
    context = chain_context(settings)
    try:
        deployment = Deployment.load(deployment_file)
        wanted = set()
        for ref in escrow:
            tx_id, _, index = ref.partition("#")
            wanted.add(TransactionInput.from_primitive([tx_id, int(index)]))
        found = [u for u in context.utxos(deployment.escrow_address) if u.input in wanted]
        missing = wanted - {u.input for u in found}
        if missing:
            raise BuilderError(f"not unspent at the escrow address: {sorted(map(str, missing))}")
        wallet = _wallet(key_file, settings)
        built = build_refund(context, deployment, found, wallet.address)  # type: ignore[attr-defined]
        tx_id = submit(context, sign(built.built, [wallet.signing_key]))  # type: ignore[attr-defined]
    except (BuilderError, ValueError) as exc:
        raise _fail(exc) from exc
    typer.echo(f"refund tx: {tx_id}")
