"""In-memory chain and builder for the settlement engine's state-machine tests.

`FakeChain` keeps the one property the engine's exactly-once argument rests on: a
transaction spends its escrow inputs, and an input can be spent once (mempool included).
Blocks, rollbacks (with or without dropping the txs) and foreign spends (refunds) are
explicit calls, so each test drives the chain step by step.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import cbor2
from sqlalchemy.engine import Engine
from sqlmodel import Session

from oracle.models import VERIFIED, AttestationRecord, escrow_ref, metadata
from oracle.settlement.engine import BatchPolicy, SettlementEngine
from oracle.settlement.intents import IntentLog
from oracle.settlement.ports import (
    Annotate,
    ChainUnavailable,
    Claim,
    OutRef,
    SpendStatus,
    SubmitRejected,
    TxStatus,
    UnsignedBatch,
)
from oracle.settlement.queue import AttestationQueue
from oracle.settlement.watcher import WatchConfig
from oracle.storage.db import make_engine
from proofnet.messages import merkle

_counter = itertools.count(1)


def fake_tx_id(tag: str) -> str:
    return hashlib.sha256(tag.encode()).hexdigest()


@dataclass
class FakeTx:
    tx_id: str
    inputs: tuple[str, ...]
    payouts: tuple[tuple[str, int], ...]


def decode(tx_cbor: bytes) -> FakeTx:
    body, _witnesses = cbor2.loads(tx_cbor)
    return FakeTx(
        hashlib.sha256(cbor2.dumps(body)).hexdigest(),
        tuple(body["inputs"]),
        tuple((a, n) for a, n in body["payouts"]),
    )


@dataclass
class FakeChain:
    """Escrow outputs, a mempool and a list of blocks of tx ids."""

    escrows: set[str] = field(default_factory=set)
    spent: dict[str, str] = field(default_factory=dict)  # confirmed spends: ref -> tx
    mempool: dict[str, FakeTx] = field(default_factory=dict)
    blocks: list[list[FakeTx]] = field(default_factory=lambda: [[]])
    submissions: list[str] = field(default_factory=list)
    down: bool = False
    refuse: str | None = None  # refuse every submission with this reason

    def add_escrow(self) -> OutRef:
        ref = OutRef(fake_tx_id(f"escrow-{next(_counter)}"), 0)
        self.escrows.add(str(ref))
        return ref

    # --- ChainView ----------------------------------------------------------------------

    def _check(self) -> None:
        if self.down:
            raise ChainUnavailable("fake chain is down")

    def tip_height(self) -> int:
        self._check()
        return len(self.blocks) - 1

    def tx_status(self, tx_id: str) -> TxStatus:
        self._check()
        for height, block in enumerate(self.blocks):
            if any(t.tx_id == tx_id for t in block):
                return TxStatus(height, f"block-{height}", False)
        return TxStatus(None, None, tx_id in self.mempool)

    def spend_status(self, ref: OutRef) -> SpendStatus:
        self._check()
        return SpendStatus(str(ref) in self.escrows, self.spent.get(str(ref)))

    def output_cbor(self, ref: OutRef) -> bytes | None:
        return None

    def submit(self, tx_cbor: bytes) -> str:
        self._check()
        tx = decode(tx_cbor)
        self.submissions.append(tx.tx_id)
        if self.refuse:
            raise SubmitRejected(self.refuse)
        if tx.tx_id in self.mempool:
            return tx.tx_id
        pending = {i for t in self.mempool.values() for i in t.inputs}
        for ref in tx.inputs:
            if ref not in self.escrows or ref in self.spent or ref in pending:
                raise SubmitRejected(f"BadInputsUTxO {ref}")
        self.mempool[tx.tx_id] = tx
        return tx.tx_id

    # --- driving the chain ------------------------------------------------------------------

    def produce_block(self) -> list[str]:
        block = list(self.mempool.values())
        self.mempool.clear()
        for tx in block:
            for ref in tx.inputs:
                self.spent[ref] = tx.tx_id
        self.blocks.append(block)
        return [t.tx_id for t in block]

    def rollback(self, depth: int, drop: bool = False) -> list[str]:
        undone: list[FakeTx] = []
        for _ in range(depth):
            block = self.blocks.pop()
            undone.extend(block)
            for tx in block:
                for ref in tx.inputs:
                    self.spent.pop(ref, None)
        if not drop:
            for tx in undone:
                self.mempool[tx.tx_id] = tx
        return [t.tx_id for t in undone]

    def foreign_spend(self, ref: OutRef, tag: str = "refund") -> str:
        """A refund/cancel of `ref` by someone else, straight into a block."""
        tx = FakeTx(fake_tx_id(f"{tag}-{ref}-{next(_counter)}"), (str(ref),), ())
        for other in list(self.mempool.values()):
            if str(ref) in other.inputs:
                del self.mempool[other.tx_id]
        self.blocks.append([tx])
        self.spent[str(ref)] = tx.tx_id
        return tx.tx_id

    def paid(self) -> dict[str, list[tuple[str, int]]]:
        """Per escrow: the payouts of the confirmed txs spending it."""
        out: dict[str, list[tuple[str, int]]] = {}
        for block in self.blocks:
            for tx in block:
                for ref in tx.inputs:
                    out.setdefault(ref, []).extend(
                        (a, n) for a, n in tx.payouts if a.endswith(ref[-8:])
                    )
        return out


@dataclass
class FakeBuilder:
    """Packs at most `capacity` claims; the tx body names escrows and payouts, its id is
    the body's SHA-256, witnesses are opaque tags."""

    name: str = "oracle-a"
    capacity: int = 8
    fail: Exception | None = None

    def build(
        self,
        claims: Sequence[Claim],
        *,
        batch_id: bytes,
        annotate: Annotate,
        signers: Sequence[bytes] = (),
    ) -> UnsignedBatch:
        if self.fail is not None:
            raise self.fail
        packed = tuple(claims[: self.capacity])
        note = annotate(packed)
        body = {
            "inputs": [str(c.escrow) for c in packed],
            "payouts": [[f"{c.payout_address}", c.amount] for c in packed],
            "root": note.merkle_root,
            "batch": batch_id,
        }
        raw = cbor2.dumps(body)
        return UnsignedBatch(
            hashlib.sha256(raw).hexdigest(),
            cbor2.dumps([body, []]),
            packed,
            note.merkle_root,
            batch_id,
        )

    def witness(self, tx_id: str) -> bytes:
        return cbor2.dumps([self.name, tx_id])

    def assemble(self, unsigned: UnsignedBatch, witnesses: Sequence[bytes]) -> bytes:
        body, _ = cbor2.loads(unsigned.tx_cbor)
        return cbor2.dumps([body, list(witnesses)])


def oracle_engine(tmp_path: Path, name: str = "oracle.db") -> Engine:
    engine = make_engine(f"sqlite:///{tmp_path / name}")
    import oracle.settlement.models  # noqa: F401  (registers the settlement tables)

    metadata.create_all(engine)
    return engine


def add_verified(engine: Engine, escrow: OutRef, amount: int = 100, age_s: float = 0.0) -> int:
    """A verified attestation row (the intake's job in production) paying to an address
    tagged with the escrow, so `FakeChain.paid` can attribute payouts."""
    n = next(_counter)
    stamp = datetime.now(UTC) - timedelta(seconds=age_s)
    payload = f"payload-{n}-{escrow}".encode()
    leaf = merkle.leaf_hash(payload).hex()
    row = AttestationRecord(
        job_id=fake_tx_id(f"job-{n}"),
        escrow_tx_id=escrow.tx_id,
        escrow_index=escrow.index,
        escrow_ref=escrow_ref(escrow.tx_id, escrow.index),
        payable_escrow=escrow_ref(escrow.tx_id, escrow.index),
        worker_key=fake_tx_id(f"worker-{n}"),
        payout_address=f"provider-{str(escrow)[-8:]}",
        amount=amount,
        cose=cbor2.dumps([b"p", {}, payload, bytes(64)]),
        leaf_hash=leaf,
        status=VERIFIED,
        received_at=stamp,
        updated_at=stamp,
    )
    with Session(engine) as session:
        session.add(row)
        session.commit()
        assert row.id is not None
        return row.id


def statuses(engine: Engine) -> dict[int, str]:
    from sqlmodel import select

    with Session(engine) as session:
        return {r.id: r.status for r in session.exec(select(AttestationRecord)).all() if r.id}


def make_engine_for(
    engine: Engine,
    chain: FakeChain,
    builder: FakeBuilder | None = None,
    *,
    depth: int = 2,
    batch_size: int = 4,
    max_wait_s: float = 0.0,
    attempts: int = 3,
) -> SettlementEngine:
    return SettlementEngine(
        IntentLog(engine, AttestationQueue()),
        chain,
        builder or FakeBuilder(),
        policy=BatchPolicy(batch_size=batch_size, max_wait_s=max_wait_s),
        watch=WatchConfig(confirmation_depth=depth, max_submit_attempts=attempts),
        proposer="test",
    )
