"""The Plutus V3 `ScriptContext`, built the way the Haskell ledger (Conway, protocol 10) does.

Shapes follow `PlutusLedgerApi.V3`; orders follow the ledger's own containers: inputs,
policies, signatories and datums are Sets/Maps (sorted), withdrawals are a Map keyed by
reward account (script credentials first), redeemers a Map keyed by the ledger's purpose
(tag, then index), outputs, certificates and proposals keep body order. The conformance
vectors in `shared/fixtures/ledger/script_context_v3` pin these choices.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from chain.devnet.cbor_items import CborMap, CborTag
from chain.devnet.plutus_data import (
    PlutusData,
    PlutusDataError,
    boolean,
    bytestring,
    constr,
    data_from_raw,
    integer,
    just,
    nothing,
    plist,
    pmap,
)
from chain.devnet.plutus_tx import (
    Address,
    Credential,
    Output,
    Pointer,
    Redeemer,
    Tx,
    TxDecodeError,
    TxIn,
    Value,
    Voter,
    blake2b_256,
    decode_credential,
    decode_reward_account,
    decode_tx,
    decode_tx_in,
    resolve_utxos,
)
from chain.devnet.purposes import TAG_NUMBERS, NeededScript
from chain.devnet.rationals import Interval, RationalError, ledger_rational


class ScriptContextError(ValueError):
    """The ledger could not translate the transaction for a Plutus script."""


@dataclass(frozen=True)
class SlotConfig:
    """How slots map to POSIX milliseconds (the ledger's epoch info, for a fixed slot length)."""

    zero_time_ms: int
    zero_slot: int
    slot_length_ms: int

    def posix_ms(self, slot: int) -> int:
        return self.zero_time_ms + (slot - self.zero_slot) * self.slot_length_ms


def build_script_context(
    tx_cbor: bytes | Tx,
    resolved: Mapping[Any, Any],
    purpose: NeededScript | tuple[str, int],
    redeemer_data: PlutusData | None,
    slot_config: SlotConfig,
) -> PlutusData:
    """The V3 ScriptContext for the redeemer at `purpose` (a `NeededScript` or (tag, index)).

    `redeemer_data` overrides the redeemer's data (None: take it from the witness set).
    `resolved` maps every spent and reference input to its output.
    """
    tx = tx_cbor if isinstance(tx_cbor, Tx) else decode_tx(tx_cbor)
    builder = ContextBuilder(tx, resolve_utxos(resolved), slot_config)
    tag, index = (purpose.tag, purpose.index) if isinstance(purpose, NeededScript) else purpose
    return builder.script_context(TAG_NUMBERS[tag], index, redeemer_data)


class ContextBuilder:
    """Builds the TxInfo once and a ScriptContext per redeemer of one transaction."""

    def __init__(self, tx: Tx, utxos: Mapping[TxIn, Output], slot_config: SlotConfig) -> None:
        self.tx = tx
        self.utxos = utxos
        self.slot_config = slot_config
        self.body = tx.body
        self._tx_info: PlutusData | None = None
        self._datums: dict[bytes, PlutusData] | None = None

    # --- public -------------------------------------------------------------------------

    def script_context(
        self, tag: int, index: int, redeemer_data: PlutusData | None = None
    ) -> PlutusData:
        if redeemer_data is None:
            redeemer = self.redeemer(tag, index)
            redeemer_data = self._data(redeemer.data, f"redeemer ({tag}, {index})")
        return constr(0, self.tx_info(), redeemer_data, self.script_info(tag, index))

    def redeemer(self, tag: int, index: int) -> Redeemer:
        found = None
        for r in self.tx.witnesses.redeemers:
            if (r.tag, r.index) == (tag, index):
                found = r  # the ledger's Map keeps the last of duplicate pointers
        if found is None:
            raise ScriptContextError(f"no redeemer for ({tag}, {index})")
        return found

    def tx_info(self) -> PlutusData:
        if self._tx_info is None:
            self._tx_info = self._build_tx_info()
        return self._tx_info

    def script_info(self, tag: int, index: int) -> PlutusData:
        if tag == 0:
            txin = self._spent_input(index)
            return constr(1, tx_out_ref(txin), self._spend_datum(txin))
        return constr(tag_to_info_constructor(tag), *self._purpose_fields(tag, index))

    def datum_for_spend(self, index: int) -> PlutusData | None:
        """The datum a spend at `index` hands its script (None when there is none)."""
        d = self._spend_datum(self._spent_input(index))
        return d.fields[0] if d.constructor == 0 else None  # type: ignore[attr-defined]

    # --- TxInfo -------------------------------------------------------------------------

    def _build_tx_info(self) -> PlutusData:
        body = self.body
        return constr(
            0,
            plist(self._tx_in_info(i) for i in body.sorted_inputs),
            plist(self._tx_in_info(i) for i in body.sorted_reference_inputs),
            plist(tx_out(o) for o in body.outputs),
            integer(body.fee),
            mint_value(body.mint),
            plist(tx_cert(c) for c in body.certificates),
            pmap(
                (credential(account.credential), integer(amount))
                for account, amount in body.sorted_withdrawals
            ),
            self._validity_range(),
            plist(bytestring(h) for h in sorted(set(body.required_signers))),
            pmap(self._redeemer_entries()),
            pmap(sorted(self._witness_datums().items(), key=lambda kv: kv[0].value)),
            bytestring(self.tx.tx_id),
            self._votes(),
            plist(proposal_procedure(p) for p in body.proposals),
            _maybe_int(body.current_treasury),
            _maybe_int(body.donation),
        )

    def _tx_in_info(self, txin: TxIn) -> PlutusData:
        if txin not in self.utxos:
            raise ScriptContextError(f"input {txin.tx_id.hex()}#{txin.index} is not resolved")
        return constr(0, tx_out_ref(txin), tx_out(self.utxos[txin]))

    def _validity_range(self) -> PlutusData:
        start, ttl = self.body.validity_start, self.body.ttl
        lower = (
            constr(0, constr(0), boolean(True))
            if start is None
            else constr(0, constr(1, integer(self.slot_config.posix_ms(start))), boolean(True))
        )
        # An upper bound from the ttl is exclusive (strictUpperBound in the ledger).
        upper = (
            constr(0, constr(2), boolean(True))
            if ttl is None
            else constr(0, constr(1, integer(self.slot_config.posix_ms(ttl))), boolean(False))
        )
        return constr(0, lower, upper)

    def _redeemer_entries(self) -> list[tuple[PlutusData, PlutusData]]:
        latest: dict[tuple[int, int], Redeemer] = {}
        for r in self.tx.witnesses.redeemers:
            latest[(r.tag, r.index)] = r
        return [
            (self._script_purpose(tag, index), self._data(r.data, f"redeemer ({tag}, {index})"))
            for (tag, index), r in sorted(latest.items())
        ]

    def _script_purpose(self, tag: int, index: int) -> PlutusData:
        if tag == 0:
            return constr(1, tx_out_ref(self._spent_input(index)))
        if tag == 1:
            return constr(0, *self._purpose_fields(tag, index))
        return constr(tag_to_info_constructor(tag), *self._purpose_fields(tag, index))

    def _purpose_fields(self, tag: int, index: int) -> list[PlutusData]:
        body = self.body
        if tag == 1:
            policies = body.sorted_policies
            _check_index(index, len(policies), "mint")
            return [bytestring(policies[index])]
        if tag == 2:
            _check_index(index, len(body.certificates), "cert")
            return [integer(index), tx_cert(body.certificates[index])]
        if tag == 3:
            withdrawals = body.sorted_withdrawals
            _check_index(index, len(withdrawals), "reward")
            return [credential(withdrawals[index][0].credential)]
        if tag == 4:
            voters = body.sorted_voters
            _check_index(index, len(voters), "vote")
            return [voter(voters[index])]
        if tag == 5:
            _check_index(index, len(body.proposals), "propose")
            return [integer(index), proposal_procedure(body.proposals[index])]
        raise ScriptContextError(f"unknown redeemer tag {tag}")

    def _spent_input(self, index: int) -> TxIn:
        inputs = self.body.sorted_inputs
        _check_index(index, len(inputs), "spend")
        return inputs[index]

    def _spend_datum(self, txin: TxIn) -> PlutusData:
        if txin not in self.utxos:
            raise ScriptContextError(f"input {txin.tx_id.hex()}#{txin.index} is not resolved")
        out = self.utxos[txin]
        if out.inline_datum_cbor is not None:
            return just(self._data(out.inline_datum, "inline datum"))
        if out.datum_hash is not None:
            datum = self._witness_datums_by_hash().get(out.datum_hash)
            return just(datum) if datum is not None else nothing()
        return nothing()

    def _witness_datums(self) -> dict[Any, PlutusData]:
        return {bytestring(h): d for h, d in self._witness_datums_by_hash().items()}

    def _witness_datums_by_hash(self) -> dict[bytes, PlutusData]:
        if self._datums is None:
            wits = self.tx.witnesses
            self._datums = {
                blake2b_256(raw_bytes): self._data(raw, "witness datum")
                for raw, raw_bytes in zip(wits.datums, wits.datum_cbors, strict=True)
            }
        return self._datums

    def _votes(self) -> PlutusData:
        merged: dict[Voter, dict[tuple[bytes, int], Any]] = {}
        for v, ballots in self.body.votes:
            entry = merged.setdefault(v, {})
            for action_id, procedure in ballots:
                entry[action_id] = procedure
        return pmap(
            (
                voter(v),
                pmap(
                    (gov_action_id(action_id), vote(procedure))
                    for action_id, procedure in sorted(merged[v].items())
                ),
            )
            for v in sorted(merged, key=Voter.sort_key)
        )

    @staticmethod
    def _data(raw: Any, what: str) -> PlutusData:
        try:
            return data_from_raw(raw)
        except PlutusDataError as err:
            raise ScriptContextError(f"{what}: {err}") from err


# --- shapes -----------------------------------------------------------------------------


def tag_to_info_constructor(tag: int) -> int:
    # Ledger redeemer tags: spend 0, mint 1, cert 2, reward 3, vote 4, propose 5.
    # V3 ScriptInfo/ScriptPurpose: minting 0, spending 1, rewarding 2, certifying 3,
    # voting 4, proposing 5.
    return {0: 1, 1: 0, 2: 3, 3: 2, 4: 4, 5: 5}[tag]


def _check_index(index: int, count: int, what: str) -> None:
    if not 0 <= index < count:
        raise ScriptContextError(f"{what} redeemer index {index} points at nothing ({count})")


def _maybe_int(n: int | None) -> PlutusData:
    return nothing() if n is None else just(integer(n))


def tx_out_ref(txin: TxIn) -> PlutusData:
    return constr(0, bytestring(txin.tx_id), integer(txin.index))


def credential(cred: Credential) -> PlutusData:
    return constr(1 if cred.is_script else 0, bytestring(cred.hash))


def address(addr: Address) -> PlutusData:
    if addr.payment is None:
        raise ScriptContextError("Byron addresses cannot appear in a Plutus script context")
    staking: PlutusData
    if addr.staking is None:
        staking = nothing()
    elif isinstance(addr.staking, Pointer):
        p = addr.staking
        staking = just(constr(1, integer(p.slot), integer(p.tx_index), integer(p.cert_index)))
    else:
        staking = just(constr(0, credential(addr.staking)))
    return constr(0, credential(addr.payment), staking)


def value(v: Value) -> PlutusData:
    """An output value: the ada entry first, then policies and names in ledger order."""
    entries: list[tuple[PlutusData, PlutusData]] = [
        (bytestring(b""), pmap([(bytestring(b""), integer(v.coin))]))
    ]
    entries.extend(_multiasset_entries(v.assets))
    return pmap(entries)


def mint_value(assets: tuple[tuple[bytes, tuple[tuple[bytes, int], ...]], ...]) -> PlutusData:
    # V3 mint carries no ada entry (the vectors confirm; V1/V2 added a zero-ada entry).
    return pmap(_multiasset_entries(assets))


def _multiasset_entries(
    assets: tuple[tuple[bytes, tuple[tuple[bytes, int], ...]], ...],
) -> list[tuple[PlutusData, PlutusData]]:
    merged: dict[bytes, dict[bytes, int]] = {}
    for policy, names in assets:
        bucket = merged.setdefault(policy, {})
        for name, qty in names:
            bucket[name] = qty
    return [
        (
            bytestring(policy),
            pmap((bytestring(name), integer(qty)) for name, qty in sorted(merged[policy].items())),
        )
        for policy in sorted(merged)
        if any(qty != 0 for qty in merged[policy].values())
    ]


def tx_out(out: Output) -> PlutusData:
    if out.inline_datum_cbor is not None:
        datum = constr(2, data_from_raw(out.inline_datum))
    elif out.datum_hash is not None:
        datum = constr(1, bytestring(out.datum_hash))
    else:
        datum = constr(0)
    script = nothing() if out.script_ref is None else just(bytestring(out.script_ref.hash))
    return constr(0, address(out.address), value(out.value), datum, script)


def _cred(item: Any) -> PlutusData:
    try:
        return credential(decode_credential(item))
    except TxDecodeError as err:
        raise ScriptContextError(str(err)) from err


def drep(item: Any) -> PlutusData:
    if not (isinstance(item, list) and item and item[0] in (0, 1, 2, 3)):
        raise ScriptContextError(f"malformed DRep {item!r}")
    if item[0] in (0, 1):
        return constr(0, credential(Credential(item[0] == 1, item[1])))
    return constr(1 if item[0] == 2 else 2)


def tx_cert(cert: Any) -> PlutusData:
    """A Conway certificate as a V3 `TxCert` (deposits present, as from protocol 10)."""
    if not (isinstance(cert, list) and cert and isinstance(cert[0], int)):
        raise ScriptContextError(f"malformed certificate {cert!r}")
    kind, args = cert[0], cert[1:]
    try:
        if kind == 0:
            return constr(0, _cred(args[0]), nothing())
        if kind == 7:
            return constr(0, _cred(args[0]), just(integer(args[1])))
        if kind == 1:
            return constr(1, _cred(args[0]), nothing())
        if kind == 8:
            return constr(1, _cred(args[0]), just(integer(args[1])))
        if kind == 2:
            return constr(2, _cred(args[0]), constr(0, bytestring(args[1])))
        if kind == 9:
            return constr(2, _cred(args[0]), constr(1, drep(args[1])))
        if kind == 10:
            return constr(2, _cred(args[0]), constr(2, bytestring(args[1]), drep(args[2])))
        if kind == 11:
            return constr(3, _cred(args[0]), constr(0, bytestring(args[1])), integer(args[2]))
        if kind == 12:
            return constr(3, _cred(args[0]), constr(1, drep(args[1])), integer(args[2]))
        if kind == 13:
            delegatee = constr(2, bytestring(args[1]), drep(args[2]))
            return constr(3, _cred(args[0]), delegatee, integer(args[3]))
        if kind == 16:
            return constr(4, _cred(args[0]), integer(args[1]))
        if kind == 18:
            return constr(5, _cred(args[0]))
        if kind == 17:
            return constr(6, _cred(args[0]), integer(args[1]))
        if kind == 3:
            return constr(7, bytestring(args[0]), bytestring(args[1]))
        if kind == 4:
            return constr(8, bytestring(args[0]), integer(args[1]))
        if kind == 14:
            return constr(9, _cred(args[0]), _cred(args[1]))
        if kind == 15:
            return constr(10, _cred(args[0]))
    except (IndexError, TypeError) as err:
        raise ScriptContextError(f"malformed certificate {cert!r}") from err
    raise ScriptContextError(f"certificate type {kind} is not allowed in Conway")


def voter(v: Voter) -> PlutusData:
    if v.kind in (0, 1):
        return constr(0, credential(v.credential))
    if v.kind in (2, 3):
        return constr(1, credential(v.credential))
    return constr(2, bytestring(v.hash))


def gov_action_id(action_id: tuple[bytes, int]) -> PlutusData:
    return constr(0, bytestring(action_id[0]), integer(action_id[1]))


def vote(procedure: Any) -> PlutusData:
    if not (isinstance(procedure, list) and len(procedure) == 2 and procedure[0] in (0, 1, 2)):
        raise ScriptContextError(f"malformed voting procedure {procedure!r}")
    # CBOR: 0 no, 1 yes, 2 abstain; V3 Vote: VoteNo 0, VoteYes 1, Abstain 2.
    return constr(procedure[0])


def _maybe_gov_action_id(item: Any) -> PlutusData:
    if item is None:
        return nothing()
    txin = decode_tx_in(item)
    return just(gov_action_id((txin.tx_id, txin.index)))


def _maybe_script_hash(item: Any) -> PlutusData:
    return nothing() if item is None else just(bytestring(item))


def _quorum(item: Any) -> PlutusData:
    try:
        value = ledger_rational(item, Interval.UNIT, "committee quorum")
    except RationalError as err:
        raise ScriptContextError(str(err)) from err
    # PlutusTx's Rational is data-encoded like a pair: Constr 0 [numerator, denominator],
    # reduced with a positive denominator (the ledger's `unboundRational`).
    return constr(0, integer(value.numerator), integer(value.denominator))


def _rational_list(value: Fraction) -> PlutusData:
    return plist([integer(value.numerator), integer(value.denominator)])


# The rationals of a Conway parameter update, by key (cardano-ledger ConwayPParams): a0 is
# a NonNegativeInterval, rho and tau UnitIntervals, the two execution prices
# NonNegativeIntervals, every voting threshold a UnitInterval, and the reference-script fee
# per byte a NonNegativeInterval.
_RATIONAL_PARAMS: dict[int, tuple[Interval, int | None]] = {
    9: (Interval.NON_NEGATIVE, None),
    10: (Interval.UNIT, None),
    11: (Interval.UNIT, None),
    19: (Interval.NON_NEGATIVE, 2),
    25: (Interval.UNIT, 5),
    26: (Interval.UNIT, 10),
    33: (Interval.NON_NEGATIVE, None),
}
# Keys a Conway update may carry; 12-15 (d, extra entropy, protocol version, min UTxO)
# left the update with earlier eras.
_UPDATE_KEYS = frozenset(range(12)) | frozenset(range(16, 34))


def changed_parameters(item: Any) -> PlutusData:
    """A protocol parameter update as the ledger hands it to guardrail scripts:
    a map from parameter key to value, rationals as reduced two-element lists."""
    if not isinstance(item, CborMap):
        raise ScriptContextError("parameter update must be a map")
    keys = [k for k, _ in item.pairs]
    if (
        not keys
        or any(type(k) is not int for k in keys)
        or len(set(keys)) != len(keys)
        or not set(keys) <= _UPDATE_KEYS
    ):
        raise ScriptContextError(f"parameter update has invalid keys {keys}")
    pairs = sorted(item.pairs, key=lambda kv: int(kv[0]))
    return pmap((integer(k), _param_value(k, v)) for k, v in pairs)


def _param_value(key: int, item: Any) -> PlutusData:
    rational = _RATIONAL_PARAMS.get(key)
    try:
        if rational is not None:
            interval, count = rational
            what = f"parameter {key}"
            if count is None:
                return _rational_list(ledger_rational(item, interval, what))
            if not (isinstance(item, list) and len(item) == count):
                raise ScriptContextError(f"{what} must be a list of {count} rationals")
            return plist(
                _rational_list(ledger_rational(v, interval, f"{what}[{i}]"))
                for i, v in enumerate(item)
            )
    except RationalError as err:
        raise ScriptContextError(str(err)) from err
    return _plain_param_value(key, item)


def _plain_param_value(key: int, item: Any) -> PlutusData:
    if isinstance(item, CborTag):
        raise ScriptContextError(f"parameter {key} does not take a tagged value {item!r}")
    if isinstance(item, int) and not isinstance(item, bool):
        return integer(item)
    if isinstance(item, list):
        return plist(_plain_param_value(key, i) for i in item)
    if isinstance(item, CborMap):
        return pmap((_plain_param_value(key, k), _plain_param_value(key, v)) for k, v in item.pairs)
    raise ScriptContextError(f"unsupported parameter value {item!r}")


def governance_action(action: Any) -> PlutusData:
    if not (isinstance(action, list) and action and action[0] in range(7)):
        raise ScriptContextError(f"malformed governance action {action!r}")
    kind = action[0]
    try:
        if kind == 0:
            return constr(
                0,
                _maybe_gov_action_id(action[1]),
                changed_parameters(action[2]),
                _maybe_script_hash(action[3]),
            )
        if kind == 1:
            version = constr(0, integer(action[2][0]), integer(action[2][1]))
            return constr(1, _maybe_gov_action_id(action[1]), version)
        if kind == 2:
            withdrawals = sorted(
                ((decode_reward_account(k), v) for k, v in action[1].pairs),
                key=lambda kv: kv[0].sort_key(),
            )
            return constr(
                2,
                pmap((credential(a.credential), integer(v)) for a, v in withdrawals),
                _maybe_script_hash(action[2]),
            )
        if kind == 3:
            return constr(3, _maybe_gov_action_id(action[1]))
        if kind == 4:
            removed = sorted((decode_credential(c) for c in action[2]), key=Credential.sort_key)
            added = sorted(
                ((decode_credential(list(k)), v) for k, v in action[3].pairs),
                key=lambda kv: kv[0].sort_key(),
            )
            return constr(
                4,
                _maybe_gov_action_id(action[1]),
                plist(credential(c) for c in removed),
                pmap((credential(c), integer(e)) for c, e in added),
                _quorum(action[4]),
            )
        if kind == 5:
            constitution = constr(0, _maybe_script_hash(action[2][1]))
            return constr(5, _maybe_gov_action_id(action[1]), constitution)
        return constr(6)
    except (IndexError, TypeError, AttributeError, TxDecodeError) as err:
        raise ScriptContextError(f"malformed governance action {action!r}") from err


def proposal_procedure(proposal: Any) -> PlutusData:
    if not (isinstance(proposal, list) and len(proposal) == 4):
        raise ScriptContextError(f"malformed proposal procedure {proposal!r}")
    try:
        account = decode_reward_account(proposal[1])
    except TxDecodeError as err:
        raise ScriptContextError(str(err)) from err
    return constr(
        0,
        integer(proposal[0]),
        credential(account.credential),
        governance_action(proposal[2]),
    )
