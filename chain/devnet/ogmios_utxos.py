"""Turn Blockfrost's `additionalUtxoSet` (Ogmios v5 `[TxIn, TxOut]` JSON) into ledger CBOR.

`POST /utils/txs/evaluate/utxos` passes extra UTxOs to the ledger as (input CBOR, output
CBOR) pairs; this module is the one place that reads the Ogmios JSON shapes. A pair of CBOR
hex strings is accepted too, for clients that already hold the bytes.
"""

from __future__ import annotations

from typing import Any

from pycardano import (
    Address,
    Asset,
    AssetName,
    DatumHash,
    MultiAsset,
    NativeScript,
    PlutusV1Script,
    PlutusV2Script,
    PlutusV3Script,
    ScriptHash,
    TransactionId,
    TransactionInput,
    TransactionOutput,
    Value,
)
from pycardano.serialization import RawCBOR

_PLUTUS = {"plutus:v1": PlutusV1Script, "plutus:v2": PlutusV2Script, "plutus:v3": PlutusV3Script}


class OgmiosUtxoError(ValueError):
    """An `additionalUtxoSet` entry is not a well-formed `[TxIn, TxOut]`."""


def _hex(value: Any, what: str, length: int | None = None) -> bytes:
    if not isinstance(value, str):
        raise OgmiosUtxoError(f"{what} must be a hex string")
    try:
        raw = bytes.fromhex(value)
    except ValueError:
        raise OgmiosUtxoError(f"{what} is not hex") from None
    if length is not None and len(raw) != length:
        raise OgmiosUtxoError(f"{what} must be {length} bytes")
    return raw


def _nat(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise OgmiosUtxoError(f"{what} must be a non-negative integer")
    return value


def _tx_in(raw: Any) -> bytes:
    if not isinstance(raw, dict):
        raise OgmiosUtxoError("TxIn must be an object {txId, index}")
    tx_id = _hex(raw.get("txId"), "TxIn.txId", 32)
    index = _nat(raw.get("index"), "TxIn.index")
    return bytes(TransactionInput(TransactionId(tx_id), index).to_cbor())


def _value(raw: Any) -> Value:
    if not isinstance(raw, dict):
        raise OgmiosUtxoError("TxOut.value must be an object {coins, assets}")
    coins = _nat(raw.get("coins"), "TxOut.value.coins")
    assets = raw.get("assets") or {}
    if not isinstance(assets, dict):
        raise OgmiosUtxoError("TxOut.value.assets must be an object")
    multi = MultiAsset()
    for unit, qty in assets.items():
        policy_hex, _, name_hex = str(unit).partition(".")
        policy = ScriptHash(_hex(policy_hex, "asset policy id", 28))
        name = AssetName(_hex(name_hex, "asset name") if name_hex else b"")
        if len(name.payload) > 32:
            raise OgmiosUtxoError("asset name is longer than 32 bytes")
        multi.setdefault(policy, Asset())[name] = _nat(qty, f"quantity of {unit}")
    return Value(coins, multi)


def _script(raw: Any) -> Any:
    if not isinstance(raw, dict) or len(raw) != 1:
        raise OgmiosUtxoError("TxOut.script must be {'plutus:vN': hex} or {'native': ...}")
    ((kind, body),) = raw.items()
    if kind in _PLUTUS:
        return _PLUTUS[kind](_hex(body, f"TxOut.script.{kind}"))
    if kind == "native":
        try:
            return NativeScript.from_dict(body)
        except Exception as exc:  # from_dict raises KeyError/TypeError/... on bad JSON
            raise OgmiosUtxoError(f"TxOut.script.native is not a native script ({exc})") from None
    raise OgmiosUtxoError(f"unknown script language {kind!r}")


def _tx_out(raw: Any) -> bytes:
    if not isinstance(raw, dict):
        raise OgmiosUtxoError("TxOut must be an object {address, value, ...}")
    address_text = raw.get("address")
    if not isinstance(address_text, str):
        raise OgmiosUtxoError("TxOut.address must be a bech32 address")
    try:
        address = Address.from_primitive(address_text)
    except Exception:
        raise OgmiosUtxoError("TxOut.address is not a valid address") from None
    datum_hash_hex = raw.get("datumHash", raw.get("datum_hash"))
    datum = raw.get("datum")
    if datum is not None and not isinstance(datum, str):
        raise OgmiosUtxoError("TxOut.datum must be the datum's CBOR as hex")
    output = TransactionOutput(
        address,
        _value(raw.get("value")),
        datum_hash=DatumHash(_hex(datum_hash_hex, "TxOut.datumHash", 32))
        if datum_hash_hex is not None and datum is None
        else None,
        datum=RawCBOR(_hex(datum, "TxOut.datum")) if datum is not None else None,
        script=_script(raw["script"]) if raw.get("script") is not None else None,
    )
    return bytes(output.to_cbor())


def additional_utxo_cbor(item: Any) -> tuple[bytes, bytes]:
    """One `[TxIn, TxOut]` entry as (input CBOR, output CBOR)."""
    if not isinstance(item, list) or len(item) != 2:
        raise OgmiosUtxoError("each entry must be a [TxIn, TxOut] pair")
    tx_in, tx_out = item
    if isinstance(tx_in, str) and isinstance(tx_out, str):
        return _hex(tx_in, "TxIn CBOR"), _hex(tx_out, "TxOut CBOR")
    return _tx_in(tx_in), _tx_out(tx_out)
