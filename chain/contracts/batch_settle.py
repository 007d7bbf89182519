"""Batch settlement stake validator (withdraw-zero + UTxO indexer).

Parameters: the escrow script hash, the config NFT policy and the oracle-config script
hash. Escrow inputs forward their Settle here; this script runs once per transaction and
settles all of them, O(number of escrows):
- the oracle quorum of the authenticated configuration signed the transaction;
- the redeemer's entries name every escrow input exactly once, in strictly increasing
  input order; each names its payout outputs and its refund output, and all output indices
  used by the batch strictly increase, so no output counts for two obligations;
- every other input is a key input: no script input the batch does not settle may share
  the transaction (an escrow of another script version or deployment, a second batch's
  escrows, any other script), so no other validator can count one of these outputs for an
  obligation of its own;
- each escrow's datum trusts this batch script and this configuration and pins the oracle
  set the configuration holds now (so an admin's rotation settles no escrow locked before
  it, unless the set it pinned is restored), the escrow holds
  only ADA and its NTX unit, each payout output (named by its index alone) carries a
  positive NTX quantity as its first token, their sum is within the budget, and the rest of
  the NTX and ADA goes to the submitter's full address; payout amounts and addresses are not
  repeated in the redeemer: the signing oracle quorum chooses the outputs (a redeemer copy
  would be set by the same signers), and auditors check them against the attestations the
  batch's Merkle root commits to;
- the transaction is valid only before every settled escrow's deadline.
As a certifying script it lets anyone register the credential and asks the admin quorum
for anything else (deregistration, delegation).

In the deployed script the withdrawal is answered by a hand-written UPLC core that makes
exactly these checks in this order (`chain.contracts.settle_core.batch_core`, about a
third of the memory per escrow); certificates run this program. This module stays the
definition: the unit tests run it alone and with its core and require the same verdicts.

Cost (this runs once per batch but its per-escrow part bounds the batch size):
- one forward pass: the entries' input and output indices strictly increase, so inputs and
  outputs are walked once with the list builtins (`chain.contracts.listwalk`), dropping the
  traversed prefix, instead of positional indexing (O(index) per access, O(N^2) a batch);
  every input stepped over must be a key input, every input named must be an escrow;
- the context and the redeemer are read through views (below) whose unread fields are
  `Anything`: OpShin copies a `List[...]` field on every read, not an `Anything` one;
- values are read by position (the ledger puts ADA first) rather than by key lookups;
- loops are recursive functions: OpShin's integrity analysis does not terminate on `while`
  loops that walk these lists.
"""

from chain.contracts.listwalk import *


@dataclass(unsafe_hash=True)
class EntryView(PlutusData):
    """`SettleEntry` as read here: the payouts list stays a datum (walked, not copied)."""

    CONSTR_ID = 0
    input_index: int
    payouts: Anything
    refund_index: int


@dataclass(unsafe_hash=True)
class BatchSettleView(PlutusData):
    """`BatchSettle` (constructor 0) with its entries left a datum."""

    CONSTR_ID = 0
    config_ref_index: int
    entries: Anything
    merkle_root: bytes
    batch_id: bytes


@dataclass(unsafe_hash=True)
class TxView(PlutusData):
    """`TxInfo` up to the signatories; inputs and outputs stay datums (walked once)."""

    CONSTR_ID = 0
    inputs: Anything
    reference_inputs: List[TxInInfo]
    outputs: Anything
    fee: Anything
    mint: Anything
    certificates: Anything
    withdrawals: Anything
    validity_range: TimeRange
    signatories: List[bytes]


@dataclass(unsafe_hash=True)
class BatchContext(PlutusData):
    """`ScriptContext` seen through `TxView`."""

    CONSTR_ID = 0
    transaction: TxView
    redeemer: Anything
    purpose: ScriptInfo


def no_script_among(ins: List[Elem], n: int) -> None:
    """None of the first `n` inputs is a script input: stepping over an escrow would leave
    it unsettled (an entry left out, or entries out of input order), and any other script
    input (an escrow of another version or deployment, a second batch's escrow) could have
    its own claim on one of this batch's outputs."""
    if n > 0:
        skipped: TxInInfo = head_list(ins)
        assert isinstance(skipped.resolved.address.payment_credential, PubKeyCredential), (
            "script input skipped: every script input must be an escrow this batch settles, escrow input indices must strictly increase"
        )
        no_script_among(tail_list(ins), n - 1)


def pay_all(
    payouts: List[Elem],
    outs: List[Elem],
    out_pos: int,
    policy: bytes,
    name: bytes,
    budget_left: int,
    ntx_left: int,
    ada_left: int,
    refund_index: int,
    submitter: Address,
) -> List[Elem]:
    """Check the payouts in order, then the refund; the outputs after the refund remain."""
    if null_list(payouts):
        assert budget_left >= 0, "payouts exceed the budget"
        assert refund_index >= out_pos, "output indices must strictly increase"
        rest_outs = drop_list(outs, refund_index - out_pos)
        rest: TxOut = head_list(rest_outs)
        assert rest.address == submitter, "remainder must go to the submitter's full address"
        rest_assets = rest.value.items()
        if ntx_left > 0:
            # By position, as every value here: the NTX must be the first token.
            rest_ntx = rest_assets[1]
            rest_token = rest_ntx[1].items()[0]
            assert rest_ntx[0] == policy and rest_token[0] == name and rest_token[1] >= ntx_left, (
                "NTX remainder"
            )
        assert rest_assets[0][1].items()[0][1] >= ada_left, "ADA remainder"
        return tail_list(rest_outs)
    else:
        o_idx: int = head_list(payouts)
        assert o_idx >= out_pos, "output indices must strictly increase"
        here = drop_list(outs, o_idx - out_pos)
        o: TxOut = head_list(here)
        # By position (ADA first, then the lowest policy): the first token must be the NTX
        # unit; its quantity is the amount paid. An output ordered otherwise is refused,
        # never misread.
        assets = o.value.items()
        ntx = assets[1]
        token = ntx[1].items()[0]
        amount = token[1]
        assert ntx[0] == policy and token[0] == name and amount > 0, "payout must pay NTX"
        return pay_all(
            tail_list(payouts),
            tail_list(here),
            o_idx + 1,
            policy,
            name,
            budget_left - amount,
            ntx_left - amount,
            ada_left - assets[0][1].items()[0][1],
            refund_index,
            submitter,
        )


def no_script_left(ins: List[Elem]) -> None:
    if not null_list(ins):
        left: TxInInfo = head_list(ins)
        assert isinstance(left.resolved.address.payment_credential, PubKeyCredential), (
            "every script input must be an escrow this batch settles"
        )
        no_script_left(tail_list(ins))


def settle_entries(
    entries: List[Elem],
    ins: List[Elem],
    in_pos: int,
    outs: List[Elem],
    out_pos: int,
    escrow_cred: Credential,
    own_hash: bytes,
    upper: int,
    oracle_set: bytes,
) -> None:
    if null_list(entries):
        no_script_left(ins)
    else:
        e: EntryView = head_list(entries)
        idx = e.input_index
        assert idx >= in_pos, "escrow input indices must strictly increase"
        skip = idx - in_pos
        here = drop_list(ins, skip)
        i: TxInInfo = head_list(here)
        escrow = i.resolved
        assert escrow.address.payment_credential == escrow_cred, "entry is not an escrow input"
        if skip > 0:
            no_script_among(ins, skip)
        od: SomeOutputDatum = escrow.datum
        d: EscrowDatum = od.datum
        assert d.batch_credential == own_hash, "escrow does not trust this batch script"
        assert d.oracle_set == oracle_set, "escrow pinned to another oracle set"
        assert upper <= d.deadline, "escrow deadline passed"
        value = escrow.value
        policy = d.ntx_policy
        name = d.ntx_name
        # Only ADA (always the first entry of a ledger value) and the NTX unit: anything else
        # could not be accounted for here; such an escrow is refused and stays refundable.
        assets = value.items()
        ntx_entry = assets[1]
        tokens = ntx_entry[1].items()
        token = tokens[0]
        assert (
            ntx_entry[0] == policy and token[0] == name and len(assets) == 2 and len(tokens) == 1
        ), "escrow holds other tokens"
        r_idx = e.refund_index
        rest_outs = pay_all(
            un_list_data(e.payouts),
            outs,
            out_pos,
            policy,
            name,
            d.budget,
            token[1],
            assets[0][1].items()[0][1],
            r_idx,
            d.submitter,
        )
        settle_entries(
            tail_list(entries),
            tail_list(here),
            idx + 1,
            rest_outs,
            r_idx + 1,
            escrow_cred,
            own_hash,
            upper,
            oracle_set,
        )


def settle(
    escrow_hash: bytes,
    own_hash: bytes,
    redeemer: BatchSettleView,
    tx: TxView,
    oracle_set: bytes,
) -> None:
    assert len(redeemer.merkle_root) == 32, "merkle root must be 32 bytes"
    escrow_cred: Credential = ScriptCredential(escrow_hash)
    settle_entries(
        un_list_data(redeemer.entries),
        un_list_data(tx.inputs),
        0,
        un_list_data(tx.outputs),
        0,
        escrow_cred,
        own_hash,
        upper_limit(tx.validity_range),
        oracle_set,
    )


def validator(
    escrow_hash: bytes,
    config_policy: bytes,
    config_script_hash: bytes,
    context: BatchContext,
) -> None:
    purpose = context.purpose
    tx = context.transaction
    redeemer: Union[BatchSettleView, BatchAdmin] = context.redeemer
    if isinstance(purpose, RewardingScript):
        cred = purpose.credential
        assert isinstance(cred, ScriptCredential), "not a script credential"
        assert isinstance(redeemer, BatchSettleView), "withdrawal needs a BatchSettle redeemer"
        ref = tx.reference_inputs[redeemer.config_ref_index]
        config_cred: Credential = ScriptCredential(config_script_hash)
        assert ref.resolved.address.payment_credential == config_cred, "config not at script"
        cfg = config_from(ref, config_policy, CONFIG_NFT_NAME)
        assert count_signers(cfg.oracles, tx.signatories) >= cfg.threshold, "no oracle quorum"
        settle(escrow_hash, cred.credential_hash, redeemer, tx, oracle_set_hash(cfg))
    elif isinstance(purpose, CertifyingScript):
        cert = purpose.certificate
        if not isinstance(cert, TxCertRegStaking):
            assert isinstance(redeemer, BatchAdmin), "certificate needs a BatchAdmin redeemer"
            ref = tx.reference_inputs[redeemer.config_ref_index]
            cfg = config_from(ref, config_policy, CONFIG_NFT_NAME)
            assert count_signers(cfg.admins, tx.signatories) >= cfg.admin_threshold, "no admins"
    else:
        assert False, "batch script only validates withdrawals and certificates"
