"""The one decoder of Conway transactions: a faithful, read-only view from the CBOR as sent.

pycardano re-encodes what it decodes (sets become lists, maps lose duplicate keys, data is
normalised), which is fine for building transactions but not for the ledger: the tx id is
the hash of the body bytes as submitted, and the script context must reflect exactly what
was signed. Map entries keep their order and the pieces the ledger hashes or measures
(body, outputs, values, datums, redeemers, scripts, auxiliary data) keep their bytes.

Decoding checks shapes only as far as building this view needs; phase 1 adds the Conway
CDDL's strict checks on top (`chain.devnet.txdecode`), and addresses and reward accounts
are decoded on use so that phase 1 can judge them by its own rules first.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from chain.devnet.cbor_items import (
    CborMap,
    CborTag,
    TxDecodeError,
    cbor_array_entries,
    cbor_array_spans,
    cbor_decode_item,
    cbor_loads,
    cbor_map_entries,
)

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


def _ledger_order(txin: TxIn) -> tuple[bytes, int]:
    # TxIn's own order, as a plain tuple: sorting compares these much faster.
    return (txin.tx_id, txin.index)


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
    raw: bytes  # the output's own CBOR as submitted (min-ADA is over these bytes)
    address_bytes: bytes
    value: Value
    value_size: int  # bytes of the encoded value (max value size rule)
    fields: tuple[Any, ...]  # the map's keys as encoded (a legacy array: its positions)
    datum_hash: bytes | None = None
    inline_datum: Any = None  # raw CBOR item of the inline datum
    inline_datum_cbor: bytes | None = None
    script_ref: Script | None = None

    @property
    def address(self) -> Address:
        return decode_address(self.address_bytes)


@dataclass(frozen=True)
class Redeemer:
    tag: int  # 0 spend, 1 mint, 2 cert, 3 reward, 4 vote, 5 propose
    index: int
    data: Any  # raw CBOR item
    data_cbor: bytes  # the data's bytes as submitted
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


Votes = tuple[tuple[Voter, tuple[tuple[tuple[bytes, int], Any], ...]], ...]


@dataclass(frozen=True)
class Body:
    raw: CborMap
    inputs: tuple[TxIn, ...]  # as encoded
    outputs: tuple[Output, ...]
    fee: int
    ttl: int | None
    certificates: tuple[Any, ...]  # raw CBOR certificates
    withdrawals: tuple[tuple[bytes, Any], ...]  # (reward account bytes, amount) as encoded
    validity_start: int | None
    mint: MultiAsset
    script_data_hash: bytes | None
    collateral: tuple[TxIn, ...]
    required_signers: tuple[bytes, ...]
    network_id: int | None
    collateral_return: Output | None
    total_collateral: int | None
    reference_inputs: tuple[TxIn, ...]
    proposals: tuple[Any, ...]  # raw CBOR proposal procedures
    current_treasury: int | None
    donation: int | None

    @property
    def sorted_inputs(self) -> list[TxIn]:
        return sorted(set(self.inputs), key=_ledger_order)

    @property
    def sorted_reference_inputs(self) -> list[TxIn]:
        return sorted(set(self.reference_inputs), key=_ledger_order)

    @property
    def sorted_policies(self) -> list[bytes]:
        return sorted({policy for policy, _ in self.mint})

    @property
    def sorted_withdrawals(self) -> list[tuple[RewardAccount, int]]:
        # The ledger holds withdrawals in a Map keyed by reward account (last entry wins).
        latest = {raw: (decode_reward_account(raw), amount) for raw, amount in self.withdrawals}
        return sorted(latest.values(), key=lambda item: item[0].sort_key())

    @property
    def votes(self) -> Votes:
        # Decoded on use: phase 1 rejects governance transactions before looking inside.
        return _votes(self.raw.get(19))

    @property
    def sorted_voters(self) -> list[Voter]:
        return sorted({voter for voter, _ in self.votes}, key=Voter.sort_key)


@dataclass(frozen=True)
class Witnesses:
    raw: CborMap
    scripts: tuple[Script, ...]  # native (bytes as submitted), then PlutusV1, V2, V3
    datums: tuple[Any, ...]  # raw CBOR items
    datum_cbors: tuple[bytes, ...]  # each datum's own bytes as encoded in the witness set
    datums_cbor: bytes | None  # the whole datums field as submitted (script-data hash)
    redeemers: tuple[Redeemer, ...]
    redeemers_cbor: bytes | None  # the whole redeemers field as submitted
    vkeys: tuple[tuple[bytes, bytes], ...]  # (verification key, signature)

    @property
    def vkey_hashes(self) -> tuple[bytes, ...]:
        return tuple(blake2b_224(vkey) for vkey, _ in self.vkeys)


@dataclass(frozen=True)
class Tx:
    raw: bytes
    parts: int  # 4, or 3 for the pre-Alonzo shape some tools still produce
    body_cbor: bytes
    tx_id: bytes
    body: Body
    witnesses: Witnesses
    is_valid: bool
    aux_cbor: bytes | None  # auxiliary data as submitted; None when absent or null


def decode_tx(tx_cbor: bytes, *, conway_only: bool = False) -> Tx:
    """Decode a whole signed transaction `[body, witnesses, is_valid, aux]`.

    `conway_only`: refuse the 3-part shape (what a Conway node accepts).
    """
    tx_cbor = bytes(tx_cbor)
    if not tx_cbor or tx_cbor[0] >> 5 != 4:
        raise TxDecodeError("expected a CBOR array")
    if tx_cbor[0] & 0x1F == 31:  # indefinite length: count the parts first
        parts = len(cbor_array_spans(tx_cbor))
        pos = 1
    else:
        parts, pos = _array_head(tx_cbor)
    if conway_only and parts != 4:
        raise TxDecodeError(f"a Conway transaction has 4 parts, found {parts}")
    if parts not in (3, 4):
        raise TxDecodeError(f"a transaction is an array of 4 (or 3), got {parts}")
    # Each part is decoded where it lies, once; the body and witness spans come with it.
    # The shape (parts, trailing bytes) is checked before what the parts hold.
    body_start = pos
    body_entries, pos = _map_entries_of(tx_cbor, pos, "transaction body must be a map")
    body_cbor = tx_cbor[body_start:pos]
    witness_entries, pos = _map_entries_of(tx_cbor, pos, "witness set must be a map")
    flag: Any = True
    if parts == 4:
        flag, pos = cbor_decode_item(tx_cbor, pos)
    aux_start = pos
    _, pos = cbor_decode_item(tx_cbor, pos)
    aux_cbor = None if tx_cbor[aux_start:pos] == b"\xf6" else tx_cbor[aux_start:pos]
    if tx_cbor[0] & 0x1F == 31:
        pos += 1  # the break byte
    if pos != len(tx_cbor):
        raise TxDecodeError(f"{len(tx_cbor) - pos} trailing bytes after CBOR array")
    body = _checked(_body, tx_cbor, body_entries, "malformed transaction body")
    witnesses = _checked(_witnesses, tx_cbor, witness_entries, "malformed witness set")
    if not isinstance(flag, bool):
        raise TxDecodeError("transaction is_valid flag must be a boolean")
    return Tx(tx_cbor, parts, body_cbor, blake2b_256(body_cbor), body, witnesses, flag, aux_cbor)


def _array_head(data: bytes) -> tuple[int, int]:
    info = data[0] & 0x1F
    if info < 24:
        return info, 1
    width = {24: 1, 25: 2, 26: 4, 27: 8}.get(info)
    if width is None or len(data) < 1 + width:
        raise TxDecodeError("truncated CBOR" if width else f"invalid CBOR additional info {info}")
    return int.from_bytes(data[1 : 1 + width], "big"), 1 + width


def _map_entries_of(
    data: bytes, pos: int, not_a_map: str
) -> tuple[list[tuple[Any, Any, int, int]], int]:
    if pos >= len(data):
        raise TxDecodeError("truncated CBOR")
    if data[pos] >> 5 != 5:
        raise TxDecodeError(not_a_map)
    return cbor_map_entries(data, pos)


def _checked(build: Any, data: bytes, entries: Any, what: str) -> Any:
    try:
        return build(data, entries)
    except (TypeError, ValueError, KeyError, AttributeError, IndexError) as err:
        if isinstance(err, TxDecodeError):
            raise
        raise TxDecodeError(f"{what}: {err}") from err


def decode_body(body_cbor: bytes) -> Body:
    entries, end = _map_entries_of(body_cbor, 0, "transaction body must be a map")
    if end != len(body_cbor):
        raise TxDecodeError(f"{len(body_cbor) - end} trailing bytes after CBOR item")
    body: Body = _checked(_body, body_cbor, entries, "malformed transaction body")
    return body


def decode_output(output_cbor: bytes) -> Output:
    output_cbor = bytes(output_cbor)
    try:
        return _output(output_cbor)
    except (TypeError, ValueError, KeyError, AttributeError, IndexError) as err:
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


def _output(raw: bytes) -> Output:
    if not raw:
        raise TxDecodeError("empty output")
    fields: dict[Any, tuple[Any, int, int]] = {}
    legacy = raw[0] >> 5 == 4
    if legacy:
        items, end = cbor_array_entries(raw, 0)
        if len(items) not in (2, 3):
            raise TxDecodeError("legacy output must have 2 or 3 fields")
        fields = dict(enumerate(items))
    elif raw[0] >> 5 == 5:
        entries, end = cbor_map_entries(raw, 0)
        for key, value, start, stop in entries:
            fields.setdefault(key, (value, start, stop))  # like CborMap.get: first wins
        keys = tuple(key for key, _, _, _ in entries)
    else:
        raise TxDecodeError("output must be an array or a map")
    if end != len(raw):
        raise TxDecodeError(f"{len(raw) - end} trailing bytes after CBOR item")
    address = _bytes(fields[0][0] if 0 in fields else None, "address")
    if 1 not in fields:
        raise TxDecodeError("output lacks its value")
    value_item, value_start, value_end = fields[1]
    value = _value(value_item)
    datum_hash = None
    inline = None
    inline_cbor = None
    option = fields[2][0] if 2 in fields else None
    if legacy:
        if option is not None and (not isinstance(option, bytes) or len(option) != 32):
            raise TxDecodeError("datum hash must be 32 bytes")
        return Output(raw, address, value, value_end - value_start, tuple(fields), option)
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
    ref_item = fields[3][0] if 3 in fields else None
    script_ref = decode_script_ref(ref_item) if ref_item is not None else None
    return Output(
        raw,
        address,
        value,
        value_end - value_start,
        keys,
        datum_hash,
        inline,
        inline_cbor,
        script_ref,
    )


def _bytes(item: Any, what: str) -> bytes:
    if not isinstance(item, bytes):
        raise TxDecodeError(f"{what} must be bytes")
    return item


def _body(data: bytes, entries: list[tuple[Any, Any, int, int]]) -> Body:
    # `entries` (and their spans) are of the body map inside `data`.
    raw = CborMap(tuple((key, value) for key, value, _, _ in entries))
    keys = raw.keys()
    if len(keys) != len(set(keys)):
        raise TxDecodeError("duplicate key in transaction body")
    fields = dict(raw.pairs)  # keys are unique: a dict reads as CborMap.get would
    get = fields.get
    spans = {key: (start, end) for key, _, start, end in entries}
    for required, name in ((0, "inputs"), (1, "outputs"), (2, "fee")):
        if required not in spans:
            raise TxDecodeError(f"transaction body lacks {name}")
    if data[spans[1][0]] >> 5 != 4:
        raise TxDecodeError("outputs must be an array")
    items, _ = cbor_array_entries(data, spans[1][0])
    outputs = tuple(decode_output(data[start:end]) for _, start, end in items)
    withdrawals: list[tuple[bytes, Any]] = []
    w = get(5)
    if w is not None:
        if not isinstance(w, CborMap):
            raise TxDecodeError("withdrawals must be a map")
        withdrawals = [(_bytes(k, "reward account"), v) for k, v in w.pairs]
    collateral_return = None
    if 16 in spans:
        collateral_return = decode_output(data[spans[16][0] : spans[16][1]])
    return Body(
        raw=raw,
        inputs=_tx_ins(get(0)),
        outputs=outputs,
        fee=_int(get(2), "fee"),
        ttl=get(3),
        certificates=tuple(_list(get(4, []), "certificates")),
        withdrawals=tuple(withdrawals),
        validity_start=get(8),
        mint=_multiasset(get(9), "mint") if get(9) is not None else (),
        script_data_hash=get(11),
        collateral=_tx_ins(get(13, [])),
        required_signers=tuple(_bytes(s, "signer") for s in _list(get(14, []), "signers")),
        network_id=get(15),
        collateral_return=collateral_return,
        total_collateral=get(17),
        reference_inputs=_tx_ins(get(18, [])),
        proposals=tuple(_list(get(20, []), "proposals")),
        current_treasury=get(21),
        donation=get(22),
    )


def _votes(vp: Any) -> Votes:
    if vp is None:
        return ()
    if not isinstance(vp, CborMap):
        raise TxDecodeError("voting procedures must be a map")
    votes = []
    for voter, ballots in vp.pairs:
        if not (isinstance(voter, tuple) and len(voter) == 2 and voter[0] in range(5)):
            raise TxDecodeError("malformed voter")
        if not isinstance(ballots, CborMap):
            raise TxDecodeError("malformed votes")
        entries = tuple(
            ((decode_tx_in(k).tx_id, decode_tx_in(k).index), v) for k, v in ballots.pairs
        )
        votes.append((Voter(voter[0], _bytes(voter[1], "voter")), entries))
    return tuple(votes)


def _list(item: Any, what: str) -> list[Any]:
    if not isinstance(item, list):
        raise TxDecodeError(f"{what} must be an array")
    return item


def _int(item: Any, what: str) -> int:
    if not isinstance(item, int) or isinstance(item, bool):
        raise TxDecodeError(f"{what} must be an integer")
    return item


def decode_witnesses(witness_cbor: bytes) -> Witnesses:
    entries, end = _map_entries_of(witness_cbor, 0, "witness set must be a map")
    if end != len(witness_cbor):
        raise TxDecodeError(f"{len(witness_cbor) - end} trailing bytes after CBOR item")
    witnesses: Witnesses = _checked(_witnesses, witness_cbor, entries, "malformed witness set")
    return witnesses


def _witnesses(witness_cbor: bytes, entries: list[tuple[Any, Any, int, int]]) -> Witnesses:
    # `entries` (and their spans) are of the witness map inside `witness_cbor`.
    raw = CborMap(tuple((key, value) for key, value, _, _ in entries))
    spans: dict[Any, tuple[int, int]] = {}
    for key, _, start, stop in entries:
        spans.setdefault(key, (start, stop))  # like CborMap.get: first wins

    def elements(key: int) -> list[tuple[Any, bytes]]:
        # Native script and datum hashes are over each element's bytes as submitted.
        if key not in spans or raw.get(key) is None:
            return []
        items, _ = cbor_array_entries(witness_cbor, spans[key][0])
        return [(item, witness_cbor[start:stop]) for item, start, stop in items]

    def field_bytes(key: int) -> bytes | None:
        return witness_cbor[spans[key][0] : spans[key][1]] if key in spans else None

    scripts = [Script(0, cbor) for _, cbor in elements(1)]
    for key, language in ((3, 1), (6, 2), (7, 3)):
        for script in _list(raw.get(key, []), "scripts"):
            scripts.append(Script(language, _bytes(script, "Plutus script")))
    datum_entries = elements(4)
    vkeys = []
    for i, pair in enumerate(_list(raw.get(0, []), "vkey witnesses")):
        if not (isinstance(pair, list) and len(pair) == 2):
            raise TxDecodeError(f"vkey witness {i} must be [vkey, signature]")
        vkeys.append((_bytes(pair[0], "vkey"), _bytes(pair[1], "signature")))
    redeemers: tuple[Redeemer, ...] = ()
    if 5 in spans and raw.get(5) is not None:
        redeemers = _redeemers(witness_cbor, spans[5][0])
    return Witnesses(
        raw=raw,
        scripts=tuple(scripts),
        datums=tuple(item for item, _ in datum_entries),
        datum_cbors=tuple(cbor for _, cbor in datum_entries),
        datums_cbor=field_bytes(4),
        redeemers=redeemers,
        redeemers_cbor=field_bytes(5),
        vkeys=tuple(vkeys),
    )


def _redeemers(data: bytes, start: int) -> tuple[Redeemer, ...]:
    result = []
    major = data[start] >> 5
    if major == 4:
        for entry, entry_start, _ in cbor_array_entries(data, start)[0]:
            if not (isinstance(entry, list) and len(entry) == 4):
                raise TxDecodeError("redeemer must be [tag, index, data, ex_units]")
            parts, _ = cbor_array_entries(data, entry_start)
            tag, index, payload, units = entry
            payload_cbor = data[parts[2][1] : parts[2][2]]
            result.append(_redeemer(tag, index, payload, payload_cbor, units))
    elif major == 5:
        for key, value, value_start, _ in cbor_map_entries(data, start)[0]:
            if not (isinstance(key, tuple) and len(key) == 2):
                raise TxDecodeError("redeemer key must be [tag, index]")
            if not (isinstance(value, list) and len(value) == 2):
                raise TxDecodeError("redeemer value must be [data, ex_units]")
            parts, _ = cbor_array_entries(data, value_start)
            payload_cbor = data[parts[0][1] : parts[0][2]]
            result.append(_redeemer(key[0], key[1], value[0], payload_cbor, value[1]))
    else:
        raise TxDecodeError("redeemers must be an array or a map")
    return tuple(result)


def _redeemer(tag: Any, index: Any, data: Any, data_cbor: bytes, units: Any) -> Redeemer:
    if tag not in range(6) or not isinstance(index, int) or index < 0:
        raise TxDecodeError(f"bad redeemer pointer ({tag!r}, {index!r})")
    if not (isinstance(units, list) and len(units) == 2 and all(isinstance(u, int) for u in units)):
        raise TxDecodeError("redeemer ex_units must be [mem, steps]")
    return Redeemer(tag, index, data, data_cbor, units[0], units[1])


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
