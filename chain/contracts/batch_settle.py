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


@dataclass(unsafe_hash=True)
class Cursor(PlutusData):
    """Loop state. OpShin threads every variable a loop body writes through each
    iteration, so loop bodies are functions and the loops carry this one value."""

    CONSTR_ID = 0
    # Last escrow input index settled, last output index used by the batch.
    prev_in: int
    prev_out: int
    # NTX and lovelace paid out by the current escrow so far.
    paid: int
    paid_ada: int


def pay(p: Payout, cur: Cursor, outputs: List[TxOut], policy: bytes, name: bytes) -> Cursor:
    o_idx = p.output_index
    assert o_idx > cur.prev_out, "output indices must strictly increase"
    out = outputs[o_idx]
    amount = p.amount
    assert amount > 0, "payout must be positive"
    assert out.address == p.address, "payout to the wrong address"
    value = out.value
    assert value[policy][name] == amount, "payout amount mismatch"
    return Cursor(cur.prev_in, o_idx, cur.paid + amount, cur.paid_ada + value[b""][b""])


def settle_one(
    e: SettleEntry,
    cur: Cursor,
    inputs: List[TxInInfo],
    outputs: List[TxOut],
    escrow_cred: Credential,
    own_hash: bytes,
    config_policy: bytes,
    upper: int,
) -> Cursor:
    idx = e.input_index
    assert idx > cur.prev_in, "escrow input indices must strictly increase"
    escrow = inputs[idx].resolved
    assert escrow.address.payment_credential == escrow_cred, "entry is not an escrow input"
    od: SomeOutputDatum = escrow.datum
    d: EscrowDatum = od.datum
    # This batch script's hash commits to its parameters (escrow script, config NFT), so an
    # escrow naming it trusts exactly this oracle configuration.
    assert d.batch_credential == own_hash, "escrow does not trust this batch script"
    assert upper <= d.deadline, "escrow deadline passed"
    value = escrow.value
    policy = d.ntx_policy
    name = d.ntx_name
    ntx_tokens = value[policy]
    # Only ADA and the NTX unit: anything else could not be accounted for here; such an
    # escrow is refused and stays refundable in full.
    assert len(value) == 2 and len(ntx_tokens) == 1, "escrow holds other tokens"
    acc = Cursor(idx, cur.prev_out, 0, 0)
    for p in e.payouts:
        acc = pay(p, acc, outputs, policy, name)
    assert acc.paid <= d.budget, "payouts exceed the budget"
    r_idx = e.refund_index
    assert r_idx > acc.prev_out, "output indices must strictly increase"
    rest = outputs[r_idx]
    assert rest.address == d.submitter, "remainder must go to the submitter's full address"
    rest_value = rest.value
    remaining = ntx_tokens[name] - acc.paid
    if remaining > 0:
        assert rest_value[policy][name] >= remaining, "NTX remainder"
    assert rest_value[b""][b""] >= value[b""][b""] - acc.paid_ada, "ADA remainder"
    return Cursor(idx, r_idx, 0, 0)


def count_escrows(inputs: List[TxInInfo], escrow_cred: Credential) -> int:
    n = 0
    for i in inputs:
        if i.resolved.address.payment_credential == escrow_cred:
            n += 1
    return n


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
    entries = redeemer.entries
    # Every escrow input is named (the indices are distinct escrow inputs, so equal counts
    # mean all of them are covered exactly once).
    assert len(entries) == count_escrows(inputs, escrow_cred), "every escrow must be settled"
    cur = Cursor(-1, -1, 0, 0)
    for e in entries:
        cur = settle_one(e, cur, inputs, outputs, escrow_cred, own_hash, config_policy, upper)


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
