"""What the phase-1 rules read of a transaction, with the Conway CDDL's strict checks.

`plutus_tx` decodes a transaction once, faithfully, keeping the bytes the ledger hashes and
measures. This module reshapes that view for the rules (inputs as sortable byte keys, flat
multi-assets, outputs with their bytes) and rejects what a node's decoder rejects but the
faithful view lets through: unknown or repeated fields, empty non-empty sets, zero
quantities, out-of-range integers, wrong hash lengths.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import cbor2

from chain.devnet import plutus_tx
from chain.devnet.cbor_items import CborMap, CborTag, TxDecodeError
from chain.devnet.errors import MalformedTransaction
from chain.devnet.plutus_tx import MultiAsset, Redeemer, TxIn, blake2b_224, blake2b_256

__all__ = [
    "Assets",
    "DecodedTx",
    "InputKey",
    "LANG_NAMES",
    "LANG_NATIVE",
    "Output",
    "REDEEMER_TAGS",
    "Redeemer",
    "blake2b_224",
    "blake2b_256",
    "decode_output",
    "decode_tx",
    "input_key",
    "key_str",
    "script_hash",
]

# A transaction input as one bytes key: 32-byte tx id + 2-byte big-endian index. Sorting the
# keys bytewise gives the ledger's input order (tx id, then index).
InputKey = bytes
# A flat multi-asset: (28-byte policy id + asset name) -> quantity.
Assets = dict[bytes, int]

REDEEMER_TAGS = ("spend", "mint", "cert", "reward", "vote", "propose")
LANG_NATIVE = 0  # script-ref / hashing prefix of each script language
LANG_NAMES = {0: "timelock", 1: "plutusV1", 2: "plutusV2", 3: "plutusV3"}

_BODY_KEYS = {0, 1, 2, 3, 4, 5, 7, 8, 9, 11, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22}
_NONEMPTY_BODY_KEYS = {4: "certificates", 5: "withdrawals", 9: "mint",
                       14: "required signers", 19: "voting procedures",
                       20: "proposal procedures"}  # fmt: skip
_WITNESS_KEYS = {0, 1, 2, 3, 4, 5, 6, 7}
_OUTPUT_KEYS = {0, 1, 2, 3}


def input_key(tx_id: bytes, index: int) -> InputKey:
    return tx_id + index.to_bytes(2, "big")


def key_str(key: InputKey) -> str:
    """`txhash#index`, how reasons name an input."""
    return f"{key[:32].hex()}#{int.from_bytes(key[32:], 'big')}"


def tx_in(key: InputKey) -> TxIn:
    return TxIn(key[:32], int.from_bytes(key[32:], "big"))


def script_hash(lang: int, script: bytes) -> bytes:
    """Hash of a script: blake2b-224 over the language prefix and the script's bytes."""
    return blake2b_224(bytes([lang]) + script)


@dataclass(frozen=True, slots=True)
class Output:
    raw: bytes
    address: bytes
    coin: int
    assets: Assets
    value_size: int  # bytes of the encoded value (max value size rule)
    datum_hash: bytes | None
    inline_datum: bytes | None  # original CBOR of an inline datum
    script_ref: tuple[int, bytes] | None  # (language, script bytes as hashed)
    view: plutus_tx.Output = field(compare=False, repr=False)  # what scripts see

    @property
    def script_ref_hash(self) -> bytes | None:
        return None if self.script_ref is None else script_hash(*self.script_ref)


@dataclass(frozen=True)
class DecodedTx:
    raw: bytes
    body_raw: bytes
    tx_id: bytes
    inputs: tuple[InputKey, ...]  # as encoded; the ledger's order is sorted(inputs)
    outputs: tuple[Output, ...]
    fee: int
    ttl: int | None  # invalid_hereafter
    validity_start: int | None  # invalid_before
    certs: tuple[list[Any], ...]
    withdrawals: dict[bytes, int]  # reward account bytes -> lovelace
    mint: Assets
    aux_data_hash: bytes | None
    script_data_hash: bytes | None
    collateral: tuple[InputKey, ...]
    required_signers: tuple[bytes, ...]
    network_id: int | None
    collateral_return: Output | None
    total_collateral: int | None
    reference_inputs: tuple[InputKey, ...]
    has_voting: bool
    has_proposals: bool
    current_treasury: int | None
    donation: int
    vkey_witnesses: tuple[tuple[bytes, bytes], ...]  # (vkey, signature)
    has_bootstrap_witnesses: bool
    native_scripts: tuple[bytes, ...]  # original CBOR of each
    plutus_scripts: tuple[tuple[int, bytes], ...]  # (language 1..3, script bytes)
    datums: tuple[bytes, ...]  # original CBOR of each witness datum
    datums_raw: bytes | None  # the witness-set field as submitted (script-data hash)
    redeemers: tuple[Redeemer, ...]
    redeemers_raw: bytes | None
    is_valid: bool
    aux_data_raw: bytes | None
    size: int
    view: plutus_tx.Tx = field(compare=False, repr=False)  # what scripts see

    @property
    def tx_hash(self) -> str:
        return self.tx_id.hex()

    def policies(self) -> list[bytes]:
        return sorted({asset[:28] for asset in self.mint})


def _malformed(what: str) -> MalformedTransaction:
    return MalformedTransaction(what)


def _uint(value: Any, what: str, bits: int = 64) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0 or value >= 1 << bits:
        raise _malformed(f"{what} must be an unsigned integer, got {value!r}")
    return value


def _bytes(value: Any, what: str, length: int | None = None) -> bytes:
    if not isinstance(value, bytes) or (length is not None and len(value) != length):
        size = f" of {length} bytes" if length is not None else ""
        raise _malformed(f"{what} must be a byte string{size}, got {value!r:.80}")
    return value


def _loads(data: bytes, what: str) -> None:
    # The rules read metadata and native scripts with cbor2, whose semantic-tag checks are
    # stricter than the faithful reader's; phase 1 has always held every embedded item
    # (datums, redeemer data, scripts, metadata) to them.
    try:
        cbor2.loads(data)
    except Exception as exc:  # cbor2 raises several types for bad input
        raise _malformed(f"{what}: invalid CBOR ({exc})") from None


def _input_keys(txins: tuple[TxIn, ...], what: str, nonempty: bool) -> tuple[InputKey, ...]:
    keys = tuple(
        input_key(i.tx_id, _uint(i.index, f"{what}[{n}] index", 16)) for n, i in enumerate(txins)
    )
    if len(set(keys)) != len(keys):
        raise _malformed(f"{what} contains a duplicate input")
    if nonempty and not keys:
        raise _malformed(f"{what} is present but empty")
    return keys


def _flat_assets(value: MultiAsset, what: str, allow_negative: bool) -> Assets:
    flat: Assets = {}
    for policy, names in value:
        policy_b = _bytes(policy, f"{what} policy id", 28)
        if not names:
            raise _malformed(f"{what} policy {policy_b.hex()} must map asset names to amounts")
        for name, qty in names:
            name_b = _bytes(name, f"{what} asset name")
            if len(name_b) > 32:
                raise _malformed(f"{what} asset name {name_b.hex()} is longer than 32 bytes")
            if not isinstance(qty, int) or isinstance(qty, bool):
                raise _malformed(f"{what} quantity of {policy_b.hex()}.{name_b.hex()} not an int")
            if qty == 0:
                raise _malformed(f"{what} has a zero quantity of {policy_b.hex()}.{name_b.hex()}")
            if not allow_negative and qty < 0:
                raise _malformed(f"{what} has a negative quantity of {policy_b.hex()}")
            if not -(1 << 63) <= qty < (1 << 64):
                raise _malformed(f"{what} quantity of {policy_b.hex()} is out of range")
            flat[policy_b + name_b] = qty
    return flat


def _output(out: plutus_tx.Output, what: str) -> Output:
    if len(set(out.fields)) != len(out.fields) or not set(out.fields) <= _OUTPUT_KEYS:
        raise _malformed(f"{what} has an unexpected or repeated field")
    if not out.address_bytes:
        raise _malformed(f"{what} has an empty address")
    coin = _uint(out.value.coin, f"{what} value coin")
    assets = _flat_assets(out.value.assets, f"{what} value", False)
    if out.inline_datum_cbor is not None:
        _loads(out.inline_datum_cbor, f"{what} inline datum")
    if out.datum_hash is not None:
        _bytes(out.datum_hash, f"{what} datum hash", 32)
    elif 2 in out.fields and out.inline_datum_cbor is None:
        raise _malformed(f"{what} datum option must be [0, hash] or [1, data]")
    script_ref = None
    if out.script_ref is not None:
        script_ref = (
            _uint(out.script_ref.language, f"{what} script language"),
            out.script_ref.body,
        )
    elif 3 in out.fields:
        raise _malformed(f"{what} script reference must be CBOR-in-CBOR (tag 24)")
    return Output(
        raw=out.raw,
        address=out.address_bytes,
        coin=coin,
        assets=assets,
        value_size=out.value_size,
        datum_hash=out.datum_hash,
        inline_datum=out.inline_datum_cbor,
        script_ref=script_ref,
        view=out,
    )


def decode_output(raw: bytes, what: str = "output") -> Output:
    """Decode one transaction output (legacy array or post-Alonzo map) from its bytes."""
    try:
        out = plutus_tx.decode_output(raw)
    except TxDecodeError as exc:
        raise _malformed(f"{what}: {exc}") from None
    return _output(out, what)


def decode_tx(raw: bytes) -> DecodedTx:
    """Decode a signed Conway transaction, raising `MalformedTransaction` on bad bytes."""
    if not isinstance(raw, bytes | bytearray) or not raw:
        raise _malformed("transaction must be non-empty bytes")
    try:
        tx = plutus_tx.decode_tx(bytes(raw), conway_only=True)
    except TxDecodeError as exc:
        raise _malformed(str(exc)) from None
    return _phase1(tx)


def _is_empty(value: Any) -> bool:
    if isinstance(value, CborTag):
        value = value.value
    if isinstance(value, CborMap):
        return not value.pairs
    return hasattr(value, "__len__") and len(value) == 0


def _phase1(tx: plutus_tx.Tx) -> DecodedTx:
    body = tx.body
    fields = body.raw
    in_order = fields.keys()
    keys = set(in_order)
    for key in in_order:
        if key not in _BODY_KEYS:
            raise _malformed(f"transaction body has an unknown field {key!r}")
    inputs = _input_keys(body.inputs, "inputs", nonempty=False)
    outputs = tuple(_output(out, f"output {i}") for i, out in enumerate(body.outputs))
    fee = _uint(body.fee, "fee")
    ttl = _uint(fields.get(3), "ttl") if 3 in keys else None
    start = _uint(fields.get(8), "validity start") if 8 in keys else None
    for i, cert in enumerate(body.certificates):
        if not isinstance(cert, list) or not cert or not isinstance(cert[0], int):
            raise _malformed(f"certificate {i} must be [type, ...]")
    withdrawals: dict[bytes, int] = {}
    for account, amount in body.withdrawals:
        withdrawals[_bytes(account, "reward account", 29)] = _uint(amount, "withdrawal")
    mint = _flat_assets(body.mint, "mint", True)
    aux_hash = _bytes(fields.get(7), "auxiliary data hash", 32) if 7 in keys else None
    sd_hash = _bytes(fields.get(11), "script data hash", 32) if 11 in keys else None
    collateral = _input_keys(body.collateral, "collateral", 13 in keys)
    signers = tuple(_bytes(s, "required signer", 28) for s in body.required_signers)
    network_id = _uint(fields.get(15), "network id") if 15 in keys else None
    if network_id is not None and network_id > 1:
        raise _malformed(f"network id must be 0 or 1, got {network_id}")
    coll_return = None
    if body.collateral_return is not None:
        coll_return = _output(body.collateral_return, "collateral return")
    total_coll = _uint(fields.get(17), "total collateral") if 17 in keys else None
    refs = _input_keys(body.reference_inputs, "reference inputs", 18 in keys)
    treasury = _uint(fields.get(21), "current treasury value") if 21 in keys else None
    donation = 0
    if 22 in keys:
        donation = _uint(fields.get(22), "treasury donation")
        if donation == 0:
            raise _malformed("treasury donation must be positive when present")
    for key, name in _NONEMPTY_BODY_KEYS.items():
        if key in keys and _is_empty(fields.get(key)):
            raise _malformed(f"{name} is present but empty")

    wits = tx.witnesses
    wit_keys = wits.raw.keys()
    for key in wit_keys:
        if key not in _WITNESS_KEYS or wit_keys.count(key) > 1:
            raise _malformed(f"witness set has an unknown or repeated field {key!r}")
    vkeys = tuple(
        (_bytes(vkey, f"vkey witness {i} key", 32), _bytes(sig, "signature", 64))
        for i, (vkey, sig) in enumerate(wits.vkeys)
    )
    natives = tuple(s.body for s in wits.scripts if s.language == 0)
    for i, native in enumerate(natives):
        _loads(native, f"native script {i}")
    for i, datum in enumerate(wits.datum_cbors):
        _loads(datum, f"datum {i}")
    for r in wits.redeemers:
        where = f"redeemer ({r.tag!r}, {r.index!r})"
        _loads(r.data_cbor, f"{where} data")
        _uint(r.tag, f"{where} tag")
        _uint(r.index, f"{where} index", 32)
        _uint(r.mem, f"{where} mem")
        _uint(r.steps, f"{where} steps")
    pointers = [(r.tag, r.index) for r in wits.redeemers]
    if len(set(pointers)) != len(pointers):
        raise _malformed("redeemers contain a repeated (tag, index)")
    if tx.aux_cbor is not None:
        _loads(tx.aux_cbor, "auxiliary data")

    return DecodedTx(
        raw=tx.raw,
        body_raw=tx.body_cbor,
        tx_id=tx.tx_id,
        inputs=inputs,
        outputs=outputs,
        fee=fee,
        ttl=ttl,
        validity_start=start,
        certs=body.certificates,
        withdrawals=withdrawals,
        mint=mint,
        aux_data_hash=aux_hash,
        script_data_hash=sd_hash,
        collateral=collateral,
        required_signers=signers,
        network_id=network_id,
        collateral_return=coll_return,
        total_collateral=total_coll,
        reference_inputs=refs,
        has_voting=19 in keys,
        has_proposals=20 in keys,
        current_treasury=treasury,
        donation=donation,
        vkey_witnesses=vkeys,
        has_bootstrap_witnesses=2 in wit_keys,
        native_scripts=natives,
        plutus_scripts=tuple((s.language, s.body) for s in wits.scripts if s.language != 0),
        datums=wits.datum_cbors,
        datums_raw=wits.datums_cbor,
        redeemers=wits.redeemers,
        redeemers_raw=wits.redeemers_cbor,
        is_valid=tx.is_valid,
        aux_data_raw=tx.aux_cbor,
        size=len(tx.raw),
        view=tx,
    )
