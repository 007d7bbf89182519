"""Phase 2 on the devnet ledger: Plutus V3 scripts decide, and is_valid=false transactions
pay with their collateral, as on a real node."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from ledger_fixtures import (
    ALWAYS_FALSE,
    ALWAYS_FALSE_ADDRESS,
    ALWAYS_TRUE,
    ALWAYS_TRUE_ADDRESS,
    Harness,
    Wallet,
    redeemer,
)
from pycardano import ExecutionUnits, PlutusV3Script, RedeemerTag, TransactionOutput, UTxO

from chain.devnet import errors as e
from chain.devnet.txdecode import decode_output, decode_tx


@pytest.fixture
def h(tmp_path: Path) -> Iterator[Harness]:
    harness = Harness(tmp_path)
    yield harness
    harness.close()


def _spend(
    h: Harness,
    w: Wallet,
    script: PlutusV3Script,
    locked: UTxO,
    units: ExecutionUnits | None = None,
    **kw: object,
) -> bytes:
    spare = h.utxos(w.address)
    ordered = sorted(
        [locked, *spare], key=lambda u: (u.input.transaction_id.payload, u.input.index)
    )
    args: dict[str, object] = dict(
        inputs=[locked, *spare], outputs=[], change=w.address, signers=[w.skey],
        plutus_scripts=[script], collateral=spare[:1],
        redeemers=[redeemer(RedeemerTag.SPEND, ordered.index(locked), 0, units)],
    )  # fmt: skip
    args.update(kw)
    return h.build(**args)  # type: ignore[arg-type]


def test_always_true_spend_is_accepted(h: Harness) -> None:
    w = h.wallet()
    locked = h.lock_at_script(w, ALWAYS_TRUE_ADDRESS, datum=1)  # type: ignore[arg-type]
    tx_hash = h.ledger.submit(_spend(h, w, ALWAYS_TRUE, locked))
    h.block()
    record = h.ledger.transaction(tx_hash)
    assert record is not None and record.valid_contract
    assert h.ledger.utxos_at(str(ALWAYS_TRUE_ADDRESS)) == []


def test_always_false_spend_is_rejected_with_its_trace(h: Harness) -> None:
    w = h.wallet()
    locked = h.lock_at_script(w, ALWAYS_FALSE_ADDRESS, datum=1)  # type: ignore[arg-type]
    with pytest.raises(e.ScriptFailure) as info:
        h.ledger.submit(_spend(h, w, ALWAYS_FALSE, locked))
    assert "spend #" in info.value.reason and "always false" in info.value.reason
    assert "always false" in info.value.logs
    assert h.ledger.mempool() == []


def test_is_valid_false_consumes_the_collateral(h: Harness) -> None:
    w = h.wallet()
    locked = h.lock_at_script(w, ALWAYS_FALSE_ADDRESS, datum=1)  # type: ignore[arg-type]
    coll = h.utxos(w.address)[0]
    coll_coin = coll.output.amount.coin
    returned = coll_coin - 1_000_000
    tx = _spend(h, w, ALWAYS_FALSE, locked, is_valid=False, collateral=[coll],
                collateral_return=TransactionOutput(w.address, returned),
                total_collateral=1_000_000)  # fmt: skip
    decoded = decode_tx(tx)
    tx_hash = h.ledger.submit(tx)
    h.block()
    record = h.ledger.transaction(tx_hash)
    assert record is not None and not record.valid_contract
    assert record.fee == 1_000_000  # the total collateral, not the body's fee
    # the script input is untouched, the collateral is spent, its return exists
    assert [u.tx_hash for u in h.ledger.utxos_at(str(ALWAYS_FALSE_ADDRESS))] == [
        locked.input.transaction_id.payload.hex()
    ]
    mine = h.ledger.utxos_at(str(w.address))
    assert [(u.tx_hash, u.index) for u in mine] == [(tx_hash, len(decoded.outputs))]
    assert decode_output(mine[0].output_cbor).coin == returned
    outputs = h.ledger.tx_outputs(tx_hash)
    assert len(outputs) == 1 and outputs[0].collateral


def test_is_valid_false_with_succeeding_scripts_is_rejected(h: Harness) -> None:
    w = h.wallet()
    locked = h.lock_at_script(w, ALWAYS_TRUE_ADDRESS, datum=1)  # type: ignore[arg-type]
    with pytest.raises(e.ValidationTagMismatch) as info:
        h.ledger.submit(_spend(h, w, ALWAYS_TRUE, locked, is_valid=False))
    assert "every script succeeds" in info.value.reason


def test_insufficient_declared_ex_units_are_rejected(h: Harness) -> None:
    w = h.wallet()
    locked = h.lock_at_script(w, ALWAYS_TRUE_ADDRESS, datum=1)  # type: ignore[arg-type]
    with pytest.raises(e.ScriptFailure) as info:
        h.ledger.submit(_spend(h, w, ALWAYS_TRUE, locked, ExecutionUnits(10, 10)))
    assert "out of budget" in info.value.reason


def test_evaluate_reports_the_units_a_script_needs(h: Harness) -> None:
    w = h.wallet()
    locked = h.lock_at_script(w, ALWAYS_TRUE_ADDRESS, datum=1)  # type: ignore[arg-type]
    results = h.ledger.evaluate(_spend(h, w, ALWAYS_TRUE, locked, ExecutionUnits(10, 10)))
    assert len(results) == 1 and results[0].ok and results[0].tag == "spend"
    short = ExecutionUnits(results[0].mem, results[0].steps - 1)
    with pytest.raises(e.ScriptFailure) as info:
        h.ledger.submit(_spend(h, w, ALWAYS_TRUE, locked, short))
    assert "out of budget" in info.value.reason
    tight = ExecutionUnits(results[0].mem, results[0].steps)
    h.ledger.submit(_spend(h, w, ALWAYS_TRUE, locked, tight))
