"""Escrow spending validator (unparameterised): one UTxO per job, holding its NTX budget.

- Settle: O(1) forwarding check: the transaction withdraws from the batch stake validator
  named in the datum, which settles every escrow input at once (withdraw-zero pattern).
- Refund: after the deadline anyone may return the whole value to the submitter's full
  address; the submitter cannot lose anything by a third party doing it.
- Cancel: submitter and the oracle quorum agree; value back as in Refund.
Refund and Cancel refuse to run next to a batch withdrawal, and their output carries the
escrow's TxOutRef as inline datum, so one output never pays back two escrows.
"""

from opshin.std.integrity import check_integrity

from chain.contracts.rules import *


def pays_back(tx: TxInfo, own_ref: TxOutRef, datum: EscrowDatum, output_index: int) -> None:
    """The whole value of the escrow `own_ref` goes to the submitter in `output_index`."""
    assert not withdraws_from(tx.withdrawals, datum.batch_credential), "batch in same tx"
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


def validator(context: ScriptContext) -> None:
    purpose = context.purpose
    assert isinstance(purpose, SpendingScript), "escrow only validates spending"
    maybe_datum: SomeDatum = purpose.datum
    datum: EscrowDatum = maybe_datum.datum
    redeemer: EscrowRedeemer = context.redeemer
    tx = context.transaction
    if isinstance(redeemer, Settle):
        # The hot path: one map lookup; the batch script does the real work once per tx.
        assert withdraws_from(tx.withdrawals, datum.batch_credential), "batch not invoked"
    else:
        # Without this a redeemer of any other constructor would reach the last branch.
        check_integrity(redeemer)
        if isinstance(redeemer, Refund):
            assert lower_limit(tx.validity_range) > datum.deadline, "deadline not passed"
            pays_back(tx, purpose.tx_out_ref, datum, redeemer.output_index)
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
            pays_back(tx, purpose.tx_out_ref, datum, cancel.output_index)
