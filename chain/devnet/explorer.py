"""The devnet's block explorer: server-rendered HTML pages under `/explorer`, beside the
Blockfrost API (`/api/v0`), read straight from the ledger.

Pages: the index (latest blocks and transactions, a search box), a transaction (inputs with
the outputs they spend, outputs with values, datums and reference scripts, fee, validity
interval, metadata with the CIP-20 memo up front, redeemers with purposes and execution
units, its block and confirmations), an address (UTxOs and transactions) and a block.
Everything shown is escaped; no scripts, no external assets.

    app.include_router(explorer_router(ledger))
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from html import escape
from typing import Any

import cbor2
from fastapi import APIRouter
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from chain.devnet import blockfrost_shapes as shapes
from chain.devnet.interface import DevnetLedger
from chain.devnet.links import EXPLORER_PREFIX, explorer_tx_url  # noqa: F401  (re-exported)
from chain.devnet.records import BlockRecord, OutputRecord, TxRecord

PREFIX = EXPLORER_PREFIX
MEMO_LABEL = 674  # CIP-20 messages
LATEST = 20  # blocks on the index, transactions per address page
_HEX = frozenset("0123456789abcdef")

_STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5rem auto;max-width:72rem;padding:0 1rem;
color:#1b1f24}
a{color:#0b5cad;text-decoration:none}a:hover{text-decoration:underline}
code,.mono{font-family:ui-monospace,monospace;font-size:.9em;word-break:break-all}
table{border-collapse:collapse;width:100%;margin:.5rem 0 1.5rem}
th,td{border-bottom:1px solid #d8dee4;padding:.35rem .5rem;text-align:left;vertical-align:top}
th{background:#f6f8fa}.memo{background:#fff8c5;border:1px solid #d4a72c;padding:.75rem;
border-radius:6px;margin:1rem 0}.bad{color:#cf222e}.muted{color:#57606a}
pre{background:#f6f8fa;padding:.5rem;overflow-x:auto;white-space:pre-wrap;word-break:break-all}
"""


# --- rendering helpers --------------------------------------------------------------------------


def _e(value: object) -> str:
    return escape(str(value), quote=True)


def _page(title: str, body: str, status: int = 200) -> HTMLResponse:
    html = (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        f"<title>{_e(title)} - proofnet devnet</title><style>{_STYLE}</style></head><body>"
        f'<nav><a href="{PREFIX}/">proofnet devnet explorer</a> '
        f'<form action="{PREFIX}/search" method=get style="display:inline">'
        '<input name=q size=70 placeholder="transaction, block hash or height, address">'
        "<button>search</button></form></nav>"
        f"<h1>{_e(title)}</h1>{body}</body></html>"
    )
    return HTMLResponse(html, status_code=status)


def _not_found(what: str) -> HTMLResponse:
    return _page("Not found", f"<p>{_e(what)} is not on this devnet.</p>", status=404)


def _bad_request(what: str) -> HTMLResponse:
    return _page("Bad request", f"<p class=bad>{_e(what)}</p>", status=400)


def _tx_link(tx_hash: str, text: str | None = None) -> str:
    return f'<a class=mono href="{PREFIX}/tx/{_e(tx_hash)}">{_e(text or tx_hash)}</a>'


def _address_link(address: str) -> str:
    return f'<a class=mono href="{PREFIX}/address/{_e(address)}">{_e(address)}</a>'


def _block_link(height: int, text: str | None = None) -> str:
    return f'<a href="{PREFIX}/block/{height}">{_e(text or height)}</a>'


def _table(head: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """`rows` hold HTML already escaped; `head` is plain text."""
    cells = "".join(f"<th>{_e(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return (
        f"<table><tr>{cells}</tr>{body or '<tr><td colspan=9 class=muted>none</td></tr>'}</table>"
    )


def _ada(lovelace: int) -> str:
    return f"{lovelace / 1_000_000:,.6f} ADA"


def _value(decoded: shapes.DecodedOutput) -> str:
    parts = [_e(_ada(decoded.coin))]
    for unit, quantity in decoded.assets:
        policy, name = unit[:56], unit[56:]
        try:
            label = bytes.fromhex(name).decode("ascii")
            label = label if label.isprintable() else name
        except (ValueError, UnicodeDecodeError):
            label = name
        parts.append(f'{quantity:,} <span class=mono title="{_e(policy)}">{_e(label)}</span>')
    return "<br>".join(parts)


def _datum(decoded: shapes.DecodedOutput) -> str:
    out = []
    if decoded.inline_datum:
        try:
            data = shapes.plutus_data_json(cbor2.loads(bytes.fromhex(decoded.inline_datum)))
            text = json.dumps(data, separators=(",", ":"))
        except Exception:  # foreign data is shown raw, never fails the page
            text = decoded.inline_datum
        out.append(f"inline: <code>{_e(text[:600])}</code>")
    elif decoded.data_hash:
        out.append(f"hash: <code>{_e(decoded.data_hash)}</code>")
    if decoded.reference_script_hash:
        out.append(f"reference script: <code>{_e(decoded.reference_script_hash)}</code>")
    return "<br>".join(out)


def _decoded(rec: OutputRecord) -> shapes.DecodedOutput | None:
    try:
        return shapes.decode_output(rec.output_cbor)
    except Exception:  # a record the shapes cannot read is listed without its value
        return None


def _output_row(rec: OutputRecord, *, source: bool) -> list[str]:
    decoded = _decoded(rec)
    ref = _tx_link(rec.tx_hash, f"{rec.tx_hash[:16]}...#{rec.index}") if source else f"#{rec.index}"
    flags = []
    if rec.collateral:
        flags.append("collateral")
    if rec.reference:
        flags.append("reference input")
    if not source and rec.spent_by:
        flags.append("spent by " + _tx_link(rec.spent_by, rec.spent_by[:16] + "..."))
    return [
        ref,
        _address_link(rec.address),
        _value(decoded) if decoded else "<span class=bad>undecodable</span>",
        _datum(decoded) if decoded else "",
        " ".join(f if f.startswith("spent") else _e(f) for f in flags),
    ]


def _memo(metadata: dict[int, Any]) -> str:
    value = metadata.get(MEMO_LABEL)
    if not isinstance(value, dict):
        return ""
    msg = value.get("msg")
    lines = msg if isinstance(msg, list) else [msg] if msg is not None else []
    memo = "<br>".join(_e(line) for line in lines)
    extra = "".join(
        f"<br><b>{_e(k)}</b>: <code>{_e(shapes.metadatum_json(v))}</code>"
        for k, v in value.items()
        if k != "msg"
    )
    return f"<div class=memo><b>memo (CIP-20, label 674)</b><br>{memo}{extra}</div>"


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

    @router.get("")
    @router.get("/")
    def index() -> HTMLResponse:
        top = tip()
        blocks = [
            b
            for h in range(top.height, max(-1, top.height - LATEST), -1)
            if (b := ledger.block(h)) is not None
        ]
        block_rows = [
            [
                _block_link(b.height),
                f"<span class=mono>{_e(b.hash[:24])}...</span>",
                _e(b.slot),
                _e(len(b.tx_hashes)),
            ]
            for b in blocks
        ]
        tx_rows = [
            [_tx_link(h), _block_link(b.height)] for b in blocks for h in reversed(b.tx_hashes)
        ][:LATEST]
        body = (
            f"<p>tip: block {_block_link(top.height)} (slot {_e(top.slot)}), "
            f"{_e(len(ledger.mempool()))} transaction(s) in the mempool</p>"
            "<h2>Latest blocks</h2>"
            + _table(["height", "hash", "slot", "transactions"], block_rows)
            + "<h2>Latest transactions</h2>"
            + _table(["transaction", "block"], tx_rows)
        )
        return _page("proofnet devnet", body)

    @router.get("/search")
    def search(q: str = "") -> Response:
        text = q.strip()
        if not text:
            return _bad_request("Type a transaction hash, a block hash or height, or an address.")
        if text.isdigit() and len(text) < 19:
            return RedirectResponse(f"{PREFIX}/block/{int(text)}", status_code=303)
        lowered = text.lower()
        if _is_hash(lowered):
            if ledger.transaction(lowered) is not None:
                return RedirectResponse(f"{PREFIX}/tx/{lowered}", status_code=303)
            if ledger.block(lowered) is not None:
                return RedirectResponse(f"{PREFIX}/block/{lowered}", status_code=303)
            return _not_found(f"{text}: no transaction or block with this hash")
        try:
            shapes.parse_address(text)
        except ValueError:
            return _bad_request(f"{text[:120]!r} is no transaction, block or address")
        return RedirectResponse(f"{PREFIX}/address/{text}", status_code=303)

    @router.get("/tx/{tx_hash}")
    def transaction(tx_hash: str) -> HTMLResponse:
        if not _is_hash(tx_hash):
            return _bad_request("A transaction hash is 64 lower-case hex digits.")
        record = ledger.transaction(tx_hash)
        if record is None:
            if tx_hash in ledger.mempool():
                return _page(
                    "Transaction pending",
                    f"<p>{_e(tx_hash)} waits in the mempool for the next block.</p>",
                    status=404,
                )
            return _not_found(f"transaction {tx_hash}")
        return _page(f"Transaction {tx_hash}", _tx_body(ledger, record, tip().height))

    @router.get("/address/{address}")
    def address(address: str) -> HTMLResponse:
        try:
            info = shapes.parse_address(address)
        except ValueError:
            return _bad_request(f"{address[:120]!r} is not a Cardano address")
        if not ledger.address_known(address):
            return _not_found(f"address {address}")
        utxos = ledger.utxos_at(address)
        txs = ledger.address_txs(address)
        kind = "script" if info.is_script else "key"
        stake = (
            f", stake address <code>{_e(info.stake_address)}</code>" if info.stake_address else ""
        )
        total = sum(d.coin for u in utxos if (d := _decoded(u)) is not None)
        body = (
            f"<p>{_e(kind)} address{stake}; {_e(len(utxos))} UTxO(s) holding {_e(_ada(total))}, "
            f"{_e(len(txs))} transaction(s)</p><h2>UTxOs</h2>"
            + _table(
                ["output", "address", "value", "datum / script", ""],
                [_output_row(u, source=True) for u in utxos],
            )
            + f"<h2>Transactions (latest {LATEST})</h2>"
            + _table(
                ["transaction", "block", "fee"],
                [
                    [_tx_link(t.hash), _block_link(t.block_height), _e(_ada(t.fee))]
                    for t in list(reversed(txs))[:LATEST]
                ],
            )
        )
        return _page(f"Address {address}", body)

    @router.get("/block/{ref}")
    def block(ref: str) -> HTMLResponse:
        key: str | int
        if ref.isdigit() and len(ref) < 19:
            key = int(ref)
        elif _is_hash(ref):
            key = ref
        else:
            return _bad_request("A block is named by its height or its 64-hex-digit hash.")
        found = ledger.block(key)
        if found is None:
            return _not_found(f"block {ref}")
        top = tip().height
        nav = []
        if found.height > 0:
            nav.append(_block_link(found.height - 1, "previous"))
        if found.height < top:
            nav.append(_block_link(found.height + 1, "next"))
        body = (
            f"<p>{' | '.join(nav)}</p>"
            + _table(
                ["", ""],
                [
                    ["hash", f"<code>{_e(found.hash)}</code>"],
                    ["height", _e(found.height)],
                    ["slot", f"{_e(found.slot)} (epoch {_e(found.epoch)})"],
                    ["time", _e(found.time)],
                    ["confirmations", _e(top - found.height + 1)],
                    ["size", f"{_e(found.size)} bytes"],
                    ["fees", _e(_ada(found.fees))],
                ],
            )
            + "<h2>Transactions</h2>"
            + _table(["transaction"], [[_tx_link(h)] for h in found.tx_hashes])
        )
        return _page(f"Block {found.height}", body)

    return router


def _tx_body(ledger: DevnetLedger, record: TxRecord, tip_height: int) -> str:
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
    status = (
        "scripts validated"
        if record.valid_contract
        else "<span class=bad>phase-2 failed: collateral consumed</span>"
    )
    inputs = ledger.tx_inputs(record.hash)
    facts = [
        ["block", f"{_block_link(record.block_height)} (index {_e(record.index)})"],
        ["confirmations", _e(tip_height - record.block_height + 1)],
        ["slot", _e(record.slot)],
        ["fee", _e(_ada(record.fee))],
        ["size", f"{_e(record.size)} bytes"],
        ["validity interval", _e(validity)],
        ["status", status],
    ]
    if record.deposit:
        facts.append(["deposit", _e(_ada(record.deposit))])
    parts = [_memo(metadata), _table(["", ""], facts)]
    spent = [i for i in inputs if not i.collateral and not i.reference]
    parts.append("<h2>Inputs</h2>")
    parts.append(
        _table(
            ["spends", "address", "value", "datum / script", ""],
            [_output_row(i, source=True) for i in spent],
        )
    )
    others = [i for i in inputs if i.collateral or i.reference]
    if others:
        parts.append("<h2>Collateral and reference inputs</h2>")
        parts.append(
            _table(
                ["output", "address", "value", "datum / script", ""],
                [_output_row(i, source=True) for i in others],
            )
        )
    parts.append("<h2>Outputs</h2>")
    parts.append(
        _table(
            ["index", "address", "value", "datum / script", ""],
            [_output_row(o, source=False) for o in ledger.tx_outputs(record.hash)],
        )
    )
    if record.redeemers:
        parts.append("<h2>Redeemers</h2>")
        parts.append(
            _table(
                ["purpose", "index", "script", "memory", "steps", "fee", "data"],
                [
                    [
                        _e(r.tag),
                        _e(r.index),
                        f"<code>{_e(r.script_hash)}</code>",
                        _e(f"{r.mem:,}"),
                        _e(f"{r.steps:,}"),
                        _e(_ada(r.fee)),
                        f"<code>{_e(_redeemer_data(r.redeemer_data_cbor)[:600])}</code>",
                    ]
                    for r in record.redeemers
                ],
            )
        )
    if metadata:
        parts.append("<h2>Metadata</h2>")
        parts.append(
            _table(
                ["label", "value"],
                [
                    [_e(label), f"<pre>{_e(json.dumps(shapes.metadatum_json(v), indent=1))}</pre>"]
                    for label, v in sorted(metadata.items())
                ],
            )
        )
    return "".join(parts)
