"""Audit one settlement transaction from the chain and its published bundle alone.

Nothing the oracles store is trusted: the transaction comes from the chain backend (its
Blockfrost REST API), the bundle from any oracle that serves it and is accepted only when
its SHA-256 is the one in the transaction's metadata. The audit then checks:

- the transaction is confirmed and its scripts validated;
- the bundle's Merkle root (recomputed from its attestations) is the metadata's root;
- every attestation's COSE signature is valid for the expected network and escrow script;
- the escrows the transaction spends are exactly the attested ones, each paid once;
- each provider receives exactly the NTX attested to it, and each escrow's submitter gets
  the rest of the escrow (escrow - payout) back.

    report = audit_settlement(devnet_url, tx_id, oracle_urls, network=..., ...)
    print(report.line())   # "audit: OK (...)" or "audit: FAILED: ..."
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cbor2
import httpx
import typer

MEMO_LABEL = 674


class AuditError(Exception):
    """The audit could not be made (transaction or bundle unavailable)."""


@dataclass(frozen=True)
class EscrowSettled:
    escrow: str  # "txid#index"
    provider: str
    attested: int
    submitter: str
    held: int  # NTX the escrow locked
    paid: int  # NTX the transaction gives the provider (summed over its outputs)
    refunded: int  # NTX the transaction gives the submitter

    @property
    def refund_expected(self) -> int:
        return self.held - self.attested


@dataclass(frozen=True)
class AuditReport:
    tx_id: str
    merkle_root: str
    bundle_sha256: str
    escrows: tuple[EscrowSettled, ...]
    signatures_checked: int
    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.problems

    def line(self) -> str:
        if self.problems:
            return "audit: FAILED: " + "; ".join(self.problems)
        return (
            f"audit: OK ({len(self.escrows)} escrow(s) settled as attested, "
            f"{self.signatures_checked} attestation signature(s) valid, "
            f"Merkle root {self.merkle_root[:16]}... matches the bundle)"
        )


def _ntx(output: Any, policy: bytes, name: bytes) -> int:
    for p, assets in output.amount.multi_asset.items():
        if p.payload == policy:
            for n, q in assets.items():
                if n.payload == name:
                    return int(q)
    return 0


def _metadata(tx: Any) -> dict[Any, Any]:
    aux = tx.auxiliary_data
    if aux is None:
        return {}
    data = getattr(aux, "data", aux)
    meta = getattr(data, "metadata", data)
    try:
        entry = dict(meta).get(MEMO_LABEL)
    except (TypeError, ValueError):
        return {}
    return dict(entry) if isinstance(entry, dict) else {}


class ChainReader:
    """The few Blockfrost REST calls the audit needs (`url` ends in /api/v0)."""

    def __init__(self, url: str, client: httpx.Client) -> None:
        self.url = url.rstrip("/")
        self.client = client

    def _get(self, path: str) -> Any:
        try:
            response = self.client.get(f"{self.url}{path}")
        except httpx.HTTPError as exc:
            raise AuditError(f"chain backend unreachable: {exc}") from exc
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            raise AuditError(f"GET {path}: {response.status_code} {response.text[:200]}")
        return response.json()

    def transaction(self, tx_id: str) -> Any:
        from pycardano import Transaction

        info = self._get(f"/txs/{tx_id}")
        if info is None:
            raise AuditError(f"transaction {tx_id} is not on chain")
        if info.get("valid_contract") is False:
            raise AuditError(f"transaction {tx_id} failed phase-2 validation")
        raw = self._get(f"/txs/{tx_id}/cbor")
        if raw is None:
            raise AuditError(f"the chain backend has no CBOR of {tx_id}")
        return Transaction.from_cbor(bytes.fromhex(raw["cbor"]))

    def output(self, tx_id: str, index: int) -> Any:
        tx = self.transaction(tx_id)
        outputs = tx.transaction_body.outputs
        if not 0 <= index < len(outputs):
            raise AuditError(f"{tx_id} has no output {index}")
        return outputs[index]


def fetch_bundle(
    client: httpx.Client, oracle_urls: Sequence[str], sha256: str
) -> tuple[bytes, str]:
    """The bundle bytes from the first oracle serving them with the right hash."""
    errors = []
    for base in oracle_urls:
        url = f"{base.rstrip('/')}/api/v1/bundles/{sha256}"
        try:
            response = client.get(url)
        except httpx.HTTPError as exc:
            errors.append(f"{base}: {exc}")
            continue
        if response.status_code != 200:
            errors.append(f"{base}: {response.status_code}")
            continue
        if hashlib.sha256(response.content).hexdigest() != sha256:
            errors.append(f"{base}: served bytes that do not hash to {sha256}")
            continue
        return response.content, url
    raise AuditError(f"no oracle serves bundle {sha256}: {'; '.join(errors) or 'none asked'}")


def audit_settlement(
    chain_url: str,
    tx_id: str,
    oracle_urls: Sequence[str],
    *,
    network: str,
    escrow_script_hash: str,
    ntx_policy: str,
    ntx_name: str = "4e5458",
    client: httpx.Client | None = None,
    on_step: Callable[[str], None] | None = None,
) -> AuditReport:
    """Audit `tx_id` (see the module doc). Raises AuditError when it cannot be made."""
    from pycardano import Address, ScriptHash

    from chain.contracts.types import EscrowDatum
    from chain.offchain.builders.onchain import address_from_data, datum_cbor
    from proofnet.messages.attestation import AttestationError, verify_attestation
    from proofnet.messages.merkle import MerkleTree, leaf_hash

    if len(tx_id) != 64 or not all(c in "0123456789abcdef" for c in tx_id):
        raise AuditError(f"a transaction hash is 64 lowercase hex digits, not {tx_id[:80]!r}")
    note = on_step or (lambda _text: None)
    own = client is None
    http = client or httpx.Client(timeout=30)
    problems: list[str] = []
    try:
        chain = ChainReader(chain_url, http)
        tx = chain.transaction(tx_id)
        body = tx.transaction_body
        pycardano_network = Address.from_primitive(str(body.outputs[0].address)).network
        meta = _metadata(tx)
        root, bundle_hash = meta.get("root"), meta.get("bundle")
        if not isinstance(root, bytes) or not isinstance(bundle_hash, bytes):
            raise AuditError(f"{tx_id} carries no settlement metadata (label {MEMO_LABEL})")
        note(f"metadata: Merkle root {root.hex()}, bundle {bundle_hash.hex()}")
        raw, where = fetch_bundle(http, oracle_urls, bundle_hash.hex())
        note(f"bundle fetched from {where}")
        try:
            obj = json.loads(raw)
            coses = [bytes.fromhex(h) for h in obj["attestations"]]
            bundle_root = bytes.fromhex(obj["merkle_root"])
        except (ValueError, KeyError, TypeError) as exc:
            raise AuditError(f"bundle {bundle_hash.hex()} is malformed: {exc}") from exc
        leaves = []
        for cose in coses:
            try:
                payload = cbor2.loads(cose)
                payload = payload.value if isinstance(payload, cbor2.CBORTag) else payload
                leaves.append(leaf_hash(payload[2]))
            except Exception as exc:  # cbor2 raises unrelated types on garbage
                raise AuditError(f"bundle holds an attestation that is not COSE: {exc}") from exc
        if MerkleTree.from_leaf_hashes(leaves).root != root:
            problems.append("the metadata's Merkle root is not the root of the bundle's leaves")
        if bundle_root != root:
            problems.append("the bundle states another Merkle root than the metadata")

        claims: dict[str, tuple[str, int]] = {}
        signatures = 0
        for cose in coses:
            try:
                att = verify_attestation(
                    cose, expected_network=network, expected_script_hash=escrow_script_hash
                )
            except AttestationError as exc:
                problems.append(f"attestation signature or domain invalid: {exc}")
                continue
            signatures += 1
            ref = f"{att.domain.escrow.tx_id}#{att.domain.escrow.index}"
            if ref in claims:
                problems.append(f"escrow {ref} is attested twice")
            claims[ref] = (att.payout_address, att.amount)

        policy, name = bytes.fromhex(ntx_policy), bytes.fromhex(ntx_name)
        script = ScriptHash(bytes.fromhex(escrow_script_hash))
        spent: dict[str, tuple[str, int]] = {}  # escrow -> (submitter, held)
        for tx_in in body.inputs:
            ref = f"{tx_in.transaction_id.payload.hex()}#{tx_in.index}"
            out = chain.output(tx_in.transaction_id.payload.hex(), tx_in.index)
            if out.address.payment_part != script:
                continue
            try:
                datum = EscrowDatum.from_cbor(datum_cbor(out.datum))
            except Exception as exc:  # foreign data at the script address
                problems.append(f"escrow input {ref} has no escrow datum: {exc}")
                continue
            submitter = str(address_from_data(datum.submitter, pycardano_network))
            spent[ref] = (submitter, _ntx(out, policy, name))
        if set(spent) != set(claims):
            problems.append(
                f"escrows spent {sorted(spent)} are not the attested ones {sorted(claims)}"
            )

        received: dict[str, int] = defaultdict(int)
        for out in body.outputs:
            received[str(out.address)] += _ntx(out, policy, name)
        owed: dict[str, int] = defaultdict(int)
        settled = []
        for ref, (provider, amount) in sorted(claims.items()):
            submitter, held = spent.get(ref, ("", 0))
            owed[provider] += amount
            if submitter:
                owed[submitter] += held - amount
            if amount > held:
                problems.append(f"escrow {ref}: attested {amount} exceeds the {held} it holds")
            settled.append(
                EscrowSettled(
                    escrow=ref,
                    provider=provider,
                    attested=amount,
                    submitter=submitter,
                    held=held,
                    paid=received.get(provider, 0),
                    refunded=received.get(submitter, 0),
                )
            )
        for address, due in sorted(owed.items()):
            got = received.get(address, 0)
            if got != due:
                problems.append(f"{address} receives {got} NTX, owed {due}")
        escrowed = sum(held for _, held in spent.values())
        paid_out = sum(owed.values())
        if paid_out != escrowed:
            problems.append(f"{escrowed} NTX left the escrows but {paid_out} were accounted for")
        return AuditReport(
            tx_id=tx_id,
            merkle_root=root.hex(),
            bundle_sha256=bundle_hash.hex(),
            escrows=tuple(settled),
            signatures_checked=signatures,
            problems=tuple(problems),
        )
    finally:
        if own:
            http.close()


# --- `proofnet audit --tx HASH` ------------------------------------------------------------


app = typer.Typer(
    help="Audit a settlement transaction from the chain and its published bundle.",
    pretty_exceptions_show_locals=False,
)


@app.command()
def audit(
    tx: str = typer.Option(..., "--tx", help="the settlement transaction's hash"),
    deployment: Path = typer.Option(
        ..., "--deployment", help="deployment.json (escrow script, NTX unit)"
    ),
    oracle_url: list[str] = typer.Option(
        [], "--oracle-url", help="an oracle serving bundles (repeat; default: settings)"
    ),
    chain_url: str = typer.Option(
        "", "--chain-url", help="Blockfrost-shaped REST root (default: PROOFNET_DEVNET_URL)"
    ),
) -> None:
    """Check payouts, refunds, the Merkle root and every attestation signature."""
    from chain.offchain.builders.deployment import Deployment
    from chain.offchain.builders.errors import BuilderError
    from proofnet.settings import build_settings

    settings = build_settings()
    try:
        deployed = Deployment.load(deployment)
    except (BuilderError, ValueError) as exc:
        raise typer.BadParameter(str(exc), param_hint="--deployment") from exc
    try:
        report = audit_settlement(
            chain_url or settings.devnet_url,
            tx,
            oracle_url or [settings.oracle_url],
            network=settings.network,
            escrow_script_hash=deployed.escrow_hash,
            ntx_policy=deployed.ntx_policy,
            ntx_name=deployed.ntx_name,
            on_step=typer.echo,
        )
    except AuditError as exc:
        typer.echo(f"audit: cannot audit {tx}: {exc}", err=True)
        raise typer.Exit(2) from exc
    for e in report.escrows:
        typer.echo(
            f"escrow {e.escrow}: held {e.held}, attested {e.attested} to {e.provider} "
            f"(received {e.paid}), refund {e.refund_expected} to {e.submitter} "
            f"(received {e.refunded})"
        )
    typer.echo(report.line())
    if not report.ok:
        raise typer.Exit(1)
