"""The trace-keeping build: same sources, same behaviour, failures name their check."""

from __future__ import annotations

import copy

import pytest
from contracts_harness import evaluate, h32, make_batch, ntx_value, out
from pycardano import Network, TransactionId, TransactionInput

from chain.contracts import types as T
from chain.offchain import compile as C
from chain.offchain import scripts as S


@pytest.fixture(scope="module")
def traced() -> S.ProtocolScripts:
    seed = TransactionInput(TransactionId(h32("seed")), 0)
    return S.protocol_scripts(seed, Network.TESTNET, traces=True)


def test_trace_build_is_cached_outside_the_committed_build(traced) -> None:  # type: ignore[no-untyped-def]
    path = C.trace_blueprint()
    assert path.exists() and C.sources_digest() in path.name
    assert C.BUILD_DIR not in path.parents
    assert set(S.load_scripts(traces=True)) == set(S.SCRIPT_NAMES)


def test_only_the_traces_differ(core_deployment, traced) -> None:  # type: ignore[no-untyped-def]
    assert C.COMPILER_CONFIG.update(remove_trace=False) == C.TRACE_COMPILER_CONFIG
    assert bytes(traced.batch_settle) != bytes(core_deployment.batch_settle)
    assert traced.batch_hash != core_deployment.batch_hash


def _failure_log(traced, oracles, admins, mutate) -> tuple[str, ...]:  # type: ignore[no-untyped-def]
    b = make_batch(traced, oracles, admins, 3)
    assert evaluate(traced.batch_settle, b.context()).ok
    entries = copy.deepcopy(b.entries)
    mutate(b, entries)
    r = evaluate(traced.batch_settle, b.context(entries))
    assert not r.ok
    return r.logs


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("omit-last", "every script input must be an escrow this batch settles"),
        ("omit-middle", "every script input must be an escrow this batch settles"),
        ("reorder", "escrow input indices must strictly increase"),
        ("repeat", "escrow input indices must strictly increase"),
        ("share-output", "output indices must strictly increase"),
        ("short-payout", "NTX remainder"),
        ("over-budget", "payouts exceed the budget"),
        ("quorum", "no oracle quorum"),
    ],
)
def test_each_rejection_names_its_check(traced, oracles, admins, case, message) -> None:  # type: ignore[no-untyped-def]
    def mutate(b, e):  # type: ignore[no-untyped-def]
        if case == "omit-last":
            del e[2]
        elif case == "omit-middle":
            del e[1]
        elif case == "reorder":
            e[0], e[1] = e[1], e[0]
        elif case == "repeat":
            e[1] = copy.deepcopy(e[0])
        elif case == "share-output":
            e[1].payouts[0] = e[0].payouts[0]
        elif case == "short-payout":
            # The payout output pays less: the remainder no longer holds the rest.
            o = b.tx.outputs[e[0].payouts[0]]
            b.tx.outputs[e[0].payouts[0]] = out(o.address, ntx_value(1_200_000, 59))
        elif case == "over-budget":
            o = b.tx.outputs[e[0].payouts[0]]
            b.tx.outputs[e[0].payouts[0]] = out(o.address, ntx_value(1_200_000, 101))
        elif case == "quorum":
            b.tx.signatories = oracles[:1]

    logs = _failure_log(traced, oracles, admins, mutate)
    assert any(message in line for line in logs), logs


def test_escrow_settle_without_batch_names_its_check(traced, oracles, admins) -> None:  # type: ignore[no-untyped-def]
    b = make_batch(traced, oracles, admins, 1)
    b.tx.withdrawals = {}
    r = evaluate(traced.escrow, b.tx.spend(b.escrows[0][0], T.Settle()))
    assert not r.ok and any("batch not invoked" in line for line in r.logs), r.logs
