"""`SettlementBuilder` over the project's transaction builders
(`chain.offchain.builders.settle`): measured packing, then the final build with the packed
batch's own Merkle root and metadata.

Packing is measured with a placeholder root of the same size (32 bytes) and metadata of
the same shape, so the final transaction has the size and execution units that were
measured, and the redeemer's entries, the Merkle leaves and the bundle share one order:
the ledger's input order. The claims of one escrow (the units of a topology job) make one
settlement with one payout per claim, in unit order: packing keeps or leaves out an escrow
with all of its claims. A claim whose verifiers earned a fee is paid by several outputs: the
provider's part, then each verifier's share (`proofnet.messages.verification_fee`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import httpx
from pycardano import (
    Address,
    ChainContext,
    PaymentSigningKey,
    Transaction,
    UTxO,
    VerificationKeyHash,
    VerificationKeyWitness,
)
from pycardano.exception import PyCardanoException

from chain.offchain.builders import assembly as A
from chain.offchain.builders import settle as S
from chain.offchain.builders.chain_time import ChainClock, tip_slot
from chain.offchain.builders.deployment import Deployment
from chain.offchain.builders.errors import BuilderError, ScriptEvaluationError
from chain.offchain.builders.onchain import out_ref_text
from chain.offchain.builders.protocol_utxos import resolve
from chain.offchain.errors import BackendUnavailableError

from .bundle import audit_metadata, make_bundle
from .ports import (
    Annotate,
    BuildError,
    ChainUnavailable,
    Claim,
    UnpayableClaims,
    UnsignedBatch,
    group_claims,
    may_share,
)


@dataclass
class CardanoSettlementBuilder:
    """Builds for one deployment. `oracle_key` signs as this oracle; `signers` are the key
    hashes of the quorum that will sign (this oracle first); `payer_key` pays the fee and
    collateral from its enterprise address (defaults to the oracle key)."""

    context: ChainContext
    deployment: Deployment
    oracle_key: PaymentSigningKey
    signers: tuple[VerificationKeyHash, ...] = ()
    payer_key: PaymentSigningKey | None = None
    # Largest batch measured to fit one transaction (grows the packing fast path).
    _known_fit: int = 0

    @property
    def oracle_pkh(self) -> VerificationKeyHash:
        return self.oracle_key.to_verification_key().hash()

    @property
    def payer_address(self) -> Address:
        key = self.payer_key or self.oracle_key
        return Address(key.to_verification_key().hash(), network=self.deployment.pycardano_network)

    def with_signers(self, signers: Sequence[VerificationKeyHash]) -> CardanoSettlementBuilder:
        return CardanoSettlementBuilder(
            self.context, self.deployment, self.oracle_key, tuple(signers), self.payer_key
        )

    # --- SettlementBuilder ----------------------------------------------------------------

    def build(
        self,
        claims: Sequence[Claim],
        *,
        batch_id: bytes,
        annotate: Annotate,
        signers: Sequence[bytes] = (),
    ) -> UnsignedBatch:
        try:
            return self._build(claims, batch_id, annotate, signers)
        except BuildError:
            raise
        except BuilderError as exc:
            raise BuildError(str(exc)) from exc
        except (BackendUnavailableError, httpx.HTTPError, PyCardanoException, OSError) as exc:
            raise ChainUnavailable(f"building the batch: {exc}") from exc

    def _build(
        self,
        claims: Sequence[Claim],
        batch_id: bytes,
        annotate: Annotate,
        quorum: Sequence[bytes],
    ) -> UnsignedBatch:
        if not claims:
            raise BuildError("nothing to settle")
        signers = (
            [VerificationKeyHash(k) for k in quorum] or list(self.signers) or [self.oracle_pkh]
        )
        escrows = {
            out_ref_text(u.input): u for u in self.context.utxos(self.deployment.escrow_address)
        }
        settlements, by_ref = self._settlements(claims, escrows, [k.payload.hex() for k in signers])
        protocol = resolve(self.context, self.deployment)
        payer_utxos = list(self.context.utxos(self.payer_address))
        # A batch no larger than one already measured to fit is built once, directly with
        # its real root; otherwise (or if it does not fit after all) it is packed first.
        if len(settlements) <= self._known_fit:
            final = self._final(
                settlements, by_ref, batch_id, annotate, signers, protocol, payer_utxos
            )
            if final is not None:
                return final
        # Same shape as the real metadata, so the measured size holds for the final build.
        placeholder = make_bundle(claims[:1])
        packed = S.pack_settle_batch(
            self.context,
            self.deployment,
            settlements,
            bytes(32),
            batch_id,
            signers,
            self.payer_address,
            payer_utxos,
            protocol=protocol,
            # At least as many digits as the final count: the measured size is an upper bound.
            metadata=audit_metadata(batch_id, placeholder, len(claims)),
        )
        fitted = len(packed.settled)
        self._known_fit = fitted if packed.left_out else max(self._known_fit, fitted)
        final = self._final(
            list(packed.settled), by_ref, batch_id, annotate, signers, protocol, payer_utxos
        )
        if final is None:
            raise BuildError("the packed batch no longer fits with its real root and metadata")
        return final

    def _final(
        self,
        settlements: Sequence[S.Settlement],
        by_ref: dict[str, tuple[Claim, ...]],
        batch_id: bytes,
        annotate: Annotate,
        signers: Sequence[VerificationKeyHash],
        protocol: object,
        payer_utxos: Sequence[UTxO],
    ) -> UnsignedBatch | None:
        ordered_settlements = sorted(
            settlements,
            key=lambda s: (s.escrow.input.transaction_id.payload, s.escrow.input.index),
        )
        ordered = [c for s in ordered_settlements for c in by_ref[out_ref_text(s.escrow.input)]]
        note = annotate(ordered)
        try:
            final = S.build_settle_batch(
                self.context,
                self.deployment,
                ordered_settlements,
                note.merkle_root,
                batch_id,
                signers,
                self.payer_address,
                payer_utxos,
                metadata=dict(note.metadata),
                protocol=protocol,  # type: ignore[arg-type]
            )
        except ScriptEvaluationError as exc:
            if "budget" not in exc.failures:
                raise
            return None
        if not S.fits(self.context, final.built):
            return None
        if [out_ref_text(s.escrow.input) for s in final.settled] != [
            out_ref_text(s.escrow.input) for s in ordered_settlements
        ]:
            raise BuildError("the final build settled other escrows than the packed one")
        return UnsignedBatch(
            final.tx_id, final.built.tx.to_cbor(), tuple(ordered), note.merkle_root, batch_id
        )

    def _settlements(
        self, claims: Sequence[Claim], escrows: dict[str, UTxO], signers: Sequence[str] = ()
    ) -> tuple[list[S.Settlement], dict[str, tuple[Claim, ...]]]:
        clock = ChainClock.of(self.context)
        now = tip_slot(self.context)
        # Escrows pinning another oracle set than the config holds now cannot settle.
        pin = S.current_oracle_set(self.deployment, resolve(self.context, self.deployment))
        settlements: list[S.Settlement] = []
        by_ref: dict[str, tuple[Claim, ...]] = {}
        unpayable: dict[int, str] = {}
        for found in group_claims(claims):
            # A fee is paid only on evidence that holds for this batch's signers: the rest
            # is neither paid nor published (`proofnet.messages.verification_fee`).
            group = tuple(c.with_valid_fees(signers).with_valid_storage(signers) for c in found)
            ref = str(group[0].escrow)
            utxo = escrows.get(ref)
            if utxo is None:
                continue  # not confirmed (or spent meanwhile): the watcher's concern, not ours
            if not may_share(group):
                for claim in group:
                    unpayable[claim.attestation_id] = f"escrow {ref} is claimed twice"
                continue
            payouts = []
            paid = 0
            for claim in group:
                try:
                    # The provider's part first, then each verifier's fee share, then what
                    # the job's storage copies earned.
                    payouts += [
                        (Address.from_primitive(address), amount)
                        for address, amount in claim.outputs()
                    ]
                    paid += 1
                except Exception as exc:  # pycardano raises assorted types on bad bech32
                    unpayable[claim.attestation_id] = f"payout address: {exc}"
            if paid != len(group):
                continue  # settled in a later batch, without the unpayable claim
            settlement = S.Settlement(utxo, tuple(payouts))
            try:
                # The builders' own per-escrow checks, so one bad escrow never sinks a batch.
                S._check_settlement(self.deployment, settlement, now, clock, pin)
            except BuilderError as exc:
                for claim in group:
                    unpayable[claim.attestation_id] = str(exc)
                continue
            settlements.append(settlement)
            by_ref[ref] = group
        if unpayable:
            raise UnpayableClaims(unpayable)
        if not settlements:
            raise BuildError("none of the claimed escrows is on chain and unspent")
        return settlements, by_ref

    def witness(self, tx_id: str) -> bytes:
        return _witness(self.oracle_key, tx_id)

    def assemble(self, unsigned: UnsignedBatch, witnesses: Sequence[bytes]) -> bytes:
        tx = Transaction.from_cbor(unsigned.tx_cbor)
        keys = [VerificationKeyWitness.from_cbor(w) for w in witnesses]
        if self.payer_key is not None:
            keys.append(VerificationKeyWitness.from_cbor(_witness(self.payer_key, unsigned.tx_id)))
        return bytes(A.add_witnesses(tx, keys).to_cbor())


def _witness(key: PaymentSigningKey, tx_id: str) -> bytes:
    body_hash = bytes.fromhex(tx_id)
    return bytes(VerificationKeyWitness(key.to_verification_key(), key.sign(body_hash)).to_cbor())
