"""A faithful, read-only view of a Conway transaction for Plutus (decoded from its own CBOR).

pycardano re-encodes what it decodes (sets become lists, maps lose duplicate keys, data is
normalised), which is fine for building transactions but not for the ledger: the tx id is
the hash of the body bytes as submitted, and the script context must reflect exactly what
was signed. This module reads CBOR itself, keeping map entries in order and byte spans.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


class TxDecodeError(ValueError):
    """The bytes are not a well-formed (Conway) transaction or component."""


# --------------------------------------------------------------------------------------
# CBOR


@dataclass(frozen=True)
class CborMap:
    """A CBOR map with its entries in encoded order (duplicates kept)."""

    pairs: tuple[tuple[Any, Any], ...]

    def get(self, key: Any, default: Any = None) -> Any:
        for k, v in self.pairs:
            if k == key:
                return v
        return default

    def keys(self) -> list[Any]:
        return [k for k, _ in self.pairs]


@dataclass(frozen=True)
class CborTag:
    tag: int
    value: Any


@dataclass(frozen=True)
class CborSimple:
    value: int


# The set tag (258) is an encoding choice of Conway; the ledger reads the same set either way.
_SET_TAG = 258


def cbor_loads(data: bytes) -> Any:
    """Decode one complete CBOR item (trailing bytes are an error)."""
    item, end = cbor_decode_item(data, 0)
    if end != len(data):
        raise TxDecodeError(f"{len(data) - end} trailing bytes after CBOR item")
    return item


def cbor_decode_item(data: bytes, pos: int) -> tuple[Any, int]:
    """Decode the CBOR item starting at `pos`; returns it and the offset just after it."""
    try:
        return _decode(data, pos)
    except IndexError:
        raise TxDecodeError("truncated CBOR") from None
    except RecursionError:
        raise TxDecodeError("CBOR nested too deeply") from None


def cbor_array_spans(data: bytes) -> list[tuple[int, int]]:
    """Byte spans of the elements of the top-level CBOR array in `data`."""
    if not data:
        raise TxDecodeError("empty CBOR")
    major, info = data[0] >> 5, data[0] & 0x1F
    if major != 4:
        raise TxDecodeError("expected a CBOR array")
    spans: list[tuple[int, int]] = []
    if info == 31:
        pos = 1
        while True:
            if pos >= len(data):
                raise TxDecodeError("truncated CBOR")
            if data[pos] == 0xFF:
                pos += 1
                break
            _, end = cbor_decode_item(data, pos)
            spans.append((pos, end))
            pos = end
    else:
        count, pos = _read_arg(data, 0, info)
        for _ in range(count):
            _, end = cbor_decode_item(data, pos)
            spans.append((pos, end))
            pos = end
    if pos != len(data):
        raise TxDecodeError(f"{len(data) - pos} trailing bytes after CBOR array")
    return spans


def _read_arg(data: bytes, pos: int, info: int) -> tuple[int, int]:
    if info < 24:
        return info, pos + 1
    if info == 24:
        return data[pos + 1], pos + 2
    if info == 25:
        return int.from_bytes(data[pos + 1 : pos + 3], "big"), pos + 3
    if info == 26:
        return int.from_bytes(data[pos + 1 : pos + 5], "big"), pos + 5
    if info == 27:
        if pos + 9 > len(data):
            raise IndexError
        return int.from_bytes(data[pos + 1 : pos + 9], "big"), pos + 9
    raise TxDecodeError(f"invalid CBOR additional info {info}")


def _decode(data: bytes, pos: int) -> tuple[Any, int]:
    initial = data[pos]
    major, info = initial >> 5, initial & 0x1F
    if major == 7:
        return _decode_simple(data, pos, info)
    if info == 31:
        return _decode_indefinite(data, pos, major)
    arg, pos = _read_arg(data, pos, info)
    if major == 0:
        return arg, pos
    if major == 1:
        return -1 - arg, pos
    if major in (2, 3):
        end = pos + arg
        if end > len(data):
            raise IndexError
        chunk = data[pos:end]
        return (bytes(chunk) if major == 2 else chunk.decode("utf-8")), end
    if major == 4:
        items = []
        for _ in range(arg):
            item, pos = _decode(data, pos)
            items.append(item)
        return items, pos
    if major == 5:
        pairs = []
        for _ in range(arg):
            key, pos = _decode(data, pos)
            value, pos = _decode(data, pos)
            pairs.append((_hashable(key), value))
        return CborMap(tuple(pairs)), pos
    # major 6: tag
    value, pos = _decode(data, pos)
    if arg in (2, 3):
        if not isinstance(value, bytes):
            raise TxDecodeError("bignum tag must wrap a byte string")
        n = int.from_bytes(value, "big")
        return (n if arg == 2 else -1 - n), pos
    if arg == _SET_TAG:
        if not isinstance(value, list):
            raise TxDecodeError("set tag must wrap an array")
        return value, pos
    return CborTag(arg, value), pos


def _decode_indefinite(data: bytes, pos: int, major: int) -> tuple[Any, int]:
    pos += 1
    if major in (2, 3):
        chunks: list[Any] = []
        while data[pos] != 0xFF:
            if data[pos] >> 5 != major or data[pos] & 0x1F == 31:
                raise TxDecodeError("bad chunk in indefinite-length string")
            chunk, pos = _decode(data, pos)
            chunks.append(chunk)
        return (b"".join(chunks) if major == 2 else "".join(chunks)), pos + 1
    if major == 4:
        items = []
        while data[pos] != 0xFF:
            item, pos = _decode(data, pos)
            items.append(item)
        return items, pos + 1
    if major == 5:
        pairs = []
        while data[pos] != 0xFF:
            key, pos = _decode(data, pos)
            value, pos = _decode(data, pos)
            pairs.append((_hashable(key), value))
        return CborMap(tuple(pairs)), pos + 1
    raise TxDecodeError(f"indefinite length not allowed for major type {major}")


def _decode_simple(data: bytes, pos: int, info: int) -> tuple[Any, int]:
    if info == 20:
        return False, pos + 1
    if info == 21:
        return True, pos + 1
    if info in (22, 23):
        return None, pos + 1
    if info == 24:
        return CborSimple(data[pos + 1]), pos + 2
    if info == 25:
        return struct.unpack(">e", data[pos + 1 : pos + 3])[0], pos + 3
    if info == 26:
        return struct.unpack(">f", data[pos + 1 : pos + 5])[0], pos + 5
    if info == 27:
        return struct.unpack(">d", data[pos + 1 : pos + 9])[0], pos + 9
    if info < 20:
        return CborSimple(info), pos + 1
    raise TxDecodeError(f"unexpected CBOR simple value {info}")


def _hashable(key: Any) -> Any:
    if isinstance(key, list):
        return tuple(_hashable(k) for k in key)
    return key


# --------------------------------------------------------------------------------------
# Ledger values


def blake2b_256(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=32).digest()


def blake2b_224(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=28).digest()


@dataclass(frozen=True, order=True)
class TxIn:
    """A transaction input; the dataclass order is the ledger's (tx id, then index)."""

    tx_id: bytes
    index: int


@dataclass(frozen=True)
class Credential:
    is_script: bool
    hash: bytes

    def sort_key(self) -> tuple[int, bytes]:
        # Haskell: data Credential = ScriptHashObj .. | KeyHashObj ..; derived Ord puts
        # script credentials first.
        return (0 if self.is_script else 1, self.hash)


@dataclass(frozen=True)
class Pointer:
    slot: int
    tx_index: int
    cert_index: int


@dataclass(frozen=True)
class Address:
    raw: bytes
    payment: Credential | None  # None for Byron addresses
    staking: Credential | Pointer | None


@dataclass(frozen=True)
class RewardAccount:
    raw: bytes
    network: int
    credential: Credential

    def sort_key(self) -> tuple[int, tuple[int, bytes]]:
        return (self.network, self.credential.sort_key())


MultiAsset = tuple[tuple[bytes, tuple[tuple[bytes, int], ...]], ...]


@dataclass(frozen=True)
class Value:
    coin: int
    assets: MultiAsset = ()  # policies and names in encoded order


@dataclass(frozen=True)
class Script:
    language: int  # 0 native, 1 PlutusV1, 2 PlutusV2, 3 PlutusV3
    body: bytes  # native: CBOR of the script; Plutus: the CBOR-wrapped flat program

    @property
    def hash(self) -> bytes:
        return blake2b_224(bytes([self.language]) + self.body)


@dataclass(frozen=True)
class Output:
    address: Address
    value: Value
    datum_hash: bytes | None = None
    inline_datum: Any = None  # raw CBOR item of the inline datum
    inline_datum_cbor: bytes | None = None
    script_ref: Script | None = None


@dataclass(frozen=True)
class Redeemer:
    tag: int  # 0 spend, 1 mint, 2 cert, 3 reward, 4 vote, 5 propose
    index: int
    data: Any  # raw CBOR item
    mem: int
    steps: int


@dataclass(frozen=True)
class Voter:
    kind: int  # CBOR voter tag: 0/1 CC hot key/script, 2/3 DRep key/script, 4 pool
    hash: bytes

    def sort_key(self) -> tuple[int, tuple[int, bytes]]:
        # Haskell: CommitteeVoter (Credential) | DRepVoter (Credential) | StakePoolVoter.
        group = (0, 0, 1, 1, 2)[self.kind]
        return (group, (0 if self.kind in (1, 3) else 1, self.hash))

    @property
    def credential(self) -> Credential:
        return Credential(self.kind in (1, 3), self.hash)


@dataclass(frozen=True)
class Body:
    raw: CborMap
    inputs: tuple[TxIn, ...]  # as encoded
    outputs: tuple[Output, ...]
    fee: int
    ttl: int | None
    certificates: tuple[Any, ...]  # raw CBOR certificates
    withdrawals: tuple[tuple[RewardAccount, int], ...]  # as encoded
    validity_start: int | None
    mint: MultiAsset
    script_data_hash: bytes | None
    collateral: tuple[TxIn, ...]
    required_signers: tuple[bytes, ...]
    network_id: int | None
    collateral_return: Output | None
    total_collateral: int | None
    reference_inputs: tuple[TxIn, ...]
    votes: tuple[tuple[Voter, tuple[tuple[tuple[bytes, int], Any], ...]], ...]
    proposals: tuple[Any, ...]  # raw CBOR proposal procedures
    current_treasury: int | None
    donation: int | None

    @property
    def sorted_inputs(self) -> list[TxIn]:
        return sorted(set(self.inputs))

    @property
    def sorted_reference_inputs(self) -> list[TxIn]:
        return sorted(set(self.reference_inputs))

    @property
    def sorted_policies(self) -> list[bytes]:
        return sorted({policy for policy, _ in self.mint})

    @property
    def sorted_withdrawals(self) -> list[tuple[RewardAccount, int]]:
        # The ledger holds withdrawals in a Map keyed by reward account (last entry wins).
        latest = {account.raw: (account, amount) for account, amount in self.withdrawals}
        return sorted(latest.values(), key=lambda item: item[0].sort_key())

    @property
    def sorted_voters(self) -> list[Voter]:
        return sorted({voter for voter, _ in self.votes}, key=Voter.sort_key)


@dataclass(frozen=True)
class Witnesses:
    raw: CborMap
    scripts: tuple[Script, ...]
    datums: tuple[Any, ...]  # raw CBOR items
    datum_cbors: tuple[bytes, ...]  # each datum's own bytes as encoded in the witness set
    redeemers: tuple[Redeemer, ...]
    vkey_hashes: tuple[bytes, ...]


@dataclass(frozen=True)
class Tx:
    body_cbor: bytes
    body: Body
    witnesses: Witnesses
    is_valid: bool

    @property
    def tx_id(self) -> bytes:
        return blake2b_256(self.body_cbor)


def decode_tx(tx_cbor: bytes) -> Tx:
    """Decode a whole signed transaction `[body, witnesses, is_valid, aux]`."""
    spans = cbor_array_spans(tx_cbor)
    if len(spans) not in (3, 4):
        raise TxDecodeError(f"a transaction is an array of 4 (or 3), got {len(spans)}")
    body_cbor = tx_cbor[spans[0][0] : spans[0][1]]
    items = [cbor_loads(tx_cbor[a:b]) for a, b in spans]
    is_valid = True
    if len(items) == 4:
        if not isinstance(items[2], bool):
            raise TxDecodeError("transaction is_valid flag must be a boolean")
        is_valid = items[2]
    witness_cbor = tx_cbor[spans[1][0] : spans[1][1]]
    return Tx(bytes(body_cbor), decode_body(body_cbor), decode_witnesses(witness_cbor), is_valid)


def decode_body(body_cbor: bytes) -> Body:
    raw = cbor_loads(body_cbor)
    if not isinstance(raw, CborMap):
        raise TxDecodeError("transaction body must be a map")
    try:
        return _body(raw)
    except (TypeError, ValueError, KeyError, AttributeError) as err:
        if isinstance(err, TxDecodeError):
            raise
        raise TxDecodeError(f"malformed transaction body: {err}") from err


def decode_output(output_cbor: bytes) -> Output:
    try:
        return _output(cbor_loads(output_cbor), output_cbor)
    except (TypeError, ValueError, KeyError, AttributeError) as err:
        if isinstance(err, TxDecodeError):
            raise
        raise TxDecodeError(f"malformed transaction output: {err}") from err


def decode_address(raw: bytes) -> Address:
    if not raw:
        raise TxDecodeError("empty address")
    header = raw[0]
    kind = header >> 4
    if kind == 8:
        return Address(raw, None, None)
    if kind > 7:
        raise TxDecodeError(f"address type {kind} cannot hold outputs")
    payment = Credential(bool(kind & 1), raw[1:29])
    if len(raw) < 29:
        raise TxDecodeError("address too short")
    staking: Credential | Pointer | None
    if kind <= 3:
        if len(raw) != 57:
            raise TxDecodeError("base address must be 57 bytes")
        staking = Credential(bool(kind & 2), raw[29:57])
    elif kind <= 5:
        staking = _pointer(raw[29:])
    else:
        if len(raw) != 29:
            raise TxDecodeError("enterprise address must be 29 bytes")
        staking = None
    return Address(raw, payment, staking)


def decode_reward_account(raw: bytes) -> RewardAccount:
    if len(raw) != 29 or raw[0] >> 4 not in (14, 15):
        raise TxDecodeError(f"not a reward account: {raw.hex()}")
    return RewardAccount(raw, raw[0] & 0x0F, Credential(raw[0] >> 4 == 15, raw[1:]))


def decode_credential(item: Any) -> Credential:
    if not (isinstance(item, list) and len(item) == 2 and item[0] in (0, 1)):
        raise TxDecodeError(f"malformed credential {item!r}")
    if not isinstance(item[1], bytes) or len(item[1]) != 28:
        raise TxDecodeError("credential hash must be 28 bytes")
    return Credential(item[0] == 1, item[1])


def decode_tx_in(item: Any) -> TxIn:
    if not (isinstance(item, list | tuple) and len(item) == 2):
        raise TxDecodeError(f"malformed transaction input {item!r}")
    tx_id, index = item
    if not isinstance(tx_id, bytes) or len(tx_id) != 32 or not isinstance(index, int):
        raise TxDecodeError(f"malformed transaction input {item!r}")
    return TxIn(tx_id, index)


def decode_script_ref(item: Any) -> Script:
    """A `script_ref` (tag 24 around `[type, script]`) or a bare `[type, script]`."""
    raw: bytes | None = None
    if isinstance(item, CborTag):
        if item.tag != 24 or not isinstance(item.value, bytes):
            raise TxDecodeError("script reference must be tag 24 bytes")
        raw = item.value
        item = cbor_loads(raw)
    if not (isinstance(item, list) and len(item) == 2 and item[0] in (0, 1, 2, 3)):
        raise TxDecodeError("malformed script reference")
    if item[0] == 0:
        if raw is None:
            raise TxDecodeError("native script reference needs its bytes")
        start, end = cbor_array_spans(raw)[1]
        return Script(0, raw[start:end])
    if not isinstance(item[1], bytes):
        raise TxDecodeError("Plutus script must be bytes")
    return Script(item[0], item[1])


def _pointer(raw: bytes) -> Pointer:
    values = []
    pos = 0
    for _ in range(3):
        n = 0
        while True:
            if pos >= len(raw):
                raise TxDecodeError("truncated pointer address")
            byte = raw[pos]
            pos += 1
            n = (n << 7) | (byte & 0x7F)
            if not byte & 0x80:
                break
        values.append(n)
    if pos != len(raw):
        raise TxDecodeError("trailing bytes in pointer address")
    return Pointer(*values)


def _tx_ins(item: Any) -> tuple[TxIn, ...]:
    if not isinstance(item, list):
        raise TxDecodeError("expected a set of inputs")
    return tuple(decode_tx_in(i) for i in item)


def _multiasset(item: Any, what: str) -> MultiAsset:
    if not isinstance(item, CborMap):
        raise TxDecodeError(f"{what} must be a map")
    result = []
    for policy, assets in item.pairs:
        if not isinstance(policy, bytes) or len(policy) != 28 or not isinstance(assets, CborMap):
            raise TxDecodeError(f"malformed {what}")
        entries = []
        for name, qty in assets.pairs:
            if not isinstance(name, bytes) or len(name) > 32 or not isinstance(qty, int):
                raise TxDecodeError(f"malformed {what} entry")
            entries.append((name, qty))
        result.append((policy, tuple(entries)))
    return tuple(result)


def _value(item: Any) -> Value:
    if isinstance(item, int) and not isinstance(item, bool):
        return Value(item)
    if isinstance(item, list) and len(item) == 2 and isinstance(item[0], int):
        return Value(item[0], _multiasset(item[1], "value"))
    raise TxDecodeError(f"malformed value {item!r}")


def _output(item: Any, own_cbor: bytes | None = None) -> Output:
    if isinstance(item, list):
        if len(item) not in (2, 3):
            raise TxDecodeError("legacy output must have 2 or 3 fields")
        datum_hash = item[2] if len(item) == 3 else None
        if datum_hash is not None and (not isinstance(datum_hash, bytes) or len(datum_hash) != 32):
            raise TxDecodeError("datum hash must be 32 bytes")
        return Output(decode_address(_bytes(item[0], "address")), _value(item[1]), datum_hash)
    if not isinstance(item, CborMap):
        raise TxDecodeError("output must be an array or a map")
    address = decode_address(_bytes(item.get(0), "address"))
    value = _value(item.get(1))
    datum_hash = None
    inline = None
    inline_cbor = None
    option = item.get(2)
    if option is not None:
        if not (isinstance(option, list) and len(option) == 2 and option[0] in (0, 1)):
            raise TxDecodeError("malformed datum option")
        if option[0] == 0:
            datum_hash = _bytes(option[1], "datum hash")
        else:
            tagged = option[1]
            if not (isinstance(tagged, CborTag) and tagged.tag == 24):
                raise TxDecodeError("inline datum must be tag 24 bytes")
            inline_cbor = _bytes(tagged.value, "inline datum")
            inline = cbor_loads(inline_cbor)
    script_ref = decode_script_ref(item.get(3)) if item.get(3) is not None else None
    return Output(address, value, datum_hash, inline, inline_cbor, script_ref)


def _bytes(item: Any, what: str) -> bytes:
    if not isinstance(item, bytes):
        raise TxDecodeError(f"{what} must be bytes")
    return item


def _body(raw: CborMap) -> Body:
    keys = raw.keys()
    if len(keys) != len(set(keys)):
        raise TxDecodeError("duplicate key in transaction body")
    withdrawals: list[tuple[RewardAccount, int]] = []
    w = raw.get(5)
    if w is not None:
        if not isinstance(w, CborMap):
            raise TxDecodeError("withdrawals must be a map")
        withdrawals = [(decode_reward_account(_bytes(k, "reward account")), v) for k, v in w.pairs]
    votes = []
    vp = raw.get(19)
    if vp is not None:
        if not isinstance(vp, CborMap):
            raise TxDecodeError("voting procedures must be a map")
        for voter, ballots in vp.pairs:
            if not (isinstance(voter, tuple) and len(voter) == 2 and voter[0] in range(5)):
                raise TxDecodeError("malformed voter")
            if not isinstance(ballots, CborMap):
                raise TxDecodeError("malformed votes")
            entries = tuple(
                ((decode_tx_in(k).tx_id, decode_tx_in(k).index), v) for k, v in ballots.pairs
            )
            votes.append((Voter(voter[0], _bytes(voter[1], "voter")), entries))
    collateral_return = raw.get(16)
    return Body(
        raw=raw,
        inputs=_tx_ins(raw.get(0)),
        outputs=tuple(_output(o) for o in _list(raw.get(1), "outputs")),
        fee=_int(raw.get(2), "fee"),
        ttl=raw.get(3),
        certificates=tuple(_list(raw.get(4, []), "certificates")),
        withdrawals=tuple(withdrawals),
        validity_start=raw.get(8),
        mint=_multiasset(raw.get(9), "mint") if raw.get(9) is not None else (),
        script_data_hash=raw.get(11),
        collateral=_tx_ins(raw.get(13, [])),
        required_signers=tuple(_bytes(s, "signer") for s in _list(raw.get(14, []), "signers")),
        network_id=raw.get(15),
        collateral_return=_output(collateral_return) if collateral_return is not None else None,
        total_collateral=raw.get(17),
        reference_inputs=_tx_ins(raw.get(18, [])),
        votes=tuple(votes),
        proposals=tuple(_list(raw.get(20, []), "proposals")),
        current_treasury=raw.get(21),
        donation=raw.get(22),
    )


def _list(item: Any, what: str) -> list[Any]:
    if not isinstance(item, list):
        raise TxDecodeError(f"{what} must be an array")
    return item


def _int(item: Any, what: str) -> int:
    if not isinstance(item, int) or isinstance(item, bool):
        raise TxDecodeError(f"{what} must be an integer")
    return item


def decode_witnesses(witness_cbor: bytes) -> Witnesses:
    raw = cbor_loads(witness_cbor)
    if not isinstance(raw, CborMap):
        raise TxDecodeError("witness set must be a map")
    scripts: list[Script] = []
    for key, language in ((1, 0), (3, 1), (6, 2), (7, 3)):
        if language == 0:
            # A native script's hash is over its bytes as submitted.
            scripts.extend(Script(0, b) for b in _map_array_bytes(witness_cbor, raw, 1))
            continue
        for script in _list(raw.get(key, []), "scripts"):
            scripts.append(Script(language, _bytes(script, "Plutus script")))
    datum_cbors = _map_array_bytes(witness_cbor, raw, 4)
    datums = tuple(cbor_loads(d) for d in datum_cbors)
    vkey_hashes = tuple(
        blake2b_224(_bytes(w[0], "vkey")) for w in _list(raw.get(0, []), "vkey witnesses")
    )
    return Witnesses(raw, tuple(scripts), datums, datum_cbors, _redeemers(raw.get(5)), vkey_hashes)


def _map_array_bytes(map_cbor: bytes, raw: CborMap, wanted: int) -> tuple[bytes, ...]:
    """The original bytes of each element of the array under key `wanted` of a CBOR map.

    Datum hashes and native script hashes are over the bytes as submitted.
    """
    if raw.get(wanted) is None:
        return ()
    pos = _map_start(map_cbor)
    for _ in range(len(raw.pairs)):
        key, pos = cbor_decode_item(map_cbor, pos)
        value_start = pos
        _, pos = cbor_decode_item(map_cbor, pos)
        if key == wanted:
            return tuple(_array_element_bytes(map_cbor[value_start:pos]))
    raise TxDecodeError(f"map key {wanted} not found")  # pragma: no cover


def _map_start(data: bytes) -> int:
    major, info = data[0] >> 5, data[0] & 0x1F
    if major != 5:
        raise TxDecodeError("expected a map")
    if info == 31:
        return 1
    return _read_arg(data, 0, info)[1]


def _array_element_bytes(data: bytes) -> list[bytes]:
    # The datums may carry the set tag (258) in front of the array.
    if data[:3] == b"\xd9\x01\x02":
        data = data[3:]
    return [data[a:b] for a, b in cbor_array_spans(data)]


def _redeemers(item: Any) -> tuple[Redeemer, ...]:
    if item is None:
        return ()
    result = []
    if isinstance(item, list):
        for entry in item:
            if not (isinstance(entry, list) and len(entry) == 4):
                raise TxDecodeError("redeemer must be [tag, index, data, ex_units]")
            tag, index, data, units = entry
            result.append(_redeemer(tag, index, data, units))
    elif isinstance(item, CborMap):
        for key, value in item.pairs:
            if not (isinstance(key, tuple) and len(key) == 2):
                raise TxDecodeError("redeemer key must be [tag, index]")
            if not (isinstance(value, list) and len(value) == 2):
                raise TxDecodeError("redeemer value must be [data, ex_units]")
            result.append(_redeemer(key[0], key[1], value[0], value[1]))
    else:
        raise TxDecodeError("redeemers must be an array or a map")
    return tuple(result)


def _redeemer(tag: Any, index: Any, data: Any, units: Any) -> Redeemer:
    if tag not in range(6) or not isinstance(index, int) or index < 0:
        raise TxDecodeError(f"bad redeemer pointer ({tag!r}, {index!r})")
    if not (isinstance(units, list) and len(units) == 2 and all(isinstance(u, int) for u in units)):
        raise TxDecodeError("redeemer ex_units must be [mem, steps]")
    return Redeemer(tag, index, data, units[0], units[1])


def outputs_by_input(inputs_cbor: bytes, outputs_cbor: bytes) -> dict[TxIn, tuple[Output, bytes]]:
    """Pair a CBOR array of inputs with a CBOR array of outputs (the vector/Aiken format)."""
    ins = [decode_tx_in(i) for i in _list(cbor_loads(inputs_cbor), "inputs")]
    out_spans = cbor_array_spans(outputs_cbor)
    if len(ins) != len(out_spans):
        raise TxDecodeError(f"{len(ins)} inputs but {len(out_spans)} outputs")
    return {
        txin: (decode_output(outputs_cbor[a:b]), outputs_cbor[a:b])
        for txin, (a, b) in zip(ins, out_spans, strict=True)
    }


def resolve_utxos(resolved: Mapping[Any, Any]) -> dict[TxIn, Output]:
    """Normalise resolved inputs: pycardano TransactionInput/TransactionOutput or our own."""
    result: dict[TxIn, Output] = {}
    for key, output in resolved.items():
        txin = key if isinstance(key, TxIn) else _pycardano_tx_in(key)
        if isinstance(output, Output):
            result[txin] = output
        elif isinstance(output, bytes):
            result[txin] = decode_output(output)
        else:
            result[txin] = decode_output(output.to_cbor())
    return result


def _pycardano_tx_in(key: Any) -> TxIn:
    try:
        return TxIn(bytes(key.transaction_id.payload), int(key.index))
    except AttributeError:
        raise TxDecodeError(f"not a transaction input: {key!r}") from None


def body_from(tx_body: Any) -> Body:
    """A `Body` from raw body CBOR bytes, a pycardano TransactionBody or a decoded `Body`."""
    if isinstance(tx_body, Body):
        return tx_body
    if isinstance(tx_body, bytes | bytearray):
        return decode_body(bytes(tx_body))
    to_cbor = getattr(tx_body, "to_cbor", None)
    if to_cbor is None:
        raise TxDecodeError(f"not a transaction body: {type(tx_body).__name__}")
    return decode_body(to_cbor())


def iter_scripts(tx: Tx, resolved: Mapping[TxIn, Output]) -> Iterable[Script]:
    """Witness scripts, then reference scripts of spent and reference inputs."""
    yield from tx.witnesses.scripts
    for txin in (*tx.body.inputs, *tx.body.reference_inputs):
        out = resolved.get(txin)
        if out is not None and out.script_ref is not None:
            yield out.script_ref
