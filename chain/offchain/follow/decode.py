"""Blockfrost's answers about one transaction -> `ChainTx` (pure).

The body and witnesses come from the transaction's CBOR (`/txs/{hash}/cbor`), whose body
must hash to the transaction id, so outputs, redeemers and withdrawals are exactly what the
ledger validated. Only the spent outputs (what the inputs pointed at: address, value,
datum) and the block come from the backend's index (`/txs/{hash}/utxos`, `/txs/{hash}`),
and the spent set must equal the body's inputs.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import cbor2
from pycardano import Address, Transaction, TransactionOutput

from chain.offchain.builders.onchain import datum_cbor
from chain.offchain.follow.model import (
    CERT,
    MINT,
    REWARD,
    SPEND,
    BlockPoint,
    ChainDataError,
    ChainTx,
    Output,
    Redeemer,
)

_PURPOSES = {0: SPEND, 1: MINT, 2: CERT, 3: REWARD, 4: "vote", 5: "propose"}


def block_point(block: Mapping[str, Any]) -> BlockPoint:
    """A Blockfrost block (`/blocks/...`) as a point."""
    try:
        return BlockPoint(
            int(block["height"]), str(block["hash"]), int(block["slot"]), int(block["time"])
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ChainDataError(f"not a block: {exc}") from exc


def tx_point(header: Mapping[str, Any]) -> tuple[BlockPoint, int]:
    """The block of a Blockfrost transaction (`/txs/{hash}`) and its index in it."""
    try:
        point = BlockPoint(
            int(header["block_height"]),
            str(header["block"]),
            int(header["slot"]),
            int(header["block_time"]),
        )
        return point, int(header["index"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ChainDataError(f"not a transaction header: {exc}") from exc


def split_tx(raw: bytes) -> tuple[bytes, Any, bool]:
    """(body bytes exactly as encoded, witness set, is_valid) of a transaction's CBOR."""
    stream = io.BytesIO(raw)
    head = stream.read(1)
    if head not in (b"\x84", b"\x83", b"\x9f"):
        raise ChainDataError("transaction CBOR is not an array of body, witnesses, ...")
    decoder = cbor2.CBORDecoder(stream)
    start = stream.tell()
    try:
        decoder.decode()
        end = stream.tell()
        witnesses = decoder.decode()
        valid = decoder.decode() if head != b"\x83" else True
    except cbor2.CBORDecodeError as exc:
        raise ChainDataError(f"transaction CBOR does not decode: {exc}") from exc
    return raw[start:end], witnesses, valid is not False


def _unit_amounts(amount: Sequence[Mapping[str, Any]]) -> tuple[int, dict[str, int]]:
    lovelace, assets = 0, {}
    for entry in amount:
        unit, quantity = str(entry["unit"]), int(entry["quantity"])
        if unit == "lovelace":
            lovelace = quantity
        else:
            assets[unit] = quantity
    return lovelace, assets


def spent_output(entry: Mapping[str, Any]) -> Output:
    """One of `/txs/{hash}/utxos`'s inputs."""
    try:
        lovelace, assets = _unit_amounts(entry["amount"])
        inline = entry.get("inline_datum")
        return Output(
            tx_hash=str(entry["tx_hash"]),
            index=int(entry["output_index"]),
            address=Address.from_primitive(str(entry["address"])),
            lovelace=lovelace,
            assets=assets,
            datum=bytes.fromhex(inline) if inline else None,
            datum_hash=entry.get("data_hash") or None,
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ChainDataError(f"not a spent output: {exc}") from exc
    except Exception as exc:  # pycardano's address parser raises assorted types
        raise ChainDataError(f"spent output with an unreadable address: {exc}") from exc


def body_output(tx_hash: str, index: int, out: TransactionOutput) -> Output:
    value = out.amount
    coin = value if isinstance(value, int) else value.coin
    assets: dict[str, int] = {}
    if not isinstance(value, int):
        for policy, names in value.multi_asset.items():
            for name, quantity in names.items():
                assets[policy.payload.hex() + name.payload.hex()] = int(quantity)
    inline = None if out.datum is None else datum_cbor(out.datum)
    datum_hash = None if out.datum_hash is None else out.datum_hash.payload.hex()
    return Output(tx_hash, index, out.address, int(coin), assets, inline, datum_hash)


def _redeemers(witnesses: Any) -> tuple[Redeemer, ...]:
    raw = witnesses.get(5) if isinstance(witnesses, dict) else None
    if raw is None:
        return ()
    found = []
    # Alonzo/Babbage: a list of [tag, index, data, ex_units]; Conway: a map
    # {[tag, index]: [data, ex_units]}. Both occur on chain.
    items = (
        [(k[0], k[1], v[0]) for k, v in raw.items()]
        if isinstance(raw, dict)
        else [(r[0], r[1], r[2]) for r in raw]
    )
    for tag, index, data in items:
        purpose = _PURPOSES.get(int(tag))
        if purpose is None:
            raise ChainDataError(f"unknown redeemer tag {tag}")
        found.append(Redeemer(purpose, int(index), cbor2.dumps(data)))
    return tuple(found)


def redeemers_of(raw: bytes) -> tuple[Redeemer, ...]:
    """The redeemers of a transaction's CBOR (its witness set's)."""
    return _redeemers(split_tx(raw)[1])


def _reward_sort_key(account: bytes) -> tuple[int, int, bytes]:
    # The ledger keeps withdrawals in a map ordered by reward account: network, then the
    # credential, whose derived order puts script hashes before key hashes.
    header = account[0]
    return (header & 0x0F, 0 if header & 0x10 else 1, account[1:])


def decode_tx(header: Mapping[str, Any], utxos: Mapping[str, Any], cbor_hex: str) -> ChainTx:
    """A confirmed transaction from `/txs/{hash}`, `/txs/{hash}/utxos` and its CBOR."""
    tx_hash = str(header.get("hash", ""))
    block, index = tx_point(header)
    try:
        raw = bytes.fromhex(cbor_hex)
    except ValueError as exc:
        raise ChainDataError(f"transaction {tx_hash}: CBOR is not hex") from exc
    return decode_ledger_tx(
        tx_hash,
        block,
        index,
        raw,
        lambda: [
            spent_output(e)
            for e in utxos.get("inputs", [])
            if not e.get("collateral") and not e.get("reference")
        ],
        indexed_valid=header.get("valid_contract", True) is not False,
    )


def decode_ledger_tx(
    tx_hash: str,
    block: BlockPoint,
    index: int,
    raw: bytes,
    spent_outputs: Callable[[], Sequence[Output]],
    *,
    indexed_valid: bool = True,
) -> ChainTx:
    """A confirmed transaction from its CBOR and the outputs its inputs spent (asked for
    only when the transaction is valid), whatever backend resolved them."""
    body_bytes, witnesses, cbor_valid = split_tx(raw)
    if hashlib.blake2b(body_bytes, digest_size=32).hexdigest() != tx_hash:
        raise ChainDataError(f"the body the backend returned does not hash to {tx_hash}")
    if not (cbor_valid and indexed_valid):
        # Phase 2 failed: only the collateral moved; nothing the scripts guarded did.
        return ChainTx(tx_hash, block, index, False, (), (), (), ())
    try:
        body = Transaction.from_cbor(raw).transaction_body
    except Exception as exc:  # pycardano raises assorted types on CBOR it cannot read
        raise ChainDataError(f"transaction {tx_hash}: body does not decode: {exc}") from exc
    wanted = {(i.transaction_id.payload.hex(), i.index) for i in body.inputs}
    spent = list(spent_outputs())
    if {(o.tx_hash, o.index) for o in spent} != wanted or len(spent) != len(wanted):
        raise ChainDataError(f"transaction {tx_hash}: the backend's inputs differ from the body's")
    spent.sort(key=lambda o: (bytes.fromhex(o.tx_hash), o.index))
    outputs = tuple(body_output(tx_hash, i, out) for i, out in enumerate(body.outputs))
    withdrawals = sorted(
        ((bytes(k), int(v)) for k, v in (body.withdraws or {}).items()),
        key=lambda item: _reward_sort_key(item[0]),
    )
    signers = tuple(k.payload.hex() for k in body.required_signers or [])
    return ChainTx(
        tx_hash,
        block,
        index,
        True,
        tuple(spent),
        outputs,
        _redeemers(witnesses),
        tuple(withdrawals),
        signers,
    )
