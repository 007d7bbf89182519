"""The V3 ScriptContext against the ledger's conformance vectors, and its shapes and orders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fixture_paths import LEDGER_VECTORS
from plutus_fixtures import (
    ALWAYS_SUCCEEDS_UPLC,
    SLOT_CONFIG,
    TxSpec,
    lock_datum,
    script_address,
    signing_key,
    tx_input,
    uplc_script,
    wallet_address,
)
from pycardano import RedeemerTag, TransactionOutput, plutus_script_hash

from chain.devnet.plutus_data import data_from_json, first_difference
from chain.devnet.plutus_tx import blake2b_256, decode_tx, outputs_by_input
from chain.devnet.purposes import NeededScript, find_script, needed_scripts
from chain.devnet.script_context import SlotConfig, build_script_context, tx_cert
from chain.devnet.vectors import check_vector, check_vector_file, check_vectors_dir

KEY = bytes(range(28))
SCRIPT = bytes(range(100, 128))


def _vectors() -> Path:
    return LEDGER_VECTORS


def _load(name: str) -> dict:
    return json.loads((_vectors() / f"{name}.json").read_text())


def test_simple_send_vector_matches_the_ledger() -> None:
    result = check_vector_file(_vectors() / "simple_send.json")
    assert result.ok, result.describe()


def test_mint_vector_matches_the_ledger() -> None:
    # The mint field is read as encoded: the transaction's 0x2d is -14 for "aiken".
    vector = _load("mint")
    tx = decode_tx(bytes.fromhex(vector["transaction_cbor"]))
    policy = bytes.fromhex("0c8eaf490c53afbf27e3d84a3b57da51fbafe5aa78443fcec2dc262e")
    assert dict(dict(tx.body.mint)[policy])[b"aiken"] == -14
    result = check_vector_file(_vectors() / "mint.json")
    assert result.ok, result.describe()


def test_mutated_expectation_is_reported_with_its_first_differing_path() -> None:
    vector = _load("simple_send")
    vector["expected_script_context"]["fields"][0]["fields"][3] = {"int": 43}
    result = check_vector(vector)
    assert not result.ok
    assert result.path == "fields[0].fields[3]"
    assert (result.expected, result.actual) == ('{"int": 43}', '{"int": 42}')

    vector = _load("simple_send")
    vector["expected_script_context"]["fields"][0]["fields"][0]["list"].append({"int": 1})
    assert check_vector(vector).path == "fields[0].fields[0].list[1]"


def test_vector_directory_and_bad_vectors(tmp_path: Path) -> None:
    names = [r.name for r in check_vectors_dir(_vectors())]
    assert names == ["mint", "simple_send"]
    (tmp_path / "broken.json").write_text('{"name": "broken", "plutus_version": "V3"}')
    (result,) = check_vectors_dir(tmp_path)
    assert not result.ok and result.error is not None
    with pytest.raises(NotADirectoryError):
        check_vectors_dir(tmp_path / "nothing-here")
    (tmp_path / "broken.json").unlink()
    with pytest.raises(FileNotFoundError):
        check_vectors_dir(tmp_path)


def test_tx_id_is_the_hash_of_the_original_body_bytes() -> None:
    vector = _load("simple_send")
    raw = bytes.fromhex(vector["transaction_cbor"])
    # Re-encode the body map with indefinite length: same body, different bytes and id.
    assert raw[:2] == b"\x84\xa7"
    tx = decode_tx(raw)
    body = tx.body_cbor
    indefinite = b"\x84\xbf" + body[1:] + b"\xff" + raw[1 + len(body) :]
    resolved = {
        k: o
        for k, (o, _) in outputs_by_input(
            bytes.fromhex(vector["resolved_inputs"]["inputs_cbor"]),
            bytes.fromhex(vector["resolved_inputs"]["outputs_cbor"]),
        ).items()
    }
    slot = SlotConfig(**vector["slot_config"])
    ctx = build_script_context(indefinite, resolved, ("spend", 0), None, slot)
    tx_id = ctx.fields[0].fields[11].value
    assert tx_id == blake2b_256(b"\xbf" + body[1:] + b"\xff")
    assert tx_id != tx.tx_id
    expected = data_from_json(vector["expected_script_context"])
    assert first_difference(expected, ctx) == "fields[0].fields[11]"


def _spend_tx(**extra: object):
    script = uplc_script(ALWAYS_SUCCEEDS_UPLC)
    owner, other = signing_key(1), signing_key(2)
    datum = lock_datum(b"\x01" * 28, 5)
    locked = (tx_input(7, 3), TransactionOutput(script_address(script), 3_000_000, datum=datum))
    wallet = (tx_input(1), TransactionOutput(wallet_address(owner), 9_000_000))
    spec = TxSpec(
        script_inputs=[locked],
        wallet_inputs=[wallet],
        outputs=[TransactionOutput(wallet_address(other), 11_000_000)],
        scripts=[script],
        redeemers=[(RedeemerTag.SPEND, locked[0], 1, (10**6, 10**9))],
        signers=[owner, other],
        **extra,  # type: ignore[arg-type]
    )
    return spec.build(), script, locked


def test_tx_info_shapes_for_a_pycardano_transaction() -> None:
    ptx, script, locked = _spend_tx(ttl=200, validity_start=100)
    (purpose,) = needed_scripts(ptx.tx.transaction_body, ptx.resolved)
    assert (
        purpose.tag == "spend" and purpose.script_hash == plutus_script_hash(script).payload.hex()
    )
    ctx = build_script_context(ptx.cbor, ptx.resolved, purpose, None, SLOT_CONFIG)
    info, redeemer, script_info = ctx.fields
    assert redeemer.value == 1
    # Inputs sorted by (tx id, index), outputs as in the body.
    ids = [i.fields[0].fields[0].value for i in info.fields[0].value]
    assert ids == sorted(ids)
    # Validity: [start, ttl) in POSIX ms; the upper bound is exclusive.
    lower, upper = info.fields[7].fields
    assert lower.fields[0].fields[0].value == SLOT_CONFIG.posix_ms(100)
    assert lower.fields[1].constructor == 1
    assert upper.fields[0].fields[0].value == SLOT_CONFIG.posix_ms(200)
    assert upper.fields[1].constructor == 0
    # Signatories are a sorted set of key hashes.
    signers = [s.value for s in info.fields[8].value]
    assert signers == sorted(signers) and len(signers) == 2
    # SpendingScript carries the inline datum.
    assert script_info.constructor == 1
    assert script_info.fields[1].constructor == 0
    assert script_info.fields[1].fields[0].fields[1].value == 5
    # Redeemers keyed by ScriptPurpose (Spending = constructor 1).
    (key,) = info.fields[9].value
    assert key.constructor == 1
    assert key.fields[0].fields[1].value == locked[0].index


def test_needed_scripts_orders_withdrawals_script_first_and_skips_key_items() -> None:
    script = uplc_script(ALWAYS_SUCCEEDS_UPLC)
    key_account = bytes([0xE0]) + KEY
    script_account = bytes([0xF0]) + plutus_script_hash(script).payload
    wallet = (tx_input(1), TransactionOutput(wallet_address(signing_key(1)), 9_000_000))
    ptx = TxSpec(
        wallet_inputs=[wallet],
        outputs=[TransactionOutput(wallet_address(signing_key(1)), 8_000_000)],
        withdrawals={key_account: 0, script_account: 0},
        scripts=[script],
        redeemers=[(RedeemerTag.WITHDRAWAL, 0, 0, (10**6, 10**9))],
    ).build()
    needed = needed_scripts(ptx.tx.transaction_body, ptx.resolved)
    # The ledger's Credential order puts ScriptHashObj before KeyHashObj, although the
    # script account's bytes (0xf0..) sort after the key account's (0xe0..).
    assert needed == [NeededScript("reward", 0, plutus_script_hash(script).payload.hex(), None)]
    ctx = build_script_context(ptx.cbor, ptx.resolved, needed[0], None, SLOT_CONFIG)
    withdrawals = list(ctx.fields[0].fields[6].value)
    assert [w.constructor for w in withdrawals] == [1, 0]
    assert ctx.fields[2].constructor == 2 and ctx.fields[2].fields[0].constructor == 1


def test_find_script_looks_at_witnesses_and_reference_inputs() -> None:
    script = uplc_script(ALWAYS_SUCCEEDS_UPLC)
    holder = (
        tx_input(9),
        TransactionOutput(wallet_address(signing_key(3)), 20_000_000, script=script),
    )
    wallet = (tx_input(1), TransactionOutput(wallet_address(signing_key(1)), 9_000_000))
    ptx = TxSpec(
        wallet_inputs=[wallet],
        reference_inputs=[holder],
        outputs=[TransactionOutput(wallet_address(signing_key(1)), 8_000_000)],
    ).build()
    found = find_script(
        plutus_script_hash(script).payload, ptx.tx.transaction_witness_set, ptx.resolved
    )
    assert found is not None and found.language == 3 and found.body == bytes(script)
    assert find_script("00" * 28, ptx.tx.transaction_witness_set, ptx.resolved) is None
    spend = TxSpec(
        script_inputs=[(tx_input(4), TransactionOutput(script_address(script), 2_000_000))],
        wallet_inputs=[wallet],
        reference_inputs=[holder],
        outputs=[TransactionOutput(wallet_address(signing_key(1)), 10_000_000)],
        redeemers=[(RedeemerTag.SPEND, tx_input(4), 0, (10**6, 10**9))],
    ).build()
    (purpose,) = needed_scripts(spend.tx.transaction_body, spend.resolved)
    assert find_script(purpose.script_hash, spend.tx.transaction_witness_set, spend.resolved)
    ctx_holder = build_script_context(spend.cbor, spend.resolved, purpose, None, SLOT_CONFIG)
    (ref,) = ctx_holder.fields[0].fields[1].value
    assert ref.fields[1].fields[3].fields[0].value == plutus_script_hash(script).payload


def test_conway_certificates_carry_deposits_as_the_ledger_does() -> None:
    script_cred = [1, SCRIPT]
    assert tx_cert([7, script_cred, 2_000_000]).to_json() == {
        "constructor": 0,
        "fields": [
            {"constructor": 1, "fields": [{"bytes": SCRIPT.hex()}]},
            {"constructor": 0, "fields": [{"int": 2_000_000}]},
        ],
    }
    assert tx_cert([0, [0, KEY]]).fields[1].constructor == 1  # legacy: no deposit
    deleg = tx_cert([10, script_cred, KEY, [2]])
    assert deleg.constructor == 2
    assert deleg.fields[1].constructor == 2  # DelegStakeVote
    assert deleg.fields[1].fields[1].constructor == 1  # AlwaysAbstain
    assert tx_cert([17, [0, KEY], 500]).constructor == 6
    with pytest.raises(ValueError, match="not allowed in Conway"):
        tx_cert([6, 1])
