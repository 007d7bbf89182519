"""Audit settlements from the chain and their published bundles alone.

Nothing the oracles store is trusted: transactions come from a Blockfrost REST API (the
devnet's, or Blockfrost's own for preprod/mainnet with a project id), bundles from any oracle
that serves them and are accepted only when their SHA-256 is the one in the transaction's
metadata. Auditing one settlement checks:

- the transaction is confirmed and its scripts validated;
- the bundle's Merkle root (recomputed from its attestations) is the metadata's root, and
  the batch redeemer carries that same root;
- every attestation's COSE signature is valid for the expected network and escrow script;
- the escrows the transaction spends are exactly the attested ones, each attested once;
- each provider receives exactly the NTX attested to it, each escrow's submitter gets the
  rest of the escrow (escrow - payout) back, and no other address receives NTX;
- an escrow paid by several unit attestations of a topology job (`unit` set; see
  docs/topologies.md): its settlement entry has one payout output per unit attestation,
  in bundle order, paying that unit's provider exactly its attested amount, the refund is
  escrow - the sum, no unit is attested twice, every unit's inputs are outputs of units of
  the same escrow in the bundle (branch starts and nodes have none), and a cluster's nodes
  attest one output;
- an escrow paid by several attempts of a resumed job (`segments` set; docs/protocol.md,
  "Long jobs resume"): likewise one payout output per attempt's attestation, and no two
  attempts claim one segment (`proofnet.messages.escrow_share`; each attempt's amount
  within its segments' share of the price is the oracles' check, as the price is not on
  chain);
- an attestation of a lease stopped for the job's fault (`stop` set; docs/protocol.md,
  "A job at fault"): the bundle carries the stop's evidence (`proofnet.messages.
  stop_evidence`: the quorum's signed job-fault verdicts for that very lease, at least the
  deployment's threshold of its oracle set as the config on chain names it, and the job's
  spec, hashing to its id), and the amount is within the stopped share the evidence allows
  (re-derived from the spec's schedule and price cap and the segments at the stop); no
  evidence beside an attestation that claims no stop.

Three ways to pick what to audit: one transaction (`audit_settlement`), the settlement(s)
that paid a job (`settlements_for_job`, a scan of label-674 transactions and their bundles)
and every settlement paying a provider (`settlements_paying`).

    report = audit_settlement(devnet_url, tx_id, oracle_urls, network=..., ...)
    print(report.line())   # "audit: OK (...)" or "audit: FAILED: ..."
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import cbor2
import httpx
import typer

from proofnet.messages.attestation import Attestation
from proofnet.messages.escrow_share import sharing_refusal
from proofnet.messages.stop_evidence import (
    StopEvidence,
    StopEvidenceError,
    bundle_stops,
    stop_refusal,
    stopped_cap,
)
from proofnet.messages.storage import StorageError
from proofnet.messages.storage_receipt import StorageReceipt, bundle_receipts, receipt_refusal
from proofnet.messages.unit_chain import (
    chain_breaks,
)
from proofnet.messages.verification_fee import (
    FeeError,
    FeeEvidence,
    Payouts,
    bundle_fees,
    fee_payouts,
    fee_refusal,
)

if TYPE_CHECKING:
    from chain.offchain.builders.deployment import Deployment

MEMO_LABEL = 674
PAGE_SIZE = 100  # Blockfrost's largest page
REWARD_TAG = 3  # the ledger's redeemer tag for withdrawals (the batch validator's purpose)


class AuditError(Exception):
    """The audit could not be made (transaction or bundle unavailable, bad input)."""


# Discrepancy kinds, each naming one way a settlement can disagree with its attestations.
BAD_SIGNATURE = "bad-signature"
LEAF_NOT_IN_ROOT = "leaf-not-in-root"
BUNDLE_ROOT_MISMATCH = "bundle-root-mismatch"
REDEEMER_ROOT_MISMATCH = "redeemer-root-mismatch"
BUNDLE_HASH_MISMATCH = "bundle-hash-mismatch"
PAYOUT_MISMATCH = "payout-mismatch"
REFUND_MISMATCH = "refund-mismatch"
NTX_ELSEWHERE = "ntx-to-other-address"
UNATTESTED_ESCROW = "escrow-paid-without-attestation"
ATTESTED_NOT_SPENT = "attested-escrow-not-spent"
DUPLICATE_ATTESTATION = "duplicate-attestation"
OVER_ATTESTED = "attested-exceeds-escrow"
NOT_AN_ESCROW = "escrow-without-datum"
UNBALANCED = "escrow-ntx-unaccounted"
FOREIGN_ESCROW = "escrow-of-another-deployment"
# A verification fee the bundle's evidence does not back, or a fee output that does not pay
# what the evidence says (proofnet.messages.verification_fee).
FEE_UNEARNED = "verification-fee-unearned"
FEE_MISMATCH = "verification-fee-mismatch"
# A storage payout no valid receipt backs, or one whose output does not pay what the receipt
# says (proofnet.messages.storage).
STORAGE_UNEARNED = "storage-payout-unearned"
STORAGE_MISMATCH = "storage-payout-mismatch"
# A stopped lease's payout without valid evidence of its stop (none, forged, another job's
# or lease's, short of the quorum), or over the stopped share the evidence allows
# (proofnet.messages.stop_evidence).
STOP_UNPROVEN = "stopped-payout-unproven"
STOP_SHARE_EXCEEDED = "stopped-share-exceeded"


class WrongDeployment(AuditError):
    """The settlement pays escrows of another deployment than the one audited against: not
    fraud, a question asked of the wrong deployment. `actual` are the deployments its
    escrows name, `expected` the one given (each "config NFT policy.name")."""

    def __init__(self, tx_id: str, actual: tuple[str, ...], expected: str) -> None:
        self.tx_id = tx_id
        self.actual = actual
        self.expected = expected
        super().__init__(
            f"settlement {tx_id} belongs to deployment {', '.join(actual)}, not {expected}: "
            "audit it against the deployment its escrows name (--deployment)"
        )


def deployment_label(config_policy: str, config_name: str) -> str:
    """A deployment's name in audit output: its config NFT (unique per deployment, minted
    once from the deployment's seed), as "policy.name" in hex."""
    return f"{config_policy}.{config_name}"


@dataclass(frozen=True)
class Discrepancy:
    """One named disagreement; `output` is the transaction output index when one is at fault."""

    kind: str
    tx_id: str
    detail: str
    output: int | None = None
    expected: int | str | None = None
    actual: int | str | None = None

    def __str__(self) -> str:
        where = f"{self.tx_id}#{self.output}" if self.output is not None else self.tx_id
        text = f"{self.kind} in {where}: {self.detail}"
        if self.expected is not None or self.actual is not None:
            text += f" (expected {self.expected}, actual {self.actual})"
        return text


@dataclass(frozen=True)
class FeePaid:
    """A verifier's share of the verification fee of one attestation (carved out of the
    attested amount), as the bundle's evidence backs it."""

    verifier: str
    address: str
    amount: int
    provider: str  # whose attestation it was checked for
    unit: int | None = None


@dataclass(frozen=True)
class StoragePaid:
    """What one storage copy of the job earned (answered retrieval challenges), paid beside
    the job's attestation from its escrow's storage budget, as an oracle's receipt backs it."""

    placement_id: int
    provider_key: str
    address: str
    amount: int
    size: int
    ntx_per_gb_month: int
    challenges_passed: int


@dataclass(frozen=True)
class UnitPaid:
    """One unit attestation of a topology job's escrow and the output that pays it."""

    index: int
    kind: str
    provider: str
    attested: int
    output: int | None  # transaction output index named by the settlement entry
    paid: int  # NTX in that output


@dataclass(frozen=True)
class EscrowSettled:
    escrow: str  # "txid#index"
    provider: str  # "" for an escrow paid by unit attestations (see `units`)
    attested: int  # summed over the units for a topology job's escrow
    submitter: str
    held: int  # NTX the escrow locked
    paid: int  # NTX the transaction gives the provider (summed over its outputs)
    refunded: int  # NTX the transaction gives the submitter
    job_id: str = ""
    units: tuple[UnitPaid, ...] = ()
    # Verification fees out of the attested amount(s): the provider gets `attested` less them.
    fees: tuple[FeePaid, ...] = ()
    # Storage the job's copies earned, paid beside the attestation(s) from the same escrow.
    storage: tuple[StoragePaid, ...] = ()

    @property
    def fee_total(self) -> int:
        return sum(f.amount for f in self.fees)

    @property
    def storage_total(self) -> int:
        return sum(p.amount for p in self.storage)

    @property
    def refund_expected(self) -> int:
        return self.held - self.attested - self.storage_total


@dataclass(frozen=True)
class AuditReport:
    tx_id: str
    merkle_root: str
    bundle_sha256: str
    escrows: tuple[EscrowSettled, ...]
    signatures_checked: int
    discrepancies: tuple[Discrepancy, ...]
    redeemer_root: str = ""
    block_height: int | None = None
    outputs: tuple[tuple[int, str, int], ...] = ()  # (index, address, NTX) of NTX outputs

    @property
    def problems(self) -> tuple[str, ...]:
        return tuple(str(d) for d in self.discrepancies)

    @property
    def ok(self) -> bool:
        return not self.discrepancies

    def paid_to(self, address: str) -> int:
        return sum(q for _, a, q in self.outputs if a == address)

    def line(self) -> str:
        if self.discrepancies:
            return "audit: FAILED: " + "; ".join(self.problems)
        fees = sum(e.fee_total for e in self.escrows)
        shares = sum(len(e.fees) for e in self.escrows)
        paid_fees = (
            f"{fees} NTX of verification fees to {shares} verifier share(s), " if fees else ""
        )
        stored = sum(e.storage_total for e in self.escrows)
        copies = sum(len(e.storage) for e in self.escrows)
        paid_storage = f"{stored} NTX of storage to {copies} copy(ies), " if copies else ""
        return (
            f"audit: OK ({len(self.escrows)} escrow(s) settled as attested, "
            f"{paid_fees}{paid_storage}"
            f"{self.signatures_checked} attestation signature(s) valid, "
            f"Merkle root {self.merkle_root[:16]}... matches the bundle)"
        )

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["ok"] = self.ok
        return out


# --- reading the chain ------------------------------------------------------------------------


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


@dataclass(frozen=True)
class ChainTx:
    tx_id: str
    cbor: bytes
    block_height: int | None
    tx: Any  # pycardano Transaction


class ChainReader:
    """The chain reads the audit needs, through the REST client of a Blockfrost-shaped chain
    backend (`chain.offchain.backends.history_api`: the devnet or hosted Blockfrost, spoken
    by blockfrost-python); `client` fetches bundles from oracles. Its errors become
    AuditError here; a 404 reads as None."""

    def __init__(self, api: Any, client: httpx.Client) -> None:
        self.api = api
        self.client = client
        self._txs: dict[str, ChainTx] = {}

    def call(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """One request through the SDK: its JSON, or None on 404."""
        try:
            return fn(*args, return_type="json", **kwargs)
        except Exception as exc:  # the SDK raises its ApiError, requests' errors, ...
            status = getattr(exc, "status_code", None)
            if status == 404:
                return None
            from chain.offchain.errors import BackendConfigError

            if isinstance(exc, BackendConfigError):  # a read this backend cannot serve
                raise AuditError(f"{what}: {exc}") from exc
            if isinstance(status, int):
                message = getattr(exc, "message", None) or exc
                raise AuditError(f"{what}: the chain backend answered {status}: {message}") from exc
            raise AuditError(f"chain backend unreachable ({what}): {exc}") from exc

    def pages(
        self, what: str, fn: Callable[..., Any], *args: Any, limit: int, **kwargs: Any
    ) -> Iterator[Any]:
        """Up to `limit` items of a paginated list, page by page (404: none)."""
        page = 1
        given = 0
        while given < limit:
            items = self.call(what, fn, *args, count=PAGE_SIZE, page=page, **kwargs)
            if items is None:
                return
            if not isinstance(items, list):
                raise AuditError(f"{what}: expected a list, got {type(items).__name__}")
            for item in items[: limit - given]:
                given += 1
                yield item
            if len(items) < PAGE_SIZE:
                return
            page += 1

    def tx_info(self, tx_id: str) -> dict[str, Any] | None:
        info = self.call(f"transaction {tx_id}", self.api.transaction, tx_id)
        return info if isinstance(info, dict) else None

    def chain_tx(self, tx_id: str) -> ChainTx:
        from pycardano import Transaction

        if tx_id in self._txs:
            return self._txs[tx_id]
        info = self.tx_info(tx_id)
        if info is None:
            raise AuditError(f"transaction {tx_id} is not on chain")
        if info.get("valid_contract") is False:
            raise AuditError(f"transaction {tx_id} failed phase-2 validation")
        raw = self.call(f"the CBOR of {tx_id}", self.api.transaction_cbor, tx_id)
        if not isinstance(raw, dict) or "cbor" not in raw:
            raise AuditError(f"the chain backend has no CBOR of {tx_id}")
        cbor = bytes.fromhex(raw["cbor"])
        height = info.get("block_height")
        try:
            decoded = Transaction.from_cbor(cbor)
        except Exception as exc:  # pycardano raises assorted types on bad CBOR
            raise AuditError(f"the CBOR of {tx_id} does not decode: {exc}") from exc
        found = ChainTx(tx_id, cbor, height if isinstance(height, int) else None, decoded)
        self._txs[tx_id] = found
        return found

    def transaction(self, tx_id: str) -> Any:
        return self.chain_tx(tx_id).tx

    def output(self, tx_id: str, index: int) -> Any:
        outputs = self.transaction(tx_id).transaction_body.outputs
        if not 0 <= index < len(outputs):
            raise AuditError(f"{tx_id} has no output {index}")
        return outputs[index]

    def settlement_memo(self, tx_id: str) -> dict[str, Any] | None:
        """The label-674 JSON of `tx_id` when it names a root and a bundle."""
        found = self.call(f"the metadata of {tx_id}", self.api.transaction_metadata, tx_id)
        for entry in found or []:
            if str(entry.get("label")) == str(MEMO_LABEL) and _is_settlement(
                entry.get("json_metadata")
            ):
                return dict(entry["json_metadata"])
        return None


def _is_settlement(memo: Any) -> bool:
    return isinstance(memo, dict) and _hex32(memo.get("root")) and _hex32(memo.get("bundle"))


def _hex32(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    text = value.removeprefix("0x")
    return len(text) == 64 and all(c in "0123456789abcdef" for c in text)


def redeemer_root(tx_cbor: bytes, reward_indices: Sequence[int]) -> bytes | None:
    """The Merkle root the batch redeemer carries: the third field of the reward (withdrawal)
    redeemer's `BatchSettle` data, read from the transaction's witness set."""
    try:
        tx = cbor2.loads(tx_cbor)
        witnesses = tx[1]
        redeemers = witnesses.get(5)
    except Exception as exc:  # cbor2 raises unrelated types on garbage
        raise AuditError(f"the transaction CBOR does not decode: {exc}") from exc
    entries: list[tuple[int, int, Any]] = []
    if isinstance(redeemers, list | tuple):  # pre-Conway: [tag, index, data, ex_units]
        entries = [(int(r[0]), int(r[1]), r[2]) for r in redeemers]
    elif isinstance(redeemers, dict):  # Conway: {[tag, index]: [data, ex_units]}
        entries = [(int(k[0]), int(k[1]), v[0]) for k, v in redeemers.items()]
    for tag, index, data in entries:
        if tag != REWARD_TAG or (reward_indices and index not in reward_indices):
            continue
        fields = data.value if isinstance(data, cbor2.CBORTag) else None
        if isinstance(fields, list) and len(fields) == 4 and isinstance(fields[2], bytes):
            return bytes(fields[2])
    return None


def redeemer_entries(
    tx_cbor: bytes, reward_indices: Sequence[int]
) -> list[tuple[int, tuple[int, ...], int]] | None:
    """The batch redeemer's entries `(input index, payout output indices, refund output
    index)`, read like `redeemer_root`; None when no batch redeemer carries them."""
    try:
        witnesses = cbor2.loads(tx_cbor)[1]
        redeemers = witnesses.get(5)
    except Exception as exc:  # cbor2 raises unrelated types on garbage
        raise AuditError(f"the transaction CBOR does not decode: {exc}") from exc
    datas: list[tuple[int, int, Any]] = []
    if isinstance(redeemers, list | tuple):
        datas = [(int(r[0]), int(r[1]), r[2]) for r in redeemers]
    elif isinstance(redeemers, dict):
        datas = [(int(k[0]), int(k[1]), v[0]) for k, v in redeemers.items()]
    for tag, index, data in datas:
        if tag != REWARD_TAG or (reward_indices and index not in reward_indices):
            continue
        fields = data.value if isinstance(data, cbor2.CBORTag) else None
        if not (isinstance(fields, list) and len(fields) == 4 and isinstance(fields[1], list)):
            continue
        entries = []
        try:
            for entry in fields[1]:
                values = entry.value if isinstance(entry, cbor2.CBORTag) else entry
                input_index, payouts, refund = values
                entries.append((int(input_index), tuple(int(p) for p in payouts), int(refund)))
        except (TypeError, ValueError) as exc:
            raise AuditError(f"the batch redeemer's entries do not decode: {exc}") from exc
        return entries
    return None


def escrow_deployments(chain: ChainReader, inputs: Sequence[Any], script: Any) -> dict[str, str]:
    """Escrow input ("txid#index") -> the deployment its datum names (`deployment_label` of
    the datum's config NFT), for the inputs at the escrow script `script` with an escrow
    datum. The escrow script is shared by every deployment; the datum says whose it is (the
    batch validator only pays escrows whose datum names its config)."""
    from chain.offchain.builders.onchain import datum_cbor, escrow_datum_from_cbor

    named: dict[str, str] = {}
    for tx_in in inputs:
        source = tx_in.transaction_id.payload.hex()
        out = chain.output(source, tx_in.index)
        if out.address.payment_part != script:
            continue
        try:
            datum = escrow_datum_from_cbor(datum_cbor(out.datum))
        except Exception:  # foreign data at the script address: flagged by the audit
            continue
        named[f"{source}#{tx_in.index}"] = deployment_label(
            bytes(datum.config_policy).hex(), bytes(datum.config_name).hex()
        )
    return named


@dataclass(frozen=True)
class AuditedDeployment:
    """What the audit needs of a deployment, and where it was read (a file, a service's
    `GET /api/v1/deployment`, or the settlement itself on chain)."""

    escrow_hash: str
    ntx_policy: str
    ntx_name: str
    config_policy: str
    config_name: str
    origin: str

    @property
    def label(self) -> str:
        return deployment_label(self.config_policy, self.config_name)


def deployment_from_chain(chain: ChainReader, tx_id: str) -> AuditedDeployment:
    """The deployment a settlement belongs to, read from the chain alone: its escrow inputs'
    datums name the config NFT, the batch credential and the NTX; a reference input must
    hold that config NFT at a script address with an oracle config naming the same batch
    credential, and another must carry the escrow script the inputs are locked by (the
    deployment's reference scripts). Raises AuditError when the transaction does not read
    as a settlement of one deployment. Which deployment it is, the caller must still judge
    (an attacker can deploy too): compare `label` with the one a service you trust serves."""
    from pycardano.plutus import script_hash

    from chain.contracts.types import OracleConfigDatum
    from chain.offchain.builders.onchain import datum_cbor, escrow_datum_from_cbor

    body = chain.transaction(tx_id).transaction_body
    escrows: dict[tuple[str, str, str, str, str, str], str] = {}
    for tx_in in body.inputs:
        source = tx_in.transaction_id.payload.hex()
        out = chain.output(source, tx_in.index)
        part = out.address.payment_part
        if out.datum is None or type(part).__name__ != "ScriptHash":
            continue
        try:
            datum = escrow_datum_from_cbor(datum_cbor(out.datum))
        except Exception:  # not an escrow: other scripts may be spent alongside
            continue
        key = (
            part.payload.hex(),
            bytes(datum.config_policy).hex(),
            bytes(datum.config_name).hex(),
            bytes(datum.batch_credential).hex(),
            bytes(datum.ntx_policy).hex(),
            bytes(datum.ntx_name).hex(),
        )
        escrows[key] = f"{source}#{tx_in.index}"
    if not escrows:
        raise AuditError(f"{tx_id} spends no escrow: no deployment to read from chain")
    if len(escrows) > 1:
        named = sorted({deployment_label(k[1], k[2]) for k in escrows})
        raise AuditError(f"{tx_id} spends escrows naming several deployments: {named}")
    ((escrow_hash, policy, name, batch, ntx_policy, ntx_name),) = escrows
    config_at = ""
    scripts: set[str] = set()
    for ref in body.reference_inputs or ():
        source = ref.transaction_id.payload.hex()
        out = chain.output(source, ref.index)
        if out.script is not None:
            scripts.add(script_hash(out.script).payload.hex())
        if _ntx(out, bytes.fromhex(policy), bytes.fromhex(name)) != 1 or out.datum is None:
            continue
        try:
            config = OracleConfigDatum.from_cbor(datum_cbor(out.datum))
        except Exception as exc:  # the NFT's output must carry the oracle config
            raise AuditError(
                f"the config NFT at {source}#{ref.index} has no config: {exc}"
            ) from exc
        if bytes(config.batch_credential).hex() != batch:
            raise AuditError(
                f"the config at {source}#{ref.index} names batch script "
                f"{bytes(config.batch_credential).hex()}, the escrows {batch}"
            )
        config_at = f"{source}#{ref.index}"
    if not config_at:
        raise AuditError(
            f"{tx_id} references no output holding config NFT {deployment_label(policy, name)}"
        )
    if escrow_hash not in scripts:
        raise AuditError(f"{tx_id} references no copy of escrow script {escrow_hash}")
    return AuditedDeployment(
        escrow_hash,
        ntx_policy,
        ntx_name,
        policy,
        name,
        f"chain: config NFT at {config_at}, escrow script {escrow_hash}, batch script {batch}",
    )


# --- bundles ------------------------------------------------------------------------------------


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
            errors.append(
                f"{base}: {BUNDLE_HASH_MISMATCH}: served bytes that do not hash to {sha256}"
            )
            continue
        return response.content, url
    raise AuditError(f"no oracle serves bundle {sha256}: {'; '.join(errors) or 'none asked'}")


def bundle_attestations(raw: bytes) -> tuple[bytes, list[bytes], list[bytes]]:
    """(stated root, COSE attestations, their signed payloads) of a bundle's bytes."""
    try:
        obj = json.loads(raw)
        coses = [bytes.fromhex(h) for h in obj["attestations"]]
        stated = bytes.fromhex(obj["merkle_root"])
    except (ValueError, KeyError, TypeError) as exc:
        raise AuditError(f"the bundle is malformed: {exc}") from exc
    payloads = []
    for cose in coses:
        try:
            message = cbor2.loads(cose)
            message = message.value if isinstance(message, cbor2.CBORTag) else message
            payload = message[2]
        except Exception as exc:  # cbor2 raises unrelated types on garbage
            raise AuditError(f"bundle holds an attestation that is not COSE: {exc}") from exc
        if not isinstance(payload, bytes):
            raise AuditError("bundle holds an attestation without an attached payload")
        payloads.append(payload)
    return stated, coses, payloads


def bundle_fee_evidence(raw: bytes, count: int) -> tuple[tuple[FeeEvidence, ...], ...]:
    """The verification fees' evidence of a bundle's bytes, per attestation position (none
    for a version-1 bundle)."""
    try:
        return bundle_fees(json.loads(raw), count)
    except (ValueError, FeeError) as exc:
        raise AuditError(f"the bundle's fee evidence is malformed: {exc}") from exc


def bundle_storage_receipts(raw: bytes, count: int) -> tuple[tuple[StorageReceipt, ...], ...]:
    """The storage receipts of a bundle's bytes, per attestation position (none before
    version 3)."""
    try:
        return bundle_receipts(json.loads(raw), count)
    except (ValueError, StorageError) as exc:
        raise AuditError(f"the bundle's storage receipts are malformed: {exc}") from exc


def bundle_stop_evidence(raw: bytes, count: int) -> tuple[StopEvidence | None, ...]:
    """The stop evidence of a bundle's bytes, per attestation position (none before
    version 4)."""
    try:
        return bundle_stops(json.loads(raw), count)
    except (ValueError, StopEvidenceError) as exc:
        raise AuditError(f"the bundle's stop evidence is malformed: {exc}") from exc


@dataclass(frozen=True)
class OracleSet:
    """The deployment's oracles (key hashes, hex) and quorum, as its config on chain says."""

    key_hashes: frozenset[str]
    threshold: int


def stopped_payout_problems(
    att: Attestation, evidence: StopEvidence | None, oracles: OracleSet
) -> list[Discrepancy]:
    """What is wrong with paying `att` beside `evidence` (see the module doc), as
    discrepancies without their transaction (the caller's `flag` adds it)."""
    why = stop_refusal(
        att, evidence, oracle_key_hashes=oracles.key_hashes, threshold=oracles.threshold
    )
    if why is not None:
        return [Discrepancy(STOP_UNPROVEN, "", f"attestation of job {att.job_id}: {why}")]
    if evidence is None:
        return []
    cap = stopped_cap(att, evidence)
    if att.amount <= cap:
        return []
    return [
        Discrepancy(
            STOP_SHARE_EXCEEDED,
            "",
            f"job {att.job_id}'s lease was stopped with {evidence.segments} segment(s) "
            f"committed: it is paid {att.amount}, over the {cap} its stopped share allows",
            expected=cap,
            actual=att.amount,
        )
    ]


def oracle_set_of(
    chain: ChainReader, body: Any, named: dict[str, str], signers: set[str]
) -> OracleSet:
    """The oracle set of the config the settlement reads (the reference input holding the
    config NFT its escrows name); the settlement's own signers when none is found."""
    from chain.contracts.types import OracleConfigDatum
    from chain.offchain.builders.onchain import datum_cbor

    labels = set(named.values())
    if len(labels) == 1:
        policy, _, name = next(iter(labels)).partition(".")
        for ref in body.reference_inputs or ():
            out = chain.output(ref.transaction_id.payload.hex(), ref.index)
            if out.datum is None or _ntx(out, bytes.fromhex(policy), bytes.fromhex(name)) != 1:
                continue
            try:
                config = OracleConfigDatum.from_cbor(datum_cbor(out.datum))
            except Exception:  # noqa: S112 - not the config: the signers stand in
                continue
            return OracleSet(
                frozenset(bytes(k).hex() for k in config.oracles), int(config.threshold)
            )
    return OracleSet(frozenset(signers), len(signers))


def _earned_storage(
    flag: Callable[..., None],
    att: Any,
    receipts: Sequence[StorageReceipt],
    signers: set[str],
    network: str,
) -> tuple[StoragePaid, ...]:
    """The storage payouts one attestation carries that its receipts back (each checked
    against the job, the network and the batch's signers; an unearned one is flagged and
    not counted, so its output shows as paid to no one)."""
    valid: list[StoragePaid] = []
    for r in receipts:
        body = r.body
        why = receipt_refusal(r, job_id=att.job_id, oracle_key_hashes=signers, network=network)
        if why is None and any(v.placement_id == body.placement_id for v in valid):
            why = "the copy is paid twice"
        if why is not None:
            flag(
                STORAGE_UNEARNED,
                f"storage of placement {body.placement_id} on job {att.job_id}: {why}",
            )
            continue
        valid.append(
            StoragePaid(
                body.placement_id,
                body.provider_key,
                body.payout_address,
                body.amount,
                body.size,
                body.ntx_per_gb_month,
                body.challenges_passed,
            )
        )
    return tuple(valid)


def _earned_fees(
    flag: Callable[..., None],
    att: Any,
    evidence: Sequence[FeeEvidence],
    signers: set[str],
) -> tuple[Payouts, tuple[FeePaid, ...]]:
    """The outputs one attestation is paid by: the fees its evidence backs (each checked
    against the attestation and the batch's signers; an unearned one is flagged and not
    counted, so its output shows as paid to no one), the provider's part the rest."""
    valid: list[FeeEvidence] = []
    for e in evidence:
        why = fee_refusal(
            e,
            leaf_hash=att.leaf_hash().hex(),
            provider=att.worker_key,
            job_id=att.job_id,
            oracle_key_hashes=signers,
        )
        if why is None and any(v.verifier == e.verifier for v in valid):
            why = "the verifier is paid twice for one attestation"
        if why is not None:
            flag(FEE_UNEARNED, f"fee of verifier {e.verifier[:16]}... on job {att.job_id}: {why}")
            continue
        valid.append(e)
    payouts = fee_payouts(att.payout_address, att.amount, valid)
    by_address = {e.payout_address: e.verifier for e in valid}
    unit = None if att.unit is None else att.unit.index
    fees = tuple(
        FeePaid(by_address.get(a, ""), a, q, att.payout_address, unit) for a, q in payouts.fees
    )
    return payouts, fees


def _payload_job(payload: bytes) -> str | None:
    try:
        job = json.loads(payload)["domain"]["job_id"]
    except (ValueError, KeyError, TypeError):
        return None
    return job if isinstance(job, str) else None


# --- one settlement -----------------------------------------------------------------------------


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
    project_id: str | None = None,
    chain: ChainReader | None = None,
    config_nft: tuple[str, str] | None = None,
) -> AuditReport:
    """Audit `tx_id` (see the module doc). Raises AuditError when it cannot be made, and
    WrongDeployment when `config_nft` (the expected deployment's config NFT policy and
    name, hex) is not the one the settlement's escrows name."""
    if len(tx_id) != 64 or not all(c in "0123456789abcdef" for c in tx_id):
        raise AuditError(f"a transaction hash is 64 lowercase hex digits, not {tx_id[:80]!r}")
    own = client is None and chain is None
    http = chain.client if chain is not None else (client or httpx.Client(timeout=30))
    try:
        if chain is None:
            from chain.offchain.backends import blockfrost_at, history_api

            chain = ChainReader(history_api(blockfrost_at(chain_url, project_id)), http)
        return _audit(
            chain,
            tx_id,
            oracle_urls,
            network=network,
            escrow_script_hash=escrow_script_hash,
            policy=bytes.fromhex(ntx_policy),
            name=bytes.fromhex(ntx_name),
            note=on_step or (lambda _text: None),
            config_nft=config_nft,
        )
    finally:
        if own:
            http.close()


def _audit(
    chain: ChainReader,
    tx_id: str,
    oracle_urls: Sequence[str],
    *,
    network: str,
    escrow_script_hash: str,
    policy: bytes,
    name: bytes,
    note: Callable[[str], None],
    config_nft: tuple[str, str] | None = None,
) -> AuditReport:
    from pycardano import Address, ScriptHash

    from chain.offchain.builders.onchain import (
        address_from_data,
        datum_cbor,
        escrow_datum_from_cbor,
    )
    from proofnet.messages.attestation import AttestationError, verify_attestation
    from proofnet.messages.merkle import MerkleTree, leaf_hash

    found: list[Discrepancy] = []

    def flag(kind: str, detail: str, **where: Any) -> None:
        found.append(Discrepancy(kind, tx_id, detail, **where))

    settled_tx = chain.chain_tx(tx_id)
    body = settled_tx.tx.transaction_body
    pycardano_network = Address.from_primitive(str(body.outputs[0].address)).network
    meta = _metadata(settled_tx.tx)
    root, bundle_hash = meta.get("root"), meta.get("bundle")
    if not isinstance(root, bytes) or not isinstance(bundle_hash, bytes):
        raise AuditError(f"{tx_id} carries no settlement metadata (label {MEMO_LABEL})")
    note(f"metadata: Merkle root {root.hex()}, bundle {bundle_hash.hex()}")
    script = ScriptHash(bytes.fromhex(escrow_script_hash))
    named = escrow_deployments(chain, body.inputs, script)
    expected = deployment_label(*config_nft) if config_nft is not None else ""
    if config_nft is not None and named and expected not in named.values():
        raise WrongDeployment(tx_id, tuple(sorted(set(named.values()))), expected)

    # The batch redeemer's root must be the metadata's: the validator saw that one.
    redeemers = (
        chain.call(f"the redeemers of {tx_id}", chain.api.transaction_redeemers, tx_id) or []
    )
    rewards = [int(r["tx_index"]) for r in redeemers if r.get("purpose") == "reward"]
    on_chain_root = redeemer_root(settled_tx.cbor, rewards) if rewards else None
    if on_chain_root is None:
        flag(REDEEMER_ROOT_MISMATCH, "no batch (reward) redeemer carries a Merkle root")
    elif on_chain_root != root:
        flag(
            REDEEMER_ROOT_MISMATCH,
            "the metadata's Merkle root is not the batch redeemer's",
            expected=on_chain_root.hex(),
            actual=root.hex(),
        )

    raw, where = fetch_bundle(chain.client, oracle_urls, bundle_hash.hex())
    note(f"bundle fetched from {where}")
    stated, coses, payloads = bundle_attestations(raw)
    fee_evidence = bundle_fee_evidence(raw, len(coses))
    receipts = bundle_storage_receipts(raw, len(coses))
    stops = bundle_stop_evidence(raw, len(coses))
    signers = {k.payload.hex() for k in body.required_signers or []}
    oracles: OracleSet | None = None
    paying: dict[str, tuple[Payouts, tuple[FeePaid, ...]]] = {}  # leaf hash -> its outputs
    storing: dict[str, tuple[StoragePaid, ...]] = {}  # leaf hash -> the storage beside it
    recomputed = MerkleTree.from_leaf_hashes([leaf_hash(p) for p in payloads]).root
    if recomputed != root:
        flag(
            LEAF_NOT_IN_ROOT,
            "the bundle's attestation leaves do not make the metadata's Merkle root",
            expected=root.hex(),
            actual=recomputed.hex(),
        )
    if stated != root:
        flag(
            BUNDLE_ROOT_MISMATCH,
            "the bundle states another Merkle root than the metadata",
            expected=root.hex(),
            actual=stated.hex(),
        )

    claims: dict[str, tuple[str, int, str, str]] = {}  # escrow -> (provider, amount, job, leaf)
    unit_claims: dict[str, list[Any]] = defaultdict(list)  # escrow -> unit attestations
    signatures = 0
    for position, cose in enumerate(coses):
        try:
            att = verify_attestation(
                cose, expected_network=network, expected_script_hash=escrow_script_hash
            )
        except AttestationError as exc:
            flag(
                BAD_SIGNATURE,
                f"attestation {position} of the bundle: signature or domain invalid: {exc}",
            )
            continue
        signatures += 1
        evidence = fee_evidence[position] if position < len(fee_evidence) else ()
        paying[att.leaf_hash().hex()] = _earned_fees(flag, att, evidence, signers)
        stored = receipts[position] if position < len(receipts) else ()
        storing[att.leaf_hash().hex()] = _earned_storage(flag, att, stored, signers, network)
        stop = stops[position] if position < len(stops) else None
        if att.stop is not None or stop is not None:
            if oracles is None:
                oracles = oracle_set_of(chain, body, named, signers)
            for wrong in stopped_payout_problems(att, stop, oracles):
                flag(wrong.kind, wrong.detail, expected=wrong.expected, actual=wrong.actual)
        ref = f"{att.domain.escrow.tx_id}#{att.domain.escrow.index}"
        if (att.unit is not None or att.segments is not None) and ref not in claims:
            unit_claims[ref].append(att)
            continue
        if ref in claims or ref in unit_claims:
            flag(DUPLICATE_ATTESTATION, f"escrow {ref} is attested twice")
        unit_claims.pop(ref, None)
        claims[ref] = (att.payout_address, att.amount, att.job_id, att.leaf_hash().hex())
    for ref, atts in sorted(unit_claims.items()):
        why = sharing_refusal(atts)
        if why is not None:
            flag(DUPLICATE_ATTESTATION, f"escrow {ref}: {why}")
    units_paid = [(ref, a.unit) for ref, atts in unit_claims.items() for a in atts if a.unit]
    for problem in chain_breaks(units_paid):
        flag(problem.kind, problem.detail)

    spent: dict[str, tuple[str, int]] = {}  # escrow -> (submitter, held)
    for tx_in in body.inputs:
        source = tx_in.transaction_id.payload.hex()
        ref = f"{source}#{tx_in.index}"
        out = chain.output(source, tx_in.index)
        if out.address.payment_part != script:
            continue
        if config_nft is not None and named.get(ref, expected) != expected:
            flag(
                FOREIGN_ESCROW,
                f"escrow {ref} belongs to deployment {named[ref]}, not {expected}, and is "
                "spent beside this deployment's escrows",
            )
            continue
        try:
            datum = escrow_datum_from_cbor(datum_cbor(out.datum))
        except Exception as exc:  # foreign data at the script address
            flag(NOT_AN_ESCROW, f"escrow input {ref} has no escrow datum: {exc}")
            continue
        submitter = str(address_from_data(datum.submitter, pycardano_network))
        spent[ref] = (submitter, _ntx(out, policy, name))
    attested = set(claims) | set(unit_claims)
    for ref in sorted(set(spent) - attested):
        flag(
            UNATTESTED_ESCROW, f"escrow {ref} ({spent[ref][1]} NTX) is spent without an attestation"
        )
    for ref in sorted(attested - set(spent)):
        flag(ATTESTED_NOT_SPENT, f"escrow {ref} is attested but not spent by this transaction")

    ntx_outputs: list[tuple[int, str, int]] = []
    received: dict[str, int] = defaultdict(int)
    for index, out in enumerate(body.outputs):
        quantity = _ntx(out, policy, name)
        if quantity:
            ntx_outputs.append((index, str(out.address), quantity))
            received[str(out.address)] += quantity
    owed: dict[str, int] = defaultdict(int)
    providers: set[str] = set()
    verifiers: set[str] = set()
    storers: set[str] = set()
    settled = []
    for ref, (provider, amount, job, leaf) in sorted(claims.items()):
        submitter, held = spent.get(ref, ("", 0))
        payouts, fees = paying[leaf]
        owed[provider] += payouts.provider[1]
        providers.add(provider)
        for fee in fees:
            owed[fee.address] += fee.amount
            verifiers.add(fee.address)
        storage = storing.get(leaf, ())
        for copy in storage:
            owed[copy.address] += copy.amount
            storers.add(copy.address)
        stored_total = sum(c.amount for c in storage)
        if submitter:
            owed[submitter] += held - amount - stored_total
            if amount + stored_total > held:
                flag(
                    OVER_ATTESTED,
                    f"escrow {ref}: attested {amount} and storage {stored_total} exceed the "
                    f"{held} it holds",
                )
        settled.append(
            EscrowSettled(
                escrow=ref,
                provider=provider,
                attested=amount,
                submitter=submitter,
                held=held,
                paid=received.get(provider, 0),
                refunded=received.get(submitter, 0),
                job_id=job,
                fees=fees,
                storage=storage,
            )
        )
    if unit_claims:
        ledger_inputs = sorted(body.inputs, key=lambda i: (i.transaction_id.payload, i.index))
        settled += _audit_unit_escrows(
            flag,
            unit_claims,
            spent,
            redeemer_entries(settled_tx.cbor, rewards) or [],
            [f"{i.transaction_id.payload.hex()}#{i.index}" for i in ledger_inputs],
            [(str(o.address), _ntx(o, policy, name)) for o in body.outputs],
            owed,
            providers,
            verifiers,
            paying,
            storing,
            storers,
        )
    for address, due in sorted(owed.items()):
        got = received.get(address, 0)
        if got != due:
            kind = (
                PAYOUT_MISMATCH
                if address in providers
                else FEE_MISMATCH
                if address in verifiers
                else STORAGE_MISMATCH
                if address in storers
                else REFUND_MISMATCH
            )
            indices = [i for i, a, _ in ntx_outputs if a == address]
            flag(
                kind,
                f"{address} receives {got} NTX in output(s) {indices or 'none'}, owed {due}",
                output=indices[0] if len(indices) == 1 else None,
                expected=due,
                actual=got,
            )
    for index, address, quantity in ntx_outputs:
        if address not in owed:
            flag(
                NTX_ELSEWHERE,
                f"{quantity} NTX go to {address}, which no attestation, earned fee, storage "
                "receipt or escrow names",
                output=index,
                expected=0,
                actual=quantity,
            )
    escrowed = sum(held for _, held in spent.values())
    accounted = sum(owed.values())
    if escrowed != accounted and not any(d.kind == UNATTESTED_ESCROW for d in found):
        flag(
            UNBALANCED,
            "the escrows' NTX are not all paid out or refunded",
            expected=escrowed,
            actual=accounted,
        )
    return AuditReport(
        tx_id=tx_id,
        merkle_root=root.hex(),
        bundle_sha256=bundle_hash.hex(),
        escrows=tuple(settled),
        signatures_checked=signatures,
        discrepancies=tuple(found),
        redeemer_root=on_chain_root.hex() if on_chain_root else "",
        block_height=settled_tx.block_height,
        outputs=tuple(ntx_outputs),
    )


def _audit_unit_escrows(
    flag: Callable[..., None],
    unit_claims: dict[str, list[Any]],
    spent: dict[str, tuple[str, int]],
    entries: Sequence[tuple[int, tuple[int, ...], int]],
    inputs: Sequence[str],
    outputs: Sequence[tuple[str, int]],
    owed: dict[str, int],
    providers: set[str],
    verifiers: set[str],
    paying: dict[str, tuple[Payouts, tuple[FeePaid, ...]]],
    storing: dict[str, tuple[StoragePaid, ...]] | None = None,
    storers: set[str] | None = None,
) -> list[EscrowSettled]:
    """The escrows paid by unit attestations: per unit, in bundle order, one payout output
    paying its provider its attested amount less its verification fees, then one per fee
    share; then the refund of the rest. Adds what each address is owed to `owed` (the
    address-level checks that follow)."""
    by_input = {inputs[i]: (payouts, refund) for i, payouts, refund in entries if i < len(inputs)}
    settled = []
    for ref, atts in sorted(unit_claims.items()):
        submitter, held = spent.get(ref, ("", 0))
        total = sum(a.amount for a in atts)
        # (att, address, NTX, what: "payout" | "fee" | "storage")
        owed_outputs: list[tuple[Any, str, int, str]] = []
        fees: list[FeePaid] = []
        storage: list[StoragePaid] = []
        for a in atts:
            outs, earned = paying[a.leaf_hash().hex()]
            owed[a.payout_address] += outs.provider[1]
            providers.add(a.payout_address)
            owed_outputs.append((a, a.payout_address, outs.provider[1], "payout"))
            for fee in earned:
                owed[fee.address] += fee.amount
                verifiers.add(fee.address)
                owed_outputs.append((a, fee.address, fee.amount, "fee"))
            fees.extend(earned)
            # Then the storage the job's copies earned, as the claim's outputs are ordered.
            for copy in (storing or {}).get(a.leaf_hash().hex(), ()):
                owed[copy.address] += copy.amount
                if storers is not None:
                    storers.add(copy.address)
                owed_outputs.append((a, copy.address, copy.amount, "storage"))
                storage.append(copy)
        stored = sum(c.amount for c in storage)
        if submitter:
            owed[submitter] += held - total - stored
            if total + stored > held:
                flag(
                    OVER_ATTESTED,
                    f"escrow {ref}: attested {total} and storage {stored} exceed the {held} it "
                    "holds",
                )
        payouts, refund = by_input.get(ref, ((), None))
        if ref in spent and refund is None:
            flag(PAYOUT_MISMATCH, f"escrow {ref} has no entry in the batch redeemer")
        elif ref in spent and len(payouts) != len(owed_outputs):
            flag(
                PAYOUT_MISMATCH,
                f"escrow {ref} pays {len(payouts)} output(s) for {len(atts)} unit attestation(s) "
                f"and their fees ({len(owed_outputs)} output(s))",
                expected=len(owed_outputs),
                actual=len(payouts),
            )
        units = []
        for position, (att, due_to, due, what_for) in enumerate(owed_outputs):
            index = payouts[position] if position < len(payouts) else None
            address, quantity = (
                outputs[index] if index is not None and index < len(outputs) else ("", 0)
            )
            part, part_kind = _part_of(att)
            if what_for == "payout":
                units.append(
                    UnitPaid(part, part_kind, att.payout_address, att.amount, index, quantity)
                )
            if index is not None and (address != due_to or quantity != due):
                what, kind = {
                    "fee": ("a verification fee of", FEE_MISMATCH),
                    "storage": ("for storage", STORAGE_MISMATCH),
                }.get(what_for, ("attested, less its fees,", PAYOUT_MISMATCH))
                flag(
                    kind,
                    f"{_part_name(att)} of escrow {ref} owes {what} "
                    f"{due} NTX to {due_to}; output {index} pays {quantity} NTX to {address}",
                    output=index,
                    expected=due,
                    actual=quantity,
                )
        refunded = 0
        if refund is not None and refund < len(outputs):
            address, refunded = outputs[refund]
            due_back = held - total - stored
            if submitter and (address != submitter or refunded != due_back):
                flag(
                    REFUND_MISMATCH,
                    f"escrow {ref} holds {held} NTX, its units are attested {total} and its "
                    f"storage {stored}: output {refund} refunds {refunded} NTX to {address}, "
                    f"owed {due_back} to {submitter}",
                    output=refund,
                    expected=due_back,
                    actual=refunded,
                )
        settled.append(
            EscrowSettled(
                escrow=ref,
                provider="",
                attested=total,
                submitter=submitter,
                held=held,
                paid=sum(u.paid for u in units),
                refunded=refunded,
                job_id=atts[0].job_id,
                units=tuple(units),
                fees=tuple(fees),
                storage=tuple(storage),
            )
        )
    return settled


def _part_of(att: Any) -> tuple[int, str]:
    """(index, kind) of what an attestation of a shared escrow pays: a unit of a topology
    job, or an attempt of a resumed job (kind "attempt")."""
    if att.unit is not None:
        return att.unit.index, att.unit.kind
    return att.segments.attempt, "attempt"


def _part_name(att: Any) -> str:
    index, kind = _part_of(att)
    if kind == "attempt":
        return f"attempt {index} (segments {att.segments.first}..{att.segments.last})"
    return f"unit {index} ({kind})"


# --- finding settlements ------------------------------------------------------------------------


@dataclass(frozen=True)
class Scan:
    """What a search looked at: settlements found, candidates scanned, bundles unreadable."""

    tx_ids: tuple[str, ...]
    scanned: int
    unreadable: tuple[str, ...] = field(default=())


def settlements_for_job(
    chain: ChainReader,
    oracle_urls: Sequence[str],
    job_id: str,
    *,
    since: int | None = None,
    limit: int = 1000,
) -> Scan:
    """Settlements whose bundle holds an attestation for `job_id`, newest first: label-674
    transactions (at most `limit`, none below block height `since`) and their bundles."""
    job = job_id.lower().removeprefix("0x")
    if len(job) != 64 or not all(c in "0123456789abcdef" for c in job):
        raise AuditError(f"a job id is 64 hex digits, not {job_id[:80]!r}")
    found: list[str] = []
    unreadable: list[str] = []
    bundles: dict[str, bool] = {}
    scanned = 0
    for entry in chain.pages(
        f"label {MEMO_LABEL} transactions",
        chain.api.metadata_label_json,
        str(MEMO_LABEL),
        limit=limit,
        order="desc",
    ):
        memo = entry.get("json_metadata")
        if not _is_settlement(memo):
            continue
        tx_id = str(entry["tx_hash"])
        if since is not None and _height(chain, tx_id) < since:
            break  # newest first: everything further is older
        scanned += 1
        sha = memo["bundle"].removeprefix("0x")
        if sha not in bundles:
            try:
                raw, _ = fetch_bundle(chain.client, oracle_urls, sha)
                _, _, payloads = bundle_attestations(raw)
            except AuditError as exc:
                unreadable.append(f"{tx_id}: {exc}")
                continue
            bundles[sha] = any(_payload_job(p) == job for p in payloads)
        if bundles[sha] and tx_id not in found:
            found.append(tx_id)
    return Scan(tuple(found), scanned, tuple(unreadable))


def settlements_paying(
    chain: ChainReader, address: str, *, since: int | None = None, limit: int = 1000
) -> Scan:
    """Settlement transactions (label 674 with a root and a bundle) that touch `address`,
    newest first: at most `limit` of its transactions, none below block height `since`."""
    found: list[str] = []
    scanned = 0
    for entry in chain.pages(
        f"the transactions of {address}",
        chain.api.address_transactions,
        address,
        limit=limit,
        from_block=None if since is None else str(since),
        order="desc",
    ):
        scanned += 1
        tx_id = str(entry["tx_hash"])
        if since is not None and int(entry.get("block_height", since)) < since:
            break
        if chain.settlement_memo(tx_id) is not None and tx_id not in found:
            found.append(tx_id)
    return Scan(tuple(found), scanned)


def _height(chain: ChainReader, tx_id: str) -> int:
    info = chain.tx_info(tx_id) or {}
    height = info.get("block_height")
    return int(height) if isinstance(height, int) else 0


# --- `proofnet audit` ---------------------------------------------------------------------------


def network_of_project(project_id: str) -> str:
    """The network of a Blockfrost project id (they start with the network's name)."""
    for network in ("mainnet", "preprod", "preview"):
        if project_id.startswith(network):
            return network
    raise AuditError(
        f"cannot tell the network of project id {project_id[:12]!r}...; set PROOFNET_NETWORK"
    )


@dataclass(frozen=True)
class ChainChoice:
    """Where the audit reads the chain: the reader, the network attestations must name, and
    the devnet's URL for explorer links (unused off the devnet)."""

    reader: ChainReader
    network: str
    devnet_url: str

    def links(self, tx_id: str) -> dict[str, str]:
        from chain.offchain.explorers import explorer_links

        return explorer_links(self.network, self.devnet_url, tx_id)


def choose_chain(
    settings: Any, client: httpx.Client, *, chain_url: str = "", project_id: str = ""
) -> ChainChoice:
    """The chain backend `settings` select (PROOFNET_CHAIN_BACKEND, as every role reads it),
    or a Blockfrost-shaped REST root given outright (`chain_url`, the devnet's by default
    project id), or hosted Blockfrost for `project_id` (its network from the id when
    PROOFNET_NETWORK is devnet). Through Ogmios (with Kupo) transactions are found by id;
    searches by job or address need an index (Blockfrost, the devnet): AuditError."""
    from chain.offchain.backends import blockfrost_at, chain_context, history_api
    from chain.offchain.errors import BackendConfigError

    try:
        if chain_url:
            context: Any = blockfrost_at(chain_url, project_id or None)
            return ChainChoice(
                ChainReader(history_api(context), client), settings.network, chain_url
            )
        if project_id:
            network = settings.network
            if network == "devnet":
                network = network_of_project(project_id)
            settings = settings.model_copy(
                update={
                    "chain_backend": "blockfrost",
                    "blockfrost_project_id": project_id,
                    "network": network,
                }
            )
        context = chain_context(settings)
        return ChainChoice(
            ChainReader(history_api(context), client), settings.network, settings.devnet_url
        )
    except BackendConfigError as exc:
        raise AuditError(str(exc)) from exc


def load_deployment(source: str, client: httpx.Client) -> AuditedDeployment:
    """The deployment to audit against: a deployment.json file, or the URL of the API or an
    oracle, whose `GET /api/v1/deployment` says which deployment the service runs with."""
    from chain.offchain.builders.deployment import Deployment
    from chain.offchain.builders.errors import BuilderError
    from proofnet.messages.deployment import DEPLOYMENT_PATH

    if not source.startswith(("http://", "https://")):
        try:
            return _audited(Deployment.load(Path(source)), source)
        except BuilderError as exc:
            raise AuditError(str(exc)) from exc
    url = source.rstrip("/")
    if not url.endswith(DEPLOYMENT_PATH):
        url += DEPLOYMENT_PATH
    try:
        response = client.get(url)
    except httpx.HTTPError as exc:
        raise AuditError(f"cannot read the deployment at {url}: {exc}") from exc
    if response.status_code != 200:
        raise AuditError(f"{url} answered {response.status_code}: {response.text[:200]}")
    try:
        return _audited(Deployment.from_json(response.text), url)
    except BuilderError as exc:
        raise AuditError(f"{url} serves no usable deployment: {exc}") from exc


def _audited(deployment: Deployment, origin: str) -> AuditedDeployment:
    return AuditedDeployment(
        deployment.escrow_hash,
        deployment.ntx_policy,
        deployment.ntx_name,
        deployment.config_policy,
        deployment.config_name,
        origin,
    )


# Exit codes of `proofnet audit`.
EXIT_OK = 0
EXIT_DISCREPANCY = 1  # a settlement disagrees with its attestations, or none was found
EXIT_CANNOT_AUDIT = 2  # bad input, chain or bundle unavailable
EXIT_WRONG_DEPLOYMENT = 3  # the settlement(s) belong to another deployment than the one given

app = typer.Typer(
    help="Audit settlement transactions from the chain and their published bundles.",
    pretty_exceptions_show_locals=False,
)


@app.command()
def audit(
    tx: str = typer.Option("", "--tx", help="a settlement transaction's hash"),
    job: str = typer.Option("", "--job", help="a job id: audit the settlement(s) that paid it"),
    provider: str = typer.Option(
        "", "--provider", help="a payout address: audit every settlement paying it"
    ),
    deployment: str = typer.Option(
        "",
        "--deployment",
        help="deployment.json, the URL of the API or an oracle serving GET "
        "/api/v1/deployment, or 'chain': read it from each settlement's escrows, config NFT "
        "and reference scripts (default: PROOFNET_DEPLOYMENT_FILE, else PROOFNET_API_URL)",
    ),
    oracle_url: list[str] = typer.Option(
        [],
        "--oracle-url",
        help="an oracle or the API, serving bundles (repeat; default: PROOFNET_ORACLE_URL, "
        "then PROOFNET_API_URL)",
    ),
    chain_url: str = typer.Option(
        "",
        "--chain-url",
        help="a Blockfrost-shaped REST root (default: the backend PROOFNET_CHAIN_BACKEND "
        "selects, as for every role)",
    ),
    project_id: str = typer.Option(
        "",
        "--blockfrost-project-id",
        help="read hosted Blockfrost with this project id (default: PROOFNET_CHAIN_BACKEND)",
    ),
    since: int | None = typer.Option(
        None, "--since", min=0, help="scan only blocks at or above this height"
    ),
    limit: int = typer.Option(
        1000, "--limit", min=1, help="scan at most this many candidate transactions"
    ),
    as_json: bool = typer.Option(False, "--json", help="print the reports as JSON"),
) -> None:
    """Check payouts, refunds, Merkle roots and every attestation signature.

    Exit codes: 0 every settlement is as attested; 1 a discrepancy (or nothing found);
    2 the audit could not be made; 3 the settlement belongs to another deployment than the
    one given (not fraud: audit it against its own)."""
    from proofnet.settings import build_settings

    modes = [m for m in (tx, job, provider) if m]
    if len(modes) != 1:
        raise typer.BadParameter("give exactly one of --tx, --job, --provider")
    settings = build_settings()
    source = deployment or (
        str(settings.deployment_file) if settings.deployment_file else settings.api_url
    )
    # The API relays the oracles' bundles (checked against their hash, as here): asked last.
    oracles = oracle_url or [settings.oracle_url, settings.api_url]
    quiet = as_json

    def step(text: str) -> None:
        if not quiet:
            typer.echo(text)

    foreign: list[WrongDeployment] = []
    read: dict[str, AuditedDeployment] = {}  # settlement -> the deployment audited against
    with httpx.Client(timeout=30) as http:
        deployed: AuditedDeployment | None = None
        if source != "chain":
            try:
                deployed = load_deployment(source, http)
            except AuditError as exc:
                typer.echo(f"error: audit --deployment {source}: {exc}", err=True)
                raise typer.Exit(EXIT_CANNOT_AUDIT) from exc
            step(f"deployment {deployed.label} (from {deployed.origin})")
        try:
            choice = choose_chain(settings, http, chain_url=chain_url, project_id=project_id)
            chain = choice.reader
            scan = None
            if tx:
                tx_ids: tuple[str, ...] = (tx,)
            elif job:
                scan = settlements_for_job(chain, oracles, job, since=since, limit=limit)
                tx_ids = scan.tx_ids
            else:
                scan = settlements_paying(chain, provider, since=since, limit=limit)
                tx_ids = scan.tx_ids
            reports = []
            for t in tx_ids:
                target = deployed
                if target is None:
                    target = deployment_from_chain(chain, t)
                    step(f"deployment {target.label} (read from {target.origin})")
                read[t] = target
                try:
                    reports.append(
                        audit_settlement(
                            "",
                            t,
                            oracles,
                            network=choice.network,
                            escrow_script_hash=target.escrow_hash,
                            ntx_policy=target.ntx_policy,
                            ntx_name=target.ntx_name,
                            chain=chain,
                            on_step=step,
                            config_nft=(target.config_policy, target.config_name),
                        )
                    )
                except WrongDeployment as exc:
                    foreign.append(exc)
        except AuditError as exc:
            typer.echo(f"error: audit cannot audit {tx or job or provider}: {exc}", err=True)
            raise typer.Exit(EXIT_CANNOT_AUDIT) from exc
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "ok": bool(reports) and all(r.ok for r in reports),
                    "deployment": deployed.label if deployed else None,
                    "deployment_source": deployed.origin if deployed else "chain",
                    "scanned": scan.scanned if scan else 1,
                    "unreadable": list(scan.unreadable) if scan else [],
                    "other_deployments": [
                        {"tx_id": w.tx_id, "deployments": list(w.actual)} for w in foreign
                    ],
                    "settlements": [
                        {
                            **r.to_json(),
                            "deployment": read[r.tx_id].label,
                            "paid_to_provider": r.paid_to(provider) if provider else None,
                            "explorer": next(iter(choice.links(r.tx_id).values()), None),
                            "explorers": choice.links(r.tx_id),
                        }
                        for r in reports
                    ],
                },
                indent=2,
            )
        )
    else:
        _print_reports(reports, provider, choice, scan)
    for wrong in foreign:
        typer.echo(f"audit: {wrong}", err=True)
    if not reports:
        if foreign:
            raise typer.Exit(EXIT_WRONG_DEPLOYMENT)
        what = f"job {job}" if job else f"address {provider}"
        typer.echo(f"audit: no settlement found for {what}", err=True)
        raise typer.Exit(EXIT_DISCREPANCY)
    if not all(r.ok for r in reports):
        raise typer.Exit(EXIT_DISCREPANCY)


def _print_reports(
    reports: Sequence[AuditReport], provider: str, choice: ChainChoice, scan: Scan | None
) -> None:
    from rich.console import Console

    console = Console(highlight=False, soft_wrap=True)
    if scan is not None:
        console.print(f"scanned {scan.scanned} settlement candidate(s), {len(reports)} matched")
        for text in scan.unreadable:
            console.print(f"[yellow]skipped (bundle unavailable): {text}[/yellow]")
    for report in reports:
        console.print(f"\n[bold]settlement {report.tx_id}[/bold] (block {report.block_height})")
        for name, link in choice.links(report.tx_id).items():
            console.print(f"explorer ({name}): {link}", markup=False)
        for e in report.escrows:
            if e.units:
                console.print(
                    f"escrow {e.escrow} (job {e.job_id[:16]}...): held {e.held}, "
                    f"{len(e.units)} unit(s) attested {e.attested} (paid {e.paid}), "
                    f"refund {e.refund_expected} to {e.submitter} (received {e.refunded})",
                    markup=False,
                )
                for u in e.units:
                    name = f"attempt {u.index}" if u.kind == "attempt" else f"unit {u.index}"
                    console.print(
                        f"  {name} ({u.kind}): attested {u.attested} to {u.provider}, "
                        f"output {u.output} pays {u.paid}",
                        markup=False,
                    )
            else:
                console.print(
                    f"escrow {e.escrow} (job {e.job_id[:16]}...): held {e.held}, "
                    f"attested {e.attested} to {e.provider} (received {e.paid}), "
                    f"refund {e.refund_expected} to {e.submitter} (received {e.refunded})",
                    markup=False,
                )
            # Storage beside the compute: what each copy of the job earned, from its receipt.
            for c in e.storage:
                console.print(
                    f"  storage copy {c.placement_id}: {c.amount} NTX to {c.address} "
                    f"({c.size} bytes at {c.ntx_per_gb_month} per GB-month, "
                    f"{c.challenges_passed} challenge(s) answered)",
                    markup=False,
                )
        if provider:
            console.print(f"paid to {provider}: {report.paid_to(provider)} NTX")
        for d in report.discrepancies:
            console.print(f"[red]{d}[/red]")
        # Plain line last (no markup): scripts and tests read it.
        console.print(report.line(), markup=False)
