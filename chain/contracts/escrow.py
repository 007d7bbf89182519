"""Escrow spending validator (unparameterised): one UTxO per job, holding its NTX budget.

- Settle: O(1) forwarding check: the transaction withdraws from the batch stake validator
  named in the datum, which settles every escrow input at once (withdraw-zero pattern).
- Refund: after the deadline anyone may return the whole value to the submitter's full
  address; the submitter cannot lose anything by a third party doing it.
- Cancel: submitter and the oracle quorum agree; value back as in Refund. The config must
  hold the oracle set the escrow pinned when it was locked (`EscrowDatum.oracle_set`).
Refund and Cancel refuse to run next to any withdrawal (a batch of this or any other script
version or deployment), and their output carries the escrow's TxOutRef as inline datum, so
one output never pays back two escrows nor serves a batch as well. That output carries no
reference script: a stranger refunding after the deadline could otherwise park a script on
the submitter's funds, whose every later spend would pay the ledger's reference-script fee.

In the deployed script the Settle path is answered by a hand-written UPLC core that makes
exactly this path's checks (`chain.contracts.settle_core.escrow_core`, about a third of the
memory); every other redeemer runs this program. This module stays the definition: the
unit tests run it alone and with its core and require the same verdicts.

Cost: Settle runs once per escrow of a batch, so it reads the context through the views
below (fields it never reads are `Anything`, which OpShin neither converts nor copies) and
only the first datum field. Refund and Cancel cast the same data to the full ledger types.
"""

from opshin.std.integrity import check_integrity

from chain.contracts.rules import *


@dataclass(unsafe_hash=True)
class BatchRef(PlutusData):
    """The first field of an `EscrowDatum`, all that Settle reads."""

    CONSTR_ID = 0
    batch_credential: bytes


@dataclass(unsafe_hash=True)
class WithdrawalsView(PlutusData):
    """`TxInfo` up to its withdrawals (field 6)."""

    CONSTR_ID = 0
    inputs: Anything
    reference_inputs: Anything
    outputs: Anything
    fee: Anything
    mint: Anything
    certificates: Anything
    withdrawals: Dict[Credential, int]


@dataclass(unsafe_hash=True)
class EscrowSpending(PlutusData):
    """`SpendingScript` (constructor 1) with its fields left undecoded."""

    CONSTR_ID = 1
    tx_out_ref: Anything
    datum: Anything


EscrowPurpose = Union[
    MintingScript, EscrowSpending, RewardingScript, CertifyingScript, VotingScript, ProposingScript
]


@dataclass(unsafe_hash=True)
class EscrowContext(PlutusData):
    """`ScriptContext` with the transaction left undecoded."""

    CONSTR_ID = 0
    transaction: Anything
    redeemer: Anything
    purpose: EscrowPurpose


def pays_back(tx: TxInfo, own_ref: TxOutRef, datum: EscrowDatum, output_index: int) -> None:
    """The whole value of the escrow `own_ref` goes to the submitter in `output_index`."""
    # No withdrawal at all: not this escrow's batch (whose remainder output could be this
    # one), nor a batch of another script version or deployment, which does not know this
    # escrow and could name this output as one of its own escrows' remainders.
    assert len(tx.withdrawals) == 0, "no withdrawal beside a refund or cancel"
    own_value: Dict[bytes, Dict[bytes, int]] = {}
    found = False
    for i in tx.inputs:
        if i.out_ref == own_ref:
            own_value = i.resolved.value
            found = True
    assert found, "own input not found"
    out = tx.outputs[output_index]
    assert out.address == datum.submitter, "refund must go to the submitter's full address"
    assert ValueBox(out.value) == ValueBox(own_value), "refund must carry the whole escrow value"
    tag = out.datum
    assert isinstance(tag, SomeOutputDatum), "refund output must be tagged"
    tagged_ref: TxOutRef = tag.datum
    assert tagged_ref == own_ref, "refund output tagged for another escrow"
    script = out.reference_script
    assert isinstance(script, NoScriptHash), "refund output carries a reference script"


def validator(context: EscrowContext) -> None:
    purpose = context.purpose
    assert isinstance(purpose, EscrowSpending), "escrow only validates spending"
    # SomeDatum (constructor 0) or NoDatum: reading the field of a NoDatum fails the script.
    maybe_datum: SomeDatum = purpose.datum
    redeemer: EscrowRedeemer = context.redeemer
    if isinstance(redeemer, Settle):
        # The hot path: one map lookup; the batch script does the real work once per tx.
        batch: BatchRef = maybe_datum.datum
        view: WithdrawalsView = context.transaction
        key: Credential = ScriptCredential(batch.batch_credential)
        assert view.withdrawals.get(key, -1) >= 0, "batch not invoked"
    else:
        # Without this a redeemer of any other constructor would reach the last branch.
        check_integrity(redeemer)
        datum: EscrowDatum = maybe_datum.datum
        tx: TxInfo = context.transaction
        own_ref: TxOutRef = purpose.tx_out_ref
        if isinstance(redeemer, Refund):
            assert lower_limit(tx.validity_range) > datum.deadline, "deadline not passed"
            pays_back(tx, own_ref, datum, redeemer.output_index)
        else:
            cancel: Cancel = redeemer
            assert datum.submitter_pkh in tx.signatories, "submitter must sign a cancel"
            until = datum.cancel_allowed_until
            if isinstance(until, SomePosixTime):
                assert upper_limit(tx.validity_range) <= until.time, "cancel window closed"
            cfg = config_from(
                tx.reference_inputs[cancel.config_ref_index],
                datum.config_policy,
                datum.config_name,
            )
            assert count_signers(cfg.oracles, tx.signatories) >= cfg.threshold, "oracle quorum"
            # The config holds the oracle set the escrow pinned: `rules.oracle_set_hash`,
            # inlined (a top-level function is bound at the start of every run, Settle's too).
            pinned = integer_to_byte_string(True, 8, cfg.threshold)
            for k in cfg.oracles:
                pinned = pinned + k
            assert blake2b(pinned).digest() == datum.oracle_set, (
                "escrow pinned to another oracle set"
            )
            pays_back(tx, own_ref, datum, cancel.output_index)
