"""SQLite persistence of the devnet ledger (`data_dir/ledger.sqlite3`, WAL).

Every block is written in one SQL transaction, so a crash leaves either the whole block
or none of it. Rows carry the height that created them, which makes a rollback a matter
of deleting that height's rows and un-spending what it spent. The mempool is a table too,
so a restart finds exactly the queued transactions it left.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chain.devnet.records import (
    AssetRecord,
    BlockRecord,
    OutputRecord,
    RedeemerRecord,
    ScriptRecord,
    TxRecord,
)

INPUT_SPEND, INPUT_COLLATERAL, INPUT_REFERENCE = 0, 1, 2

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS blocks(
    height INTEGER PRIMARY KEY, hash TEXT NOT NULL UNIQUE, slot INTEGER NOT NULL,
    time INTEGER NOT NULL, epoch INTEGER NOT NULL, epoch_slot INTEGER NOT NULL,
    prev_hash TEXT, size INTEGER NOT NULL, fees INTEGER NOT NULL, output INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS txs(
    hash TEXT PRIMARY KEY, height INTEGER NOT NULL, idx INTEGER NOT NULL, cbor BLOB NOT NULL,
    fee INTEGER NOT NULL, size INTEGER NOT NULL, deposit INTEGER NOT NULL,
    valid INTEGER NOT NULL, redeemers TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS txs_height ON txs(height, idx);
CREATE TABLE IF NOT EXISTS outputs(
    tx_hash TEXT NOT NULL, idx INTEGER NOT NULL, address TEXT NOT NULL, cbor BLOB NOT NULL,
    height INTEGER NOT NULL, tx_idx INTEGER NOT NULL, collateral INTEGER NOT NULL,
    spent_by TEXT, spent_height INTEGER, PRIMARY KEY(tx_hash, idx)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS outputs_address ON outputs(address, spent_by);
CREATE INDEX IF NOT EXISTS outputs_height ON outputs(height);
CREATE INDEX IF NOT EXISTS outputs_spent_height ON outputs(spent_height);
CREATE TABLE IF NOT EXISTS tx_inputs(
    tx_hash TEXT NOT NULL, kind INTEGER NOT NULL, pos INTEGER NOT NULL,
    src_hash TEXT NOT NULL, src_idx INTEGER NOT NULL, height INTEGER NOT NULL,
    PRIMARY KEY(tx_hash, kind, pos)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS tx_inputs_height ON tx_inputs(height);
CREATE TABLE IF NOT EXISTS stake_events(
    height INTEGER NOT NULL, tx_idx INTEGER NOT NULL, seq INTEGER NOT NULL,
    tx_hash TEXT NOT NULL, cred BLOB NOT NULL, deposit INTEGER);
CREATE INDEX IF NOT EXISTS stake_events_height ON stake_events(height);
CREATE TABLE IF NOT EXISTS stake(cred BLOB PRIMARY KEY, deposit INTEGER NOT NULL,
    reward INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS drep_events(
    height INTEGER NOT NULL, tx_idx INTEGER NOT NULL, seq INTEGER NOT NULL,
    tx_hash TEXT NOT NULL, cred BLOB NOT NULL, drep BLOB);
CREATE INDEX IF NOT EXISTS drep_events_height ON drep_events(height);
CREATE TABLE IF NOT EXISTS mints(
    height INTEGER NOT NULL, tx_idx INTEGER NOT NULL, tx_hash TEXT NOT NULL,
    policy TEXT NOT NULL, name TEXT NOT NULL, quantity TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS mints_unit ON mints(policy, name);
CREATE INDEX IF NOT EXISTS mints_height ON mints(height);
CREATE TABLE IF NOT EXISTS datums(hash TEXT PRIMARY KEY, cbor BLOB NOT NULL,
    height INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS datums_height ON datums(height);
CREATE TABLE IF NOT EXISTS scripts(hash TEXT PRIMARY KEY, type TEXT NOT NULL,
    cbor BLOB NOT NULL, size INTEGER, height INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS scripts_height ON scripts(height);
CREATE TABLE IF NOT EXISTS metadata(
    tx_hash TEXT NOT NULL, label INTEGER NOT NULL, value BLOB NOT NULL,
    height INTEGER NOT NULL, tx_idx INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS metadata_label ON metadata(label, height, tx_idx);
CREATE INDEX IF NOT EXISTS metadata_tx ON metadata(tx_hash);
CREATE INDEX IF NOT EXISTS metadata_height ON metadata(height);
CREATE TABLE IF NOT EXISTS address_txs(
    address TEXT NOT NULL, tx_hash TEXT NOT NULL, height INTEGER NOT NULL,
    tx_idx INTEGER NOT NULL, PRIMARY KEY(address, tx_hash)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS address_txs_height ON address_txs(height);
CREATE TABLE IF NOT EXISTS mempool(seq INTEGER PRIMARY KEY, hash TEXT NOT NULL UNIQUE,
    cbor BLOB NOT NULL);
"""


@dataclass(frozen=True)
class NewOutput:
    index: int
    address: str
    cbor: bytes
    collateral: bool = False


@dataclass(frozen=True)
class AppliedTx:
    """Everything a confirmed transaction changes, as the store records it."""

    hash: str
    cbor: bytes
    fee: int
    size: int
    deposit: int
    valid: bool
    redeemers: tuple[RedeemerRecord, ...]
    inputs: tuple[tuple[int, str, int], ...]  # (kind, source tx hash, source index)
    spent: tuple[tuple[str, int], ...]  # outputs this tx consumes
    outputs: tuple[NewOutput, ...]
    stake: tuple[tuple[bytes, int | None], ...]  # credential -> deposit, None: deregistered
    dreps: tuple[tuple[bytes, bytes | None], ...]  # credential -> DRep, None: cleared
    mints: tuple[tuple[str, str, int], ...]  # (policy hex, name hex, quantity)
    datums: tuple[tuple[str, bytes], ...]
    scripts: tuple[ScriptRecord, ...]
    metadata: tuple[tuple[int, bytes], ...]  # (label, value CBOR)
    addresses: tuple[str, ...]


@dataclass(frozen=True)
class RolledBackBlock:
    height: int
    tx_hashes: tuple[str, ...]
    created: tuple[tuple[str, int], ...]  # outputs that no longer exist
    restored: tuple[tuple[str, int, bytes], ...]  # outputs unspent again


def _redeemers_json(redeemers: Iterable[RedeemerRecord]) -> str:
    return json.dumps(
        [
            {
                "tag": r.tag,
                "index": r.index,
                "mem": r.mem,
                "steps": r.steps,
                "fee": r.fee,
                "script_hash": r.script_hash,
                "redeemer_data_hash": r.redeemer_data_hash,
                "redeemer_data_cbor": r.redeemer_data_cbor.hex(),
                "datum_hash": r.datum_hash,
            }
            for r in redeemers
        ]
    )


def _redeemers_from_json(text: str) -> tuple[RedeemerRecord, ...]:
    return tuple(
        RedeemerRecord(
            tag=item["tag"],
            index=item["index"],
            mem=item["mem"],
            steps=item["steps"],
            fee=item["fee"],
            script_hash=item["script_hash"],
            redeemer_data_hash=item["redeemer_data_hash"],
            redeemer_data_cbor=bytes.fromhex(item["redeemer_data_cbor"]),
            datum_hash=item["datum_hash"],
        )
        for item in json.loads(text)
    )


_BLOCK_COLUMNS = "height, hash, slot, time, epoch, epoch_slot, prev_hash, size, fees, output"
_OUTPUT_SELECT = (
    "SELECT o.tx_hash, o.idx, o.address, o.cbor, o.height, b.hash, b.time, o.spent_by, "
    "o.collateral FROM outputs o JOIN blocks b ON b.height = o.height"
)


class Store:
    """The ledger's SQLite database. Callers serialize access (the ledger holds one lock)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA foreign_keys=OFF")
        self._db.executescript(_SCHEMA)
        self._lock = threading.RLock()

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # --- meta and genesis ------------------------------------------------------------

    def meta(self, key: str) -> str | None:
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        with self._lock:
            self._db.execute(
                "INSERT INTO meta(key, value) VALUES (?, ?) "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (key, value),
            )

    def write_genesis(
        self,
        meta: dict[str, str],
        block: BlockRecord,
        genesis_tx_hash: str,
        outputs: Sequence[NewOutput],
    ) -> None:
        with self._lock, self._transaction():
            for key, value in meta.items():
                self._db.execute("INSERT INTO meta(key, value) VALUES (?, ?)", (key, value))
            self._insert_block(block)
            self._db.executemany(
                "INSERT INTO outputs(tx_hash, idx, address, cbor, height, tx_idx, collateral) "
                "VALUES (?, ?, ?, ?, 0, 0, 0)",
                [(genesis_tx_hash, o.index, o.address, o.cbor) for o in outputs],
            )

    # --- state loading ---------------------------------------------------------------

    def unspent_outputs(self) -> Iterator[tuple[str, int, bytes]]:
        yield from self._db.execute("SELECT tx_hash, idx, cbor FROM outputs WHERE spent_by IS NULL")

    def stake_state(self) -> dict[bytes, tuple[int, int]]:
        return {
            bytes(cred): (int(dep), int(rew))
            for cred, dep, rew in self._db.execute("SELECT cred, deposit, reward FROM stake")
        }

    def drep_state(self) -> dict[bytes, bytes]:
        """Vote delegations in force: replayed from the events, latest per credential."""
        state: dict[bytes, bytes | None] = {}
        for cred, drep in self._db.execute(
            "SELECT cred, drep FROM drep_events ORDER BY height, tx_idx, seq"
        ):
            state[bytes(cred)] = None if drep is None else bytes(drep)
        return {cred: drep for cred, drep in state.items() if drep is not None}

    def stake_last_event_height(self, cred: bytes) -> int | None:
        """Height of the block holding the credential's latest (de)registration."""
        row = self._db.execute(
            "SELECT MAX(height) FROM stake_events WHERE cred = ?", (cred,)
        ).fetchone()
        return None if row is None or row[0] is None else int(row[0])

    def utxos_of(self, keys: Iterable[tuple[str, int]]) -> list[OutputRecord]:
        """Output records of the given (tx hash, index) pairs, chain order."""
        records = []
        for tx_hash, index in keys:
            row = self._db.execute(
                f"{_OUTPUT_SELECT} WHERE o.tx_hash = ? AND o.idx = ? AND o.spent_by IS NULL",
                (tx_hash, index),
            ).fetchone()
            if row is not None:
                records.append(self._output_record(row))
        records.sort(key=lambda r: (r.block_height or 0, r.tx_hash, r.index))
        return records

    def mempool_entries(self) -> list[tuple[str, bytes]]:
        return [
            (str(h), bytes(c))
            for h, c in self._db.execute("SELECT hash, cbor FROM mempool ORDER BY seq")
        ]

    def mempool_add(self, tx_hash: str, cbor: bytes) -> None:
        with self._lock:
            self._db.execute(
                "INSERT INTO mempool(seq, hash, cbor) "
                "VALUES ((SELECT COALESCE(MAX(seq), 0) + 1 FROM mempool), ?, ?)",
                (tx_hash, cbor),
            )

    def mempool_remove(self, tx_hashes: Iterable[str]) -> None:
        with self._lock, self._transaction():
            self._db.executemany("DELETE FROM mempool WHERE hash = ?", [(h,) for h in tx_hashes])

    # --- blocks ----------------------------------------------------------------------

    def commit_block(self, block: BlockRecord, txs: Sequence[AppliedTx]) -> None:
        """Write a block and everything its transactions change, atomically; the sealed
        transactions leave the mempool in the same SQL transaction."""
        with self._lock, self._transaction():
            self._insert_block(block)
            h = block.height
            for tx_idx, tx in enumerate(txs):
                self._db.execute(
                    "INSERT INTO txs(hash, height, idx, cbor, fee, size, deposit, valid, "
                    "redeemers) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (tx.hash, h, tx_idx, tx.cbor, tx.fee, tx.size, tx.deposit, int(tx.valid),
                     _redeemers_json(tx.redeemers)),
                )  # fmt: skip
                self._db.executemany(
                    "INSERT INTO tx_inputs(tx_hash, kind, pos, src_hash, src_idx, height) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    [(tx.hash, kind, pos, src, idx, h) for pos, (kind, src, idx) in
                     enumerate(tx.inputs)],
                )  # fmt: skip
                self._db.executemany(
                    "UPDATE outputs SET spent_by = ?, spent_height = ? WHERE tx_hash = ? AND idx = ?",
                    [(tx.hash, h, src, idx) for src, idx in tx.spent],
                )
                self._db.executemany(
                    "INSERT INTO outputs(tx_hash, idx, address, cbor, height, tx_idx, collateral) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [(tx.hash, o.index, o.address, o.cbor, h, tx_idx, int(o.collateral))
                     for o in tx.outputs],
                )  # fmt: skip
                for seq, (cred, deposit) in enumerate(tx.stake):
                    self._db.execute(
                        "INSERT INTO stake_events(height, tx_idx, seq, tx_hash, cred, deposit) "
                        "VALUES (?, ?, ?, ?, ?, ?)",
                        (h, tx_idx, seq, tx.hash, cred, deposit),
                    )
                    if deposit is None:
                        self._db.execute("DELETE FROM stake WHERE cred = ?", (cred,))
                    else:
                        self._db.execute(
                            "INSERT INTO stake(cred, deposit, reward) VALUES (?, ?, 0)",
                            (cred, deposit),
                        )
                self._db.executemany(
                    "INSERT INTO drep_events(height, tx_idx, seq, tx_hash, cred, drep) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    [(h, tx_idx, seq, tx.hash, cred, drep)
                     for seq, (cred, drep) in enumerate(tx.dreps)],
                )  # fmt: skip
                self._db.executemany(
                    "INSERT INTO mints(height, tx_idx, tx_hash, policy, name, quantity) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    [(h, tx_idx, tx.hash, p, n, str(q)) for p, n, q in tx.mints],
                )
                self._db.executemany(
                    "INSERT OR IGNORE INTO datums(hash, cbor, height) VALUES (?, ?, ?)",
                    [(dh, cbor, h) for dh, cbor in tx.datums],
                )
                self._db.executemany(
                    "INSERT OR IGNORE INTO scripts(hash, type, cbor, size, height) "
                    "VALUES (?, ?, ?, ?, ?)",
                    [(s.hash, s.type, s.cbor, s.serialised_size, h) for s in tx.scripts],
                )
                self._db.executemany(
                    "INSERT INTO metadata(tx_hash, label, value, height, tx_idx) "
                    "VALUES (?, ?, ?, ?, ?)",
                    [(tx.hash, label, value, h, tx_idx) for label, value in tx.metadata],
                )
                self._db.executemany(
                    "INSERT OR IGNORE INTO address_txs(address, tx_hash, height, tx_idx) "
                    "VALUES (?, ?, ?, ?)",
                    [(a, tx.hash, h, tx_idx) for a in tx.addresses],
                )
                self._db.execute("DELETE FROM mempool WHERE hash = ?", (tx.hash,))

    def rollback(self, depth: int, keep_txs: bool) -> list[RolledBackBlock]:
        """Undo the top `depth` blocks (never the genesis block), newest first. Their
        transactions go to the front of the mempool, oldest first, unless not kept."""
        undone: list[RolledBackBlock] = []
        with self._lock, self._transaction():
            tip = self._tip_height()
            depth = min(depth, tip)
            for height in range(tip, tip - depth, -1):
                txs = [
                    (str(h), bytes(c))
                    for h, c in self._db.execute(
                        "SELECT hash, cbor FROM txs WHERE height = ? ORDER BY idx", (height,)
                    )
                ]
                created = [
                    (str(t), int(i))
                    for t, i in self._db.execute(
                        "SELECT tx_hash, idx FROM outputs WHERE height = ?", (height,)
                    )
                ]
                restored = [
                    (str(t), int(i), bytes(c))
                    for t, i, c in self._db.execute(
                        "SELECT tx_hash, idx, cbor FROM outputs WHERE spent_height = ? "
                        "AND height < ?",
                        (height, height),
                    )
                ]
                self._db.execute(
                    "UPDATE outputs SET spent_by = NULL, spent_height = NULL "
                    "WHERE spent_height = ?",
                    (height,),
                )
                for table in ("outputs", "tx_inputs", "txs", "stake_events", "drep_events",
                              "mints", "datums", "scripts", "metadata", "address_txs",
                              "blocks"):  # fmt: skip
                    self._db.execute(f"DELETE FROM {table} WHERE height = ?", (height,))
                undone.append(
                    RolledBackBlock(
                        height, tuple(h for h, _ in txs), tuple(created), tuple(restored)
                    )
                )
                if keep_txs and txs:
                    low = self._db.execute("SELECT COALESCE(MIN(seq), 1) FROM mempool").fetchone()
                    first = int(low[0]) - len(txs)
                    self._db.executemany(
                        "INSERT OR IGNORE INTO mempool(seq, hash, cbor) VALUES (?, ?, ?)",
                        [(first + i, h, c) for i, (h, c) in enumerate(txs)],
                    )
            self._rebuild_stake()
        return undone

    def _rebuild_stake(self) -> None:
        self._db.execute("DELETE FROM stake")
        state: dict[bytes, int | None] = {}
        for cred, deposit in self._db.execute(
            "SELECT cred, deposit FROM stake_events ORDER BY height, tx_idx, seq"
        ):
            state[bytes(cred)] = deposit
        self._db.executemany(
            "INSERT INTO stake(cred, deposit, reward) VALUES (?, ?, 0)",
            [(c, d) for c, d in state.items() if d is not None],
        )

    # --- queries ---------------------------------------------------------------------

    def _tip_height(self) -> int:
        row = self._db.execute("SELECT MAX(height) FROM blocks").fetchone()
        return int(row[0]) if row and row[0] is not None else -1

    def tip(self) -> BlockRecord:
        block = self.block(self._tip_height())
        assert block is not None, "the store always holds the genesis block"
        return block

    def block(self, hash_or_height: str | int) -> BlockRecord | None:
        column = "height" if isinstance(hash_or_height, int) else "hash"
        row = self._db.execute(
            f"SELECT {_BLOCK_COLUMNS} FROM blocks WHERE {column} = ?", (hash_or_height,)
        ).fetchone()
        if row is None:
            return None
        hashes = tuple(
            str(h)
            for (h,) in self._db.execute(
                "SELECT hash FROM txs WHERE height = ? ORDER BY idx", (row[0],)
            )
        )
        return BlockRecord(
            height=row[0], hash=row[1], slot=row[2], time=row[3], epoch=row[4],
            epoch_slot=row[5], previous_hash=row[6], tx_hashes=hashes, size=row[7],
            fees=row[8], output=row[9],
        )  # fmt: skip

    def transaction(self, tx_hash: str) -> TxRecord | None:
        row = self._db.execute(
            "SELECT t.hash, t.cbor, t.height, b.hash, b.time, b.slot, t.idx, t.fee, t.size, "
            "t.deposit, t.valid, t.redeemers FROM txs t JOIN blocks b ON b.height = t.height "
            "WHERE t.hash = ?",
            (tx_hash,),
        ).fetchone()
        if row is None:
            return None
        return TxRecord(
            hash=row[0], cbor=bytes(row[1]), block_height=row[2], block_hash=row[3],
            block_time=row[4], slot=row[5], index=row[6], fee=row[7], size=row[8],
            deposit=row[9], valid_contract=bool(row[10]),
            redeemers=_redeemers_from_json(row[11]),
        )  # fmt: skip

    def tx_cbor(self, tx_hash: str) -> bytes | None:
        row = self._db.execute("SELECT cbor FROM txs WHERE hash = ?", (tx_hash,)).fetchone()
        return None if row is None else bytes(row[0])

    @staticmethod
    def _output_record(row: Sequence[Any], reference: bool = False) -> OutputRecord:
        return OutputRecord(
            tx_hash=row[0], index=row[1], address=row[2], output_cbor=bytes(row[3]),
            block_height=row[4], block_hash=row[5], block_time=row[6], spent_by=row[7],
            collateral=bool(row[8]), reference=reference,
        )  # fmt: skip

    def tx_inputs(self, tx_hash: str) -> list[OutputRecord]:
        records = []
        for kind, src, idx in self._db.execute(
            "SELECT kind, src_hash, src_idx FROM tx_inputs WHERE tx_hash = ? ORDER BY kind, pos",
            (tx_hash,),
        ).fetchall():
            row = self._db.execute(
                f"{_OUTPUT_SELECT} WHERE o.tx_hash = ? AND o.idx = ?", (src, idx)
            ).fetchone()
            if row is None:
                continue
            record = self._output_record(row, reference=kind == INPUT_REFERENCE)
            if kind == INPUT_COLLATERAL:
                record = OutputRecord(**{**record.__dict__, "collateral": True})
            records.append(record)
        return records

    def tx_outputs(self, tx_hash: str) -> list[OutputRecord]:
        return [
            self._output_record(row)
            for row in self._db.execute(
                f"{_OUTPUT_SELECT} WHERE o.tx_hash = ? ORDER BY o.idx", (tx_hash,)
            )
        ]

    def tx_metadata(self, tx_hash: str) -> list[tuple[int, bytes]]:
        return [
            (int(label), bytes(value))
            for label, value in self._db.execute(
                "SELECT label, value FROM metadata WHERE tx_hash = ? ORDER BY label", (tx_hash,)
            )
        ]

    def utxos_at(self, address: str) -> list[OutputRecord]:
        return [
            self._output_record(row)
            for row in self._db.execute(
                f"{_OUTPUT_SELECT} WHERE o.address = ? AND o.spent_by IS NULL "
                "ORDER BY o.height, o.tx_idx, o.idx",
                (address,),
            )
        ]

    def address_known(self, address: str) -> bool:
        return (
            self._db.execute(
                "SELECT 1 FROM outputs WHERE address = ? LIMIT 1", (address,)
            ).fetchone()
            is not None
            or self._db.execute(
                "SELECT 1 FROM address_txs WHERE address = ? LIMIT 1", (address,)
            ).fetchone()
            is not None
        )

    def address_tx_hashes(self, address: str) -> list[str]:
        return [
            str(h)
            for (h,) in self._db.execute(
                "SELECT tx_hash FROM address_txs WHERE address = ? ORDER BY height, tx_idx",
                (address,),
            )
        ]

    def script_redeemers(self, script_hash: str) -> list[tuple[str, RedeemerRecord]]:
        """Runs of one script, oldest first. A scan of the transactions' redeemer lists
        (no index of its own): the devnet's chains are small, and a rollback needs nothing."""
        found = []
        for tx_hash, text in self._db.execute(
            "SELECT hash, redeemers FROM txs WHERE instr(redeemers, ?) > 0 ORDER BY height, idx",
            (script_hash,),
        ):
            found += [
                (str(tx_hash), r)
                for r in _redeemers_from_json(text)
                if r.script_hash == script_hash
            ]
        return found

    def metadata_label_values(self, label: int) -> list[tuple[str, bytes]]:
        return [
            (str(h), bytes(v))
            for h, v in self._db.execute(
                "SELECT tx_hash, value FROM metadata WHERE label = ? ORDER BY height, tx_idx",
                (label,),
            )
        ]

    def metadata_labels(self) -> list[tuple[int, int]]:
        return [
            (int(label), int(count))
            for label, count in self._db.execute(
                "SELECT label, COUNT(DISTINCT tx_hash) FROM metadata GROUP BY label ORDER BY label"
            )
        ]

    def asset(self, policy: str, name: str) -> AssetRecord | None:
        rows = self._db.execute(
            "SELECT tx_hash, quantity FROM mints WHERE policy = ? AND name = ? "
            "ORDER BY height, tx_idx",
            (policy, name),
        ).fetchall()
        if not rows:
            return None
        return AssetRecord(
            policy_id=policy,
            asset_name=name,
            quantity=sum(int(q) for _, q in rows),
            initial_mint_tx_hash=str(rows[0][0]),
            mint_or_burn_count=len(rows),
        )

    def script(self, script_hash: str) -> ScriptRecord | None:
        row = self._db.execute(
            "SELECT hash, type, cbor, size FROM scripts WHERE hash = ?", (script_hash,)
        ).fetchone()
        return None if row is None else ScriptRecord(row[0], row[1], bytes(row[2]), row[3])

    def datum(self, datum_hash: str) -> bytes | None:
        row = self._db.execute("SELECT cbor FROM datums WHERE hash = ?", (datum_hash,)).fetchone()
        return None if row is None else bytes(row[0])

    # --- helpers ---------------------------------------------------------------------

    def _insert_block(self, b: BlockRecord) -> None:
        self._db.execute(
            f"INSERT INTO blocks({_BLOCK_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (b.height, b.hash, b.slot, b.time, b.epoch, b.epoch_slot, b.previous_hash, b.size,
             b.fees, b.output),
        )  # fmt: skip

    def _transaction(self) -> _Transaction:
        return _Transaction(self._db)


class _Transaction:
    """BEGIN IMMEDIATE ... COMMIT, rolled back on any exception."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def __enter__(self) -> None:
        self._db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self._db.execute("COMMIT")
        else:
            self._db.execute("ROLLBACK")
