"""The devnet's REST front end: Blockfrost's paths and shapes over a `DevnetLedger`.

Clients written for hosted Blockfrost (pycardano's `BlockFrostChainContext`,
blockfrost-python, explorers) work unchanged against `create_app(ledger, ...)` mounted at
`/api/v0`. Devnet-only administration (faucet, faults) lives under `/api/v0/admin/...`.

Bad input is always a 4xx with Blockfrost's error body and never reaches a ledger method that
mutates state; a 500 means a bug in the devnet.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
import logging
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, TypeVar

import cbor2
from fastapi import APIRouter, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from chain.devnet import blockfrost_shapes as shapes
from chain.devnet.addresses import payment_credential_from_bech32
from chain.devnet.errors import LedgerError, MalformedTransaction, UnknownEntity
from chain.devnet.explorer import explorer_router
from chain.devnet.interface import DevnetLedger
from chain.devnet.ogmios_utxos import OgmiosUtxoError, additional_utxo_cbor
from chain.devnet.records import BlockRecord
from proofnet.json_limits import JsonLimits

log = logging.getLogger(__name__)

API_PREFIX = "/api/v0"
BLOCKFROST_SPEC_VERSION = "0.1.91"
MAX_PAGE_COUNT = 100
MAX_PAGE = 21_474_836
# Blockfrost's hosted submit endpoint answers 425 when the mempool is full; the devnet
# applies the same back-pressure so clients exercise their retry path.
DEFAULT_MEMPOOL_LIMIT = 4_096

_REASONS = {
    400: "Bad Request",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    413: "Payload Too Large",
    415: "Unsupported Media Type",
    425: "Mempool Full",
    500: "Internal Server Error",
}
NOT_FOUND_MESSAGE = "The requested component has not been found."

T = TypeVar("T")


class ApiError(Exception):
    """Rendered as Blockfrost's `{"status_code", "error", "message"}` body."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def error_body(status: int, message: str) -> dict[str, Any]:
    return {"status_code": status, "error": _REASONS.get(status, "Error"), "message": message}


def _error_response(status: int, message: str) -> JSONResponse:
    return JSONResponse(error_body(status, message), status_code=status)


def _not_found() -> ApiError:
    return ApiError(404, NOT_FOUND_MESSAGE)


# --- request parsing ------------------------------------------------------------------------

_HEX = frozenset("0123456789abcdef")


def _hex_id(value: str, what: str, length: int = 64) -> str:
    if len(value) != length or not set(value) <= _HEX:
        raise ApiError(400, f"Invalid or malformed {what} format.")
    return value


def _int_query(request: Request, name: str, default: int, lo: int, hi: int) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    if not raw.isdigit():
        raise ApiError(400, f"querystring/{name} must be integer")
    value = int(raw)
    if value < lo:
        raise ApiError(400, f"querystring/{name} must be >= {lo}")
    if value > hi:
        raise ApiError(400, f"querystring/{name} must be <= {hi}")
    return value


class Page:
    """Blockfrost pagination: `count` (1..100), `page` (>= 1), `order` (asc | desc)."""

    __slots__ = ("count", "page", "desc")

    def __init__(self, request: Request) -> None:
        self.count = _int_query(request, "count", MAX_PAGE_COUNT, 1, MAX_PAGE_COUNT)
        self.page = _int_query(request, "page", 1, 1, MAX_PAGE)
        order = request.query_params.get("order", "asc")
        if order not in ("asc", "desc"):
            raise ApiError(400, "querystring/order must be equal to one of the allowed values")
        self.desc = order == "desc"

    def slice(self, items: Sequence[T]) -> list[T]:
        """The requested page of `items` (given oldest first) without copying the rest."""
        start = (self.page - 1) * self.count
        n = len(items)
        if start >= n:
            return []
        if not self.desc:
            return list(items[start : start + self.count])
        hi = n - start
        lo = max(0, hi - self.count)
        return list(reversed(items[lo:hi]))


def _block_ref(value: str) -> str | int:
    if value.isdigit() and len(value) < 19:
        return int(value)
    return _hex_id(value, "block hash or number")


def _asset_unit(value: str) -> str:
    # policy id (28 bytes) + asset name (0..32 bytes), lower-case hex
    if len(value) < 56 or len(value) > 120 or len(value) % 2 or not set(value) <= _HEX:
        raise ApiError(400, "Invalid or malformed asset format.")
    return value


def _label(value: str) -> int:
    if not value.isdigit() or int(value) >= 2**64:
        raise ApiError(400, "Invalid or malformed metadata label format.")
    return int(value)


def _body_bytes(raw: bytes) -> bytes:
    """A transaction given as raw CBOR, or as base16/base64 text (Blockfrost accepts both)."""
    text = raw.strip()
    if not text:
        raise ApiError(400, "Request body is empty; expected a CBOR-encoded transaction.")
    if text[:1] in b"0123456789abcdefABCDEF":
        try:
            return bytes.fromhex(text.decode("ascii"))
        except (UnicodeDecodeError, ValueError):
            pass
    if raw[:1] in (b"\x84", b"\x83", b"\x9f"):
        return raw
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ApiError(400, "Request body is neither CBOR nor base16/base64 text.") from None


def _check_tx_shape(tx_cbor: bytes) -> None:
    """Reject what is not even shaped like a transaction before the ledger sees it."""
    try:
        decoded = cbor2.loads(tx_cbor)
    except Exception as exc:  # cbor2 raises several types on garbage
        raise ApiError(
            400, f"MalformedTransaction: transaction is not valid CBOR ({exc})"
        ) from None
    if not isinstance(decoded, list) or len(decoded) not in (3, 4):
        raise ApiError(400, "MalformedTransaction: a transaction is a CBOR array of 4 items")
    if not isinstance(decoded[0], dict) or not isinstance(decoded[1], dict):
        raise ApiError(400, "MalformedTransaction: transaction body and witness set must be maps")


def _ledger_error_message(exc: LedgerError) -> str:
    return f"{exc.rule}: {exc.reason}"


# --- middleware -----------------------------------------------------------------------------


class BodyLimitMiddleware:
    """413 for request bodies above `max_bytes`, whether or not Content-Length is sent.

    The body is buffered (it is small by construction) and replayed to the app, so an
    oversized chunked upload is refused before any handler runs.
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    await self._reject(send, 400, "Invalid Content-Length header.")
                    return
                if declared > self.max_bytes:
                    await self._reject(send, 413, self._too_large())
                    return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._reject(send, 413, self._too_large())
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    def _too_large(self) -> str:
        return f"Request body exceeds the devnet's limit of {self.max_bytes} bytes."

    @staticmethod
    async def _reject(send: Send, status: int, message: str) -> None:
        response = _error_response(status, message)
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(response.body)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": response.body})


# --- cached derived state ---------------------------------------------------------------------


class EpochStatsCache:
    """Per-epoch totals, extended block by block as the tip moves (no O(chain) rescans)."""

    def __init__(self, ledger: DevnetLedger) -> None:
        self._ledger = ledger
        self._lock = threading.Lock()
        self._stats: shapes.EpochStats | None = None
        self._tip: tuple[int, str] | None = None

    def current(self) -> shapes.EpochStats:
        with self._lock:
            tip = self._ledger.tip()
            if self._tip == (tip.height, tip.hash) and self._stats is not None:
                return self._stats
            stats = self._extend(tip) if self._can_extend(tip) else None
            if stats is None:
                stats = self._rebuild(tip)
            self._stats, self._tip = stats, (tip.height, tip.hash)
            return stats

    def _can_extend(self, tip: BlockRecord) -> bool:
        if self._stats is None or self._tip is None or self._stats.epoch != tip.epoch:
            return False
        height, block_hash = self._tip
        if height > tip.height:
            return False
        seen = self._ledger.block(height)
        return seen is not None and seen.hash == block_hash

    def _extend(self, tip: BlockRecord) -> shapes.EpochStats | None:
        assert self._stats is not None and self._tip is not None
        stats = self._stats
        for height in range(self._tip[0] + 1, tip.height + 1):
            block = tip if height == tip.height else self._ledger.block(height)
            if block is None:
                return None
            stats = _add_block(stats, block)
        return stats

    def _rebuild(self, tip: BlockRecord) -> shapes.EpochStats:
        blocks: list[BlockRecord] = []
        block: BlockRecord | None = tip
        while block is not None and block.epoch == tip.epoch:
            blocks.append(block)
            block = self._ledger.block(block.height - 1) if block.height > 0 else None
        stats = shapes.EpochStats(tip.epoch, tip.time, tip.time, 0, 0, 0, 0)
        first = True
        for b in reversed(blocks):
            if first:
                stats = shapes.EpochStats(tip.epoch, b.time, b.time, 0, 0, 0, 0)
                first = False
            stats = _add_block(stats, b)
        return stats


def _add_block(stats: shapes.EpochStats, block: BlockRecord) -> shapes.EpochStats:
    return shapes.EpochStats(
        epoch=stats.epoch,
        first_block_time=stats.first_block_time,
        last_block_time=block.time,
        block_count=stats.block_count + 1,
        tx_count=stats.tx_count + len(block.tx_hashes),
        output=stats.output + block.output,
        fees=stats.fees + block.fees,
    )


class SubmittedTxs:
    """CBOR of recently submitted transactions, so `/mempool/{hash}` can describe them."""

    def __init__(self, limit: int = 10_000) -> None:
        self._limit = limit
        self._lock = threading.Lock()
        self._txs: OrderedDict[str, bytes] = OrderedDict()

    def add(self, tx_hash: str, tx_cbor: bytes) -> None:
        with self._lock:
            self._txs[tx_hash] = tx_cbor
            while len(self._txs) > self._limit:
                self._txs.popitem(last=False)

    def get(self, tx_hash: str) -> bytes | None:
        with self._lock:
            return self._txs.get(tx_hash)


# --- the application ---------------------------------------------------------------------------


class CollapseSlashesMiddleware:
    """Serve `/api/v0//addresses/...` as `/api/v0/addresses/...`.

    Clients join a base URL ending in `/` with paths starting with `/` (Blaze does);
    Blockfrost's proxy collapses the doubled slash, so the devnet does too.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and "//" in scope["path"]:
            path = _SLASHES.sub("/", scope["path"])
            scope = {**scope, "path": path, "raw_path": path.encode()}
        await self.app(scope, receive, send)


_SLASHES = re.compile(r"/{2,}")


def create_app(
    ledger: DevnetLedger,
    *,
    enable_faults: bool,
    admin_token: str | None,
    max_body_bytes: int = 32768,
    mempool_limit: int = DEFAULT_MEMPOOL_LIMIT,
) -> FastAPI:
    """The Blockfrost-compatible REST app over `ledger` (paths under `/api/v0`).

    `enable_faults` unlocks the fault-injection admin endpoints (rollback, pause, ...);
    `admin_token`, when set, must be sent as `Authorization: Bearer <token>` to every
    `POST /admin/...`; bodies above `max_body_bytes` get a 413; submissions while the
    mempool holds `mempool_limit` transactions get a 425.
    """
    app = FastAPI(
        title="proofnet devnet (Blockfrost-compatible)",
        version=BLOCKFROST_SPEC_VERSION,
        docs_url=f"{API_PREFIX}/docs",
        openapi_url=f"{API_PREFIX}/openapi.json",
        redoc_url=None,
    )
    app.state.ledger = ledger
    epochs = EpochStatsCache(ledger)
    submitted = SubmittedTxs()
    genesis = ledger.genesis()
    network = shapes.expected_network(genesis)

    @app.exception_handler(ApiError)
    async def _api_error(_: Request, exc: ApiError) -> JSONResponse:
        return _error_response(exc.status, exc.message)

    @app.exception_handler(UnknownEntity)
    async def _unknown(_: Request, exc: UnknownEntity) -> JSONResponse:
        return _error_response(404, NOT_FOUND_MESSAGE)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        message = NOT_FOUND_MESSAGE if exc.status_code == 404 else str(exc.detail)
        return _error_response(exc.status_code, message)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        where = "/".join(str(p) for p in first.get("loc", ()))
        return _error_response(400, f"{where}: {first.get('msg', 'invalid request')}")

    @app.exception_handler(Exception)
    async def _internal_error(_: Request, exc: Exception) -> JSONResponse:
        log.exception("devnet server bug", exc_info=exc)
        return _error_response(500, "An unexpected response was received from the backend.")

    def address(text: str) -> shapes.AddressInfo:
        try:
            info = shapes.parse_address(text)
        except ValueError:
            raise ApiError(400, "Invalid address for this network.") from None
        if info.network != network:
            raise ApiError(400, "Invalid address for this network.")
        return info

    def tip_height() -> int:
        return ledger.tip().height

    def block_json(block: BlockRecord) -> dict[str, Any]:
        nxt = ledger.block(block.height + 1)
        return shapes.block_content(
            block, tip_height=tip_height(), next_hash=nxt.hash if nxt else None
        )

    def require_admin(request: Request) -> None:
        if not admin_token:
            return
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            token.strip().encode(), admin_token.encode()
        ):
            raise ApiError(403, "Missing or invalid admin token (send 'Authorization: Bearer').")

    def require_faults(request: Request) -> None:
        require_admin(request)
        if not enable_faults:
            raise ApiError(
                403, "Fault injection is disabled; start the devnet with --enable-faults."
            )

    async def json_body(request: Request) -> dict[str, Any]:
        raw = await request.body()
        if not raw.strip():
            return {}
        try:
            parsed = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            raise ApiError(400, "Request body is not valid JSON.") from None
        if not isinstance(parsed, dict):
            raise ApiError(400, "Request body must be a JSON object.")
        return parsed

    router = APIRouter(prefix=API_PREFIX)

    # --- health and static configuration ---------------------------------------------

    @router.get("/")
    def root(request: Request) -> dict[str, Any]:
        return {
            "url": str(request.base_url).rstrip("/") + API_PREFIX,
            "version": f"{BLOCKFROST_SPEC_VERSION}-proofnet-devnet",
        }

    @router.get("/health")
    def health() -> dict[str, Any]:
        ledger.tip()  # healthy means the ledger answers
        return {"is_healthy": True}

    @router.get("/health/clock")
    def clock() -> dict[str, Any]:
        return {"server_time": int(time.time() * 1000)}

    @router.get("/genesis")
    def genesis_route() -> dict[str, Any]:
        return shapes.genesis_content(ledger.genesis())

    @router.get("/epochs/latest")
    def epoch_latest() -> dict[str, Any]:
        return shapes.epoch_content(ledger.genesis(), epochs.current())

    @router.get("/epochs/latest/parameters")
    def epoch_latest_parameters() -> dict[str, Any]:
        return shapes.protocol_params_content(ledger.protocol_params(), ledger.tip().epoch)

    @router.get("/epochs/{number}/parameters")
    def epoch_parameters(number: str) -> dict[str, Any]:
        if not number.isdigit() or len(number) > 9:
            raise ApiError(400, "Invalid or malformed epoch number.")
        epoch = int(number)
        if epoch > ledger.tip().epoch:
            raise _not_found()
        # Parameters never change on the devnet, so every past epoch had today's.
        return shapes.protocol_params_content(ledger.protocol_params(), epoch)

    # --- blocks -------------------------------------------------------------------------

    @router.get("/blocks/latest")
    def block_latest() -> dict[str, Any]:
        return block_json(ledger.tip())

    @router.get("/blocks/latest/txs")
    def block_latest_txs(request: Request) -> list[str]:
        page = Page(request)
        return page.slice(ledger.tip().tx_hashes)

    @router.get("/blocks/{hash_or_number}")
    def block(hash_or_number: str) -> dict[str, Any]:
        found = ledger.block(_block_ref(hash_or_number))
        if found is None:
            raise _not_found()
        return block_json(found)

    @router.get("/blocks/{hash_or_number}/txs")
    def block_txs(hash_or_number: str, request: Request) -> list[str]:
        page = Page(request)
        found = ledger.block(_block_ref(hash_or_number))
        if found is None:
            raise _not_found()
        return page.slice(found.tx_hashes)

    # --- addresses ------------------------------------------------------------------------

    @router.get("/addresses/{addr}")
    def address_route(addr: str) -> dict[str, Any]:
        info = address(addr)
        if not ledger.address_known(addr):
            raise _not_found()
        return shapes.address_content(info, ledger.utxos_at(addr))

    def utxos_of(addr: str, unit: str | None) -> list[Any]:
        # Blockfrost also takes a bech32 payment credential (addr_vkh1... / script1...) in
        # place of the address: every unspent output locked by that credential, whatever
        # its stake part.
        credential = payment_credential_from_bech32(addr)
        if credential is not None:
            return ledger.utxos_by_payment(credential, unit)
        address(addr)
        if not ledger.address_known(addr):
            raise _not_found()
        return ledger.utxos_at(addr, unit)

    @router.get("/addresses/{addr}/utxos")
    def address_utxos(addr: str, request: Request) -> list[dict[str, Any]]:
        page = Page(request)
        return [shapes.address_utxo(u) for u in page.slice(utxos_of(addr, None))]

    @router.get("/addresses/{addr}/utxos/{asset}")
    def address_utxos_asset(addr: str, asset: str, request: Request) -> list[dict[str, Any]]:
        page = Page(request)
        unit = asset if asset == shapes.LOVELACE else _asset_unit(asset)
        utxos = utxos_of(addr, None if unit == shapes.LOVELACE else unit)
        return [shapes.address_utxo(u) for u in page.slice(utxos)]

    @router.get("/addresses/{addr}/transactions")
    def address_transactions(addr: str, request: Request) -> list[dict[str, Any]]:
        page = Page(request)
        address(addr)
        lower = _height_bound(request.query_params.get("from"), "from")
        upper = _height_bound(request.query_params.get("to"), "to")
        if not ledger.address_known(addr):
            raise _not_found()
        txs = ledger.address_txs(addr)
        if lower is not None or upper is not None:
            txs = [t for t in txs if _within((t.block_height, t.index), lower, upper)]
        return [
            {
                "tx_hash": t.hash,
                "tx_index": t.index,
                "block_height": t.block_height,
                "block_time": t.block_time,
            }
            for t in page.slice(txs)
        ]

    @router.get("/addresses/{addr}/txs")
    def address_txs(addr: str, request: Request) -> list[str]:
        page = Page(request)
        address(addr)
        if not ledger.address_known(addr):
            raise _not_found()
        return [t.hash for t in page.slice(ledger.address_txs(addr))]

    # --- transactions ------------------------------------------------------------------------

    def tx_record(tx_hash: str) -> Any:
        found = ledger.transaction(_hex_id(tx_hash, "transaction hash"))
        if found is None:
            raise _not_found()
        return found

    @router.get("/txs/{tx_hash}")
    def tx(tx_hash: str) -> dict[str, Any]:
        record = tx_record(tx_hash)
        return shapes.tx_content(record, ledger.tx_outputs(record.hash))

    @router.get("/txs/{tx_hash}/utxos")
    def tx_utxos(tx_hash: str) -> dict[str, Any]:
        record = tx_record(tx_hash)
        return {
            "hash": record.hash,
            "inputs": [shapes.tx_utxo_input(i) for i in ledger.tx_inputs(record.hash)],
            "outputs": [shapes.tx_utxo_output(o) for o in ledger.tx_outputs(record.hash)],
        }

    @router.get("/txs/{tx_hash}/metadata")
    def tx_metadata(tx_hash: str) -> list[dict[str, Any]]:
        record = tx_record(tx_hash)
        return shapes.tx_metadata_json(ledger.tx_metadata(record.hash))

    @router.get("/txs/{tx_hash}/metadata/cbor")
    def tx_metadata_cbor(tx_hash: str) -> list[dict[str, Any]]:
        record = tx_record(tx_hash)
        return shapes.tx_metadata_cbor(ledger.tx_metadata(record.hash))

    @router.get("/txs/{tx_hash}/redeemers")
    def tx_redeemers(tx_hash: str) -> list[dict[str, Any]]:
        record = tx_record(tx_hash)
        return [shapes.redeemer_content(r) for r in record.redeemers]

    @router.get("/txs/{tx_hash}/cbor")
    def tx_cbor(tx_hash: str) -> dict[str, Any]:
        return {"cbor": tx_record(tx_hash).cbor.hex()}

    # --- metadata -------------------------------------------------------------------------

    @router.get("/metadata/txs/labels")
    def metadata_labels(request: Request) -> list[dict[str, Any]]:
        page = Page(request)
        labels = sorted(ledger.metadata_labels())
        return [
            {"label": str(label), "cip10": shapes.CIP10_LABELS.get(label), "count": str(count)}
            for label, count in page.slice(labels)
        ]

    @router.get("/metadata/txs/labels/{label}")
    def metadata_label(label: str, request: Request) -> list[dict[str, Any]]:
        page = Page(request)
        entries = ledger.metadata_label_txs(_label(label))
        return [
            {"tx_hash": h, "json_metadata": shapes.metadatum_json(v)}
            for h, v in page.slice(entries)
        ]

    @router.get("/metadata/txs/labels/{label}/cbor")
    def metadata_label_cbor(label: str, request: Request) -> list[dict[str, Any]]:
        page = Page(request)
        entries = ledger.metadata_label_txs(_label(label))
        out = []
        for h, v in page.slice(entries):
            encoded = cbor2.dumps(v).hex()
            out.append({"tx_hash": h, "cbor_metadata": "\\x" + encoded, "metadata": encoded})
        return out

    # --- assets, scripts, datums, accounts ---------------------------------------------------

    @router.get("/assets/{asset}")
    def asset(asset: str) -> dict[str, Any]:
        found = ledger.asset(_asset_unit(asset))
        if found is None:
            raise _not_found()
        return shapes.asset_content(found)

    @router.get("/assets/{asset}/addresses")
    def asset_addresses(asset: str, request: Request) -> list[dict[str, Any]]:
        page = Page(request)
        unit = _asset_unit(asset)
        if ledger.asset(unit) is None:
            raise _not_found()
        holders = ledger.asset_holders(unit)
        if request.query_params.get("order", "asc") == "desc":
            holders = list(reversed(holders))
        return [{"address": a, "quantity": str(q)} for a, q in page.slice(holders)]

    def script_record(script_hash: str) -> Any:
        found = ledger.script(_hex_id(script_hash, "script hash", 56))
        if found is None:
            raise _not_found()
        return found

    @router.get("/scripts/{script_hash}")
    def script(script_hash: str) -> dict[str, Any]:
        return shapes.script_content(script_record(script_hash))

    @router.get("/scripts/{script_hash}/json")
    def script_json(script_hash: str) -> dict[str, Any]:
        return shapes.script_json_content(script_record(script_hash))

    @router.get("/scripts/{script_hash}/cbor")
    def script_cbor(script_hash: str) -> dict[str, Any]:
        return shapes.script_cbor_content(script_record(script_hash))

    @router.get("/scripts/{script_hash}/redeemers")
    def script_redeemers(script_hash: str, request: Request) -> list[dict[str, Any]]:
        page = Page(request)
        runs = ledger.script_redeemers(_hex_id(script_hash, "script hash", 56))
        if not runs and ledger.script(script_hash.lower()) is None:
            raise _not_found()
        return [shapes.script_redeemer_content(h, r) for h, r in page.slice(runs)]

    def datum_cbor(datum_hash: str) -> bytes:
        found = ledger.datum(_hex_id(datum_hash, "datum hash"))
        if found is None:
            raise _not_found()
        return found

    @router.get("/scripts/datum/{datum_hash}")
    def datum(datum_hash: str) -> dict[str, Any]:
        value = shapes.plutus_data_json(cbor2.loads(datum_cbor(datum_hash)))
        return {"json_value": value}

    @router.get("/scripts/datum/{datum_hash}/cbor")
    def datum_cbor_route(datum_hash: str) -> dict[str, Any]:
        return {"cbor": datum_cbor(datum_hash).hex()}

    @router.get("/accounts/{stake_address}")
    def account(stake_address: str) -> dict[str, Any]:
        try:
            info = shapes.parse_address(stake_address)
        except ValueError:
            raise ApiError(400, "Invalid or malformed stake address format.") from None
        if info.network != network or not stake_address.startswith("stake"):
            raise ApiError(400, "Invalid or malformed stake address format.")
        found = ledger.account(stake_address)
        if found is None:  # the chain has never seen this credential
            raise _not_found()
        return shapes.account_content(stake_address, found)

    # --- mempool ----------------------------------------------------------------------------

    @router.get("/mempool")
    def mempool(request: Request) -> list[dict[str, Any]]:
        page = Page(request)
        return [{"tx_hash": h} for h in page.slice(ledger.mempool())]

    @router.get("/mempool/{tx_hash}")
    def mempool_tx(tx_hash: str) -> dict[str, Any]:
        _hex_id(tx_hash, "transaction hash")
        cbor = submitted.get(tx_hash)
        if cbor is None or tx_hash not in ledger.mempool():
            raise _not_found()
        return shapes.mempool_tx_content(tx_hash, cbor, ledger.protocol_params().key_deposit)

    # --- submission and evaluation --------------------------------------------------------------

    @router.post("/tx/submit")
    async def submit(request: Request) -> JSONResponse:
        content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if content_type != "application/cbor":
            raise ApiError(400, "Invalid Content-Type header; expected application/cbor.")
        tx_cbor = _body_bytes(await request.body())
        _check_tx_shape(tx_cbor)
        if len(ledger.mempool()) >= mempool_limit:
            raise ApiError(425, "Mempool is full, please try resubmitting again later.")
        try:
            tx_hash = await run_in_threadpool(ledger.submit, tx_cbor)
        except LedgerError as exc:
            raise ApiError(400, _ledger_error_message(exc)) from None
        submitted.add(tx_hash, tx_cbor)
        return JSONResponse(tx_hash)

    async def evaluate(
        tx_cbor: bytes, additional: Sequence[tuple[bytes, bytes]], version: int
    ) -> Any:
        _check_tx_shape(tx_cbor)
        try:
            results = await run_in_threadpool(ledger.evaluate, tx_cbor, additional)
        except MalformedTransaction as exc:
            # Not a transaction at all: bad input, like Ogmios' deserialisation fault.
            raise ApiError(400, _ledger_error_message(exc)) from None
        except LedgerError as exc:
            # A well-formed transaction the ledger cannot evaluate (unknown inputs, ...):
            # Ogmios answers these inside a 200, and clients read them from there.
            if version == 6:
                return shapes.evaluation_failure_envelope_v6(exc.reason, exc.rule)
            return shapes.evaluation_failure_envelope(exc.reason, exc.rule)
        if version == 6:
            return shapes.evaluation_envelope_v6(results)
        return shapes.evaluation_envelope(results)

    @router.post("/utils/txs/evaluate")
    async def evaluate_route(request: Request) -> Any:
        version = _ogmios_version(request)
        return await evaluate(_body_bytes(await request.body()), (), version)

    @router.post("/utils/txs/evaluate/utxos")
    async def evaluate_utxos(request: Request) -> Any:
        version = _ogmios_version(request)
        payload = await json_body(request)
        cbor_text = payload.get("cbor")
        if not isinstance(cbor_text, str):
            raise ApiError(400, "body/cbor must be a string (base16 or base64 transaction CBOR)")
        extra = payload.get("additionalUtxoSet", [])
        if not isinstance(extra, list):
            raise ApiError(400, "body/additionalUtxoSet must be an array of [TxIn, TxOut]")
        try:
            additional = [additional_utxo_cbor(item) for item in extra]
        except OgmiosUtxoError as exc:
            raise ApiError(400, f"body/additionalUtxoSet: {exc}") from None
        return await evaluate(_body_bytes(cbor_text.encode()), additional, version)

    # --- administration (not Blockfrost) ---------------------------------------------------------

    @router.get("/admin/status")
    def admin_status() -> dict[str, Any]:
        tip = ledger.tip()
        return {
            "tip": block_json(tip),
            "mempool_size": len(ledger.mempool()),
            "paused": ledger.paused(),
            "faults_enabled": enable_faults,
            "faucet_address": ledger.faucet_address(),
            "faucet_policy_id": ledger.faucet_policy_id(),
            "network_magic": genesis.network_magic,
        }

    @router.post("/admin/fund")
    async def admin_fund(request: Request) -> dict[str, Any]:
        require_admin(request)
        payload = await json_body(request)
        target = payload.get("address")
        if not isinstance(target, str):
            raise ApiError(400, "body/address must be a bech32 address")
        address(target)
        lovelace = payload.get("lovelace", 0)
        if not _is_int(lovelace) or lovelace < 0:
            raise ApiError(400, "body/lovelace must be a non-negative integer")
        assets = _asset_quantities(payload.get("assets") or {})
        if lovelace == 0 and not assets:
            raise ApiError(400, "nothing to fund: give lovelace and/or assets")
        try:
            tx_hash = await run_in_threadpool(ledger.fund, target, lovelace, assets or None)
        except LedgerError as exc:
            raise ApiError(400, _ledger_error_message(exc)) from None
        return {
            "tx_hash": tx_hash,
            "address": target,
            "lovelace": str(lovelace),
            "policy_id": ledger.faucet_policy_id(),
            "assets": {name: str(q) for name, q in assets.items()},
        }

    @router.post("/admin/produce-block")
    async def admin_produce_block(request: Request) -> dict[str, Any]:
        require_faults(request)
        produced = await run_in_threadpool(ledger.produce_block)
        return {"block": block_json(produced) if produced is not None else None}

    @router.post("/admin/rollback")
    async def admin_rollback(request: Request) -> dict[str, Any]:
        require_faults(request)
        payload = await json_body(request)
        drop = payload.get("drop", False)
        if not isinstance(drop, bool):
            raise ApiError(400, "body/drop must be a boolean")
        # `from_height` (every block at or above it) is read against the tip under the
        # ledger's lock; `depth` counts from whatever the tip is when the request lands.
        if ("depth" in payload) == ("from_height" in payload):
            raise ApiError(400, "body must name exactly one of depth and from_height")
        field = "depth" if "depth" in payload else "from_height"
        count = payload[field]
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise ApiError(400, f"body/{field} must be a positive integer")
        if count > tip_height():
            what = "roll back" if field == "depth" else "roll back from height"
            raise ApiError(400, f"cannot {what} {count}: the chain has {tip_height()} blocks")
        try:
            undo = ledger.rollback if field == "depth" else ledger.rollback_from
            undone = await run_in_threadpool(undo, count, drop)
        except ValueError as exc:
            raise ApiError(400, str(exc)) from None
        return {"rolled_back_txs": undone, "dropped": drop, "tip": block_json(ledger.tip())}

    @router.post("/admin/drop-mempool")
    async def admin_drop_mempool(request: Request) -> dict[str, Any]:
        require_faults(request)
        return {"dropped": await run_in_threadpool(ledger.drop_mempool)}

    @router.post("/admin/pause")
    async def admin_pause(request: Request) -> dict[str, Any]:
        require_faults(request)
        await run_in_threadpool(ledger.pause)
        return {"paused": ledger.paused()}

    @router.post("/admin/resume")
    async def admin_resume(request: Request) -> dict[str, Any]:
        require_faults(request)
        await run_in_threadpool(ledger.resume)
        return {"paused": ledger.paused()}

    app.include_router(router)
    app.include_router(explorer_router(ledger))
    # Hostile JSON (admin bodies: too deep, integers past 64 bits) gets a 400, not a 500.
    app.add_middleware(JsonLimits, max_bytes=max_body_bytes, error_body=error_body)
    app.add_middleware(BodyLimitMiddleware, max_bytes=max_body_bytes)
    # Browser dapps call Blockfrost directly, which answers any origin; so does the devnet.
    # No credentials are involved (the project id and admin token travel as headers).
    app.add_middleware(
        CORSMiddleware,
        allow_origins=["*"],
        allow_methods=["GET", "POST", "OPTIONS"],
        allow_headers=["*"],
        expose_headers=["*"],
        max_age=600,
    )
    app.add_middleware(CollapseSlashesMiddleware)
    return app


# --- helpers used by the routes -----------------------------------------------------------------


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _asset_quantities(raw: Any) -> dict[str, int]:
    if not isinstance(raw, dict):
        raise ApiError(400, "body/assets must map asset name hex to quantity")
    out: dict[str, int] = {}
    for name, qty in raw.items():
        if len(name) > 64 or len(name) % 2 or not set(name) <= _HEX:
            raise ApiError(400, f"asset name {name!r} must be lower-case hex of at most 32 bytes")
        if not _is_int(qty) or qty <= 0:
            raise ApiError(400, f"asset quantity for {name!r} must be a positive integer")
        out[name] = qty
    return out


def _height_bound(raw: str | None, name: str) -> tuple[int, int] | None:
    """Blockfrost's `from`/`to`: `block_height` or `block_height:tx_index`."""
    if raw is None:
        return None
    height, _, index = raw.partition(":")
    if not height.isdigit() or (index and not index.isdigit()):
        raise ApiError(400, f"querystring/{name} must be 'height' or 'height:index'")
    if name == "from":
        return int(height), int(index) if index else 0
    return int(height), int(index) if index else 2**31


def _within(
    position: tuple[int, int], lower: tuple[int, int] | None, upper: tuple[int, int] | None
) -> bool:
    if lower is not None and position < lower:
        return False
    return not (upper is not None and position > upper)


def _ogmios_version(request: Request) -> int:
    """Blockfrost's `version`: 5 (default, Ogmios v5 JSON-WSP) or 6 (Ogmios v6 JSON-RPC)."""
    version = request.query_params.get("version", "5")
    if version in ("5", "5.0"):
        return 5
    if version in ("6", "6.0"):
        return 6
    raise ApiError(400, "querystring/version must be 5 or 6 (the Ogmios version to answer as)")
