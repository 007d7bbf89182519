"""The admin quorum cannot move escrowed funds, attacked on a running devnet.

Issue 14: the admins rewrote the oracle set to themselves and, in the same block, settled a
live escrow of an unrelated submitter to themselves. Each escrow now pins the oracle set
it was locked under (`EscrowDatum.oracle_set`); the batch script and Cancel accept it only
while the configuration holds exactly that set. A rotation strands nothing: escrows of
the old set settle once it is restored, or refund after their deadline.

The module owns its devnet; every test restores the configuration it found.
"""

from __future__ import annotations

import hashlib
import inspect
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pycardano import UTxO

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "offchain"))

from protocol_fixtures import ProtocolWorld, protocol_world  # noqa: E402

from chain.offchain import scripts as S  # noqa: E402
from chain.offchain.builders import assembly as A  # noqa: E402
from chain.offchain.builders.config_update import build_config_update  # noqa: E402
from chain.offchain.builders.deploy import OracleSetup  # noqa: E402
from chain.offchain.builders.errors import BuilderError  # noqa: E402
from chain.offchain.builders.onchain import escrow_datum_of  # noqa: E402
from chain.offchain.builders.refund import build_cancel, build_refund  # noqa: E402
from chain.offchain.builders.settle import Settlement, plan_settle_batch  # noqa: E402
from chain.offchain.errors import TransactionRejectedError  # noqa: E402

TRACES = "traces" in inspect.signature(S.protocol_scripts).parameters
ROOT = hashlib.sha256(b"attestations").digest()
PINNED = "escrow pinned to another oracle set"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProtocolWorld]:
    with protocol_world(tmp_path_factory.mktemp("admin"), traces=TRACES) as w:
        w.fund(w.providers[0])
        yield w


def honest_setup(w: ProtocolWorld) -> OracleSetup:
    return OracleSetup(tuple(o.pkh for o in w.oracles), w.threshold, (w.admin.pkh,), 1)


def rotate(w: ProtocolWorld, setup: OracleSetup) -> None:
    """The admin quorum (one admin here) rewrites the configuration: allowed."""
    built = build_config_update(w.context, w.deployment, setup, [w.admin.pkh], w.admin.address)
    w.submit(A.sign(built, [w.admin.signing_key]))


def admin_takes_over(w: ProtocolWorld) -> OracleSetup:
    """The admin names itself the only oracle (threshold 1)."""
    return OracleSetup((w.admin.pkh,), 1, (w.admin.pkh,), 1)


def settle_as(w: ProtocolWorld, escrow: UTxO, signers: list[Any], to: Any, **kw: Any) -> Any:
    return plan_settle_batch(
        w.context,
        w.deployment,
        [Settlement(escrow, ((to, escrow_datum_of(escrow).budget),))],
        ROOT,
        b"admin",
        [s.pkh for s in signers],
        signers[0].address,
        **kw,
    )


def test_attack_admins_rotate_the_oracle_set_to_themselves_and_settle_a_live_escrow(
    world: ProtocolWorld,
) -> None:
    w = world
    before = w.oracle_set
    (escrow,) = w.lock([w.job(700)])
    rotate(w, admin_takes_over(w))
    assert w.oracle_set != before
    # The project's builder refuses outright; the attacker builds it anyway.
    with pytest.raises(BuilderError, match="another oracle set"):
        settle_as(w, escrow, [w.admin], w.admin.address)
    sp = settle_as(w, escrow, [w.admin], w.admin.address, checked=False)
    built = A.finalize(
        w.context,
        sp.plan,
        w.admin.utxos(w.context),
        on_script_failure=A.declare_share_of_max(w.context),
    )
    with pytest.raises(TransactionRejectedError) as info:
        w.submit(A.sign(built, [w.admin.signing_key]))
    reason = info.value.reason
    assert "ScriptFailure" in reason and "reward #0" in reason, reason
    if TRACES:
        assert PINNED in reason, reason
    # Honest twin: with the set the escrow pinned restored, its oracles settle it.
    rotate(w, honest_setup(w))
    assert w.oracle_set == before
    quorum = w.oracle_quorum
    sp = settle_as(w, escrow, quorum, w.providers[1].address)
    payer = quorum[0]
    w.submit(
        A.sign(
            A.finalize(w.context, sp.plan, payer.utxos(w.context)), [o.signing_key for o in quorum]
        )
    )


def test_rotation_never_strands_escrows_they_refund_after_the_deadline(
    world: ProtocolWorld,
) -> None:
    w = world
    (live,) = w.lock([w.job(300, deadline_in_ms=8_000)], min_margin_ms=1_000)
    rotate(w, admin_takes_over(w))
    try:
        # Neither the new oracles nor the old ones can settle or cancel it now...
        with pytest.raises(BuilderError, match="another oracle set"):
            settle_as(w, live, [w.admin], w.admin.address)
        with pytest.raises(BuilderError, match="another oracle set"):
            build_cancel(w.context, w.deployment, [live], [w.admin.pkh], w.submitter.address)
        # ...but it is not stranded: after its deadline anyone refunds it, in full.
        w.wait_until_chain_ms(escrow_datum_of(live).deadline + 1_000)
        payer = w.providers[0]
        refund = build_refund(w.context, w.deployment, [live], payer.address)
        tx_id = w.submit(A.sign(refund.built, [payer.signing_key]))
        back = [u for u in w.utxos_of(tx_id, w.submitter.address) if u.output.datum]
        assert len(back) == 1 and back[0].output.amount == live.output.amount
        # Escrows locked after the rotation pin the new set: the admin-oracle settles those.
        (fresh,) = w.lock([w.job(200)])
        assert escrow_datum_of(fresh).oracle_set == w.oracle_set
        sp = settle_as(w, fresh, [w.admin], w.providers[2].address)
        built = A.finalize(w.context, sp.plan, w.admin.utxos(w.context))
        w.submit(A.sign(built, [w.admin.signing_key]))
    finally:
        rotate(w, honest_setup(w))
