"""Ogmios and Kupo in front of a running devnet: the self-hosted node backend
(PROOFNET_CHAIN_BACKEND=ogmios) spoken over its real protocols, from the devnet's own blocks.

    with node_bridge("http://127.0.0.1:3001/api/v0") as node:
        node.ogmios_url   # ws://127.0.0.1:PORT   Ogmios v6 JSON-RPC: chain-sync + a few queries
        node.kupo_url     # http://127.0.0.1:PORT Kupo v2: matches, datums, checkpoints

Everything is read through the devnet's REST (Blockfrost shapes), at the moment it is
asked, so the bridge sees what the devnet holds: blocks, each transaction's CBOR, every
output spent or not, and rollbacks (`/admin/rollback`). What it serves:

- Ogmios: `findIntersection`, `nextBlock` (a session's cursor; blocks as Ogmios v6 started
  with `--include-transaction-cbor`: id, ancestor, height, slot, transactions with id,
  `spends` and `cbor`; a cursor whose block the devnet rolled back is answered with
  `rollBackward` to the newest block it sent that is still on chain), `queryNetwork/tip`,
  `queryNetwork/blockHeight`, `queryNetwork/startTime`, `queryLedgerState/eraSummaries`;
  `submitTransaction` (forwarded to the devnet's `/tx/submit`) and the mempool's
  `acquireMempool`, `hasTransaction`, `releaseMempool` (the devnet's `/mempool/{hash}`).
- Kupo v2.10 as if started with `--match "*"` and no `--prune-utxo`: `GET /matches/{i}@{tx}`,
  `/matches/*@{tx}` (`spent_at` naming the spending transaction and input index),
  `/matches/{bech32 address}`, each with `?unspent` or `?spent`; `/datums/{hash}`,
  `/scripts/{hash}`, `/checkpoints/{slot}`, `/health`.

Not a node: no Ogmios ledger-state queries (UTxOs come from Kupo's address patterns; no
protocol parameters), no mempool snapshot beyond membership.
It serves what the chain watcher, the auditor, the oracle (escrow checks, the settlement
engine's reads and submission) and the API read (`proofnet devnet node-bridge`, and the
tests); nothing else in the product imports it.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from chain.devnet.testing import serve_app

POLICY_HEX = 56
# How long `nextBlock` at the tip waits for a block before answering with an error (a real
# Ogmios waits forever; a test should not).
TIP_WAIT_S = 30.0


class DevnetRest:
    """The reads the bridge needs, over the devnet's REST root (`.../api/v0`)."""

    def __init__(self, url: str) -> None:
        self._http = httpx.Client(base_url=url.rstrip("/"), timeout=30.0, trust_env=False)

    def get(self, path: str) -> Any:
        answer = self._http.get(path)
        if answer.status_code == 404:
            return None
        answer.raise_for_status()
        return answer.json()

    def post_cbor(self, path: str, body: bytes) -> tuple[int, Any]:
        answer = self._http.post(path, content=body, headers={"Content-Type": "application/cbor"})
        try:
            return answer.status_code, answer.json()
        except ValueError:
            return answer.status_code, answer.text

    def block(self, ref: str | int) -> dict[str, Any] | None:
        found = self.get(f"/blocks/{ref}")
        return found if isinstance(found, dict) else None

    def tip(self) -> dict[str, Any]:
        return dict(self.get("/blocks/latest"))

    def block_txs(self, ref: str) -> list[str]:
        hashes: list[str] = []
        page = 1
        while True:
            found = self.get(f"/blocks/{ref}/txs?count=100&page={page}") or []
            hashes.extend(found)
            if len(found) < 100:
                return hashes
            page += 1

    def close(self) -> None:
        self._http.close()


def _point(block: dict[str, Any]) -> dict[str, Any]:
    return {"slot": int(block["slot"]), "id": str(block["hash"])}


def _tip(block: dict[str, Any]) -> dict[str, Any]:
    return {**_point(block), "height": int(block["height"])}


@dataclass
class _Cursor:
    """A chain-sync session: where it stands, what it was sent, a pending rollBackward."""

    at: dict[str, Any] | None = None  # a devnet block (None: origin)
    backward: Any = None  # the point a pending rollBackward names ("origin" or a point)
    sent: list[dict[str, Any]] | None = None


class OgmiosBridge:
    """Ogmios v6's JSON-RPC over the devnet, one `_Cursor` per websocket."""

    def __init__(self, rest: DevnetRest) -> None:
        self.rest = rest
        self.genesis = rest.get("/genesis") or {}

    def handle(self, connection: Any) -> None:
        cursor = _Cursor(sent=[])
        for message in connection:
            request = json.loads(message)
            try:
                result = self.answer(cursor, request.get("method"), request.get("params") or {})
                reply: dict[str, Any] = {"jsonrpc": "2.0", "result": result}
            except _RpcError as exc:
                reply = {"jsonrpc": "2.0", "error": exc.json()}
            reply["method"] = request.get("method")
            reply["id"] = request.get("id")
            connection.send(json.dumps(reply))

    def answer(self, cursor: _Cursor, method: Any, params: dict[str, Any]) -> Any:
        if method == "findIntersection":
            return self.find_intersection(cursor, params.get("points") or [])
        if method == "nextBlock":
            return self.next_block(cursor)
        if method == "queryNetwork/tip":
            return _point(self.rest.tip())
        if method == "queryNetwork/blockHeight":
            return int(self.rest.tip()["height"])
        if method == "queryNetwork/startTime":
            start = datetime.fromtimestamp(int(self.genesis.get("system_start", 0)), UTC)
            return start.isoformat().replace("+00:00", "Z")
        if method == "submitTransaction":
            return self.submit(params)
        if method == "acquireMempool":
            return {"acquired": "mempool", "slot": int(self.rest.tip()["slot"])}
        if method == "hasTransaction":
            return self.rest.get(f"/mempool/{params.get('id', '')}") is not None
        if method == "releaseMempool":
            return {"released": "mempool"}
        if method == "queryLedgerState/eraSummaries":
            return [
                {
                    "start": {"time": {"seconds": 0}, "slot": 0, "epoch": 0},
                    "end": None,
                    "parameters": {
                        "epochLength": int(self.genesis.get("epoch_length", 432000)),
                        "slotLength": {
                            "milliseconds": int(self.genesis.get("slot_length", 1)) * 1000
                        },
                        "safeZone": 0,
                    },
                }
            ]
        raise _RpcError(-32601, f"the devnet bridge does not serve {method!r}")

    def submit(self, params: dict[str, Any]) -> dict[str, Any]:
        """Forwarded to the devnet's `/tx/submit`; its refusal is a ledger refusal (3005,
        Ogmios' code for a transaction the ledger finds invalid)."""
        cbor = str((params.get("transaction") or {}).get("cbor", ""))
        try:
            body = bytes.fromhex(cbor)
        except ValueError as exc:
            raise _RpcError(-32602, f"not CBOR hex: {exc}") from exc
        status, answer = self.rest.post_cbor("/tx/submit", body)
        if status == 200:
            return {"transaction": {"id": str(answer)}}
        if status == 400:
            message = answer.get("message", answer) if isinstance(answer, dict) else answer
            raise _RpcError(3005, str(message))
        raise _RpcError(-32000, f"the devnet answered {status}: {str(answer)[:200]}")

    def _on_chain(self, point: Any) -> dict[str, Any] | None:
        if not isinstance(point, dict):
            return None
        block = self.rest.block(str(point.get("id", "")))
        if block is None or int(block["slot"]) != int(point.get("slot", -1)):
            return None
        return block

    def find_intersection(self, cursor: _Cursor, points: list[Any]) -> dict[str, Any]:
        tip = self.rest.tip()
        for point in points:
            if point == "origin":
                cursor.at, cursor.backward, cursor.sent = None, "origin", []
                return {"intersection": "origin", "tip": _tip(tip)}
            block = self._on_chain(point)
            if block is not None:
                cursor.at, cursor.backward, cursor.sent = block, _point(block), [block]
                return {"intersection": _point(block), "tip": _tip(tip)}
        raise _RpcError(1000, "No intersection found.", {"tip": _tip(tip)})

    def next_block(self, cursor: _Cursor) -> dict[str, Any]:
        if cursor.backward is not None:
            point, cursor.backward = cursor.backward, None
            return {"direction": "backward", "point": point, "tip": _tip(self.rest.tip())}
        sent = cursor.sent if cursor.sent is not None else []
        if cursor.at is not None and self._on_chain(_point(cursor.at)) is None:
            # The devnet rolled back under this session: back to the newest block sent
            # that survived (origin when none did).
            while sent and self._on_chain(_point(sent[-1])) is None:
                sent.pop()
            cursor.at = sent[-1] if sent else None
            point = _point(cursor.at) if cursor.at is not None else "origin"
            return {"direction": "backward", "point": point, "tip": _tip(self.rest.tip())}
        height = 0 if cursor.at is None else int(cursor.at["height"]) + 1
        deadline = time.monotonic() + TIP_WAIT_S
        while (block := self.rest.block(height)) is None:
            if time.monotonic() > deadline:
                raise _RpcError(-32000, "no new block (the devnet bridge stops waiting)")
            time.sleep(0.05)
        cursor.at = block
        sent.append(block)
        del sent[:-2160]
        return {
            "direction": "forward",
            "block": self.block_json(block),
            "tip": _tip(self.rest.tip()),
        }

    def block_json(self, block: dict[str, Any]) -> dict[str, Any]:
        transactions = []
        for tx_hash in self.rest.block_txs(str(block["hash"])):
            header = self.rest.get(f"/txs/{tx_hash}") or {}
            cbor = (self.rest.get(f"/txs/{tx_hash}/cbor") or {}).get("cbor")
            transactions.append(
                {
                    "id": tx_hash,
                    "spends": "inputs" if header.get("valid_contract", True) else "collaterals",
                    "cbor": cbor,
                }
            )
        return {
            "type": "praos",
            "era": "conway",
            "id": str(block["hash"]),
            "ancestor": block.get("previous_block") or "genesis",
            "height": int(block["height"]),
            "slot": int(block["slot"]),
            "transactions": transactions,
        }


class _RpcError(Exception):
    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data

    def json(self) -> dict[str, Any]:
        found: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            found["data"] = self.data
        return found


def _kupo_value(amount: list[dict[str, Any]]) -> dict[str, Any]:
    coins, assets = 0, {}
    for entry in amount:
        unit, quantity = str(entry["unit"]), int(entry["quantity"])
        if unit == "lovelace":
            coins = quantity
        else:
            name = unit[POLICY_HEX:]
            assets[unit[:POLICY_HEX] + (f".{name}" if name else "")] = quantity
    return {"coins": coins, "assets": assets}


def kupo_app(rest: DevnetRest) -> FastAPI:
    """Kupo's HTTP API over the devnet."""
    app = FastAPI(title="kupo (devnet bridge)")
    inline: dict[str, str] = {}

    def created(tx_hash: str) -> dict[str, Any] | None:
        header = rest.get(f"/txs/{tx_hash}")
        if header is None:
            return None
        return {
            "slot_no": int(header["slot"]),
            "header_hash": str(header["block"]),
            "index": int(header["index"]),
            "valid": header.get("valid_contract", True) is not False,
        }

    def spending_index(by_tx: str, tx_hash: str, index: int) -> int | None:
        """Where `tx_hash#index` sits among `by_tx`'s inputs (the ledger sorts them)."""
        inputs = (rest.get(f"/txs/{by_tx}/utxos") or {}).get("inputs", [])
        spent = sorted(
            (str(i["tx_hash"]), int(i["output_index"]))
            for i in inputs
            if not i.get("collateral") and not i.get("reference")
        )
        return spent.index((tx_hash, index)) if (tx_hash, index) in spent else None

    def matches(tx_hash: str, index: int | None) -> list[dict[str, Any]]:
        at = created(tx_hash)
        utxos = rest.get(f"/txs/{tx_hash}/utxos") if at is not None else None
        if at is None or utxos is None:
            return []
        found = []
        for out in utxos.get("outputs", []):
            if bool(out.get("collateral")) == at["valid"]:
                continue  # a valid tx's collateral return, or a failed tx's outputs
            if index is not None and int(out["output_index"]) != index:
                continue
            spent = None
            if out.get("consumed_by_tx"):
                by_tx = str(out["consumed_by_tx"])
                by = created(by_tx)
                if by is not None:
                    # Kupo v2.10 also names the spending transaction and its input index.
                    spent = {
                        "slot_no": by["slot_no"],
                        "header_hash": by["header_hash"],
                        "transaction_id": by_tx,
                        "input_index": spending_index(by_tx, tx_hash, int(out["output_index"])),
                    }
            datum_hash = out.get("data_hash")
            if out.get("inline_datum") and datum_hash:
                inline[datum_hash] = out["inline_datum"]
            found.append(
                {
                    "transaction_index": at["index"],
                    "transaction_id": tx_hash,
                    "output_index": int(out["output_index"]),
                    "address": out["address"],
                    "value": _kupo_value(out["amount"]),
                    "datum_hash": datum_hash,
                    "datum_type": (
                        "inline" if out.get("inline_datum") else "hash" if datum_hash else None
                    ),
                    "script_hash": out.get("reference_script_hash"),
                    "created_at": {"slot_no": at["slot_no"], "header_hash": at["header_hash"]},
                    "spent_at": spent,
                }
            )
        return found

    @app.get("/health")
    def health() -> JSONResponse:
        return JSONResponse({"connection_status": "connected"})

    def at_address(address: str) -> list[dict[str, Any]]:
        """Every output ever sent to `address`, spent or not (Kupo's address pattern)."""
        hashes: list[str] = []
        page = 1
        while True:
            found = rest.get(f"/addresses/{address}/transactions?count=100&page={page}") or []
            hashes.extend(str(t["tx_hash"]) for t in found)
            if len(found) < 100:
                break
            page += 1
        return [
            m for h in dict.fromkeys(hashes) for m in matches(h, None) if m["address"] == address
        ]

    @app.get("/matches/{pattern}")
    def match(pattern: str, request: Request) -> JSONResponse:
        flags = request.query_params
        index_text, at, tx_hash = pattern.partition("@")
        if at and len(tx_hash) == 64:
            index = None if index_text == "*" else int(index_text)
            found = matches(tx_hash.lower(), index)
        elif pattern.startswith(("addr", "addr_test")) and not at:
            found = at_address(pattern)
        else:
            return JSONResponse(
                {"hint": "the devnet bridge serves output-reference and address patterns"}, 400
            )
        if "unspent" in flags:
            found = [m for m in found if m["spent_at"] is None]
        elif "spent" in flags:
            found = [m for m in found if m["spent_at"] is not None]
        return JSONResponse(found)

    @app.get("/scripts/{script_hash}")
    def script(script_hash: str) -> JSONResponse:
        kind = rest.get(f"/scripts/{script_hash}")
        cbor = rest.get(f"/scripts/{script_hash}/cbor")
        if not kind or not cbor or not cbor.get("cbor"):
            return JSONResponse(None)
        version = {"plutusV1": "plutus:v1", "plutusV2": "plutus:v2", "plutusV3": "plutus:v3"}
        language = version.get(str(kind.get("type")), "native")
        return JSONResponse({"language": language, "script": cbor["cbor"]})

    @app.get("/datums/{datum_hash}")
    def datum(datum_hash: str) -> JSONResponse:
        if datum_hash in inline:
            return JSONResponse({"datum": inline[datum_hash]})
        found = rest.get(f"/scripts/datum/{datum_hash}/cbor")
        return JSONResponse({"datum": found["cbor"]} if found else None)

    @app.get("/checkpoints/{slot}")
    def checkpoint(slot: int) -> JSONResponse:
        # The highest block at or below `slot` (Kupo's nearest ancestor): a binary search
        # over heights, slots growing with them.
        low, high = 0, int(rest.tip()["height"])
        best = None
        while low <= high:
            middle = (low + high) // 2
            block = rest.block(middle)
            if block is None:
                high = middle - 1
            elif int(block["slot"]) <= slot:
                best, low = block, middle + 1
            else:
                high = middle - 1
        if best is None:
            return JSONResponse(None)
        return JSONResponse({"slot_no": int(best["slot"]), "header_hash": str(best["hash"])})

    return app


@dataclass(frozen=True)
class NodeBridge:
    ogmios_url: str
    kupo_url: str


@contextlib.contextmanager
def node_bridge(
    devnet_url: str, *, host: str = "127.0.0.1", ogmios_port: int = 0, kupo_port: int = 0
) -> Iterator[NodeBridge]:
    """Serve Ogmios (websocket) and Kupo (HTTP) over the devnet at `devnet_url` (its REST
    root, `.../api/v0`) until the block ends; ports 0 are free ones."""
    from websockets.sync.server import serve

    rest = DevnetRest(devnet_url)
    ogmios = OgmiosBridge(rest)
    server = serve(ogmios.handle, host, ogmios_port, max_size=None, compression=None)
    port = server.socket.getsockname()[1]
    thread = threading.Thread(target=server.serve_forever, name="ogmios-bridge", daemon=True)
    thread.start()
    try:
        with serve_app(kupo_app(rest), host=host, port=kupo_port) as kupo_url:
            yield NodeBridge(f"ws://{host}:{port}", kupo_url)
    finally:
        server.shutdown()
        thread.join(timeout=10)
        rest.close()
