"""Phase-1 rules of the devnet ledger: each test builds an otherwise valid transaction,
breaks exactly one rule, and checks the rule's exception class and its reason."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import cbor2
import pytest
from ledger_fixtures import (
    ALWAYS_TRUE,
    ALWAYS_TRUE_ADDRESS,
    GENEROUS_UNITS,
    Harness,
    Wallet,
    expected_min_fee,
    redeemer,
)
from pycardano import (
    Address,
    AlonzoMetadata,
    Asset,
    AssetName,
    AuxiliaryData,
    DRep,
    DRepKind,
    ExecutionUnits,
    InvalidHereAfter,
    Metadata,
    MultiAsset,
    Network,
    PaymentSigningKey,
    PoolKeyHash,
    RedeemerTag,
    ScriptAll,
    ScriptHash,
    ScriptPubkey,
    StakeAndVoteDelegation,
    StakeCredential,
    StakeDeregistration,
    StakeDeregistrationConway,
    StakeRegistration,
    StakeRegistrationAndVoteDelegation,
    StakeRegistrationConway,
    TransactionInput,
    TransactionOutput,
    UTxO,
    VerificationKeyWitness,
    VoteDelegation,
    plutus_script_hash,
)
from pycardano.plutus import datum_hash

from chain.devnet import errors as e
from chain.devnet.fees import min_fee, ref_script_fee
from chain.devnet.rules import RuleEnv, validate_phase1
from chain.devnet.txdecode import decode_tx


@pytest.fixture
def h(tmp_path: Path) -> Iterator[Harness]:
    harness = Harness(tmp_path)
    yield harness
    harness.close()


def _reject(h: Harness, tx: bytes, cls: type[e.LedgerError], *needles: str) -> e.LedgerError:
    with pytest.raises(cls) as info:
        h.ledger.submit(tx)
    assert type(info.value) is cls, f"expected exactly {cls.__name__}, got {info.value!r}"
    for needle in needles:
        assert needle in info.value.reason, f"{needle!r} not in {info.value.reason!r}"
    assert h.ledger.mempool() == []
    return info.value


def _pay_tx(h: Harness, w: Wallet, lovelace: int = 2_000_000, **kw: object) -> bytes:
    to = Wallet().address
    kw.setdefault("signers", [w.skey])
    return h.build(inputs=h.utxos(w.address), outputs=[TransactionOutput(to, lovelace)],
                   change=w.address, **kw)  # type: ignore[arg-type]  # fmt: skip


# --- positive paths ----------------------------------------------------------------------


def test_valid_payment_is_accepted_at_exactly_the_min_fee(h: Harness) -> None:
    w = h.wallet()
    tx = _pay_tx(h, w)
    decoded = decode_tx(tx)
    assert decoded.fee == expected_min_fee(h.params, len(tx), [], 0)
    assert decoded.fee == min_fee(h.params, len(tx), [], 0)
    tx_hash = h.ledger.submit(tx)
    assert h.ledger.mempool() == [tx_hash]
    h.block()
    assert h.ledger.transaction(tx_hash) is not None


def test_chaining_on_a_mempool_output_is_allowed(h: Harness) -> None:
    w = h.wallet()
    first = h.build(inputs=h.utxos(w.address), outputs=[], change=w.address, signers=[w.skey])
    first_hash = h.ledger.submit(first)
    change = UTxO(
        TransactionInput.from_primitive([bytes.fromhex(first_hash), 0]),
        TransactionOutput.from_cbor(decode_tx(first).outputs[0].raw),
    )
    second = h.build(inputs=[change], outputs=[], change=w.address, signers=[w.skey])
    second_hash = h.ledger.submit(second)
    assert h.ledger.mempool() == [first_hash, second_hash]


# --- size, inputs, interval, network -------------------------------------------------------


def test_max_tx_size(tmp_path: Path) -> None:
    h = Harness(tmp_path, max_tx_size=300)
    try:
        w = h.wallet()
        tx = _pay_tx(h, w, metadata={674: {"msg": ["x" * 60, "y" * 60, "z" * 60]}})
        _reject(h, tx, e.MaxTxSizeExceeded, f"transaction is {len(tx)} bytes", "maximum is 300")
    finally:
        h.close()


def test_empty_inputs(h: Harness) -> None:
    w = h.wallet()
    tx = h.build(inputs=[], outputs=[], change=None, signers=[w.skey], fee=200_000)
    _reject(h, tx, e.InputSetEmpty, "spends no inputs")


def test_unknown_input(h: Harness) -> None:
    w = h.wallet()
    real = h.utxos(w.address)[0]
    ghost = UTxO(TransactionInput.from_primitive([b"\x07" * 32, 3]), real.output)
    tx = h.build(inputs=[ghost], outputs=[], change=w.address, signers=[w.skey])
    _reject(h, tx, e.BadInputs, "input " + "07" * 32 + "#3 does not exist")


def test_input_already_spent_by_a_mempool_tx(h: Harness) -> None:
    w = h.wallet()
    first_hash = h.ledger.submit(_pay_tx(h, w, 2_000_000))
    second = _pay_tx(h, w, 3_000_000)
    with pytest.raises(e.BadInputs) as info:
        h.ledger.submit(second)
    assert f"already spent by mempool transaction {first_hash}" in info.value.reason
    assert h.ledger.mempool() == [first_hash]


def test_input_spent_in_a_confirmed_block(h: Harness) -> None:
    w = h.wallet()
    spent = h.utxos(w.address)
    h.ledger.submit(_pay_tx(h, w))
    h.block()
    tx = h.build(inputs=spent, outputs=[], change=w.address, signers=[w.skey])
    _reject(h, tx, e.BadInputs, "does not exist or is already spent")


def test_ttl_in_the_past(h: Harness) -> None:
    w = h.wallet()
    slot = h.current_slot()
    _reject(h, _pay_tx(h, w, ttl=slot), e.OutsideValidityInterval,
            f"is not before the transaction's invalid_hereafter {slot}")  # fmt: skip


def test_validity_start_in_the_future(h: Harness) -> None:
    w = h.wallet()
    start = h.current_slot() + 100
    _reject(h, _pay_tx(h, w, validity_start=start), e.OutsideValidityInterval,
            f"before the transaction's invalid_before {start}")  # fmt: skip


def test_inside_the_validity_interval_is_accepted(h: Harness) -> None:
    w = h.wallet()
    slot = h.current_slot()
    h.ledger.submit(_pay_tx(h, w, validity_start=slot, ttl=slot + 100))
    assert len(h.ledger.mempool()) == 1


def test_wrong_network_in_body(h: Harness) -> None:
    w = h.wallet()
    _reject(h, _pay_tx(h, w, network_id=1), e.WrongNetworkInTxBody, "body network id is 1")


def test_output_to_a_mainnet_address(h: Harness) -> None:
    w = h.wallet()
    mainnet = Address(PaymentSigningKey.generate().to_verification_key().hash(),
                      network=Network.MAINNET)  # fmt: skip
    tx = h.build(inputs=h.utxos(w.address), outputs=[TransactionOutput(mainnet, 2_000_000)],
                 change=w.address, signers=[w.skey])  # fmt: skip
    _reject(h, tx, e.WrongNetwork, f"output 0 pays to {mainnet}", "on network 1")


def test_withdrawal_from_a_mainnet_reward_account(h: Harness) -> None:
    w = h.wallet()
    account = Address(staking_part=w.stake_skey.to_verification_key().hash(),
                      network=Network.MAINNET)  # fmt: skip
    tx = _pay_tx(h, w, withdrawals={bytes(account.to_primitive()): 0})
    _reject(h, tx, e.WrongNetworkWithdrawal, "on network 1")


# --- outputs -------------------------------------------------------------------------------


def test_output_below_min_ada(h: Harness) -> None:
    w = h.wallet()
    tx = _pay_tx(h, w, 500_000)
    size = len(decode_tx(tx).outputs[0].raw)
    needed = (160 + size) * 4310
    _reject(h, tx, e.OutputTooSmall, f"output 0 holds 500000 lovelace, needs at least {needed}")


def test_output_value_too_big(tmp_path: Path) -> None:
    h = Harness(tmp_path, max_val_size=60)
    try:
        w = h.wallet()
        policy = ScriptPubkey(w.skey.to_verification_key().hash())
        assets = Asset({AssetName(bytes([i]) * 10): 1 for i in range(5)})
        mint = MultiAsset({ScriptHash(policy.hash().payload): assets})
        tx = h.build(inputs=h.utxos(w.address), outputs=[], change=w.address, signers=[w.skey],
                     mint=mint, native_scripts=[policy])  # fmt: skip
        change = decode_tx(tx).outputs[0]
        _reject(h, tx, e.OutputValueTooBig, f"output 0 value is {change.value_size} bytes",
                "maximum is 60")  # fmt: skip
    finally:
        h.close()


# --- fee and value -------------------------------------------------------------------------


def test_fee_one_lovelace_below_the_minimum(h: Harness) -> None:
    w = h.wallet()
    tx = _pay_tx(h, w, fee_delta=-1)
    fee = decode_tx(tx).fee
    _reject(h, tx, e.FeeTooSmall, f"fee {fee} is below the minimum {fee + 1}")


def test_value_not_conserved(h: Harness) -> None:
    w = h.wallet()

    def overpay(body: object) -> None:
        out = body.outputs[0]  # type: ignore[attr-defined]
        body.outputs[0] = TransactionOutput(out.address, out.amount.coin + 1)  # type: ignore[attr-defined]

    tx = _pay_tx(h, w, tweak_body=overpay)
    _reject(h, tx, e.ValueNotConserved, "consumed - produced = -1 lovelace")


# --- witnesses -----------------------------------------------------------------------------


def test_missing_vkey_witness_for_an_input(h: Harness) -> None:
    w = h.wallet()
    other = PaymentSigningKey.generate()
    utxo = h.utxos(w.address)[0]
    tx = h.build(inputs=[utxo], outputs=[], change=w.address, signers=[other])
    _reject(h, tx, e.MissingVKeyWitnesses, f"locked by key hash {w.key_hash.hex()}",
            "which did not sign")  # fmt: skip


def test_bad_signature_is_rejected(h: Harness) -> None:
    w = h.wallet()

    def corrupt(witness: object) -> None:
        vkw = witness.vkey_witnesses[0]  # type: ignore[attr-defined]
        bad = bytes([vkw.signature[0] ^ 1]) + vkw.signature[1:]
        witness.vkey_witnesses = [VerificationKeyWitness(vkw.vkey, bad)]  # type: ignore[attr-defined]

    tx = _pay_tx(h, w, tweak_witness=corrupt)
    _reject(h, tx, e.InvalidWitnesses, f"key hash {w.key_hash.hex()}", "does not verify")


def test_required_signer_missing_and_present(h: Harness) -> None:
    w = h.wallet()
    extra = PaymentSigningKey.generate()
    extra_hash = bytes(extra.to_verification_key().hash().payload)
    tx = _pay_tx(h, w, required_signers=[extra.to_verification_key().hash()])
    _reject(h, tx, e.MissingRequiredSigner, f"required signer {extra_hash.hex()}")
    ok = h.build(inputs=h.utxos(w.address), outputs=[], change=w.address,
                 signers=[w.skey, extra], required_signers=[extra.to_verification_key().hash()])  # fmt: skip
    h.ledger.submit(ok)


def _mint(policy: ScriptPubkey | ScriptAll | InvalidHereAfter, qty: int = 10) -> MultiAsset:
    return MultiAsset({ScriptHash(policy.hash().payload): Asset({AssetName(b"TOK"): qty})})


def test_native_script_signature_not_provided(h: Harness) -> None:
    w = h.wallet()
    owner = PaymentSigningKey.generate()
    policy = ScriptPubkey(owner.to_verification_key().hash())
    tx = h.build(inputs=h.utxos(w.address), outputs=[], change=w.address, signers=[w.skey],
                 mint=_mint(policy), native_scripts=[policy])  # fmt: skip
    _reject(h, tx, e.NativeScriptFailure, f"native script {policy.hash().payload.hex()}",
            "mint #0")  # fmt: skip


def test_native_timelock_needs_the_upper_bound(h: Harness) -> None:
    w = h.wallet()
    deadline = h.current_slot() + 1000
    policy = ScriptAll([ScriptPubkey(w.skey.to_verification_key().hash()),
                        InvalidHereAfter(deadline)])  # fmt: skip
    kw = dict(inputs=h.utxos(w.address), outputs=[], change=w.address, signers=[w.skey],
              mint=_mint(policy), native_scripts=[policy])  # fmt: skip
    _reject(h, h.build(**kw), e.NativeScriptFailure, "[None, None)")  # type: ignore[arg-type]
    tx_hash = h.ledger.submit(h.build(ttl=deadline, **kw))  # type: ignore[arg-type]
    h.block()
    unit = policy.hash().payload.hex() + b"TOK".hex()
    asset = h.ledger.asset(unit)
    assert asset is not None and asset.quantity == 10
    assert asset.initial_mint_tx_hash == tx_hash


def test_missing_script_witness_for_a_policy(h: Harness) -> None:
    w = h.wallet()
    policy = ScriptPubkey(w.skey.to_verification_key().hash())
    tx = h.build(inputs=h.utxos(w.address), outputs=[], change=w.address, signers=[w.skey],
                 mint=_mint(policy))  # fmt: skip
    _reject(h, tx, e.MissingScriptWitnesses, f"script {policy.hash().payload.hex()} needed "
            "for mint #0")  # fmt: skip


def test_extraneous_script_witness(h: Harness) -> None:
    w = h.wallet()
    unused = ScriptPubkey(PaymentSigningKey.generate().to_verification_key().hash())
    tx = _pay_tx(h, w, native_scripts=[unused])
    _reject(h, tx, e.ExtraneousScriptWitnesses, f"witness script {unused.hash().payload.hex()}")


# --- auxiliary data --------------------------------------------------------------------------


def test_metadata_hash_mismatch(h: Harness) -> None:
    w = h.wallet()

    def wrong_hash(body: object) -> None:
        body.auxiliary_data_hash = AuxiliaryData(  # type: ignore[attr-defined]
            AlonzoMetadata(metadata=Metadata({674: "other"}))
        ).hash()

    tx = _pay_tx(h, w, metadata={674: {"msg": ["hello"]}}, tweak_body=wrong_hash)
    _reject(h, tx, e.AuxiliaryDataMismatch, "!= hash of the auxiliary data")


def test_metadata_text_over_64_bytes(h: Harness) -> None:
    w = h.wallet()
    tx = _pay_tx(h, w, aux_raw=cbor2.dumps({674: {"msg": ["x" * 65]}}))
    _reject(h, tx, e.InvalidMetadata, "label 674 has a 65-byte text value")


def test_metadata_is_indexed(h: Harness) -> None:
    w = h.wallet()
    tx_hash = h.ledger.submit(_pay_tx(h, w, metadata={674: {"msg": ["settled"]}}))
    h.block()
    assert h.ledger.tx_metadata(tx_hash) == {674: {"msg": ["settled"]}}
    assert h.ledger.metadata_label_txs(674) == [(tx_hash, {"msg": ["settled"]})]
    assert (674, 1) in h.ledger.metadata_labels()


# --- stake certificates and withdrawals ------------------------------------------------------


def _cred(w: Wallet) -> StakeCredential:
    return StakeCredential(w.stake_skey.to_verification_key().hash())


def _register(h: Harness, w: Wallet) -> None:
    tx = _pay_tx(h, w, certificates=[StakeRegistration(_cred(w))], deposits=2_000_000)
    h.ledger.submit(tx)
    h.block()


def test_legacy_registration_takes_the_deposit(h: Harness) -> None:
    w = h.wallet()
    assert h.ledger.reward_balance(str(w.stake_address)) is None
    tx = _pay_tx(h, w, certificates=[StakeRegistration(_cred(w))], deposits=2_000_000)
    tx_hash = h.ledger.submit(tx)
    h.block()
    assert h.ledger.reward_balance(str(w.stake_address)) == 0
    record = h.ledger.transaction(tx_hash)
    assert record is not None and record.deposit == 2_000_000


def test_registration_without_paying_the_deposit(h: Harness) -> None:
    w = h.wallet()
    tx = _pay_tx(h, w, certificates=[StakeRegistration(_cred(w))])
    _reject(
        h, tx, e.ValueNotConserved, "deposits 2000000", "consumed - produced = -2000000 lovelace"
    )


def test_re_registration_is_rejected(h: Harness) -> None:
    w = h.wallet()
    _register(h, w)
    tx = h.build(inputs=h.utxos(w.address), outputs=[], change=w.address,
                 signers=[w.skey, w.stake_skey], deposits=2_000_000,
                 certificates=[StakeRegistrationConway(_cred(w), 2_000_000)])  # fmt: skip
    _reject(h, tx, e.StakeRegistrationError, "already registered (StakeKeyRegisteredDELEG)")


def test_conway_registration_with_a_wrong_deposit(h: Harness) -> None:
    w = h.wallet()
    tx = h.build(inputs=h.utxos(w.address), outputs=[], change=w.address,
                 signers=[w.skey, w.stake_skey], deposits=1_000_000,
                 certificates=[StakeRegistrationConway(_cred(w), 1_000_000)])  # fmt: skip
    _reject(h, tx, e.StakeRegistrationError, "deposit 1000000 != key deposit 2000000")


def test_conway_registration_needs_the_stake_key_signature(h: Harness) -> None:
    w = h.wallet()
    tx = h.build(inputs=h.utxos(w.address), outputs=[], change=w.address, signers=[w.skey],
                 deposits=2_000_000, certificates=[StakeRegistrationConway(_cred(w), 2_000_000)])  # fmt: skip
    _reject(h, tx, e.MissingVKeyWitnesses, f"stake key hash {w.stake_hash.hex()}")


def test_deregistration_of_an_unknown_credential(h: Harness) -> None:
    w = h.wallet()
    tx = h.build(inputs=h.utxos(w.address), outputs=[], change=w.address,
                 signers=[w.skey, w.stake_skey], refunds=2_000_000,
                 certificates=[StakeDeregistration(_cred(w))])  # fmt: skip
    _reject(h, tx, e.StakeRegistrationError, "not registered (StakeKeyNotRegisteredDELEG)")


def test_deregistration_refund_must_match_the_deposit(h: Harness) -> None:
    w = h.wallet()
    _register(h, w)
    tx = h.build(inputs=h.utxos(w.address), outputs=[], change=w.address,
                 signers=[w.skey, w.stake_skey], refunds=1_000_000,
                 certificates=[StakeDeregistrationConway(_cred(w), 1_000_000)])  # fmt: skip
    _reject(h, tx, e.StakeRegistrationError, "refund 1000000 != deposit held 2000000")


def test_deregistration_refunds_the_deposit(h: Harness) -> None:
    w = h.wallet()
    _register(h, w)
    tx = h.build(inputs=h.utxos(w.address), outputs=[], change=w.address,
                 signers=[w.skey, w.stake_skey], refunds=2_000_000,
                 certificates=[StakeDeregistration(_cred(w))])  # fmt: skip
    tx_hash = h.ledger.submit(tx)
    h.block()
    assert h.ledger.reward_balance(str(w.stake_address)) is None
    record = h.ledger.transaction(tx_hash)
    assert record is not None and record.deposit == -2_000_000


def test_deregistration_with_a_reward_balance(h: Harness) -> None:
    w = h.wallet()
    _register(h, w)
    tx = decode_tx(h.build(inputs=h.utxos(w.address), outputs=[], change=w.address,
                           signers=[w.skey, w.stake_skey], refunds=2_000_000,
                           certificates=[StakeDeregistration(_cred(w))]))  # fmt: skip

    from chain.devnet.ledger import _Overlay, _View

    class RewardedView(_View):
        """The confirmed state, except that every credential has earned rewards (the devnet
        never pays rewards, so this is the only way to reach the rule)."""

        def reward(self, credential: bytes) -> int:
            return 7

    view = RewardedView(h.ledger._utxo, h.ledger._stake, _Overlay())
    env = RuleEnv(h.params, 0, h.current_slot())
    with pytest.raises(e.StakeRegistrationError) as info:
        validate_phase1(tx, view, env)
    assert "reward balance is 7" in info.value.reason
    assert "StakeKeyHasNonZeroRewardAccountBalanceDELEG" in info.value.reason


def test_withdrawal_from_an_unregistered_account(h: Harness) -> None:
    w = h.wallet()
    account = bytes(w.stake_address.to_primitive())
    tx = h.build(inputs=h.utxos(w.address), outputs=[], change=w.address,
                 signers=[w.skey, w.stake_skey], withdrawals={account: 0})  # fmt: skip
    _reject(h, tx, e.WithdrawalError, f"from {w.stake_address}", "is not registered")


def test_withdrawal_must_be_the_whole_balance(h: Harness) -> None:
    w = h.wallet()
    _register(h, w)
    account = bytes(w.stake_address.to_primitive())
    tx = h.build(inputs=h.utxos(w.address), outputs=[], change=w.address,
                 signers=[w.skey, w.stake_skey], withdrawals={account: 1})  # fmt: skip
    _reject(h, tx, e.WithdrawalError, "withdrawal of 1", "whole reward balance 0")


def _delegate_vote(h: Harness, w: Wallet, kind: DRepKind = DRepKind.ALWAYS_ABSTAIN) -> None:
    tx = _pay_tx(h, w, certificates=[VoteDelegation(_cred(w), DRep(kind))],
                 signers=[w.skey, w.stake_skey])  # fmt: skip
    h.ledger.submit(tx)
    h.block()


def test_withdraw_zero_from_a_registered_key_account(h: Harness) -> None:
    w = h.wallet()
    _register(h, w)
    _delegate_vote(h, w)
    account = bytes(w.stake_address.to_primitive())
    missing_sig = h.build(inputs=h.utxos(w.address), outputs=[], change=w.address,
                          signers=[w.skey], withdrawals={account: 0})  # fmt: skip
    _reject(h, missing_sig, e.MissingVKeyWitnesses, f"withdrawal from {w.stake_address}")
    ok = h.build(inputs=h.utxos(w.address), outputs=[], change=w.address,
                 signers=[w.skey, w.stake_skey], withdrawals={account: 0})  # fmt: skip
    h.ledger.submit(ok)


def test_key_account_withdrawal_needs_a_drep_delegation(h: Harness) -> None:
    # Conway from protocol 10: a key-hash reward account withdraws (even zero) only while
    # it delegates its vote; the delegation must predate the transaction.
    w = h.wallet()
    _register(h, w)
    account = bytes(w.stake_address.to_primitive())
    same_tx = h.build(inputs=h.utxos(w.address), outputs=[], change=w.address,
                      signers=[w.skey, w.stake_skey], withdrawals={account: 0},
                      certificates=[VoteDelegation(_cred(w), DRep(DRepKind.ALWAYS_ABSTAIN))])  # fmt: skip
    _reject(h, same_tx, e.WithdrawalNotDelegatedToDRep, "does not delegate to a DRep")
    _delegate_vote(h, w, DRepKind.ALWAYS_NO_CONFIDENCE)
    ok = h.build(inputs=h.utxos(w.address), outputs=[], change=w.address,
                 signers=[w.skey, w.stake_skey], withdrawals={account: 0})  # fmt: skip
    h.ledger.submit(ok)
    assert h.ledger.account(str(w.stake_address)).drep_id == "drep_always_no_confidence"  # type: ignore[union-attr]


def test_withdrawal_rule_starts_at_protocol_10(tmp_path: Path) -> None:
    h = Harness(tmp_path, protocol_major_ver=9)
    try:
        w = h.wallet()
        _register(h, w)
        account = bytes(w.stake_address.to_primitive())
        h.ledger.submit(h.build(inputs=h.utxos(w.address), outputs=[], change=w.address,
                                signers=[w.skey, w.stake_skey], withdrawals={account: 0}))  # fmt: skip
    finally:
        h.close()


def test_vote_registration_delegation_takes_the_deposit_and_deregistration_clears_it(
    h: Harness,
) -> None:
    w = h.wallet()
    abstain = DRep(DRepKind.ALWAYS_ABSTAIN)
    wrong = _pay_tx(h, w, deposits=1_000_000, signers=[w.skey, w.stake_skey],
                    certificates=[StakeRegistrationAndVoteDelegation(_cred(w), abstain, 1_000_000)])  # fmt: skip
    _reject(h, wrong, e.StakeRegistrationError, "deposit 1000000 != key deposit 2000000",
            "DepositIncorrectDELEG")  # fmt: skip
    tx = _pay_tx(h, w, deposits=2_000_000, signers=[w.skey, w.stake_skey],
                 certificates=[StakeRegistrationAndVoteDelegation(_cred(w), abstain, 2_000_000)])  # fmt: skip
    h.ledger.submit(tx)
    h.block()
    account = h.ledger.account(str(w.stake_address))
    assert account is not None and account.registered
    assert account.drep_id == "drep_always_abstain"
    assert h.ledger.reward_balance(str(w.stake_address)) == 0
    out = _pay_tx(h, w, refunds=2_000_000, signers=[w.skey, w.stake_skey],
                  certificates=[StakeDeregistration(_cred(w))])  # fmt: skip
    h.ledger.submit(out)
    h.block()
    gone = h.ledger.account(str(w.stake_address))
    assert gone is not None and not gone.registered and gone.drep_id is None


def test_delegation_to_unregistered_delegatees_is_refused(h: Harness) -> None:
    w = h.wallet()
    _register(h, w)
    drep = DRep(DRepKind.VERIFICATION_KEY_HASH, w.skey.to_verification_key().hash())
    tx = _pay_tx(h, w, certificates=[VoteDelegation(_cred(w), drep)],
                 signers=[w.skey, w.stake_skey])  # fmt: skip
    _reject(h, tx, e.DelegateeNotRegistered, "DelegateeDRepNotRegisteredDELEG")
    pool = PoolKeyHash(b"\x01" * 28)
    tx = _pay_tx(h, w, certificates=[StakeAndVoteDelegation(_cred(w), pool, DRep(DRepKind.ALWAYS_ABSTAIN))],
                 signers=[w.skey, w.stake_skey])  # fmt: skip
    _reject(h, tx, e.DelegateeNotRegistered, "DelegateeStakePoolNotRegisteredDELEG")
    unsigned = _pay_tx(h, w, certificates=[VoteDelegation(_cred(w), DRep(DRepKind.ALWAYS_ABSTAIN))],
                       signers=[w.skey])  # fmt: skip
    _reject(h, unsigned, e.MissingVKeyWitnesses, "certificate 0 (type 9)")


# --- Plutus-related phase-1 rules -------------------------------------------------------------


def _script_spend(h: Harness, w: Wallet, locked: UTxO | None = None, **kw: object) -> bytes:
    """Spend an always-true V3 output (inline datum) with a valid collateral setup."""
    if locked is None:
        locked = h.lock_at_script(w, ALWAYS_TRUE_ADDRESS, datum=42)  # type: ignore[arg-type]
    args: dict[str, object] = dict(
        inputs=[locked, *h.utxos(w.address)],
        outputs=[],
        change=w.address,
        signers=[w.skey],
        plutus_scripts=[ALWAYS_TRUE],
        redeemers=[redeemer(RedeemerTag.SPEND, _index_of(locked, h.utxos(w.address)))],
        collateral=h.utxos(w.address)[:1],
    )
    args.update(kw)
    return h.build(**args)  # type: ignore[arg-type]


def _index_of(target: UTxO, others: list[UTxO]) -> int:
    keys = sorted([target, *others], key=lambda u: (u.input.transaction_id.payload, u.input.index))
    return keys.index(target)


def test_plutus_spend_passes_phase_one(h: Harness) -> None:
    w = h.wallet()
    tx_hash = h.ledger.submit(_script_spend(h, w))
    h.block()
    record = h.ledger.transaction(tx_hash)
    assert record is not None and record.valid_contract
    assert record.redeemers[0].script_hash == plutus_script_hash(ALWAYS_TRUE).payload.hex()
    assert record.redeemers[0].mem == GENEROUS_UNITS.mem


def test_no_collateral(h: Harness) -> None:
    w = h.wallet()
    _reject(h, _script_spend(h, w, collateral=None), e.NoCollateralInputs, "no collateral")


def _locked(h: Harness, w: Wallet) -> UTxO:
    return h.lock_at_script(w, ALWAYS_TRUE_ADDRESS, datum=42)  # type: ignore[arg-type]


def test_too_many_collateral_inputs(h: Harness) -> None:
    w = h.wallet()
    locked = _locked(h, w)
    split = h.build(inputs=h.utxos(w.address), change=w.address, signers=[w.skey],
                    outputs=[TransactionOutput(w.address, 5_000_000)] * 3)  # fmt: skip
    h.ledger.submit(split)
    h.block()
    coll = h.utxos(w.address)[:4]
    assert len(coll) == 4
    _reject(h, _script_spend(h, w, locked, collateral=coll), e.TooManyCollateralInputs,
            "4 collateral inputs, at most 3")  # fmt: skip


def test_too_many_collateral_inputs_without_scripts(h: Harness) -> None:
    w = h.wallet()
    split = h.build(inputs=h.utxos(w.address), change=w.address, signers=[w.skey],
                    outputs=[TransactionOutput(w.address, 5_000_000)] * 3)  # fmt: skip
    h.ledger.submit(split)
    h.block()
    coll = h.utxos(w.address)
    _reject(h, _pay_tx(h, w, collateral=coll), e.TooManyCollateralInputs, "4 collateral inputs")


def test_script_locked_collateral(h: Harness) -> None:
    w = h.wallet()
    other = h.lock_at_script(w, ALWAYS_TRUE_ADDRESS, datum=1)  # type: ignore[arg-type]
    _reject(h, _script_spend(h, w, collateral=[other]), e.CollateralNotKeyLocked,
            "is not locked by a verification key")  # fmt: skip


def test_insufficient_collateral(h: Harness) -> None:
    w = h.wallet()
    locked = _locked(h, w)
    h.pay(w, TransactionOutput(w.address, 1_000_000))
    small = [u for u in h.utxos(w.address) if u.output.amount.coin == 1_000_000]
    tx = _script_spend(h, w, locked, collateral=small,
                       collateral_return=TransactionOutput(w.address, 990_000))  # fmt: skip
    err = _reject(h, tx, e.CollateralError, "collateral balance 10000 lovelace is below")
    assert "150% of fee" in err.reason


def test_collateral_with_tokens(h: Harness) -> None:
    w = h.wallet()
    locked = _locked(h, w)
    h.ledger.fund(str(w.address), 3_000_000, {"4e5458": 5})
    h.block()
    token_utxo = [u for u in h.utxos(w.address) if u.output.amount.multi_asset][0]
    _reject(h, _script_spend(h, w, locked, collateral=[token_utxo]),
            e.CollateralContainsNonADA, "ADA only")  # fmt: skip


def test_total_collateral_mismatch(h: Harness) -> None:
    w = h.wallet()
    locked = _locked(h, w)
    coll = h.utxos(w.address)[:1]
    coin = coll[0].output.amount.coin
    _reject(h, _script_spend(h, w, locked, collateral=coll, total_collateral=5_000_000),
            e.IncorrectTotalCollateral, f"says 5000000, the collateral balance is {coin}")  # fmt: skip


def test_script_data_hash_wrong(h: Harness) -> None:
    w = h.wallet()

    def wrong(body: object) -> None:
        body.script_data_hash = type(body.script_data_hash)(b"\x01" * 32)  # type: ignore[attr-defined]

    _reject(h, _script_spend(h, w, tweak_body=wrong), e.ScriptIntegrityHashMismatch,
            "body script_data_hash " + "01" * 32 + " != computed")  # fmt: skip


def test_script_data_hash_absent(h: Harness) -> None:
    w = h.wallet()

    def drop(body: object) -> None:
        body.script_data_hash = None  # type: ignore[attr-defined]

    _reject(h, _script_spend(h, w, tweak_body=drop), e.ScriptIntegrityHashMismatch,
            "body has no script_data_hash")  # fmt: skip


def test_script_data_hash_extraneous(h: Harness) -> None:
    w = h.wallet()

    def add(body: object) -> None:
        from pycardano import ScriptDataHash

        body.script_data_hash = ScriptDataHash(b"\x02" * 32)  # type: ignore[attr-defined]

    _reject(h, _pay_tx(h, w, tweak_body=add), e.ScriptIntegrityHashMismatch,
            "no redeemers, datums or Plutus scripts")  # fmt: skip


def test_missing_redeemer(h: Harness) -> None:
    w = h.wallet()
    locked = h.lock_at_script(w, ALWAYS_TRUE_ADDRESS, datum=42)  # type: ignore[arg-type]
    spare = h.utxos(w.address)
    # A mint redeemer keeps the tx "scripted" (collateral, hash) but the spend has none.
    tx = h.build(inputs=[locked, *spare], outputs=[], change=w.address, signers=[w.skey],
                 plutus_scripts=[ALWAYS_TRUE], collateral=spare[:1],
                 redeemers=[redeemer(RedeemerTag.MINT, 0)])  # fmt: skip
    _reject(h, tx, e.MissingRedeemers, f"no redeemer for spend #{_index_of(locked, spare)}")


def test_extra_redeemer(h: Harness) -> None:
    w = h.wallet()
    locked = _locked(h, w)
    spare = h.utxos(w.address)
    idx = _index_of(locked, spare)
    tx = _script_spend(h, w, locked,
                       redeemers=[redeemer(RedeemerTag.SPEND, idx),
                                  redeemer(RedeemerTag.SPEND, 1 - idx)])  # fmt: skip
    _reject(h, tx, e.ExtraRedeemers, f"redeemer spend #{1 - idx} points at nothing")


def test_missing_plutus_script(h: Harness) -> None:
    w = h.wallet()
    _reject(h, _script_spend(h, w, plutus_scripts=None), e.MissingScriptWitnesses,
            "needed for spend #")  # fmt: skip


def test_missing_datum_for_a_datum_hash_input(h: Harness) -> None:
    w = h.wallet()
    locked = h.lock_at_script(w, ALWAYS_TRUE_ADDRESS, datum_hash=datum_hash(42))  # type: ignore[arg-type]
    spare = h.utxos(w.address)
    idx = _index_of(locked, spare)
    kw = dict(inputs=[locked, *spare], outputs=[], change=w.address, signers=[w.skey],
              plutus_scripts=[ALWAYS_TRUE], collateral=spare[:1],
              redeemers=[redeemer(RedeemerTag.SPEND, idx)])  # fmt: skip
    _reject(h, h.build(**kw), e.MissingDatum, f"needs the datum with hash {datum_hash(42)}")  # type: ignore[arg-type]
    h.ledger.submit(h.build(datums=[42], **kw))  # type: ignore[arg-type]


def test_supplemental_datum_not_allowed(h: Harness) -> None:
    w = h.wallet()
    _reject(h, _script_spend(h, w, datums=[99]), e.NotAllowedSupplementalDatums,
            f"witness datum {datum_hash(99)}")  # fmt: skip


def test_ex_units_over_the_per_tx_maximum(h: Harness) -> None:
    w = h.wallet()
    locked = _locked(h, w)
    spare = h.utxos(w.address)
    # Today's mainnet limit (protocol 11): 16.5M memory per transaction.
    huge = ExecutionUnits(16_500_001, 1_000)
    tx = _script_spend(h, w, locked,
                       redeemers=[redeemer(RedeemerTag.SPEND, _index_of(locked, spare), 0, huge)])  # fmt: skip
    _reject(h, tx, e.ExUnitsTooBig, "declare 16500001 memory", "maximum is 16500000")


def test_reference_script_fee_is_charged(h: Harness) -> None:
    w = h.wallet()
    shelf = Wallet().address  # holds the reference script out of the wallet's way
    ref_hash = h.pay(w, TransactionOutput(shelf, 20_000_000, script=ALWAYS_TRUE))
    ref_holder = h.output_of(ref_hash, 0)
    locked = _locked(h, w)
    spare = [u for u in h.utxos(w.address) if u.output.script is None]
    idx = _index_of(locked, spare)
    kw = dict(inputs=[locked, *spare], outputs=[], change=w.address, signers=[w.skey],
              reference_inputs=[ref_holder], collateral=spare[:1],
              redeemers=[redeemer(RedeemerTag.SPEND, idx)])  # fmt: skip
    size = len(bytes(ALWAYS_TRUE))
    ref_fee = ref_script_fee(h.params, size)
    assert ref_fee == 15 * size
    short = h.build(fee_delta=-ref_fee, **kw)  # type: ignore[arg-type]
    _reject(h, short, e.FeeTooSmall, f"reference scripts {size} bytes")
    h.ledger.submit(h.build(**kw))  # type: ignore[arg-type]


def test_plutus_fee_matches_the_independent_formula(h: Harness) -> None:
    w = h.wallet()
    tx = _script_spend(h, w)
    d = decode_tx(tx)
    units = [(r.mem, r.steps) for r in d.redeemers]
    assert d.fee == min_fee(h.params, len(tx), units, 0)
    assert units == [(GENEROUS_UNITS.mem, GENEROUS_UNITS.steps)]
