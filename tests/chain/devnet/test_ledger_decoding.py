"""Decoding and hashing details the rules rely on, checked against independent sources:
the Haskell-produced conformance vectors, pycardano, and the plutus helper's purposes."""

from __future__ import annotations

import json
from pathlib import Path

import cbor2
import pytest
from ledger_fixtures import ALWAYS_TRUE, ALWAYS_TRUE_ADDRESS, Harness, redeemer
from pycardano import RedeemerTag, TransactionOutput

from chain.devnet.errors import MalformedTransaction
from chain.devnet.integrity import language_views
from chain.devnet.ledger import _View
from chain.devnet.purposes import needed_scripts
from chain.devnet.rules import RuleEnv, validate_phase1
from chain.devnet.txdecode import decode_tx


@pytest.mark.parametrize("name", ["mint", "simple_send"])
def test_vectors_decode_with_the_ledgers_tx_id(shared_dir: Path, name: str) -> None:
    vector = json.loads(
        (shared_dir / "fixtures/ledger/script_context_v3" / f"{name}.json").read_text()
    )
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


def test_purposes_agree_with_the_plutus_helper(tmp_path: Path) -> None:
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
        resolved = {u.input: u.output for u in [locked, *spare]}
        theirs = needed_scripts(tx.body_raw, resolved)
        assert [(p.tag, p.index, p.script_hash.hex()) for p in ours] == [
            (n.tag_number, n.index, n.script_hash) for n in theirs
        ]
    finally:
        h.close()
