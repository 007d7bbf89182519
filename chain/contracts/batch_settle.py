"""Batch settlement stake validator (withdraw-zero + UTxO indexer).

Parameters: the escrow script hash, the config NFT policy and the oracle-config script
hash. Escrow inputs forward their Settle here; this script runs once per transaction and
settles all of them, O(number of escrows):
- the oracle quorum of the authenticated configuration signed the transaction;
- the redeemer's entries name every escrow input exactly once, in strictly increasing
  input order; each names its payout outputs and its refund output, and all output indices
  used by the batch strictly increase, so no output counts for two obligations;
- each escrow's datum trusts this batch script and this configuration, the escrow holds
  only ADA and its NTX unit, payouts pay exact NTX amounts to exact full addresses, their
  sum is within the budget, and the rest of the NTX and ADA goes to the submitter's full
  address;
- the transaction is valid only before every settled escrow's deadline.
As a certifying script it lets anyone register the credential and asks the admin quorum
for anything else (deregistration, delegation).
"""

from chain.contracts.rules import *


def settle(
    escrow_hash: bytes,
    own_hash: bytes,
    config_policy: bytes,
    redeemer: BatchSettle,
    tx: TxInfo,
) -> None:
    assert len(redeemer.merkle_root) == 32, "merkle root must be 32 bytes"
    upper = upper_limit(tx.validity_range)
    inputs = tx.inputs
    outputs = tx.outputs
    escrow_cred: Credential = ScriptCredential(escrow_hash)
    n_escrows = 0
    for i in inputs:
        if i.resolved.address.payment_credential == escrow_cred:
            n_escrows += 1
    n_entries = 0
    prev_in = -1
    prev_out = -1
    for e in redeemer.entries:
        idx = e.input_index
        assert idx > prev_in, "escrow input indices must strictly increase"
        prev_in = idx
        n_entries += 1
        escrow = inputs[idx].resolved
        assert escrow.address.payment_credential == escrow_cred, "entry is not an escrow input"
        od = escrow.datum
        assert isinstance(od, SomeOutputDatum), "escrow datum must be inline"
        d: EscrowDatum = od.datum
        assert d.batch_credential == own_hash, "escrow does not trust this batch script"
        assert d.config_policy == config_policy, "escrow trusts another oracle config"
        assert d.config_name == CONFIG_NFT_NAME, "escrow trusts another oracle config"
        assert upper <= d.deadline, "escrow deadline passed"
        value = escrow.value
        ntx_policy = d.ntx_policy
        ntx_name = d.ntx_name
        ntx_tokens = value[ntx_policy]
        # Only ADA and the NTX unit: anything else could not be accounted for here; such an
        # escrow is refused and stays refundable in full.
        assert len(value) == 2 and len(ntx_tokens) == 1, "escrow holds other tokens"
        escrow_ntx = ntx_tokens[ntx_name]
        paid = 0
        paid_ada = 0
        for p in e.payouts:
            o_idx = p.output_index
            assert o_idx > prev_out, "output indices must strictly increase"
            prev_out = o_idx
            out = outputs[o_idx]
            amount = p.amount
            assert amount > 0, "payout must be positive"
            assert out.address == p.address, "payout to the wrong address"
            assert ntx_of(out.value, ntx_policy, ntx_name) == amount, "payout amount mismatch"
            paid += amount
            paid_ada += out.value[b""][b""]
        assert paid <= d.budget, "payouts exceed the budget"
        r_idx = e.refund_index
        assert r_idx > prev_out, "output indices must strictly increase"
        prev_out = r_idx
        rest = outputs[r_idx]
        assert rest.address == d.submitter, "remainder must go to the submitter's full address"
        assert ntx_of(rest.value, ntx_policy, ntx_name) == escrow_ntx - paid, "NTX remainder"
        assert rest.value[b""][b""] >= value[b""][b""] - paid_ada, "ADA remainder"
    assert n_entries == n_escrows, "every escrow input must be settled"


def validator(
    escrow_hash: bytes,
    config_policy: bytes,
    config_script_hash: bytes,
    context: ScriptContext,
) -> None:
    purpose = context.purpose
    tx = context.transaction
    redeemer: BatchRedeemer = context.redeemer
    if isinstance(purpose, RewardingScript):
        cred = purpose.credential
        assert isinstance(cred, ScriptCredential), "not a script credential"
        assert isinstance(redeemer, BatchSettle), "withdrawal needs a BatchSettle redeemer"
        ref = tx.reference_inputs[redeemer.config_ref_index]
        config_cred: Credential = ScriptCredential(config_script_hash)
        assert ref.resolved.address.payment_credential == config_cred, "config not at script"
        cfg = config_from(ref, config_policy, CONFIG_NFT_NAME)
        assert count_signers(cfg.oracles, tx.signatories) >= cfg.threshold, "no oracle quorum"
        settle(escrow_hash, cred.credential_hash, config_policy, redeemer, tx)
    elif isinstance(purpose, CertifyingScript):
        cert = purpose.certificate
        if not isinstance(cert, TxCertRegStaking):
            assert isinstance(redeemer, BatchAdmin), "certificate needs a BatchAdmin redeemer"
            ref = tx.reference_inputs[redeemer.config_ref_index]
            cfg = config_from(ref, config_policy, CONFIG_NFT_NAME)
            assert count_signers(cfg.admins, tx.signatories) >= cfg.admin_threshold, "no admins"
    else:
        assert False, "batch script only validates withdrawals and certificates"
