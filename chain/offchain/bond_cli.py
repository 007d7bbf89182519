"""`proofnet bond ...`: a provider's bond on chain (lock, unbond, withdraw, status), and the
audit of every slash (`slashes`). Slashing is the oracle quorum's, each oracle with only its
own key: `proofnet oracle slash` (oracle.settlement.slash).

The provider's key is the worker identity key (`proofnet worker` writes it; a cardano-cli
payment key works too): the bond's datum names its hash, and the same key signs the
attestations a slash cites. Bond terms (delay, share) come from settings
(`PROOFNET_BOND_UNBONDING_DELAY_MS`, `PROOFNET_BOND_SLASH_PERMILLE`); every party must use
the deployment's terms, or it derives another bond address.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

app = typer.Typer(no_args_is_help=True, help="Lock, unbond and withdraw a provider bond.")

DEPLOYMENT = typer.Option(..., "--deployment", help="deployment.json")
KEY_FILE = typer.Option(..., "--key-file", help="provider's key (worker key or payment key)")
BOND_REF = typer.Option(None, "--bond", help="bond out-ref TXID#INDEX (default: your only one)")


def _fail(exc: Exception) -> typer.Exit:
    typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
    return typer.Exit(2)  # an expected failure: one line, exit 2 (proofnet.cli)


def load_signing_key(path: Path) -> Any:
    """A payment signing key from a text envelope holding a 32-byte Ed25519 seed: the
    worker's identity key file or a cardano-cli `PaymentSigningKeyShelley_ed25519`."""
    from pycardano import PaymentSigningKey

    from chain.offchain.builders import BuilderError

    try:
        envelope = json.loads(Path(path).read_text(encoding="utf-8"))
        raw = bytes.fromhex(str(envelope["cborHex"]))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise BuilderError(f"cannot read key file {path}: {exc}") from exc
    if len(raw) != 34 or raw[:2] != b"\x58\x20":
        raise BuilderError(f"{path} does not hold a 32-byte Ed25519 key")
    return PaymentSigningKey.from_primitive(raw[2:])


class _Session:
    """What every command needs, built once at the edge."""

    def __init__(self, deployment_file: Path) -> None:
        from chain.offchain.backends import chain_context
        from chain.offchain.builders import Deployment
        from chain.offchain.builders.bond import BondTerms, bond_address, bond_script
        from proofnet.settings import build_settings

        settings = build_settings()
        self.context = chain_context(settings)
        self.deployment = Deployment.load(deployment_file)
        self.terms = BondTerms(settings.bond_unbonding_delay_ms, settings.bond_slash_permille)
        self.script = bond_script(self.deployment, self.terms)
        self.address = bond_address(self.script, self.deployment)
        self.script_hash_hex = str(self.address.payment_part.payload.hex())  # type: ignore[union-attr]

    def wallet(self, key_file: Path) -> Any:
        from chain.offchain.builders import KeyWallet

        return KeyWallet(load_signing_key(key_file), self.deployment.pycardano_network)

    def bonds(self, provider: Any = None) -> list[Any]:
        from chain.offchain.builders.bond import bonds_at

        return bonds_at(self.context, self.deployment, self.address, provider)

    def one_bond(self, wallet: Any, ref: str | None) -> Any:
        from chain.offchain.builders import BuilderError
        from chain.offchain.builders.onchain import out_ref_text

        mine = self.bonds(wallet.pkh)
        if ref is not None:
            mine = [b for b in mine if out_ref_text(b.utxo.input) == ref]
        if len(mine) != 1:
            raise BuilderError(f"{len(mine)} of your bonds match; name one with --bond")
        return mine[0]

    def submit(self, built: Any, keys: list[Any]) -> str:
        from chain.offchain.builders import sign, submit

        return str(submit(self.context, sign(built, keys)))


@app.command()
def lock(
    deployment_file: Path = DEPLOYMENT,
    key_file: Path = KEY_FILE,
    amount: int = typer.Option(..., min=1, help="NTX base units to bond"),
) -> None:
    """Lock NTX as your bond (the key pays and is named as the provider)."""
    from chain.offchain.builders import BuilderError
    from chain.offchain.builders.bond import build_lock_bond

    try:
        s = _Session(deployment_file)
        w = s.wallet(key_file)
        built = build_lock_bond(s.context, s.deployment, s.script, w.pkh, amount, w.address)
        tx_id = s.submit(built.built, [w.signing_key])
    except (BuilderError, ValueError) as exc:
        raise _fail(exc) from exc
    typer.echo(f"bonded {amount} NTX at {s.address}")
    typer.echo(f"bond: {tx_id}#0")


@app.command()
def unbond(
    deployment_file: Path = DEPLOYMENT, key_file: Path = KEY_FILE, bond: str = BOND_REF
) -> None:
    """Announce on chain that the bond will leave; withdraw once the delay has passed."""
    from chain.offchain.builders import BuilderError
    from chain.offchain.builders.bond import build_unbond
    from chain.offchain.builders.chain_time import ChainClock

    try:
        s = _Session(deployment_file)
        w = s.wallet(key_file)
        b = s.one_bond(w, bond)
        built = build_unbond(s.context, s.script, b.utxo, w.address)
        tx_id = s.submit(built.built, [w.signing_key])
    except (BuilderError, ValueError) as exc:
        raise _fail(exc) from exc
    since = ChainClock.of(s.context).posix_ms(int(built.built.tx.transaction_body.ttl))
    typer.echo(f"unbonding announced: {tx_id}#0")
    typer.echo(f"withdrawable from {since + s.terms.unbonding_delay_ms} (POSIX ms, chain time)")


@app.command()
def withdraw(
    deployment_file: Path = DEPLOYMENT,
    key_file: Path = KEY_FILE,
    bond: str = BOND_REF,
    to: str = typer.Option(None, help="bech32 address to receive it (default: the key's)"),
) -> None:
    """Take back an unbonding bond whose delay has passed."""
    from pycardano import Address

    from chain.offchain.builders import BuilderError
    from chain.offchain.builders.bond import build_withdraw

    try:
        s = _Session(deployment_file)
        w = s.wallet(key_file)
        b = s.one_bond(w, bond)
        dest = Address.from_primitive(to) if to else w.address
        built = build_withdraw(s.context, s.script, s.terms, b.utxo, dest, w.address)
        tx_id = s.submit(built.built, [w.signing_key])
    except (BuilderError, ValueError) as exc:
        raise _fail(exc) from exc
    typer.echo(f"withdrawn {b.ntx} NTX to {dest}: {tx_id}")


@app.command()
def status(
    deployment_file: Path = DEPLOYMENT,
    key_file: Path = typer.Option(None, "--key-file", help="show this key's bonds"),
    provider: str = typer.Option(None, help="provider key hash (hex); default: all bonds"),
    as_json: bool = typer.Option(False, "--json", help="machine-readable output"),
) -> None:
    """Bonds at the deployment's bond address: NTX, state, when withdrawable, slashes."""
    from pycardano import VerificationKeyHash

    from chain.offchain.builders import BuilderError
    from chain.offchain.builders.bond import withdrawable_from_ms
    from chain.offchain.builders.onchain import out_ref_text

    try:
        s = _Session(deployment_file)
        who = None
        if key_file is not None:
            who = s.wallet(key_file).pkh
        elif provider:
            who = VerificationKeyHash(bytes.fromhex(provider))
        rows = [
            {
                "bond": out_ref_text(b.utxo.input),
                "provider": b.provider,
                "ntx": b.ntx,
                "state": "bonded" if b.unbonding_since is None else "unbonding",
                "counts": b.counts,
                "withdrawable_from_ms": withdrawable_from_ms(b.datum, s.terms),
                "slashed_jobs": [j.hex() for j in b.datum.slashed],
            }
            for b in s.bonds(who)
        ]
    except (BuilderError, ValueError) as exc:
        raise _fail(exc) from exc
    if as_json:
        typer.echo(json.dumps({"address": str(s.address), "bonds": rows}, indent=2))
        return
    typer.echo(f"bond address: {s.address}")
    for r in rows:
        typer.echo(
            f"{r['bond']}  {r['ntx']} NTX  {r['state']}"
            + (
                f" (withdrawable from {r['withdrawable_from_ms']} ms)"
                if r["state"] != "bonded"
                else ""
            )
            + (f"  slashed for {len(r['slashed_jobs'])} job(s)" if r["slashed_jobs"] else "")
        )
    if not rows:
        typer.echo("no bonds")


@app.command()
def slashes(
    deployment_file: Path = DEPLOYMENT,
    from_height: int = typer.Option(1, min=0, help="first block height to read"),
    as_json: bool = typer.Option(False, "--json", help="machine-readable output"),
) -> None:
    """Audit: every slash of this deployment's bonds, from the chain, with its evidence
    (cited job, root, provider signature re-checked, who received the share)."""
    from dataclasses import asdict

    from chain.offchain.builders import BuilderError
    from chain.offchain.errors import ChainError
    from chain.offchain.follow.bond_slashes import SlashEvidence, slash_evidence
    from chain.offchain.follow.reader import follower_for

    try:
        s = _Session(deployment_file)
        follower = follower_for(s.context)
        start = follower.block_at(from_height)
        if start is None:
            raise BuilderError(f"no block at height {from_height}")
        bond_hash = s.script_hash_hex
        found: list[SlashEvidence] = []
        cursor = start
        while True:
            step = follower.follow([cursor], [bond_hash], start)
            for tx in step.txs:
                found += slash_evidence(tx, s.deployment, bond_hash)
            if step.cursor == cursor or step.cursor.height >= step.tip.height:
                break
            cursor = step.cursor
    except (BuilderError, ChainError, ValueError) as exc:
        raise _fail(exc) from exc
    if as_json:
        typer.echo(json.dumps([asdict(e) for e in found], indent=2))
        return
    for e in found:
        verdict = "evidence sound" if e.sound else "EVIDENCE DOES NOT CHECK"
        typer.echo(f"{e.tx_hash}: bond {e.bond_ref} of {e.provider} lost {e.ntx} NTX")
        to = f"{e.submitter} (burnt)" if e.burnt else e.submitter
        typer.echo(f"  job {e.job_id} root {e.pot_root} -> {to}; {verdict}")
    if not found:
        typer.echo("no slashes")
