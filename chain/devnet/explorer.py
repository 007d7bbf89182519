"""The devnet's block explorer: server-rendered HTML pages under `/explorer`, beside the
Blockfrost API (`/api/v0`), read straight from the ledger.

Pages: the index (latest blocks and transactions, a search box), a transaction (inputs with
the outputs they spend, outputs with values, datums and reference scripts, fee, validity
interval, metadata with the CIP-20 memo up front, redeemers with purposes and execution
units, its block and confirmations), an address (UTxOs and transactions) and a block.

Rendered from the Jinja2 templates in `templates/explorer/` with autoescaping on: everything
the chain holds is escaped. Every id is shown in full with a copy button; on a phone the
tables fold into one card per row, so nothing scrolls sideways. The one inline script
copies ids and keeps a page live: it asks `/explorer/tip` every `POLL_MS` and, when a block
has landed, refetches the page and swaps its content (confirmations, latest blocks, a
pending transaction once it is in a block). No external assets.

    app.include_router(explorer_router(ledger))
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Any

import cbor2
import jinja2
from fastapi import APIRouter
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from chain.devnet import blockfrost_shapes as shapes
from chain.devnet.interface import DevnetLedger
from chain.devnet.links import EXPLORER_PREFIX, explorer_tx_url  # noqa: F401  (re-exported)
from chain.devnet.records import BlockRecord, OutputRecord, TxRecord

PREFIX = EXPLORER_PREFIX
MEMO_LABEL = 674  # CIP-20 messages
LATEST = 20  # blocks on the index, transactions per address page
POLL_MS = 2000  # how often an open page asks for the tip
_HEX = frozenset("0123456789abcdef")


@functools.cache
def _templates() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("chain.devnet", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals.update(prefix=PREFIX, poll_ms=POLL_MS)
    return env


# --- rendering helpers --------------------------------------------------------------------------


def _render(
    template: str, title: str, tip_height: int, status: int = 200, **values: Any
) -> HTMLResponse:
    html = (
        _templates()
        .get_template(f"explorer/{template}.html")
        .render(title=title, tip_height=tip_height, **values)
    )
    return HTMLResponse(html, status_code=status)


def _message(
    title: str, message: str, status: int, tip_height: int, bad: bool = False
) -> HTMLResponse:
    return _render("message", title, tip_height, status, message=message, bad=bad)


@dataclass(frozen=True)
class AssetView:
    quantity: str
    label: str
    policy: str


@dataclass(frozen=True)
class OutputView:
    """One output as the templates show it (plain values; the templates escape them)."""

    tx_hash: str
    index: int
    address: str
    ada: str
    assets: tuple[AssetView, ...]
    datum: tuple[tuple[str, str], ...]  # (kind, text): inline / hash / reference script
    flags: tuple[str, ...]
    spent_by: str | None
    undecodable: bool


def _ada(lovelace: int) -> str:
    return f"{lovelace / 1_000_000:,.6f} ADA"


def _assets(decoded: shapes.DecodedOutput) -> tuple[AssetView, ...]:
    views = []
    for unit, quantity in decoded.assets:
        policy, name = unit[:56], unit[56:]
        try:
            label = bytes.fromhex(name).decode("ascii")
            label = label if label.isprintable() else name
        except (ValueError, UnicodeDecodeError):
            label = name
        views.append(AssetView(f"{quantity:,}", label, policy))
    return tuple(views)


def _datum(decoded: shapes.DecodedOutput) -> tuple[tuple[str, str], ...]:
    out = []
    if decoded.inline_datum:
        try:
            data = shapes.plutus_data_json(cbor2.loads(bytes.fromhex(decoded.inline_datum)))
            text = json.dumps(data, separators=(",", ":"))
        except Exception:  # foreign data is shown raw, never fails the page
            text = decoded.inline_datum
        out.append(("inline", text[:600]))
    elif decoded.data_hash:
        out.append(("hash", decoded.data_hash))
    if decoded.reference_script_hash:
        out.append(("reference script", decoded.reference_script_hash))
    return tuple(out)


def _decoded(rec: OutputRecord) -> shapes.DecodedOutput | None:
    try:
        return shapes.decode_output(rec.output_cbor)
    except Exception:  # a record the shapes cannot read is listed without its value
        return None


def _output(rec: OutputRecord, *, source: bool) -> OutputView:
    decoded = _decoded(rec)
    flags = []
    if rec.collateral:
        flags.append("collateral")
    if rec.reference:
        flags.append("reference input")
    return OutputView(
        tx_hash=rec.tx_hash,
        index=rec.index,
        address=rec.address,
        ada=_ada(decoded.coin) if decoded else "",
        assets=_assets(decoded) if decoded else (),
        datum=_datum(decoded) if decoded else (),
        flags=tuple(flags),
        spent_by=rec.spent_by if not source and rec.spent_by else None,
        undecodable=decoded is None,
    )


@dataclass(frozen=True)
class MemoView:
    lines: tuple[str, ...]
    extra: tuple[tuple[str, str], ...]


def _memo(metadata: dict[int, Any]) -> MemoView | None:
    value = metadata.get(MEMO_LABEL)
    if not isinstance(value, dict):
        return None
    msg = value.get("msg")
    lines = msg if isinstance(msg, list) else [msg] if msg is not None else []
    extra = tuple((str(k), str(shapes.metadatum_json(v))) for k, v in value.items() if k != "msg")
    return MemoView(tuple(str(line) for line in lines), extra)


def _redeemer_data(cbor: bytes) -> str:
    try:
        return json.dumps(shapes.plutus_data_json(cbor2.loads(cbor)), separators=(",", ":"))
    except Exception:  # shown raw rather than failing the page
        return cbor.hex()


def _is_hash(value: str) -> bool:
    return len(value) == 64 and set(value) <= _HEX


# --- the router ---------------------------------------------------------------------------------


def explorer_router(ledger: DevnetLedger) -> APIRouter:
    """HTML pages over `ledger` (include in the devnet app; paths start with /explorer)."""
    router = APIRouter(prefix=PREFIX, include_in_schema=False)

    def tip() -> BlockRecord:
        return ledger.tip()

    def not_found(what: str) -> HTMLResponse:
        return _message("Not found", f"{what} is not on this devnet.", 404, tip().height)

    def bad_request(what: str) -> HTMLResponse:
        return _message("Bad request", what, 400, tip().height, bad=True)

    @router.get("/tip")
    def tip_json() -> dict[str, Any]:
        """What open pages poll: they refetch themselves when the height moves."""
        top = tip()
        return {"height": top.height, "hash": top.hash, "slot": top.slot}

    @router.get("")
    @router.get("/")
    def index() -> HTMLResponse:
        top = tip()
        blocks = [
            b
            for h in range(top.height, max(-1, top.height - LATEST), -1)
            if (b := ledger.block(h)) is not None
        ]
        txs = [(h, b.height) for b in blocks for h in reversed(b.tx_hashes)][:LATEST]
        return _render(
            "index",
            "proofnet devnet",
            top.height,
            tip=top,
            blocks=blocks,
            txs=txs,
            mempool=len(ledger.mempool()),
        )

    @router.get("/search")
    def search(q: str = "") -> Response:
        text = q.strip()
        if not text:
            return bad_request("Type a transaction hash, a block hash or height, or an address.")
        if text.isdigit() and len(text) < 19:
            return RedirectResponse(f"{PREFIX}/block/{int(text)}", status_code=303)
        lowered = text.lower()
        if _is_hash(lowered):
            if ledger.transaction(lowered) is not None:
                return RedirectResponse(f"{PREFIX}/tx/{lowered}", status_code=303)
            if ledger.block(lowered) is not None:
                return RedirectResponse(f"{PREFIX}/block/{lowered}", status_code=303)
            return not_found(f"{text}: no transaction or block with this hash")
        try:
            shapes.parse_address(text)
        except ValueError:
            return bad_request(f"{text[:120]!r} is no transaction, block or address")
        return RedirectResponse(f"{PREFIX}/address/{text}", status_code=303)

    @router.get("/tx/{tx_hash}")
    def transaction(tx_hash: str) -> HTMLResponse:
        if not _is_hash(tx_hash):
            return bad_request("A transaction hash is 64 lower-case hex digits.")
        record = ledger.transaction(tx_hash)
        if record is None:
            if tx_hash in ledger.mempool():
                return _message(
                    "Transaction pending",
                    f"{tx_hash} waits in the mempool for the next block.",
                    404,
                    tip().height,
                )
            return not_found(f"transaction {tx_hash}")
        return _tx_page(ledger, record, tip().height)

    @router.get("/address/{address}")
    def address(address: str) -> HTMLResponse:
        try:
            info = shapes.parse_address(address)
        except ValueError:
            return bad_request(f"{address[:120]!r} is not a Cardano address")
        if not ledger.address_known(address):
            return not_found(f"address {address}")
        utxos = ledger.utxos_at(address)
        txs = ledger.address_txs(address)
        total = sum(d.coin for u in utxos if (d := _decoded(u)) is not None)
        return _render(
            "address",
            f"Address {address}",
            tip().height,
            address=address,
            kind="script" if info.is_script else "key",
            stake_address=info.stake_address,
            utxos=[_output(u, source=True) for u in utxos],
            total=_ada(total),
            tx_count=len(txs),
            latest=LATEST,
            txs=[
                {"hash": t.hash, "block_height": t.block_height, "fee": _ada(t.fee)}
                for t in list(reversed(txs))[:LATEST]
            ],
        )

    @router.get("/block/{ref}")
    def block(ref: str) -> HTMLResponse:
        key: str | int
        if ref.isdigit() and len(ref) < 19:
            key = int(ref)
        elif _is_hash(ref):
            key = ref
        else:
            return bad_request("A block is named by its height or its 64-hex-digit hash.")
        found = ledger.block(key)
        if found is None:
            return not_found(f"block {ref}")
        return _render(
            "block", f"Block {found.height}", tip().height, block=found, fees=_ada(found.fees)
        )

    return router


def _tx_page(ledger: DevnetLedger, record: TxRecord, tip_height: int) -> HTMLResponse:
    try:
        summary: shapes.TxBodySummary | None = shapes.summarize_tx(record.cbor)
    except Exception:  # an undecodable body still shows what the ledger recorded
        summary = None
    validity = "any slot"
    if summary is not None and (summary.invalid_before or summary.invalid_hereafter):
        validity = (
            f"slots {summary.invalid_before if summary.invalid_before is not None else '-'}"
            f" .. {summary.invalid_hereafter if summary.invalid_hereafter is not None else '-'}"
        )
    metadata = ledger.tx_metadata(record.hash)
    inputs = ledger.tx_inputs(record.hash)
    return _render(
        "tx",
        f"Transaction {record.hash}",
        tip_height,
        record=record,
        memo=_memo(metadata),
        fee=_ada(record.fee),
        deposit=_ada(record.deposit) if record.deposit else "",
        validity=validity,
        inputs=[_output(i, source=True) for i in inputs if not i.collateral and not i.reference],
        others=[_output(i, source=True) for i in inputs if i.collateral or i.reference],
        outputs=[_output(o, source=False) for o in ledger.tx_outputs(record.hash)],
        redeemers=[
            {
                "tag": r.tag,
                "index": r.index,
                "script_hash": r.script_hash,
                "mem": f"{r.mem:,}",
                "steps": f"{r.steps:,}",
                "fee": _ada(r.fee),
                "data": _redeemer_data(r.redeemer_data_cbor)[:600],
            }
            for r in record.redeemers
        ],
        metadata=[
            (label, json.dumps(shapes.metadatum_json(v), indent=1))
            for label, v in sorted(metadata.items())
        ],
    )
