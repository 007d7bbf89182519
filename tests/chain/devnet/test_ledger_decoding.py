"""Decoding and hashing details the rules rely on, checked against independent sources:
the Haskell-produced conformance vectors, pycardano, and hand-written CBOR; and the one
needed-scripts computation that both phase 1 and the script contexts use."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import cbor2
import pytest
from fixture_paths import LEDGER_VECTORS
from ledger_fixtures import ALWAYS_TRUE, ALWAYS_TRUE_ADDRESS, Harness, redeemer
from pycardano import RedeemerTag, TransactionOutput, plutus_script_hash

from chain.devnet import plutus_tx
from chain.devnet.errors import MalformedTransaction
from chain.devnet.integrity import language_views
from chain.devnet.ledger import _View
from chain.devnet.plutus_tx import outputs_by_input
from chain.devnet.purposes import needed_scripts, needed_scripts_of
from chain.devnet.rules import RuleEnv, validate_phase1
from chain.devnet.txdecode import decode_tx


@pytest.mark.parametrize("name", ["mint", "simple_send"])
def test_vectors_decode_with_the_ledgers_tx_id(name: str) -> None:
    vector = json.loads((LEDGER_VECTORS / f"{name}.json").read_text())
    tx = decode_tx(bytes.fromhex(vector["transaction_cbor"]))
    # the ScriptContext the Haskell ledger built names the tx by the hash of the body bytes
    assert tx.tx_hash in json.dumps(vector["expected_script_context"])
    assert tx.redeemers and tx.redeemers_raw is not None


def test_language_views_put_v1_last_with_its_double_encoding() -> None:
    models = {"PlutusV1": [1, 2], "PlutusV2": [3], "PlutusV3": [4, 5]}
    encoded = language_views(models, [1, 2, 3])
    assert encoded == bytes.fromhex("a3") + cbor2.dumps(1) + cbor2.dumps([3]) + cbor2.dumps(
        2
    ) + cbor2.dumps([4, 5]) + cbor2.dumps(b"\x00") + cbor2.dumps(bytes.fromhex("9f0102ff"))


def test_malformed_cbor_is_rejected_clearly() -> None:
    with pytest.raises(MalformedTransaction, match="4 parts"):
        decode_tx(cbor2.dumps([1, 2, 3]))
    with pytest.raises(MalformedTransaction, match="trailing bytes"):
        decode_tx(cbor2.dumps([{}, {}, True, None]) + b"\x00")
    with pytest.raises(MalformedTransaction, match="unknown field 6"):
        decode_tx(cbor2.dumps([{0: [], 1: [], 2: 0, 6: 1}, {}, True, None]))


def _vector(name: str) -> dict[str, Any]:
    path = LEDGER_VECTORS / f"{name}.json"
    return json.loads(path.read_text())  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("name", "purpose"),
    [
        ("simple_send", ("spend", 0, "39f47fd3b388ef53c48f08de24766d3e55dade6cae908cc24e0f4f3e")),
        ("mint", ("mint", 0, "0c8eaf490c53afbf27e3d84a3b57da51fbafe5aa78443fcec2dc262e")),
        ("mint", ("mint", 1, "12593b4cbf7fdfd8636db99fe356437cd6af8539aadaa0a401964874")),
    ],
)
def test_needed_scripts_of_the_ledger_vectors(name: str, purpose: tuple[str, int, str]) -> None:
    vector = _vector(name)
    tx = decode_tx(bytes.fromhex(vector["transaction_cbor"]))
    resolved = outputs_by_input(
        bytes.fromhex(vector["resolved_inputs"]["inputs_cbor"]),
        bytes.fromhex(vector["resolved_inputs"]["outputs_cbor"]),
    )
    needed = needed_scripts_of(tx.view.body, {k: out for k, (out, _) in resolved.items()})
    assert purpose in [(n.tag, n.index, n.script_hash) for n in needed]
    # the vector's redeemer points at a purpose the computation finds
    pointer = (vector["redeemer"]["tag"], vector["redeemer"]["index"])
    assert pointer in [(n.tag, n.index) for n in needed]


def test_phase1_purposes_are_the_needed_scripts(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    try:
        w = h.wallet()
        locked = h.lock_at_script(w, ALWAYS_TRUE_ADDRESS, datum=3)  # type: ignore[arg-type]
        spare = h.utxos(w.address)
        ordered = sorted(
            [locked, *spare], key=lambda u: (u.input.transaction_id.payload, u.input.index)
        )
        tx = decode_tx(h.build(inputs=[locked, *spare], outputs=[TransactionOutput(w.address, 2_000_000)],
                               change=w.address, signers=[w.skey], plutus_scripts=[ALWAYS_TRUE],
                               collateral=spare[:1],
                               redeemers=[redeemer(RedeemerTag.SPEND, ordered.index(locked))]))  # fmt: skip
        view = _View(h.ledger._utxo, h.ledger._stake, h.ledger._pool_overlay)
        ours = validate_phase1(tx, view, RuleEnv(h.params, 0, h.current_slot())).purposes
        # one script-locked input, at its place in the ledger's input order; the key-locked
        # inputs need no script
        expected = (0, ordered.index(locked), plutus_script_hash(ALWAYS_TRUE).payload, 3)
        assert [(p.tag, p.index, p.script_hash, p.language) for p in ours] == [expected]
        resolved = {u.input: u.output for u in [locked, *spare]}
        assert [(n.tag_number, n.index, n.script_hash) for n in needed_scripts(tx.body_raw, resolved)] == [
            (0, ordered.index(locked), plutus_script_hash(ALWAYS_TRUE).payload.hex())
        ]  # fmt: skip
    finally:
        h.close()


# --- strict checks phase 1 adds to the faithful decoding ----------------------------------

_TX_ID = bytes(range(32))
_ADDR = bytes([0x60]) + bytes(28)
_POLICY = bytes([7]) * 28


def _tx(body: dict[int, Any], witnesses: dict[int, Any] | None = None) -> bytes:
    full = {0: [[_TX_ID, 0]], 1: [{0: _ADDR, 1: 2_000_000}], 2: 200_000, **body}
    return cbor2.dumps([full, witnesses or {}, True, None])


def test_a_plain_body_decodes_with_its_bytes() -> None:
    out = cbor2.dumps({0: _ADDR, 1: [2_000_000, {_POLICY: {b"a": 5}}]})
    raw = cbor2.dumps([{0: [[_TX_ID, 1]], 1: [cbor2.CBORTag(24, b"")], 2: 9}, {}, True, None])
    raw = raw.replace(cbor2.dumps(cbor2.CBORTag(24, b"")), out)
    tx = decode_tx(raw)
    assert tx.inputs == (_TX_ID + b"\x00\x01",)
    (output,) = tx.outputs
    assert output.raw == out and output.coin == 2_000_000
    assert output.assets == {_POLICY + b"a": 5}
    assert output.value_size == len(cbor2.dumps([2_000_000, {_POLICY: {b"a": 5}}]))
    assert tx.fee == 9 and tx.size == len(raw)


@pytest.mark.parametrize(
    ("body", "witnesses", "reason"),
    [
        ({9: {_POLICY: {b"a": 0}}}, None, "zero quantity"),
        ({4: []}, None, "certificates is present but empty"),
        ({13: []}, None, "collateral is present but empty"),
        ({5: {}}, None, "withdrawals is present but empty"),
        ({0: [[_TX_ID, 0], [_TX_ID, 0]]}, None, "duplicate input"),
        ({0: [[_TX_ID, 70_000]]}, None, "index must be an unsigned integer"),
        ({1: [{0: _ADDR, 1: 5, 4: 0}]}, None, "unexpected or repeated field"),
        ({1: [{0: _ADDR, 1: 5, 2: [0, b"short"]}]}, None, "datum hash must be a byte string"),
        ({1: [[_ADDR, 5, None]]}, None, "datum option"),
        ({1: [{0: _ADDR, 1: [5, {_POLICY: {b"a": -1}}]}]}, None, "negative quantity"),
        ({15: 2}, None, "network id must be 0 or 1"),
        ({22: 0}, None, "donation must be positive"),
        ({}, {0: [[bytes(32), bytes(10)]]}, "signature must be a byte string of 64 bytes"),
        ({}, {8: []}, "unknown or repeated field 8"),
        ({}, {5: [[0, 0, 1, [1, 1]], [0, 0, 2, [1, 1]]]}, "repeated (tag, index)"),
    ],
)
def test_phase1_rejects_what_a_node_decoder_rejects(
    body: dict[int, Any], witnesses: dict[int, Any] | None, reason: str
) -> None:
    raw = _tx(body, witnesses)
    with pytest.raises(MalformedTransaction) as info:
        decode_tx(raw)
    assert reason in info.value.reason


def test_the_faithful_view_accepts_the_three_part_shape_phase1_refuses() -> None:
    body = {0: [[_TX_ID, 0]], 1: [], 2: 0}
    three = cbor2.dumps([body, {}, None])
    assert plutus_tx.decode_tx(three).parts == 3
    with pytest.raises(MalformedTransaction, match="4 parts, found 3"):
        decode_tx(three)


def test_redeemer_and_datum_bytes_are_kept_as_submitted() -> None:
    datum = bytes.fromhex("d8799f0102ff")  # indefinite list: re-encoding would change it
    redeemers = bytes.fromhex("a1820000") + bytes.fromhex("82") + datum + cbor2.dumps([7, 8])
    witnesses = bytes.fromhex("a2") + b"\x04" + bytes.fromhex("81") + datum + b"\x05" + redeemers
    body = cbor2.dumps({0: [[_TX_ID, 0]], 1: [], 2: 0})
    raw = bytes.fromhex("84") + body + witnesses + cbor2.dumps(True) + cbor2.dumps(None)
    tx = decode_tx(raw)
    assert tx.datums == (datum,) and tx.datums_raw == bytes.fromhex("81") + datum
    (r,) = tx.redeemers
    assert (r.tag, r.index, r.data_cbor, r.mem, r.steps) == (0, 0, datum, 7, 8)
    assert tx.redeemers_raw == redeemers
