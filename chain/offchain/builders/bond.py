"""Provider bonds: lock, announce unbonding, withdraw after the delay, and the oracle
quorum's slash (`chain.contracts.bond`).

The bond script is derived from the deployment (config NFT policy, oracle-config script,
NTX unit) and the bond terms (unbonding delay, slash share), so it needs no entry in
deployment.json: `bond_script(deployment, terms)` gives every party the same address.
The script travels in each spending transaction's witness set (no reference script).

A slash cites the attestation the provider signed (`Citation`, from its COSE bytes): the
script checks the signature against the bond's key and finds the job id and the
proof-of-training Merkle root in the signed bytes; the same citation goes into a CIP-20
memo (label 674) for people and indexers.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pycardano import (
    Address,
    ChainContext,
    MultiAsset,
    PlutusV3Script,
    ScriptHash,
    TransactionOutput,
    UTxO,
    Value,
    VerificationKeyHash,
    min_lovelace_post_alonzo,
)

from chain.contracts import bond_types as bt
from chain.offchain import scripts as S
from chain.offchain.builders import assembly as A
from chain.offchain.builders.chain_time import ChainClock, tip_slot
from chain.offchain.builders.deployment import Deployment
from chain.offchain.builders.errors import BuilderError
from chain.offchain.builders.onchain import (
    address_data,
    address_from_data,
    datum_cbor,
    out_ref_data,
    out_ref_text,
)
from chain.offchain.builders.protocol_utxos import ProtocolUtxos, resolve
from chain.offchain.builders.settle import MEMO_LABEL, check_metadata
from chain.offchain.escrow_terms import EscrowFacts
from proofnet.messages.attestation import ATTESTATION_DOMAIN, signed_structure
from proofnet.when import when_text

# Default terms: a week's notice before a bond leaves, and half of it per proven fraud.
DEFAULT_UNBONDING_DELAY_MS = 7 * 24 * 3_600_000
DEFAULT_SLASH_PERMILLE = 500
DEFAULT_HORIZON_SLOTS = 600
BOND_OUTPUT_LOVELACE = 2_000_000


@dataclass(frozen=True)
class BondTerms:
    """The terms every bond of a deployment shares (they are script parameters)."""

    unbonding_delay_ms: int = DEFAULT_UNBONDING_DELAY_MS
    slash_permille: int = DEFAULT_SLASH_PERMILLE

    def __post_init__(self) -> None:
        if self.unbonding_delay_ms < 0:
            raise BuilderError("the unbonding delay cannot be negative")
        if not 1 <= self.slash_permille <= 1000:
            raise BuilderError("the slash share must be 1..1000 per mille")

    def share_of(self, bonded: int) -> int:
        """NTX one slash takes from a bond of `bonded` NTX (what the script computes)."""
        return bonded * self.slash_permille // 1000


def bond_script(
    deployment: Deployment, terms: BondTerms, *, traces: bool = False
) -> PlutusV3Script:
    return S.apply_params(
        "bond",
        bytes.fromhex(deployment.config_policy),
        bytes.fromhex(deployment.oracle_config_hash),
        bytes.fromhex(deployment.ntx_policy),
        bytes.fromhex(deployment.ntx_name),
        terms.unbonding_delay_ms,
        terms.slash_permille,
        traces=traces,
    )


def bond_address(script: PlutusV3Script, deployment: Deployment) -> Address:
    return Address(S.script_hash(script), network=deployment.pycardano_network)


# Where the slash of a refereed fraud goes (`oracle.verification.referee`): an address no one
# can spend from, so the share is burnt. Its payment credential is a script hash with no
# script behind it: the BLAKE2b-224 of a text whose first byte (0x70) is no script
# language's tag, so spending needs a second preimage of BLAKE2b-224. The bond validator
# pays whatever address the quorum names; the co-signers insist on this one for a refereed
# fraud, where the submitter may be the saboteur whose job code departed on the verifiers.
BURN_CREDENTIAL = hashlib.blake2b(b"proofnet/slash-burn/v1", digest_size=28).digest()


def burn_address(deployment: Deployment) -> Address:
    """The unspendable address a refereed fraud's slash pays (`BURN_CREDENTIAL`)."""
    return Address(ScriptHash(BURN_CREDENTIAL), network=deployment.pycardano_network)


# --- reading bonds ---------------------------------------------------------------------


@dataclass(frozen=True)
class Bond:
    """A UTxO at the bond address and what it means."""

    utxo: UTxO
    datum: bt.BondDatum
    ntx: int  # NTX the UTxO holds: the bond (the datum's amount is only a declaration)
    only_ntx: bool  # holds nothing but ADA and the NTX unit

    @property
    def provider(self) -> str:
        return self.datum.provider.hex()

    @property
    def unbonding_since(self) -> int | None:
        state = self.datum.state
        return state.since if isinstance(state, bt.Unbonding) else None

    @property
    def counts(self) -> bool:
        """Whether it backs claims: bonded (not unbonding) and slashable at normal cost."""
        return isinstance(self.datum.state, bt.Bonded) and self.only_ntx and self.ntx > 0

    def slashed_for(self, job_id: bytes) -> bool:
        return job_id in self.datum.slashed


def bond_datum_of(utxo: UTxO) -> bt.BondDatum:
    datum = utxo.output.datum
    if datum is None:
        raise BuilderError(f"{out_ref_text(utxo.input)} has no inline datum")
    try:
        return bt.BondDatum.from_cbor(datum_cbor(datum))
    except Exception as exc:  # pycardano raises assorted errors on foreign data
        raise BuilderError(f"{out_ref_text(utxo.input)} does not hold a BondDatum: {exc}") from exc


def read_bond(utxo: UTxO, deployment: Deployment) -> Bond:
    policy, name = bytes.fromhex(deployment.ntx_policy), bytes.fromhex(deployment.ntx_name)
    ntx, other = 0, 0
    for p, assets in utxo.output.amount.multi_asset.items():
        for n, q in assets.items():
            if p.payload == policy and n.payload == name:
                ntx = int(q)
            else:
                other += 1
    return Bond(utxo, bond_datum_of(utxo), ntx, other == 0)


def bonds_at(
    context: ChainContext,
    deployment: Deployment,
    address: Address,
    provider: VerificationKeyHash | None = None,
) -> list[Bond]:
    """Every readable bond at `address` (of one provider when given); others are skipped."""
    found = []
    for u in context.utxos(address):
        try:
            bond = read_bond(u, deployment)
        except BuilderError:
            continue
        if provider is None or bond.datum.provider == provider.payload:
            found.append(bond)
    return found


def bonded_total(bonds: Sequence[Bond], job_id: bytes | None = None) -> int:
    """NTX that backs a claim: bonds that count (and were not slashed for `job_id`)."""
    return sum(b.ntx for b in bonds if b.counts and (job_id is None or not b.slashed_for(job_id)))


# --- citation --------------------------------------------------------------------------


@dataclass(frozen=True)
class Citation:
    """Where, in the bytes a provider signed, the attestation names its job and root."""

    job_id: bytes
    merkle_root: bytes
    provider_key: bytes
    signature: bytes
    signed: bytes
    tag_at: int
    job_id_at: int
    root_at: int

    @property
    def chunks(self) -> list[bytes]:
        """`signed` as the redeemer carries it: chunks of at most 64 bytes."""
        return [self.signed[i : i + 64] for i in range(0, len(self.signed), 64)]

    @property
    def provider_pkh(self) -> bytes:
        return bytes(VerificationKeyHash.from_primitive(_blake2b_224(self.provider_key)))


def _blake2b_224(data: bytes) -> bytes:
    import hashlib

    return hashlib.blake2b(data, digest_size=28).digest()


def citation_of(cose: bytes, job_id: bytes, merkle_root: bytes) -> Citation:
    """Cite the signed attestation `cose` (COSE_Sign1) for `job_id` and its `pot_root`.
    Refuses what the script would refuse: a bad signature or fields it cannot find."""
    try:
        key, signed, signature = signed_structure(cose)
    except ValueError as exc:
        raise BuilderError(f"cannot cite the attestation: {exc}") from exc
    fields = {
        "tag": f'"tag":"{ATTESTATION_DOMAIN}"'.encode(),
        "job_id": f'"job_id":"{job_id.hex()}"'.encode(),
        "pot_root": f'"pot_root":"{merkle_root.hex()}"'.encode(),
    }
    at = {name: signed.find(text) for name, text in fields.items()}
    missing = [name for name, offset in at.items() if offset < 0]
    if missing or len(job_id) != 32 or len(merkle_root) != 32:
        raise BuilderError(f"the signed attestation does not name {missing or 'these values'}")
    return Citation(
        job_id, merkle_root, key, signature, signed, at["tag"], at["job_id"], at["pot_root"]
    )


def harmed_submitter(
    facts: EscrowFacts | None, ref: str, deployment: Deployment, job_id: bytes
) -> Address:
    """The full address a slash for an attestation pays: the submitter of the escrow `ref`
    the attestation claimed against (`facts`: read on chain, spent or not, by the caller
    through `chain.offchain.output_reads`), which must be this deployment's escrow for that
    job."""
    if facts is None:
        raise BuilderError(f"escrow {ref} is not on chain")
    datum = facts.datum
    if datum is None or not deployment.trusts(datum) or datum.job_id != job_id:
        raise BuilderError(f"{ref} is not this deployment's escrow of the job")
    return address_from_data(datum.submitter, deployment.pycardano_network)


def slash_memo(citation: Citation, bond: UTxO, share: int) -> dict[int, Any]:
    """CIP-20 memo of a slash: the cited job, root and signature (64-byte chunks)."""
    sig = citation.signature.hex()
    ref = out_ref_text(bond.input)
    meta: dict[int, Any] = {
        MEMO_LABEL: {
            "msg": [
                f"proofnet bond slash: {share} NTX",
                "job_id",
                citation.job_id.hex(),
                "pot_root",
                citation.merkle_root.hex(),
                "provider_signature",
                sig[:64],
                sig[64:],
                "bond",
                ref[:64],
                ref[64:],
            ],
        }
    }
    check_metadata(meta)
    return meta


# --- transactions ----------------------------------------------------------------------


@dataclass(frozen=True)
class BondTx:
    """An unsigned bond transaction; `bond_output` is the index of the bond it leaves
    (None when the bond leaves the script)."""

    built: A.BuiltTx
    bond_output: int | None

    @property
    def tx_id(self) -> str:
        return self.built.tx_id


def _ntx_value(deployment: Deployment, lovelace: int, amount: int) -> Value:
    ma = MultiAsset.from_primitive(
        {bytes.fromhex(deployment.ntx_policy): {bytes.fromhex(deployment.ntx_name): amount}}
    )
    return Value(lovelace, ma)


def _with_min_ada(context: ChainContext, out: TransactionOutput) -> TransactionOutput:
    need = min_lovelace_post_alonzo(out, context)
    if out.amount.coin < need:
        out = TransactionOutput(out.address, Value(need, out.amount.multi_asset), datum=out.datum)
    return out


def build_lock_bond(
    context: ChainContext,
    deployment: Deployment,
    script: PlutusV3Script,
    provider: VerificationKeyHash,
    amount: int,
    payer: Address,
    payer_utxos: Sequence[UTxO] | None = None,
) -> BondTx:
    """Lock `amount` NTX as `provider`'s bond (bonded, nothing slashed); `payer` pays."""
    if amount <= 0:
        raise BuilderError("a bond must hold a positive NTX amount")
    datum = bt.BondDatum(provider.payload, amount, bt.Bonded(), [])
    out = _with_min_ada(
        context,
        TransactionOutput(
            bond_address(script, deployment),
            _ntx_value(deployment, BOND_OUTPUT_LOVELACE, amount),
            datum=datum,
        ),
    )
    plan = A.TxPlan(change_address=payer, outputs=[out])
    utxos = list(context.utxos(payer)) if payer_utxos is None else list(payer_utxos)
    return BondTx(A.finalize(context, plan, utxos), 0)


def _check_at_script(bond: UTxO, script: PlutusV3Script) -> bt.BondDatum:
    if bond.output.address.payment_part != S.script_hash(script):
        raise BuilderError(f"{out_ref_text(bond.input)} is not at this bond script")
    return bond_datum_of(bond)


def build_unbond(
    context: ChainContext,
    script: PlutusV3Script,
    bond: UTxO,
    payer: Address,
    payer_utxos: Sequence[UTxO] | None = None,
    *,
    horizon_slots: int = DEFAULT_HORIZON_SLOTS,
) -> BondTx:
    """Announce unbonding: the provider signs; the delay runs from the validity's end."""
    datum = _check_at_script(bond, script)
    if not isinstance(datum.state, bt.Bonded):
        raise BuilderError(f"{out_ref_text(bond.input)} is already unbonding")
    clock = ChainClock.of(context)
    ttl = tip_slot(context) + horizon_slots
    since = clock.posix_ms(ttl)
    new = bt.BondDatum(datum.provider, datum.amount, bt.Unbonding(since), datum.slashed)
    out = TransactionOutput(bond.output.address, bond.output.amount, datum=new)
    plan = A.TxPlan(
        change_address=payer,
        script_inputs=[A.ScriptInput(bond, bt.Unbond(0))],
        outputs=[out],
        scripts=[script],
        required_signers=[VerificationKeyHash(datum.provider)],
        ttl=ttl,
    )
    utxos = list(context.utxos(payer)) if payer_utxos is None else list(payer_utxos)
    return BondTx(A.finalize(context, plan, utxos), 0)


def withdrawable_from_ms(datum: bt.BondDatum, terms: BondTerms) -> int | None:
    """First chain time (POSIX ms) a withdrawal may start at; None while bonded."""
    state = datum.state
    return state.since + terms.unbonding_delay_ms if isinstance(state, bt.Unbonding) else None


def build_withdraw(
    context: ChainContext,
    script: PlutusV3Script,
    terms: BondTerms,
    bond: UTxO,
    to: Address,
    payer: Address,
    payer_utxos: Sequence[UTxO] | None = None,
) -> BondTx:
    """Take an unbonded bond's whole value to `to` (the provider signs)."""
    datum = _check_at_script(bond, script)
    start_ms = withdrawable_from_ms(datum, terms)
    if start_ms is None:
        raise BuilderError(f"{out_ref_text(bond.input)} is bonded: announce unbonding first")
    clock = ChainClock.of(context)
    now = tip_slot(context)
    start = clock.slot_after(start_ms - 1)
    if start > now:
        raise BuilderError(
            "unbonding delay not passed: withdrawal possible from "
            f"{when_text(clock.posix_ms(start), clock.posix_ms(now))} (chain time)"
        )
    plan = A.TxPlan(
        change_address=payer,
        script_inputs=[A.ScriptInput(bond, bt.Withdraw())],
        outputs=[TransactionOutput(to, bond.output.amount)],
        scripts=[script],
        required_signers=[VerificationKeyHash(datum.provider)],
        validity_start=start,
    )
    utxos = list(context.utxos(payer)) if payer_utxos is None else list(payer_utxos)
    return BondTx(A.finalize(context, plan, utxos), None)


@dataclass(frozen=True)
class SlashPlan:
    """The slash before balancing (tests tamper with `plan`)."""

    plan: A.TxPlan
    share: int
    redeemer: A.RedeemerSpec


def plan_slash(
    context: ChainContext,
    deployment: Deployment,
    script: PlutusV3Script,
    terms: BondTerms,
    bond: UTxO,
    citation: Citation,
    submitter: Address,
    oracle_signers: Sequence[VerificationKeyHash],
    payer: Address,
    *,
    protocol: ProtocolUtxos | None = None,
) -> SlashPlan:
    """Slash the share to `submitter` (output 0, tagged with the bond's out-ref); the rest
    stays bonded (output 1). The oracle quorum signs; the memo cites the attestation."""
    info = read_bond(bond, deployment)
    _check_at_script(bond, script)
    if info.slashed_for(citation.job_id):
        raise BuilderError(f"{out_ref_text(bond.input)} was already slashed for this job")
    if citation.provider_pkh != info.datum.provider:
        raise BuilderError("the cited attestation was signed by another key than the bond's")
    share = terms.share_of(info.ntx)
    if share <= 0:
        raise BuilderError(f"{out_ref_text(bond.input)} holds too little NTX to slash")
    protocol = protocol or resolve(context, deployment)
    protocol.check_oracle_quorum(list(oracle_signers))
    payout = _with_min_ada(
        context,
        TransactionOutput(
            submitter,
            _ntx_value(deployment, BOND_OUTPUT_LOVELACE, share),
            datum=out_ref_data(bond.input),
        ),
    )
    rest_value = Value(
        bond.output.amount.coin,
        bond.output.amount.multi_asset
        - MultiAsset.from_primitive(
            {bytes.fromhex(deployment.ntx_policy): {bytes.fromhex(deployment.ntx_name): share}}
        ),
    )
    d = info.datum
    rest = TransactionOutput(
        bond.output.address,
        rest_value,
        datum=bt.BondDatum(d.provider, info.ntx - share, d.state, [citation.job_id, *d.slashed]),
    )
    config_ref = protocol.config.input
    submitter_data = address_data(submitter)

    def redeemer(view: A.IndexView) -> bt.Slash:
        return bt.Slash(
            config_ref_index=view.reference_index(config_ref),
            payout_index=0,
            bond_index=1,
            submitter=submitter_data,
            job_id=citation.job_id,
            merkle_root=citation.merkle_root,
            provider_key=citation.provider_key,
            signature=citation.signature,
            signed=citation.chunks,
            tag_at=citation.tag_at,
            job_id_at=citation.job_id_at,
            root_at=citation.root_at,
        )

    clock_now = tip_slot(context)
    plan = A.TxPlan(
        change_address=payer,
        script_inputs=[A.ScriptInput(bond, redeemer)],
        outputs=[payout, rest],
        reference_inputs=[protocol.config],
        scripts=[script],
        required_signers=list(oracle_signers),
        ttl=clock_now + DEFAULT_HORIZON_SLOTS,
        metadata=slash_memo(citation, bond, share),
    )
    return SlashPlan(plan, share, redeemer)


def build_slash(
    context: ChainContext,
    deployment: Deployment,
    script: PlutusV3Script,
    terms: BondTerms,
    bond: UTxO,
    citation: Citation,
    submitter: Address,
    oracle_signers: Sequence[VerificationKeyHash],
    payer: Address,
    payer_utxos: Sequence[UTxO] | None = None,
) -> BondTx:
    sp = plan_slash(
        context, deployment, script, terms, bond, citation, submitter, oracle_signers, payer
    )
    utxos = list(context.utxos(payer)) if payer_utxos is None else list(payer_utxos)
    return BondTx(A.finalize(context, sp.plan, utxos), 1)


__all__ = [
    "Bond",
    "BondTerms",
    "BondTx",
    "Citation",
    "SlashPlan",
    "bond_address",
    "bond_script",
    "bonded_total",
    "bonds_at",
    "build_lock_bond",
    "build_slash",
    "build_unbond",
    "build_withdraw",
    "citation_of",
    "burn_address",
    "harmed_submitter",
    "plan_slash",
    "read_bond",
    "slash_memo",
    "withdrawable_from_ms",
]
