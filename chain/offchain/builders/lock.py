"""Lock NTX in escrow: one output per job at the escrow script, with an inline EscrowDatum.

Two ways to sign: `lock_escrows` with a key held here, or `build_lock_unsigned` for a
CIP-30 browser wallet (the tx CBOR, the inputs it must sign for) followed by `assemble`
with the witness set the wallet returns. The datum is validated before anything is built:
only values that round-trip through `chain.contracts.types` and fit the size limit are
ever written, so a malformed escrow cannot come out of this module.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import nacl.exceptions
import nacl.signing
from pycardano import (
    Address,
    ChainContext,
    MultiAsset,
    Transaction,
    TransactionWitnessSet,
    UTxO,
    VerificationKeyHash,
)

from chain.contracts import types as t
from chain.offchain.builders import assembly as A
from chain.offchain.builders.chain_time import tip_posix_ms
from chain.offchain.builders.deployment import FIRST_PROTOCOL, Deployment
from chain.offchain.builders.errors import BuilderError
from chain.offchain.builders.onchain import EscrowDatumV1, address_data, out_ref_text
from chain.offchain.builders.protocol_utxos import resolve
from chain.offchain.builders.wallet import KeyWallet
from chain.offchain.oracle_set import of_config

# An EscrowDatum is about 300 bytes; anything much larger is not one of ours.
MAX_DATUM_BYTES = 512
MAX_INT64 = 2**63 - 1


@dataclass(frozen=True)
class EscrowJob:
    """What one escrow locks: a job's id (32-byte hash of its canonical spec), the NTX
    budget, the settlement deadline (POSIX ms) and the submitter's full address."""

    job_id: bytes
    budget: int
    deadline: int
    submitter: Address
    cancel_allowed_until: int | None = None
    nonce: int = 0
    # Extra lovelace beyond the output's min-ADA (funds payout outputs at settlement).
    extra_lovelace: int = 0


@dataclass(frozen=True)
class LockResult:
    built: A.BuiltTx
    datums: tuple[t.EscrowDatum, ...]

    @property
    def tx_id(self) -> str:
        return self.built.tx_id

    @property
    def escrow_refs(self) -> tuple[str, ...]:
        """Out-refs ("txid#index") of the escrows, in job order (outputs 0..n-1)."""
        return tuple(f"{self.tx_id}#{i}" for i in range(len(self.datums)))


@dataclass(frozen=True)
class UnsignedLock:
    """What a CIP-30 wallet needs: `signTx(tx_cbor_hex, partialSign=false)`."""

    result: LockResult
    tx_cbor_hex: str
    signing_inputs: tuple[str, ...]  # inputs the wallet must sign for ("txid#index")
    required_key_hashes: tuple[str, ...]


def escrow_datum(deployment: Deployment, job: EscrowJob, oracle_set: bytes) -> t.EscrowDatum:
    """The datum of `job` pinning `oracle_set` (`oracle_set.of_config` of the deployment's
    configuration on chain), validated (BuilderError on anything malformed or oversized)."""
    if not isinstance(oracle_set, bytes) or len(oracle_set) != 32:
        raise BuilderError("oracle_set must be the 32-byte hash of the configured oracle set")
    if not isinstance(job.job_id, bytes) or len(job.job_id) != 32:
        raise BuilderError("job_id must be the 32-byte hash of the job spec")
    if not isinstance(job.budget, int) or not 0 < job.budget <= MAX_INT64:
        raise BuilderError(f"budget must be a positive 64-bit integer, got {job.budget!r}")
    if not isinstance(job.deadline, int) or not 0 < job.deadline <= MAX_INT64:
        raise BuilderError(f"deadline must be POSIX milliseconds, got {job.deadline!r}")
    if job.cancel_allowed_until is not None and not (
        isinstance(job.cancel_allowed_until, int) and 0 < job.cancel_allowed_until <= job.deadline
    ):
        raise BuilderError("cancel_allowed_until must be POSIX ms no later than the deadline")
    if not isinstance(job.nonce, int) or not 0 <= job.nonce <= MAX_INT64:
        raise BuilderError("nonce must be a non-negative 64-bit integer")
    if job.extra_lovelace < 0:
        raise BuilderError("extra_lovelace must not be negative")
    if not isinstance(job.submitter, Address):
        raise BuilderError("submitter must be an Address")
    submitter_pkh = job.submitter.payment_part
    if not isinstance(submitter_pkh, VerificationKeyHash):
        raise BuilderError("the submitter's address must have a key payment credential")
    if job.submitter.network != deployment.pycardano_network:
        raise BuilderError(f"submitter {job.submitter} is not on the deployment's network")
    until: t.SomePosixTime | t.NoPosixTime = (
        t.NoPosixTime()
        if job.cancel_allowed_until is None
        else t.SomePosixTime(job.cancel_allowed_until)
    )
    datum = t.EscrowDatum(
        batch_credential=bytes.fromhex(deployment.batch_hash),
        job_id=job.job_id,
        submitter=address_data(job.submitter),
        submitter_pkh=submitter_pkh.payload,
        budget=job.budget,
        ntx_policy=bytes.fromhex(deployment.ntx_policy),
        ntx_name=bytes.fromhex(deployment.ntx_name),
        deadline=job.deadline,
        config_policy=bytes.fromhex(deployment.config_policy),
        config_name=bytes.fromhex(deployment.config_name),
        cancel_allowed_until=until,
        nonce=job.nonce,
        oracle_set=oracle_set,
    )
    check_escrow_datum(datum)
    return datum


def written_datum(deployment: Deployment, datum: t.EscrowDatum) -> t.EscrowDatum | EscrowDatumV1:
    """The datum as the deployment's escrow script version expects it: a 1.0.0
    deployment's escrows hold the 1.0.0 datum (no oracle set)."""
    if deployment.protocol_version == FIRST_PROTOCOL:
        return EscrowDatumV1.of(datum)
    return datum


def check_escrow_datum(datum: t.EscrowDatum) -> None:
    """Refuse anything that does not round-trip through the schema or is oversized."""
    raw = datum.to_cbor()
    if len(raw) > MAX_DATUM_BYTES:
        raise BuilderError(f"escrow datum is {len(raw)} bytes, more than {MAX_DATUM_BYTES}")
    try:
        again = t.EscrowDatum.from_cbor(raw)
    except Exception as exc:  # pycardano raises assorted errors on malformed data
        raise BuilderError(f"escrow datum does not decode as EscrowDatum: {exc}") from exc
    if again != datum or again.to_cbor() != raw:
        raise BuilderError("escrow datum does not round-trip through the schema")
    for name in ("batch_credential", "submitter_pkh", "ntx_policy", "config_policy"):
        if len(getattr(datum, name)) != 28:
            raise BuilderError(f"escrow datum {name} must be 28 bytes")


def _plan(
    context: ChainContext,
    deployment: Deployment,
    jobs: Sequence[EscrowJob],
    payer: Address,
    min_margin_ms: int,
) -> tuple[A.TxPlan, tuple[t.EscrowDatum, ...]]:
    if not jobs:
        raise BuilderError("nothing to lock")
    now = tip_posix_ms(context)
    # The oracle set the configuration holds now: each escrow pins it.
    oracle_set = of_config(resolve(context, deployment).config_datum)
    datums = []
    outputs = []
    for job in jobs:
        datum = escrow_datum(deployment, job, oracle_set)
        if job.deadline <= now + min_margin_ms:
            raise BuilderError(
                f"deadline {job.deadline} is not {min_margin_ms} ms after chain time {now}"
            )
        ntx = MultiAsset.from_primitive(
            {bytes.fromhex(deployment.ntx_policy): {bytes.fromhex(deployment.ntx_name): job.budget}}
        )
        written = written_datum(deployment, datum)
        out = A.output_with_min_ada(context, deployment.escrow_address, ntx, datum=written)
        if job.extra_lovelace:
            out = A.output_with_min_ada(
                context,
                deployment.escrow_address,
                ntx,
                datum=written,
                at_least=out.amount.coin + job.extra_lovelace,
            )
        outputs.append(out)
        datums.append(datum)
    return A.TxPlan(change_address=payer, outputs=outputs), tuple(datums)


def build_lock(
    context: ChainContext,
    deployment: Deployment,
    jobs: Sequence[EscrowJob],
    payer: Address,
    payer_utxos: Sequence[UTxO] | None = None,
    *,
    min_margin_ms: int = 60_000,
) -> LockResult:
    """An unsigned transaction locking one escrow per job, funded by `payer` (its UTxOs
    from the chain unless given). Deadlines must be `min_margin_ms` after chain time."""
    plan, datums = _plan(context, deployment, jobs, payer, min_margin_ms)
    utxos = list(context.utxos(payer)) if payer_utxos is None else list(payer_utxos)
    return LockResult(A.finalize(context, plan, utxos), datums)


def lock_escrows(
    context: ChainContext,
    deployment: Deployment,
    jobs: Sequence[EscrowJob],
    wallet: KeyWallet,
    *,
    min_margin_ms: int = 60_000,
) -> LockResult:
    """Build, sign with `wallet` and submit."""
    result = build_lock(
        context,
        deployment,
        jobs,
        wallet.address,
        wallet.utxos(context),
        min_margin_ms=min_margin_ms,
    )
    A.submit(context, A.sign(result.built, [wallet.signing_key]))
    return result


def build_lock_unsigned(
    context: ChainContext,
    deployment: Deployment,
    jobs: Sequence[EscrowJob],
    wallet_address: Address,
    wallet_utxos: Sequence[UTxO] | None = None,
    *,
    min_margin_ms: int = 60_000,
) -> UnsignedLock:
    """The CIP-30 flow: the wallet signs `tx_cbor_hex`; pass its witness set to `assemble`."""
    result = build_lock(
        context, deployment, jobs, wallet_address, wallet_utxos, min_margin_ms=min_margin_ms
    )
    body = result.built.tx.transaction_body
    return UnsignedLock(
        result=result,
        tx_cbor_hex=result.built.cbor_hex,
        signing_inputs=tuple(out_ref_text(i) for i in body.inputs),
        required_key_hashes=tuple(k.payload.hex() for k in result.built.signers),
    )


def assemble(tx_cbor: str | bytes, witness_set_cbor: str | bytes) -> Transaction:
    """Add the vkey witnesses of a CIP-30 `signTx` answer to the unsigned transaction.

    The body is kept byte for byte (the witnesses sign its hash); a witness set with
    anything but vkey witnesses, or a signature that does not verify, is refused."""
    try:
        tx = Transaction.from_cbor(tx_cbor)
        witnesses = TransactionWitnessSet.from_cbor(witness_set_cbor)
    except Exception as exc:  # pycardano raises assorted errors on bad CBOR
        raise BuilderError(f"cannot decode transaction or witness set: {exc}") from exc
    vkeys = list(witnesses.vkey_witnesses or [])
    if not vkeys:
        raise BuilderError("the witness set holds no vkey witnesses")
    body_hash = tx.transaction_body.hash()
    for w in vkeys:
        try:
            nacl.signing.VerifyKey(w.vkey.payload).verify(body_hash, w.signature)
        except (nacl.exceptions.BadSignatureError, ValueError):
            raise BuilderError(
                f"witness of key {w.vkey.hash().payload.hex()} does not verify"
            ) from None
    return A.add_witnesses(tx, vkeys)


__all__ = [
    "EscrowJob",
    "LockResult",
    "UnsignedLock",
    "assemble",
    "build_lock",
    "build_lock_unsigned",
    "check_escrow_datum",
    "escrow_datum",
    "lock_escrows",
]
