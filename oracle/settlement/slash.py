"""Co-signing bond slashes: a provider's bond pays the harmed submitter its set share for a
fraud, and only an oracle quorum can take it (`chain/contracts/bond.py`).

Each oracle holds its own key on its own machine. The oracle that proposes a slash builds it
from a fraud in its own store (`propose_slash`, run by `proofnet oracle slash`), signs, and
asks its co-signers (`POST /api/v1/quorum/slash`). A co-signer trusts nothing it is sent: a
compromised proposer would like the quorum to slash an honest provider, or to pay the share
to itself. It decodes the transaction on its own chain view and applies `CHECKS` in turn,
each refusing with its reason:

- the shape every co-signed spend has (`reviewed_tx.refuse_beyond_scope`) and no input or
  collateral of its own (`reviewed_tx.refuse_own_funds`);
- exactly one script input, and it is a bond of this deployment's bond script (terms
  included), spent with `Slash`;
- the cited attestation (job, root, the provider's key, signature and signed bytes) is a
  fraud in this oracle's own store: an attestation of that provider whose committed
  segments this oracle's own verdict found not to replay (`oracle.storage.fraud`);
- the submitter the slash pays is the submitter of the escrow that fraud claimed against,
  as this oracle's chain holds it, and that escrow is this deployment's escrow of the job;
  for a fraud the referee of a disputed segment found (`oracle.verification.referee`), the
  unspendable burn address instead (the submitter may be the saboteur).

The bond script checks the rest on chain (the share, the remainder kept bonded, one slash
per job, the signature over the cited bytes, the quorum's signatures).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pycardano import PaymentSigningKey, ScriptHash, VerificationKeyHash, VerificationKeyWitness

from chain.contracts import bond_types as bt
from chain.contracts import types as t
from chain.offchain.builders.deployment import Deployment
from chain.offchain.builders.onchain import datum_cbor
from oracle.storage.fraud import SlashCase, fraud_cases
from oracle.storage.store import AttestationStore

from .ports import ChainView, OutRef
from .quorum import QuorumRefusal
from .reviewed_tx import ReviewedTx, decode_reviewed, refuse_beyond_scope, refuse_own_funds

log = logging.getLogger("oracle.settlement")

SLASH_PATH = "/api/v1/quorum/slash"


@dataclass(frozen=True)
class SlashContext:
    deployment: Deployment
    key_hash: VerificationKeyHash
    bond_hash: ScriptHash  # the deployment's bond script under the configured terms
    store: AttestationStore
    chain: ChainView


@dataclass(frozen=True)
class ReviewedSlash:
    """What the checks establish, step by step."""

    tx: ReviewedTx
    redeemer: bt.Slash | None = None
    case: SlashCase | None = None


Check = Callable[[ReviewedSlash, SlashContext], ReviewedSlash]


def check_shape(s: ReviewedSlash, ctx: SlashContext) -> ReviewedSlash:
    refuse_beyond_scope(s.tx, ctx.key_hash, "slash")
    return s


def check_not_own_funds(s: ReviewedSlash, ctx: SlashContext) -> ReviewedSlash:
    refuse_own_funds(s.tx, ctx.key_hash)
    return s


def check_one_bond_slashed(s: ReviewedSlash, ctx: SlashContext) -> ReviewedSlash:
    """One script input, a bond of this deployment, spent with Slash: a second script input
    could count an output of this slash for an obligation of its own."""
    scripts = [
        (index, ref, out)
        for index, (ref, out) in enumerate(s.tx.inputs)
        if isinstance(out.address.payment_part, ScriptHash)
    ]
    if len(scripts) != 1:
        raise QuorumRefusal(
            f"a slash spends exactly one script input; this one spends {len(scripts)}"
        )
    index, ref, out = scripts[0]
    if out.address.payment_part != ctx.bond_hash:
        raise QuorumRefusal(f"input {ref} is not a bond of this deployment")
    try:
        redeemer = bt.Slash.from_cbor(datum_cbor(s.tx.spend_redeemers[index]))
    except KeyError:
        raise QuorumRefusal(f"bond {ref} has no redeemer") from None
    except Exception as exc:  # foreign data: not a Slash
        raise QuorumRefusal(f"bond {ref} is not spent with Slash: {exc}") from exc
    return ReviewedSlash(s.tx, redeemer)


def _cited(case: SlashCase, redeemer: bt.Slash) -> bool:
    from chain.offchain.builders.bond import citation_of

    try:
        c = citation_of(case.cose, bytes(redeemer.job_id), bytes(redeemer.merkle_root))
    except Exception:  # the stored COSE does not name these values
        return False
    return (
        c.provider_key == bytes(redeemer.provider_key)
        and c.signature == bytes(redeemer.signature)
        and c.signed == b"".join(bytes(chunk) for chunk in redeemer.signed)
    )


def check_fraud_is_ours(s: ReviewedSlash, ctx: SlashContext) -> ReviewedSlash:
    """The cited attestation failed this oracle's own spot check: no quorum member slashes
    on another's word."""
    assert s.redeemer is not None
    job = bytes(s.redeemer.job_id).hex()
    for case in fraud_cases(ctx.store, job):
        if _cited(case, s.redeemer):
            return ReviewedSlash(s.tx, s.redeemer, case)
    raise QuorumRefusal(
        f"this oracle holds no fraud for job {job} by the cited attestation "
        "(its own verdict did not find the provider's segments not to replay)"
    )


def check_pays_the_harmed_submitter(s: ReviewedSlash, ctx: SlashContext) -> ReviewedSlash:
    """The share goes to the submitter of the escrow the fraudulent attestation claimed
    against, read on this oracle's chain (spent or not); a refereed fraud's share burns
    (`chain.offchain.builders.bond.burn_address`): its submitter may be the saboteur."""
    assert s.redeemer is not None and s.case is not None
    if s.case.burns:
        from chain.offchain.builders.bond import burn_address
        from chain.offchain.builders.onchain import address_data

        burnt = address_data(burn_address(ctx.deployment))
        if burnt.to_cbor() != s.redeemer.submitter.to_cbor():
            raise QuorumRefusal(
                "the fraud was found by the referee of a disputed segment: its slash burns "
                "(the submitter's job code may be what departed), and this one pays an address"
            )
        return s
    ref = OutRef.parse(s.case.escrow_ref)
    raw = ctx.chain.output_cbor(ref)
    if raw is None:
        raise QuorumRefusal(f"escrow {ref} of the fraud is unknown to this oracle's chain")
    from pycardano import TransactionOutput

    try:
        datum = t.EscrowDatum.from_cbor(datum_cbor(TransactionOutput.from_cbor(raw).datum))
    except Exception as exc:  # foreign data
        raise QuorumRefusal(f"escrow {ref} carries no EscrowDatum: {exc}") from exc
    if not ctx.deployment.trusts(datum) or bytes(datum.job_id) != bytes(s.redeemer.job_id):
        raise QuorumRefusal(f"{ref} is not this deployment's escrow of job {s.case.job_id}")
    if datum.submitter.to_cbor() != s.redeemer.submitter.to_cbor():
        raise QuorumRefusal(
            f"the slash pays another address than the submitter of escrow {ref}, the harmed one"
        )
    return s


CHECKS: tuple[Check, ...] = (
    check_shape,
    check_not_own_funds,
    check_one_bond_slashed,
    check_fraud_is_ours,
    check_pays_the_harmed_submitter,
)


@dataclass
class SlashCoSigner:
    """What `POST /api/v1/quorum/slash` runs."""

    deployment: Deployment
    chain: ChainView
    key: PaymentSigningKey
    store: AttestationStore
    bond_hash: ScriptHash
    checks: Sequence[Check] = CHECKS

    @classmethod
    def for_engine(cls, engine: Any, app: Any, settings: Any) -> SlashCoSigner:
        """Over the settlement engine's deployment, chain and key, the attestations' store,
        and the bond terms of the settings (every oracle of a deployment shares them)."""
        from chain.offchain.builders.bond import BondTerms, bond_script

        builder = engine.builder
        terms = BondTerms(settings.bond_unbonding_delay_ms, settings.bond_slash_permille)
        script = bond_script(builder.deployment, terms)
        from pycardano import plutus_script_hash

        return cls(
            builder.deployment,
            engine.chain,
            builder.oracle_key,
            AttestationStore(app.state.engine),
            plutus_script_hash(script),
        )

    @property
    def key_hash(self) -> VerificationKeyHash:
        return self.key.to_verification_key().hash()

    def review(self, tx_cbor: bytes) -> bytes:
        """The VKey witness CBOR over the slash, or `QuorumRefusal`."""
        state = ReviewedSlash(decode_reviewed(tx_cbor, self.chain))
        ctx = SlashContext(self.deployment, self.key_hash, self.bond_hash, self.store, self.chain)
        for check in self.checks:
            state = check(state, ctx)
        body_hash = state.tx.tx.transaction_body.hash()
        witness = VerificationKeyWitness(self.key.to_verification_key(), self.key.sign(body_hash))
        log.info(
            "co-signed slash tx %s for job %s",
            body_hash.hex(),
            state.case.job_id if state.case else "?",
            extra={"job": "quorum", "tx_id": body_hash.hex()},
        )
        return bytes(witness.to_cbor())


# --- proposing -------------------------------------------------------------------------


class SlashError(Exception):
    """The slash cannot be proposed; the message says why and what to do."""


@dataclass(frozen=True)
class Peer:
    """A co-signing oracle: where it answers, and the key hash it must sign with."""

    url: str
    key_hash: str


@dataclass(frozen=True)
class SlashProposal:
    tx_id: str
    job_id: str
    bond: str
    share: int
    submitter: str
    signers: tuple[str, ...]


def ask_peer(peer: Peer, tx_cbor: bytes, body_hash: bytes, timeout_s: float = 60.0) -> Any:
    """The peer's VKey witness over the slash, checked to be its key's signature over this
    body (a wrong one would only get the transaction refused at submission)."""
    import httpx
    from nacl.exceptions import BadSignatureError
    from nacl.signing import VerifyKey

    from proofnet.redaction import redact_credentials

    try:
        response = httpx.post(
            f"{peer.url.rstrip('/')}{SLASH_PATH}",
            json={"tx_cbor": tx_cbor.hex()},
            timeout=timeout_s,
        )
    except httpx.HTTPError as exc:
        raise SlashError(redact_credentials(f"co-signer {peer.url} unreachable: {exc}")) from exc
    if response.status_code != 200:
        raise SlashError(
            redact_credentials(
                f"co-signer {peer.url} refused: {response.status_code} {response.text[:300]}"
            )
        )
    try:
        witness = VerificationKeyWitness.from_cbor(bytes.fromhex(response.json()["witness"]))
        VerifyKey(bytes(witness.vkey.payload)).verify(body_hash, bytes(witness.signature))
    except (BadSignatureError, ValueError, KeyError, TypeError) as exc:
        raise SlashError(f"co-signer {peer.url} answered no valid witness: {exc}") from exc
    except Exception as exc:  # pycardano raises assorted errors on bad CBOR
        raise SlashError(f"co-signer {peer.url} answered no valid witness: {exc}") from exc
    if witness.vkey.hash().payload.hex() != peer.key_hash:
        raise SlashError(f"co-signer {peer.url} signed with another key than {peer.key_hash}")
    return witness


def read_escrow(context: Any, escrow: OutRef) -> Any:
    """The escrow's facts on chain, spent or not (`chain.offchain.output_reads`: Blockfrost
    shapes, or Kupo on a self-hosted node), or None; a failed read is a `BuilderError`."""
    from chain.offchain.builders import BuilderError
    from chain.offchain.errors import ChainError
    from chain.offchain.output_reads import output_facts

    try:
        return output_facts(context, escrow.tx_id, escrow.index)
    except ChainError as exc:  # Kupo not configured, a backend down or answering nonsense
        raise BuilderError(f"cannot read escrow {escrow}: {exc}") from exc


def propose_slash(
    context: Any,
    deployment: Deployment,
    terms: Any,
    key: PaymentSigningKey,
    store: AttestationStore,
    peers: Sequence[Peer],
    threshold: int,
    job_id: str,
    bond_ref: str | None = None,
) -> SlashProposal:
    """Slash the provider of a fraud in this oracle's own store: the bond's set share to the
    harmed submitter, signed by this oracle and `threshold - 1` peers, each after its own
    review. Raises `SlashError` with the reason."""
    from pycardano import Address

    from chain.offchain.builders import BuilderError
    from chain.offchain.builders.assembly import sign, submit
    from chain.offchain.builders.bond import (
        bond_address,
        bond_script,
        bonds_at,
        build_slash,
        burn_address,
        citation_of,
        harmed_submitter,
    )
    from chain.offchain.builders.onchain import out_ref_text
    from chain.offchain.errors import TransactionRejectedError

    cases = fraud_cases(store, job_id)
    if not cases:
        raise SlashError(f"this oracle holds no fraud for job {job_id} (`proofnet oracle frauds`)")
    if not 1 <= threshold <= len(peers) + 1:
        raise SlashError(f"a {threshold}-of-{len(peers) + 1} quorum cannot sign; add co-signers")
    case = cases[0]
    job, root = bytes.fromhex(case.job_id), bytes.fromhex(case.pot_root)
    try:
        citation = citation_of(case.cose, job, root)
        escrow = OutRef.parse(case.escrow_ref)
        harmed = (
            burn_address(deployment)
            if case.burns
            else harmed_submitter(read_escrow(context, escrow), str(escrow), deployment, job)
        )
        script = bond_script(deployment, terms)
        bonds = [
            b
            for b in bonds_at(context, deployment, bond_address(script, deployment))
            if b.datum.provider == citation.provider_pkh
            and not b.slashed_for(job)
            and b.only_ntx
            and b.ntx > 0
        ]
        if bond_ref is not None:
            bonds = [b for b in bonds if out_ref_text(b.utxo.input) == bond_ref]
        if not bonds:
            raise SlashError(
                f"provider {case.provider} has no bond to slash for job {job_id}"
                + (f" at {bond_ref}" if bond_ref else "")
            )
        bond = max(bonds, key=lambda b: b.ntx)
        own = key.to_verification_key().hash()
        chosen = list(peers[: threshold - 1])
        signers = [own, *(VerificationKeyHash(bytes.fromhex(p.key_hash)) for p in chosen)]
        payer = Address(own, network=deployment.pycardano_network)
        built = build_slash(
            context, deployment, script, terms, bond.utxo, citation, harmed, signers, payer
        )
    except BuilderError as exc:
        raise SlashError(f"cannot build the slash: {exc}") from exc
    tx = built.built.tx
    tx_cbor = tx.to_cbor()
    body_hash = tx.transaction_body.hash()
    witnesses = [ask_peer(p, tx_cbor, body_hash) for p in chosen]
    from chain.offchain.builders.assembly import add_witnesses

    signed = add_witnesses(sign(tx, [key]), witnesses)
    try:
        tx_id = submit(context, signed)
    except TransactionRejectedError as exc:
        raise SlashError(f"the chain refused the slash: {exc}") from exc
    return SlashProposal(
        tx_id=tx_id,
        job_id=case.job_id,
        bond=out_ref_text(bond.utxo.input),
        share=terms.share_of(bond.ntx),
        submitter=str(harmed),
        signers=tuple(s.payload.hex() for s in signers),
    )
