"""Decode Conway transactions and outputs from raw CBOR, keeping the original bytes.

Everything the rules hash or measure (body, outputs, values, datums, redeemers, native
scripts) is kept as the exact bytes that were submitted; only the pieces the rules compute
with are decoded. Decoding follows the Conway CDDL strictly enough to reject what a node's
decoder rejects (unknown body fields, empty non-empty sets, zero quantities).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import cbor2

from chain.devnet.cbor_spans import CborSpanError, array_items, head, map_entries, skip
from chain.devnet.errors import MalformedTransaction

# A transaction input as one bytes key: 32-byte tx id + 2-byte big-endian index. Sorting the
# keys bytewise gives the ledger's input order (tx id, then index).
InputKey = bytes
# A flat multi-asset: (28-byte policy id + asset name) -> quantity.
Assets = dict[bytes, int]

REDEEMER_TAGS = ("spend", "mint", "cert", "reward", "vote", "propose")
LANG_NATIVE = 0  # script-ref / hashing prefix of each script language
LANG_NAMES = {0: "timelock", 1: "plutusV1", 2: "plutusV2", 3: "plutusV3"}

_BODY_KEYS = {0, 1, 2, 3, 4, 5, 7, 8, 9, 11, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22}
_NONEMPTY_BODY_KEYS = {4: "certificates", 5: "withdrawals", 9: "mint", 13: "collateral",
                       14: "required signers", 18: "reference inputs",
                       19: "voting procedures", 20: "proposal procedures"}  # fmt: skip
_WITNESS_KEYS = {0, 1, 2, 3, 4, 5, 6, 7}


def blake2b_256(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=32).digest()


def blake2b_224(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=28).digest()


def input_key(tx_id: bytes, index: int) -> InputKey:
    return tx_id + index.to_bytes(2, "big")


def key_str(key: InputKey) -> str:
    """`txhash#index`, how reasons name an input."""
    return f"{key[:32].hex()}#{int.from_bytes(key[32:], 'big')}"


def script_hash(lang: int, script: bytes) -> bytes:
    """Hash of a script: blake2b-224 over the language prefix and the script's bytes."""
    return blake2b_224(bytes([lang]) + script)


def unit_str(asset: bytes) -> str:
    return asset.hex()


@dataclass(frozen=True, slots=True)
class Output:
    raw: bytes
    address: bytes
    coin: int
    assets: Assets
    value_size: int  # bytes of the encoded value (max value size rule)
    datum_hash: bytes | None = None
    inline_datum: bytes | None = None  # original CBOR of an inline datum
    script_ref: tuple[int, bytes] | None = None  # (language, script bytes as hashed)

    @property
    def script_ref_hash(self) -> bytes | None:
        return None if self.script_ref is None else script_hash(*self.script_ref)


@dataclass(frozen=True, slots=True)
class Redeemer:
    tag: int
    index: int
    data: bytes  # original CBOR of the redeemer data
    mem: int
    steps: int


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
    size: int = field(default=0)

    @property
    def tx_hash(self) -> str:
        return self.tx_id.hex()

    def policies(self) -> list[bytes]:
        return sorted({asset[:28] for asset in self.mint})


def _malformed(what: str) -> MalformedTransaction:
    return MalformedTransaction(what)


def _loads(data: bytes, what: str) -> Any:
    try:
        return cbor2.loads(data)
    except Exception as exc:  # cbor2 raises several types for bad input
        raise _malformed(f"{what}: invalid CBOR ({exc})") from None


def _uint(value: Any, what: str, bits: int = 64) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0 or value >= 1 << bits:
        raise _malformed(f"{what} must be an unsigned integer, got {value!r}")
    return value


def _bytes(value: Any, what: str, length: int | None = None) -> bytes:
    if not isinstance(value, bytes) or (length is not None and len(value) != length):
        size = f" of {length} bytes" if length is not None else ""
        raise _malformed(f"{what} must be a byte string{size}, got {value!r:.80}")
    return value


def _input(data: bytes, span: tuple[int, int], what: str) -> InputKey:
    value = _loads(data[span[0] : span[1]], what)
    if not isinstance(value, list) or len(value) != 2:
        raise _malformed(f"{what} must be [tx id, index]")
    tx_id = _bytes(value[0], f"{what} tx id", 32)
    index = _uint(value[1], f"{what} index", 16)
    return input_key(tx_id, index)


def _input_set(data: bytes, start: int, what: str, nonempty: bool) -> tuple[InputKey, ...]:
    try:
        spans = array_items(data, start, allow_set_tag=True)
    except CborSpanError as exc:
        raise _malformed(f"{what}: {exc}") from None
    keys = tuple(_input(data, span, f"{what}[{i}]") for i, span in enumerate(spans))
    if len(set(keys)) != len(keys):
        raise _malformed(f"{what} contains a duplicate input")
    if nonempty and not keys:
        raise _malformed(f"{what} is present but empty")
    return keys


def flatten_multiasset(value: Any, what: str, allow_negative: bool) -> Assets:
    if not isinstance(value, dict):
        raise _malformed(f"{what} must be a map of policy id to assets")
    flat: Assets = {}
    for policy, names in value.items():
        policy_b = _bytes(policy, f"{what} policy id", 28)
        if not isinstance(names, dict) or not names:
            raise _malformed(f"{what} policy {policy_b.hex()} must map asset names to amounts")
        for name, qty in names.items():
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


def _value(data: bytes, what: str) -> tuple[int, Assets]:
    value = _loads(data, what)
    if isinstance(value, int) and not isinstance(value, bool):
        return _uint(value, what), {}
    if isinstance(value, list) and len(value) == 2:
        return _uint(value[0], f"{what} coin"), flatten_multiasset(value[1], what, False)
    raise _malformed(f"{what} must be a coin or [coin, multiasset]")


def _script_ref(payload: Any, what: str) -> tuple[int, bytes]:
    if not isinstance(payload, cbor2.CBORTag) or payload.tag != 24:
        raise _malformed(f"{what} script reference must be CBOR-in-CBOR (tag 24)")
    inner = _bytes(payload.value, f"{what} script reference")
    try:
        spans = array_items(inner, 0)
    except CborSpanError as exc:
        raise _malformed(f"{what} script reference: {exc}") from None
    if len(spans) != 2:
        raise _malformed(f"{what} script reference must be [language, script]")
    lang = _uint(_loads(inner[spans[0][0] : spans[0][1]], what), f"{what} script language")
    script_bytes = inner[spans[1][0] : spans[1][1]]
    if lang == LANG_NATIVE:
        return lang, script_bytes
    if lang in (1, 2, 3):
        return lang, _bytes(_loads(script_bytes, what), f"{what} Plutus script")
    raise _malformed(f"{what} has unknown script language {lang}")


def decode_output(raw: bytes, what: str = "output") -> Output:
    """Decode one transaction output (legacy array or post-Alonzo map) from its bytes."""
    try:
        major, _, _ = head(raw, 0)
        if major == 4:
            spans = array_items(raw, 0)
            if len(spans) not in (2, 3):
                raise _malformed(f"{what} must have 2 or 3 fields")
            fields = {i: span for i, span in enumerate(spans)}
        elif major == 5:
            fields = {}
            for key_span, value_span in map_entries(raw, 0):
                key = _loads(raw[key_span[0] : key_span[1]], what)
                if key not in (0, 1, 2, 3) or key in fields:
                    raise _malformed(f"{what} has an unexpected or repeated field {key!r}")
                fields[key] = value_span
            if 0 not in fields or 1 not in fields:
                raise _malformed(f"{what} lacks its address or value")
        else:
            raise _malformed(f"{what} must be an array or a map")
    except CborSpanError as exc:
        raise _malformed(f"{what}: {exc}") from None
    address = _bytes(_loads(raw[fields[0][0] : fields[0][1]], what), f"{what} address")
    if not address:
        raise _malformed(f"{what} has an empty address")
    value_bytes = raw[fields[1][0] : fields[1][1]]
    coin, assets = _value(value_bytes, f"{what} value")
    datum_hash = inline = None
    script_ref = None
    if 2 in fields:
        datum = _loads(raw[fields[2][0] : fields[2][1]], what)
        if major == 4:
            datum_hash = _bytes(datum, f"{what} datum hash", 32)
        elif isinstance(datum, list) and len(datum) == 2 and datum[0] == 0:
            datum_hash = _bytes(datum[1], f"{what} datum hash", 32)
        elif isinstance(datum, list) and len(datum) == 2 and datum[0] == 1:
            tagged = datum[1]
            if not isinstance(tagged, cbor2.CBORTag) or tagged.tag != 24:
                raise _malformed(f"{what} inline datum must be CBOR-in-CBOR (tag 24)")
            inline = _bytes(tagged.value, f"{what} inline datum")
            _loads(inline, f"{what} inline datum")
        else:
            raise _malformed(f"{what} datum option must be [0, hash] or [1, data]")
    if 3 in fields:
        script_ref = _script_ref(_loads(raw[fields[3][0] : fields[3][1]], what), what)
    return Output(raw, address, coin, assets, len(value_bytes), datum_hash, inline, script_ref)


def _redeemers(data: bytes, start: int, end: int) -> tuple[Redeemer, ...]:
    what = "redeemers"
    major, _, _ = head(data, start)
    found: list[Redeemer] = []

    def ex_units(value: Any, where: str) -> tuple[int, int]:
        if not isinstance(value, list) or len(value) != 2:
            raise _malformed(f"{where} execution units must be [mem, steps]")
        return _uint(value[0], f"{where} mem"), _uint(value[1], f"{where} steps")

    def tag_index(tag: Any, index: Any, where: str) -> tuple[int, int]:
        tag_i = _uint(tag, f"{where} tag")
        if tag_i >= len(REDEEMER_TAGS):
            raise _malformed(f"{where} has unknown tag {tag_i}")
        return tag_i, _uint(index, f"{where} index", 32)

    if major == 4:
        for i, (s, _end) in enumerate(array_items(data, start)):
            parts = array_items(data, s)
            where = f"{what}[{i}]"
            if len(parts) != 4:
                raise _malformed(f"{where} must be [tag, index, data, ex_units]")
            tag, index = tag_index(
                _loads(data[parts[0][0] : parts[0][1]], where),
                _loads(data[parts[1][0] : parts[1][1]], where),
                where,
            )
            payload = data[parts[2][0] : parts[2][1]]
            _loads(payload, f"{where} data")
            mem, steps = ex_units(_loads(data[parts[3][0] : parts[3][1]], where), where)
            found.append(Redeemer(tag, index, payload, mem, steps))
    elif major == 5:
        for i, ((ks, ke), (vs, _ve)) in enumerate(map_entries(data, start)):
            where = f"{what}[{i}]"
            key = _loads(data[ks:ke], where)
            if not isinstance(key, list) or len(key) != 2:
                raise _malformed(f"{where} key must be [tag, index]")
            tag, index = tag_index(key[0], key[1], where)
            parts = array_items(data, vs)
            if len(parts) != 2:
                raise _malformed(f"{where} value must be [data, ex_units]")
            payload = data[parts[0][0] : parts[0][1]]
            _loads(payload, f"{where} data")
            mem, steps = ex_units(_loads(data[parts[1][0] : parts[1][1]], where), where)
            found.append(Redeemer(tag, index, payload, mem, steps))
    else:
        raise _malformed("redeemers must be a list or a map")
    pointers = [(r.tag, r.index) for r in found]
    if len(set(pointers)) != len(pointers):
        raise _malformed("redeemers contain a repeated (tag, index)")
    return tuple(found)


def decode_tx(raw: bytes) -> DecodedTx:
    """Decode a signed Conway transaction, raising `MalformedTransaction` on bad bytes."""
    if not isinstance(raw, bytes | bytearray) or not raw:
        raise _malformed("transaction must be non-empty bytes")
    raw = bytes(raw)
    try:
        return _decode_tx(raw)
    except CborSpanError as exc:
        raise _malformed(str(exc)) from None


def _decode_tx(raw: bytes) -> DecodedTx:
    if skip(raw, 0) != len(raw):
        raise _malformed("trailing bytes after the transaction")
    parts = array_items(raw, 0)
    if len(parts) != 4:
        raise _malformed(f"a Conway transaction has 4 parts, found {len(parts)}")
    body_start, body_end = parts[0]
    body_raw = raw[body_start:body_end]
    body: dict[int, tuple[int, int]] = {}
    for key_span, value_span in map_entries(raw, body_start):
        key = _loads(raw[key_span[0] : key_span[1]], "body key")
        if key not in _BODY_KEYS:
            raise _malformed(f"transaction body has an unknown field {key!r}")
        if key in body:
            raise _malformed(f"transaction body repeats field {key}")
        body[key] = value_span

    def field_value(key: int) -> Any:
        s, e = body[key]
        return _loads(raw[s:e], f"body field {key}")

    for required, name in ((0, "inputs"), (1, "outputs"), (2, "fee")):
        if required not in body:
            raise _malformed(f"transaction body lacks {name}")
    inputs = _input_set(raw, body[0][0], "inputs", nonempty=False)
    outputs = tuple(
        decode_output(raw[s:e], f"output {i}")
        for i, (s, e) in enumerate(array_items(raw, body[1][0]))
    )
    fee = _uint(field_value(2), "fee")
    ttl = _uint(field_value(3), "ttl") if 3 in body else None
    start = _uint(field_value(8), "validity start") if 8 in body else None

    certs: tuple[list[Any], ...] = ()
    if 4 in body:
        spans = array_items(raw, body[4][0], allow_set_tag=True)
        certs = tuple(_loads(raw[s:e], f"certificate {i}") for i, (s, e) in enumerate(spans))
        for i, cert in enumerate(certs):
            if not isinstance(cert, list) or not cert or not isinstance(cert[0], int):
                raise _malformed(f"certificate {i} must be [type, ...]")

    withdrawals: dict[bytes, int] = {}
    if 5 in body:
        value = field_value(5)
        if not isinstance(value, dict):
            raise _malformed("withdrawals must be a map")
        for account, amount in value.items():
            withdrawals[_bytes(account, "reward account", 29)] = _uint(amount, "withdrawal")

    mint = flatten_multiasset(field_value(9), "mint", True) if 9 in body else {}
    aux_hash = _bytes(field_value(7), "auxiliary data hash", 32) if 7 in body else None
    sd_hash = _bytes(field_value(11), "script data hash", 32) if 11 in body else None
    collateral = _input_set(raw, body[13][0], "collateral", True) if 13 in body else ()
    signers: tuple[bytes, ...] = ()
    if 14 in body:
        spans = array_items(raw, body[14][0], allow_set_tag=True)
        signers = tuple(
            _bytes(_loads(raw[s:e], "required signer"), "required signer", 28) for s, e in spans
        )
    network_id = _uint(field_value(15), "network id") if 15 in body else None
    if network_id is not None and network_id > 1:
        raise _malformed(f"network id must be 0 or 1, got {network_id}")
    coll_return = None
    if 16 in body:
        s, e = body[16]
        coll_return = decode_output(raw[s:e], "collateral return")
    total_coll = _uint(field_value(17), "total collateral") if 17 in body else None
    refs = _input_set(raw, body[18][0], "reference inputs", True) if 18 in body else ()
    treasury = _uint(field_value(21), "current treasury value") if 21 in body else None
    donation = 0
    if 22 in body:
        donation = _uint(field_value(22), "treasury donation")
        if donation == 0:
            raise _malformed("treasury donation must be positive when present")
    for key, name in _NONEMPTY_BODY_KEYS.items():
        if key in body and key not in (13, 18):
            value = field_value(key)
            if isinstance(value, cbor2.CBORTag):
                value = value.value
            if hasattr(value, "__len__") and len(value) == 0:
                raise _malformed(f"{name} is present but empty")

    # witness set
    wit_start = parts[1][0]
    wits: dict[int, tuple[int, int]] = {}
    for key_span, value_span in map_entries(raw, wit_start):
        key = _loads(raw[key_span[0] : key_span[1]], "witness key")
        if key not in _WITNESS_KEYS or key in wits:
            raise _malformed(f"witness set has an unknown or repeated field {key!r}")
        wits[key] = value_span

    def wit_items(key: int) -> list[bytes]:
        if key not in wits:
            return []
        return [raw[s:e] for s, e in array_items(raw, wits[key][0], allow_set_tag=True)]

    vkeys: list[tuple[bytes, bytes]] = []
    for i, item in enumerate(wit_items(0)):
        pair = _loads(item, f"vkey witness {i}")
        if not isinstance(pair, list) or len(pair) != 2:
            raise _malformed(f"vkey witness {i} must be [vkey, signature]")
        vkeys.append(
            (_bytes(pair[0], f"vkey witness {i} key", 32), _bytes(pair[1], "signature", 64))
        )
    natives = tuple(wit_items(1))
    for i, item in enumerate(natives):
        _loads(item, f"native script {i}")
    plutus: list[tuple[int, bytes]] = []
    for key, lang in ((3, 1), (6, 2), (7, 3)):
        for i, item in enumerate(wit_items(key)):
            plutus.append((lang, _bytes(_loads(item, f"Plutus script {i}"), "Plutus script")))
    datums = tuple(wit_items(4))
    for i, item in enumerate(datums):
        _loads(item, f"datum {i}")
    datums_raw = raw[wits[4][0] : wits[4][1]] if 4 in wits else None
    redeemers: tuple[Redeemer, ...] = ()
    redeemers_raw = None
    if 5 in wits:
        s, e = wits[5]
        redeemers_raw = raw[s:e]
        redeemers = _redeemers(raw, s, e)

    is_valid = _loads(raw[parts[2][0] : parts[2][1]], "is_valid flag")
    if not isinstance(is_valid, bool):
        raise _malformed("the third part of a transaction must be the is_valid boolean")
    aux_raw = raw[parts[3][0] : parts[3][1]]
    aux = None if aux_raw == b"\xf6" else aux_raw
    if aux is not None:
        _loads(aux, "auxiliary data")

    return DecodedTx(
        raw=raw,
        body_raw=body_raw,
        tx_id=blake2b_256(body_raw),
        inputs=inputs,
        outputs=outputs,
        fee=fee,
        ttl=ttl,
        validity_start=start,
        certs=certs,
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
        has_voting=19 in body,
        has_proposals=20 in body,
        current_treasury=treasury,
        donation=donation,
        vkey_witnesses=tuple(vkeys),
        has_bootstrap_witnesses=2 in wits,
        native_scripts=natives,
        plutus_scripts=tuple(plutus),
        datums=datums,
        datums_raw=datums_raw,
        redeemers=redeemers,
        redeemers_raw=redeemers_raw,
        is_valid=is_valid,
        aux_data_raw=aux,
        size=len(raw),
    )


def skip_item(data: bytes, pos: int = 0) -> int:
    """Re-exported for callers that check a blob is exactly one CBOR item."""
    return skip(data, pos)
