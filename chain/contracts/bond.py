"""Provider bond spending validator, parameterised by the deployment and the bond terms.

Parameters: the config NFT policy, the oracle-config script hash, the NTX unit, the
unbonding delay (ms) and the slash share (per mille of the bonded NTX). Every bond of a
deployment has the same terms, so no provider picks a zero delay or share.

- Unbond: the provider (datum key) signs; the whole value stays at this full address with
  the same datum but `Unbonding(since)`, `since` at or after the transaction's finite upper
  validity bound (so it cannot be backdated).
- Withdraw: the provider signs, the bond is unbonding, and the transaction's lower validity
  bound is at or after `since + delay`.
- Slash: the oracle quorum of the configuration (reference input holding the config NFT at
  the oracle-config script) signs; the redeemer cites an attestation the provider's key
  signed (its signature is checked here, and the cited job id and Merkle root are read at
  the named offsets of the signed bytes); exactly `bonded * share // 1000` NTX goes to the
  named submitter's full address in an output tagged with the bond's out-ref; the rest of
  the value stays at this address with the same datum, the job id added to `slashed` (a
  job is slashed once) and `amount` set to what remains. Works bonded or unbonding.
Every path: exactly one input of this script per transaction (no output serves two bonds)
and no reference script on the outputs it names.
"""

from chain.contracts.bond_types import *
from chain.contracts.bytestrings import *

HEX_DIGITS = b"0123456789abcdef"


def hex_of(b: bytes) -> bytes:
    """Lowercase hex text of `b` (built back to front)."""
    out = b""
    i = len(b) - 1
    while i >= 0:
        x = index_byte_string(b, i)
        out = cons_byte_string(
            index_byte_string(HEX_DIGITS, x // 16),
            cons_byte_string(index_byte_string(HEX_DIGITS, x % 16), out),
        )
        i -= 1
    return out


def holds_at(signed: bytes, at: int, text: bytes) -> bool:
    return at >= 0 and slice_byte_string(at, len(text), signed) == text


def joined(chunks: List[bytes]) -> bytes:
    out = b""
    for c in chunks:
        out = append_byte_string(out, c)
    return out


def check_citation(datum: BondDatum, r: Slash) -> None:
    signed = joined(r.signed)
    assert len(r.job_id) == 32 and len(r.merkle_root) == 32, "job id and root are 32 bytes"
    assert len(r.provider_key) == 32, "provider key is 32 bytes"
    assert blake2b_224(r.provider_key) == datum.provider, "cited key is not the bond's"
    assert verify_ed25519_signature(r.provider_key, signed, r.signature), "bad signature"
    assert holds_at(signed, r.tag_at, ATTESTATION_TAG_FIELD), "not an attestation"
    job_field = append_byte_string(b'"job_id":"', append_byte_string(hex_of(r.job_id), b'"'))
    assert holds_at(signed, r.job_id_at, job_field), "job id not in the attestation"
    root_field = append_byte_string(
        b'"pot_root":"', append_byte_string(hex_of(r.merkle_root), b'"')
    )
    assert holds_at(signed, r.root_at, root_field), "root not in the attestation"


def keeps_all_but_ntx(
    own: Dict[bytes, Dict[bytes, int]],
    out: Dict[bytes, Dict[bytes, int]],
    ntx_policy: bytes,
    ntx_name: bytes,
) -> bool:
    """Every asset of `own` other than NTX (ADA included) is in `out`, at least as much."""
    ok = True
    for pol, names in own.items():
        for name, q in names.items():
            if not (pol == ntx_policy and name == ntx_name):
                ok = ok and out.get(pol, {b"": 0}).get(name, 0) >= q
    return ok


def validator(
    config_policy: bytes,
    config_script_hash: bytes,
    ntx_policy: bytes,
    ntx_name: bytes,
    unbonding_delay: int,
    slash_permille: int,
    context: ScriptContext,
) -> None:
    purpose = context.purpose
    assert isinstance(purpose, SpendingScript), "bond only validates spending"
    tx = context.transaction
    own_ref = purpose.tx_out_ref
    own = tx.inputs[0].resolved
    for i in tx.inputs:
        if i.out_ref == own_ref:
            own = i.resolved
    own_cred = own.address.payment_credential
    bonds = 0
    for i in tx.inputs:
        if i.resolved.address.payment_credential == own_cred:
            bonds += 1
    assert bonds == 1, "one bond per transaction"
    maybe_datum: SomeDatum = purpose.datum
    datum: BondDatum = maybe_datum.datum
    # No check_integrity (it would triple the script): every redeemer field is read as its
    # type or compared whole, a constructor other than Unbond/Withdraw reaches Slash, which
    # needs the oracle quorum anyway, and the datums written are compared with datums built
    # here, so a malformed one never equals them.
    redeemer: BondRedeemer = context.redeemer
    if isinstance(redeemer, Unbond):
        assert datum.provider in tx.signatories, "provider must sign"
        assert isinstance(datum.state, Bonded), "already unbonding"
        out = tx.outputs[redeemer.output_index]
        assert out.address == own.address, "the bond must stay at its address"
        assert ValueBox(out.value) == ValueBox(own.value), "the bond must keep its value"
        assert isinstance(out.reference_script, NoScriptHash), "no reference script"
        od = out.datum
        assert isinstance(od, SomeOutputDatum), "bond datum must be inline"
        new: BondDatum = od.datum
        state = new.state
        assert isinstance(state, Unbonding), "must announce unbonding"
        since = state.since
        assert since >= upper_limit(tx.validity_range), "unbonding start backdated"
        kept = BondDatum(datum.provider, datum.amount, Unbonding(since), datum.slashed)
        assert kept == new, "the bond keeps its datum"
    elif isinstance(redeemer, Withdraw):
        assert datum.provider in tx.signatories, "provider must sign"
        state = datum.state
        assert isinstance(state, Unbonding), "announce unbonding first"
        start = lower_limit(tx.validity_range)
        assert start >= state.since + unbonding_delay, "unbonding delay not passed"
    else:
        r: Slash = redeemer
        assert r.job_id not in datum.slashed, "already slashed for this job"
        cfg_in = tx.reference_inputs[r.config_ref_index]
        cfg_cred: Credential = ScriptCredential(config_script_hash)
        assert cfg_in.resolved.address.payment_credential == cfg_cred, "config not at script"
        cfg = config_from(cfg_in, config_policy, CONFIG_NFT_NAME)
        assert count_signers(cfg.oracles, tx.signatories) >= cfg.threshold, "oracle quorum"
        check_citation(datum, r)
        bonded = ntx_of(own.value, ntx_policy, ntx_name)
        share = bonded * slash_permille // 1000
        assert share > 0, "nothing to slash"
        assert r.payout_index != r.bond_index, "payout and bond outputs differ"
        pay = tx.outputs[r.payout_index]
        assert pay.address == r.submitter, "slash must pay the named submitter"
        assert ntx_of(pay.value, ntx_policy, ntx_name) == share, "slash must be the share"
        assert isinstance(pay.reference_script, NoScriptHash), "no reference script"
        tag = pay.datum
        assert isinstance(tag, SomeOutputDatum), "slash payout must be tagged"
        tagged: TxOutRef = tag.datum
        assert tagged == own_ref, "slash payout tagged for another bond"
        rest = tx.outputs[r.bond_index]
        assert rest.address == own.address, "the rest must stay bonded"
        assert ntx_of(rest.value, ntx_policy, ntx_name) == bonded - share, "remainder"
        assert keeps_all_but_ntx(own.value, rest.value, ntx_policy, ntx_name), "value"
        assert isinstance(rest.reference_script, NoScriptHash), "no reference script"
        rd = rest.datum
        assert isinstance(rd, SomeOutputDatum), "bond datum must be inline"
        got: BondDatum = rd.datum
        rest_datum = BondDatum(
            datum.provider, bonded - share, datum.state, [r.job_id] + datum.slashed
        )
        assert got == rest_datum, "the rest keeps the datum"
