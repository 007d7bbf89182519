"""Conway phase-1 rules: everything a node checks before running any Plutus script.

`validate_phase1` checks one decoded transaction against a view of the ledger (confirmed
state plus the mempool) and returns what applying it would do. Each failure raises the
`errors` subclass named after the Haskell ledger's predicate failure, with a reason that
names the offending input, output, script or credential and the expected vs actual value.
"""

from __future__ import annotations

from collections.abc import Iterable, Set
from dataclasses import dataclass
from typing import Any, Protocol

import cbor2
import nacl.exceptions
import nacl.signing

from chain.devnet import errors as e
from chain.devnet.addresses import (
    SCRIPT,
    Credential,
    DRep,
    address_network,
    address_text,
    credential_from_cbor,
    drep_from_cbor,
    is_byron,
    payment_credential,
    reward_account_order,
    reward_credential,
)
from chain.devnet.fees import min_ada, min_collateral, min_fee, script_fee
from chain.devnet.integrity import MissingCostModel, script_integrity_hash
from chain.devnet.native_scripts import evaluate_native
from chain.devnet.params import ProtocolParams
from chain.devnet.purposes import PurposeError, needed_scripts_of
from chain.devnet.txdecode import (
    REDEEMER_TAGS,
    Assets,
    DecodedTx,
    InputKey,
    Output,
    blake2b_224,
    blake2b_256,
    decode_output,
    key_str,
    script_hash,
    tx_in,
)

_MAX_METADATA_VALUE_BYTES = 64


class LedgerView(Protocol):
    """What the rules read: unspent outputs and stake registrations (mempool included)."""

    def lookup(self, key: InputKey) -> bytes | None:
        """Output CBOR of an unspent output, None when unknown or spent."""
        ...

    def spent_in_mempool(self, key: InputKey) -> str | None:
        """Hash of the mempool transaction that already spends `key`, if any."""
        ...

    def stake_deposit(self, credential: Credential) -> int | None:
        """Deposit held for a registered credential, None when not registered."""
        ...

    def reward(self, credential: Credential) -> int: ...

    def drep_delegation(self, credential: Credential) -> DRep | None:
        """The DRep a registered credential delegates its vote to, None when it does not."""
        ...


@dataclass(frozen=True)
class RuleEnv:
    params: ProtocolParams
    network_id: int
    slot: int


@dataclass(frozen=True)
class Purpose:
    tag: int  # redeemer tag number
    index: int
    script_hash: bytes
    language: int | None  # 0 native, 1..3 Plutus; None when the script is missing


@dataclass(frozen=True)
class Phase1Result:
    tx: DecodedTx
    resolved: dict[InputKey, Output]  # spent, collateral and reference inputs
    purposes: tuple[Purpose, ...]
    scripts: dict[bytes, tuple[int, bytes]]  # every provided script by hash
    stake_changes: tuple[tuple[Credential, int | None], ...]  # None: deregistered
    drep_changes: tuple[tuple[Credential, DRep | None], ...]  # None: delegation cleared
    deposits: int
    refunds: int
    collateral_balance: int  # lovelace the collateral inputs put up net of their return

    @property
    def needs_phase2(self) -> bool:
        return bool(self.tx.redeemers)

    @property
    def ex_units(self) -> tuple[int, int]:
        return (sum(r.mem for r in self.tx.redeemers), sum(r.steps for r in self.tx.redeemers))


def validate_phase1(tx: DecodedTx, view: LedgerView, env: RuleEnv) -> Phase1Result:
    params = env.params
    _check_size(tx, params)
    if not tx.inputs:
        raise e.InputSetEmpty("the transaction spends no inputs")
    resolved = _resolve(tx, view)
    _check_validity_interval(tx, env.slot)
    _check_network(tx, env.network_id)
    _check_unsupported(tx)
    _check_outputs(tx, params)
    _check_auxiliary_data(tx)
    scripts = _provided_scripts(tx, resolved)
    ref_size = _ref_script_size(tx, resolved)
    if ref_size > params.max_ref_script_size_per_tx:
        raise e.RefScriptsSizeTooBig(
            f"reference scripts total {ref_size} bytes, the limit is "
            f"{params.max_ref_script_size_per_tx}"
        )
    purposes = _purposes(tx, resolved, scripts)
    _check_scripts(tx, purposes, scripts)
    signers = _check_vkey_witnesses(tx)
    _check_native_scripts(tx, purposes, scripts, signers)
    _check_required_keys(tx, resolved, signers)
    _check_datums(tx, resolved, purposes)
    _check_redeemers(tx, purposes)
    _check_integrity_hash(tx, purposes, params)
    _check_ex_units(tx, params)
    _check_fee(tx, params, ref_size)
    collateral_balance = _check_collateral(tx, resolved, params)
    changes, dreps, deposits, refunds = _check_certs_and_withdrawals(tx, view, params)
    _check_treasury(tx)
    _check_value_preserved(tx, resolved, deposits, refunds)
    return Phase1Result(
        tx=tx,
        resolved=resolved,
        purposes=tuple(purposes),
        scripts=scripts,
        stake_changes=tuple(changes),
        drep_changes=tuple(dreps),
        deposits=deposits,
        refunds=refunds,
        collateral_balance=collateral_balance,
    )


# --- size, inputs, interval, network ---------------------------------------------------


def _check_size(tx: DecodedTx, params: ProtocolParams) -> None:
    if tx.size > params.max_tx_size:
        raise e.MaxTxSizeExceeded(
            f"transaction is {tx.size} bytes, the maximum is {params.max_tx_size}"
        )


def _resolve(tx: DecodedTx, view: LedgerView) -> dict[InputKey, Output]:
    resolved: dict[InputKey, Output] = {}
    for what, keys in (
        ("input", tx.inputs),
        ("collateral input", tx.collateral),
        ("reference input", tx.reference_inputs),
    ):
        for key in keys:
            if key in resolved:
                continue
            raw = view.lookup(key)
            if raw is None:
                spender = view.spent_in_mempool(key)
                if spender is not None:
                    raise e.BadInputs(
                        f"{what} {key_str(key)} is already spent by mempool transaction {spender}"
                    )
                raise e.BadInputs(f"{what} {key_str(key)} does not exist or is already spent")
            resolved[key] = decode_output(raw, f"output {key_str(key)}")
    return resolved


def _check_validity_interval(tx: DecodedTx, slot: int) -> None:
    if tx.validity_start is not None and slot < tx.validity_start:
        raise e.OutsideValidityInterval(
            f"current slot {slot} is before the transaction's invalid_before {tx.validity_start}"
        )
    if tx.ttl is not None and slot >= tx.ttl:
        raise e.OutsideValidityInterval(
            f"current slot {slot} is not before the transaction's invalid_hereafter {tx.ttl}"
        )


def _check_network(tx: DecodedTx, network_id: int) -> None:
    if tx.network_id is not None and tx.network_id != network_id:
        raise e.WrongNetworkInTxBody(
            f"body network id is {tx.network_id}, the devnet's is {network_id}"
        )
    outputs = list(enumerate(tx.outputs))
    if tx.collateral_return is not None:
        outputs.append((len(tx.outputs), tx.collateral_return))
    for i, out in outputs:
        net = address_network(out.address)
        if net is not None and net != network_id:
            name = "collateral return" if i == len(tx.outputs) else f"output {i}"
            raise e.WrongNetwork(
                f"{name} pays to {address_text(out.address)} on network {net}, "
                f"the devnet's is {network_id}"
            )
    for account in tx.withdrawals:
        if reward_credential(account) is None:
            raise e.MalformedTransaction(
                f"withdrawal account {account.hex()} is not a reward account"
            )
        if account[0] & 0x0F != network_id:
            raise e.WrongNetworkWithdrawal(
                f"withdrawal from {address_text(account)} on network {account[0] & 0x0F}, "
                f"the devnet's is {network_id}"
            )


def _check_unsupported(tx: DecodedTx) -> None:
    if tx.has_voting or tx.has_proposals:
        raise e.UnsupportedOnDevnet(
            "governance votes and proposals are not modelled by the devnet (no DReps or pools)"
        )
    if tx.has_bootstrap_witnesses:
        raise e.UnsupportedOnDevnet("Byron bootstrap witnesses are not supported by the devnet")


# --- outputs ---------------------------------------------------------------------------


def _all_outputs(tx: DecodedTx) -> list[tuple[str, Output]]:
    named = [(f"output {i}", out) for i, out in enumerate(tx.outputs)]
    if tx.collateral_return is not None:
        named.append(("collateral return", tx.collateral_return))
    return named


def _check_outputs(tx: DecodedTx, params: ProtocolParams) -> None:
    for name, out in _all_outputs(tx):
        needed = min_ada(params, len(out.raw))
        if out.coin < needed:
            raise e.OutputTooSmall(
                f"{name} holds {out.coin} lovelace, needs at least {needed} "
                f"({len(out.raw)} bytes serialized)"
            )
    for name, out in _all_outputs(tx):
        if out.value_size > params.max_val_size:
            raise e.OutputValueTooBig(
                f"{name} value is {out.value_size} bytes serialized, "
                f"the maximum is {params.max_val_size}"
            )


def _check_auxiliary_data(tx: DecodedTx) -> None:
    if tx.aux_data_raw is None:
        if tx.aux_data_hash is not None:
            raise e.AuxiliaryDataMismatch(
                "the body declares an auxiliary data hash but the transaction has no "
                "auxiliary data (MissingTxMetadata)"
            )
        return
    actual = blake2b_256(tx.aux_data_raw)
    if tx.aux_data_hash is None:
        raise e.AuxiliaryDataMismatch(
            f"auxiliary data present (hash {actual.hex()}) but the body has no "
            "auxiliary data hash (MissingTxBodyMetadataHash)"
        )
    if tx.aux_data_hash != actual:
        raise e.AuxiliaryDataMismatch(
            f"body auxiliary data hash {tx.aux_data_hash.hex()} != hash of the auxiliary "
            f"data {actual.hex()}"
        )
    for label, value in auxiliary_metadata(tx.aux_data_raw).items():
        _check_metadatum(label, value)


def auxiliary_metadata(aux_raw: bytes) -> dict[int, Any]:
    """Metadata (label -> value) of any auxiliary-data shape (Shelley, Allegra, Alonzo+)."""
    aux = cbor2.loads(aux_raw)
    if isinstance(aux, cbor2.CBORTag) and aux.tag == 259 and isinstance(aux.value, dict):
        metadata = aux.value.get(0, {})
    elif isinstance(aux, list) and len(aux) == 2:
        metadata = aux[0]
    else:
        metadata = aux
    if not isinstance(metadata, dict) or not all(
        isinstance(k, int) and not isinstance(k, bool) and k >= 0 for k in metadata
    ):
        raise e.InvalidMetadata("metadata must be a map from unsigned labels to values")
    return metadata


def _check_metadatum(label: int, value: Any, depth: int = 0) -> None:
    if depth > 64:
        raise e.InvalidMetadata(f"metadata under label {label} nests too deeply")
    if isinstance(value, bytes | str):
        size = len(value.encode() if isinstance(value, str) else value)
        if size > _MAX_METADATA_VALUE_BYTES:
            raise e.InvalidMetadata(
                f"metadata under label {label} has a {size}-byte "
                f"{'text' if isinstance(value, str) else 'bytes'} value; at most 64 allowed"
            )
    elif isinstance(value, list):
        for item in value:
            _check_metadatum(label, item, depth + 1)
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_metadatum(label, key, depth + 1)
            _check_metadatum(label, item, depth + 1)
    elif not isinstance(value, int) or isinstance(value, bool):
        raise e.InvalidMetadata(
            f"metadata under label {label} holds a {type(value).__name__}; only integers, "
            "bytes, text, lists and maps are allowed"
        )


# --- scripts and purposes ----------------------------------------------------------------


def _provided_scripts(
    tx: DecodedTx, resolved: dict[InputKey, Output]
) -> dict[bytes, tuple[int, bytes]]:
    scripts: dict[bytes, tuple[int, bytes]] = {}
    for key in (*tx.inputs, *tx.reference_inputs):
        ref = resolved[key].script_ref
        if ref is not None:
            scripts[script_hash(*ref)] = ref
    for native in tx.native_scripts:
        scripts[script_hash(0, native)] = (0, native)
    for lang, body in tx.plutus_scripts:
        scripts[script_hash(lang, body)] = (lang, body)
    return scripts


def _ref_script_size(tx: DecodedTx, resolved: dict[InputKey, Output]) -> int:
    total = 0
    for key in set(tx.inputs) | set(tx.reference_inputs):
        ref = resolved[key].script_ref
        if ref is not None:
            total += len(ref[1])
    return total


# Conway certificate shapes the devnet applies: tag -> (length, position of the pool key
# hash or None, position of the DRep or None, position of the deposit/refund or None).
_CERT_SHAPES: dict[int, tuple[int, int | None, int | None, int | None]] = {
    0: (2, None, None, None),  # stake_registration (legacy, no deposit field)
    1: (2, None, None, None),  # stake_deregistration (legacy)
    7: (3, None, None, 2),  # reg_cert
    8: (3, None, None, 2),  # unreg_cert
    9: (3, None, 2, None),  # vote_deleg_cert
    10: (4, 2, 3, None),  # stake_vote_deleg_cert
    11: (4, 2, None, 3),  # stake_reg_deleg_cert
    12: (4, None, 2, 3),  # vote_reg_deleg_cert
    13: (5, 2, 3, 4),  # stake_vote_reg_deleg_cert
}
_REGISTRATIONS = {0, 7, 11, 12, 13}
_DEREGISTRATIONS = {1, 8}


def cert_credential(cert: list[Any], index: int) -> tuple[Credential, bool]:
    """(credential, needs a witness) of a supported stake certificate."""
    kind = cert[0]
    shape = _CERT_SHAPES.get(kind)
    if shape is None:
        raise e.UnsupportedOnDevnet(
            f"certificate {index} has type {kind}; the devnet supports stake (de)registration "
            "and vote delegation (types 0, 1, 7-13) only: it runs no pools, DReps or committee"
        )
    length, pool_at, drep_at, coin_at = shape
    cred = credential_from_cbor(cert[1]) if len(cert) == length else None
    well_formed = (
        cred is not None
        and (pool_at is None or (isinstance(cert[pool_at], bytes) and len(cert[pool_at]) == 28))
        and (drep_at is None or drep_from_cbor(cert[drep_at]) is not None)
        and (coin_at is None or (isinstance(cert[coin_at], int) and cert[coin_at] >= 0))
    )
    if not well_formed or cred is None:
        raise e.MalformedTransaction(f"certificate {index} is not a well-formed type-{kind}")
    # A legacy registration (type 0) is the one certificate that needs no witness.
    return cred, kind != 0


def _purposes(
    tx: DecodedTx, resolved: dict[InputKey, Output], scripts: dict[bytes, tuple[int, bytes]]
) -> list[Purpose]:
    for i, cert in enumerate(tx.certs):
        cert_credential(cert, i)  # the devnet supports stake certificates only
    utxos = {tx_in(key): resolved[key].view for key in tx.inputs}
    try:
        needed = needed_scripts_of(tx.view.body, utxos)
    except PurposeError as err:
        raise e.MalformedTransaction(str(err)) from None
    found: list[Purpose] = []
    for n in needed:
        h = bytes.fromhex(n.script_hash)
        provided = scripts.get(h)
        found.append(Purpose(n.tag_number, n.index, h, None if provided is None else provided[0]))
    return found


def _purpose_name(p: Purpose) -> str:
    return f"{REDEEMER_TAGS[p.tag]} #{p.index}"


def _check_scripts(
    tx: DecodedTx, purposes: list[Purpose], scripts: dict[bytes, tuple[int, bytes]]
) -> None:
    for p in purposes:
        if p.language is None:
            raise e.MissingScriptWitnesses(
                f"script {p.script_hash.hex()} needed for {_purpose_name(p)} is neither a "
                "witness nor a reference script of a spent or reference input"
            )
    needed = {p.script_hash for p in purposes}
    witnessed = [script_hash(0, n) for n in tx.native_scripts]
    witnessed += [script_hash(lang, body) for lang, body in tx.plutus_scripts]
    for h in witnessed:
        if h not in needed:
            raise e.ExtraneousScriptWitnesses(
                f"witness script {h.hex()} is not needed by any input, policy, certificate "
                "or withdrawal"
            )


def _check_vkey_witnesses(tx: DecodedTx) -> set[bytes]:
    signers: set[bytes] = set()
    for vkey, signature in tx.vkey_witnesses:
        try:
            nacl.signing.VerifyKey(vkey).verify(tx.tx_id, signature)
        except (nacl.exceptions.BadSignatureError, ValueError):
            raise e.InvalidWitnesses(
                f"signature of key {vkey.hex()} (key hash {blake2b_224(vkey).hex()}) does not "
                f"verify against transaction id {tx.tx_hash}"
            ) from None
        signers.add(blake2b_224(vkey))
    return signers


def _check_native_scripts(
    tx: DecodedTx,
    purposes: list[Purpose],
    scripts: dict[bytes, tuple[int, bytes]],
    signers: Set[bytes],
) -> None:
    checked: set[bytes] = set()
    for p in purposes:
        if p.language != 0 or p.script_hash in checked:
            continue
        checked.add(p.script_hash)
        script = cbor2.loads(scripts[p.script_hash][1])
        if not evaluate_native(script, signers, tx.validity_start, tx.ttl):
            raise e.NativeScriptFailure(
                f"native script {p.script_hash.hex()} ({_purpose_name(p)}) does not hold for "
                f"the provided signatures and validity interval "
                f"[{tx.validity_start}, {tx.ttl})"
            )


def _check_required_keys(
    tx: DecodedTx, resolved: dict[InputKey, Output], signers: Set[bytes]
) -> None:
    for what, keys in (("input", sorted(tx.inputs)), ("collateral input", tx.collateral)):
        for key in keys:
            address = resolved[key].address
            if is_byron(address):
                raise e.UnsupportedOnDevnet(
                    f"{what} {key_str(key)} is locked by a Byron address; bootstrap "
                    "witnesses are not supported"
                )
            cred = payment_credential(address)
            if cred is not None and cred[0] != SCRIPT and cred[1:] not in signers:
                raise e.MissingVKeyWitnesses(
                    f"{what} {key_str(key)} is locked by key hash {cred[1:].hex()} "
                    "which did not sign"
                )
    for account in sorted(tx.withdrawals, key=reward_account_order):
        cred = reward_credential(account)
        if cred is not None and cred[0] != SCRIPT and cred[1:] not in signers:
            raise e.MissingVKeyWitnesses(
                f"withdrawal from {address_text(account)} needs a signature from stake key "
                f"hash {cred[1:].hex()}"
            )
    for i, cert in enumerate(tx.certs):
        cred, witnessed = cert_credential(cert, i)
        if witnessed and cred[0] != SCRIPT and cred[1:] not in signers:
            raise e.MissingVKeyWitnesses(
                f"certificate {i} (type {cert[0]}) needs a signature from stake key hash "
                f"{cred[1:].hex()}"
            )
    for signer in tx.required_signers:
        if signer not in signers:
            raise e.MissingRequiredSigner(
                f"required signer {signer.hex()} has no verifying vkey witness"
            )


def _check_datums(tx: DecodedTx, resolved: dict[InputKey, Output], purposes: list[Purpose]) -> None:
    provided = {blake2b_256(d): d for d in tx.datums}
    required: set[bytes] = set()
    sorted_inputs = sorted(tx.inputs)
    for p in purposes:
        if p.tag != 0 or p.language in (None, 0):
            continue
        key = sorted_inputs[p.index]
        out = resolved[key]
        if out.inline_datum is not None:
            continue
        if out.datum_hash is None:
            if p.language in (1, 2):
                raise e.UnspendableUTxONoDatumHash(
                    f"input {key_str(key)} is locked by Plutus V{p.language} script "
                    f"{p.script_hash.hex()} but carries no datum"
                )
            continue  # PlutusV3 scripts may lock outputs without a datum (CIP-69)
        required.add(out.datum_hash)
        if out.datum_hash not in provided:
            raise e.MissingDatum(
                f"input {key_str(key)} needs the datum with hash {out.datum_hash.hex()}, "
                "which is not in the witness set"
            )
    allowed = set(required)
    for _, out in _all_outputs(tx):
        if out.datum_hash is not None:
            allowed.add(out.datum_hash)
    for key in tx.reference_inputs:
        ref_hash = resolved[key].datum_hash
        if ref_hash is not None:
            allowed.add(ref_hash)
    for h in provided:
        if h not in allowed:
            raise e.NotAllowedSupplementalDatums(
                f"witness datum {h.hex()} is neither required by a script input nor the "
                "datum hash of an output or reference input"
            )


def _check_redeemers(tx: DecodedTx, purposes: list[Purpose]) -> None:
    present = {(r.tag, r.index) for r in tx.redeemers}
    wanted = {(p.tag, p.index): p for p in purposes if p.language not in (None, 0)}
    for pointer, p in wanted.items():
        if pointer not in present:
            raise e.MissingRedeemers(
                f"no redeemer for {_purpose_name(p)} (Plutus script {p.script_hash.hex()})"
            )
    for r in tx.redeemers:
        if (r.tag, r.index) not in wanted:
            raise e.ExtraRedeemers(
                f"redeemer {REDEEMER_TAGS[r.tag]} #{r.index} points at nothing a Plutus "
                "script must validate"
            )


def _check_integrity_hash(tx: DecodedTx, purposes: list[Purpose], params: ProtocolParams) -> None:
    languages = {p.language for p in purposes if p.language in (1, 2, 3)}
    try:
        expected = script_integrity_hash(
            tx.redeemers_raw,
            tx.datums_raw,
            params.cost_models,
            (lang for lang in languages if lang is not None),
            has_redeemers=bool(tx.redeemers),
            has_datums=bool(tx.datums),
        )
    except MissingCostModel as exc:
        raise e.ScriptIntegrityHashMismatch(str(exc)) from None
    if expected == tx.script_data_hash:
        return
    if expected is None:
        raise e.ScriptIntegrityHashMismatch(
            f"body has script_data_hash {tx.script_data_hash.hex() if tx.script_data_hash else ''}"
            " but the transaction has no redeemers, datums or Plutus scripts"
        )
    if tx.script_data_hash is None:
        raise e.ScriptIntegrityHashMismatch(
            f"body has no script_data_hash; expected {expected.hex()}"
        )
    raise e.ScriptIntegrityHashMismatch(
        f"body script_data_hash {tx.script_data_hash.hex()} != computed {expected.hex()} "
        f"(languages {sorted(languages)})"
    )


def _check_ex_units(tx: DecodedTx, params: ProtocolParams) -> None:
    mem = sum(r.mem for r in tx.redeemers)
    steps = sum(r.steps for r in tx.redeemers)
    if mem > params.max_tx_ex_mem or steps > params.max_tx_ex_steps:
        raise e.ExUnitsTooBig(
            f"redeemers declare {mem} memory / {steps} steps, the per-transaction maximum is "
            f"{params.max_tx_ex_mem} / {params.max_tx_ex_steps}"
        )


def _check_fee(tx: DecodedTx, params: ProtocolParams, ref_size: int) -> None:
    units = [(r.mem, r.steps) for r in tx.redeemers]
    needed = min_fee(params, tx.size, units, ref_size)
    if tx.fee < needed:
        mem = sum(u[0] for u in units)
        steps = sum(u[1] for u in units)
        raise e.FeeTooSmall(
            f"fee {tx.fee} is below the minimum {needed} (size {tx.size} bytes, script fee "
            f"{script_fee(params, mem, steps)}, reference scripts {ref_size} bytes)"
        )


def _check_collateral(
    tx: DecodedTx, resolved: dict[InputKey, Output], params: ProtocolParams
) -> int:
    # The count limit holds for every transaction; the rest only when scripts run.
    if len(tx.collateral) > params.max_collateral_inputs:
        raise e.TooManyCollateralInputs(
            f"{len(tx.collateral)} collateral inputs, at most {params.max_collateral_inputs}"
        )
    if not tx.redeemers:
        return 0
    if not tx.collateral:
        raise e.NoCollateralInputs("the transaction runs Plutus scripts but has no collateral")
    coin = 0
    assets: Assets = {}
    for key in tx.collateral:
        out = resolved[key]
        cred = payment_credential(out.address)
        if cred is None or cred[0] == SCRIPT:
            raise e.CollateralNotKeyLocked(
                f"collateral input {key_str(key)} is not locked by a verification key "
                f"({address_text(out.address)})"
            )
        coin += out.coin
        _add_assets(assets, out.assets, 1)
    if tx.collateral_return is not None:
        coin -= tx.collateral_return.coin
        _add_assets(assets, tx.collateral_return.assets, -1)
    if coin < 0:
        raise e.CollateralError(
            f"collateral return takes {-coin} lovelace more than the collateral inputs hold"
        )
    if assets:
        listed = ", ".join(f"{a.hex()}={q}" for a, q in sorted(assets.items()))
        raise e.CollateralContainsNonADA(
            f"collateral net of its return must be ADA only, but leaves tokens {listed}"
        )
    needed = min_collateral(params, tx.fee)
    if coin < needed:
        raise e.CollateralError(
            f"collateral balance {coin} lovelace is below {needed} "
            f"({params.collateral_percent}% of fee {tx.fee})"
        )
    if tx.total_collateral is not None and tx.total_collateral != coin:
        raise e.IncorrectTotalCollateral(
            f"total_collateral field says {tx.total_collateral}, the collateral balance is {coin}"
        )
    return coin


def _check_certs_and_withdrawals(
    tx: DecodedTx, view: LedgerView, params: ProtocolParams
) -> tuple[list[tuple[Credential, int | None]], list[tuple[Credential, DRep | None]], int, int]:
    # Conway checks withdrawals against the state before any certificate of the same tx.
    for account in sorted(tx.withdrawals, key=reward_account_order):
        amount = tx.withdrawals[account]
        cred = reward_credential(account)
        assert cred is not None  # checked with the network
        if view.stake_deposit(cred) is None:
            raise e.WithdrawalError(
                f"withdrawal of {amount} from {address_text(account)}: the reward account "
                "is not registered"
            )
        balance = view.reward(cred)
        if amount != balance:
            raise e.WithdrawalError(
                f"withdrawal of {amount} from {address_text(account)} must equal its whole "
                f"reward balance {balance}"
            )
        # From protocol 10 (the end of Conway's bootstrap phase) a key-hash reward account
        # withdraws only while it delegates its vote to a DRep (ledger: LEDGER rule,
        # validateWithdrawalsDelegated), zero withdrawals included; script accounts are free.
        if (
            params.protocol_major_ver >= 10
            and cred[0] != SCRIPT
            and view.drep_delegation(cred) is None
        ):
            raise e.WithdrawalNotDelegatedToDRep(
                f"withdrawal of {amount} from {address_text(account)}: key hash "
                f"{cred[1:].hex()} does not delegate to a DRep (protocol "
                f"{params.protocol_major_ver} requires it; delegate with a vote_deleg_cert "
                "in an earlier transaction)"
            )
    drained = {reward_credential(a) for a in tx.withdrawals}
    local: dict[Credential, int | None] = {}
    changes: list[tuple[Credential, int | None]] = []
    drep_changes: list[tuple[Credential, DRep | None]] = []
    deposits = refunds = 0
    pv11 = params.protocol_major_ver > 10

    def deposit_of(cred: Credential) -> int | None:
        return local[cred] if cred in local else view.stake_deposit(cred)

    for i, cert in enumerate(tx.certs):
        cred, _ = cert_credential(cert, i)
        kind = cert[0]
        _, pool_at, drep_at, coin_at = _CERT_SHAPES[kind]
        name = (
            f"certificate {i} (type {kind}) for {'script' if cred[0] else 'key'} {cred[1:].hex()}"
        )
        if kind in _REGISTRATIONS:
            if coin_at is not None and cert[coin_at] != params.key_deposit:
                rule = "DepositIncorrectDELEG" if pv11 else "IncorrectDepositDELEG"
                raise e.StakeRegistrationError(
                    f"{name}: deposit {cert[coin_at]} != key deposit {params.key_deposit} ({rule})"
                )
            if deposit_of(cred) is not None:
                raise e.StakeRegistrationError(
                    f"{name}: stake credential is already registered (StakeKeyRegisteredDELEG)"
                )
        elif deposit_of(cred) is None and kind not in _DEREGISTRATIONS:
            _check_delegatees(cert, pool_at, drep_at, name)
            raise e.StakeRegistrationError(
                f"{name}: stake credential is not registered (StakeKeyNotRegisteredDELEG)"
            )
        _check_delegatees(cert, pool_at, drep_at, name)
        if kind in _REGISTRATIONS:
            local[cred] = params.key_deposit
            deposits += params.key_deposit
            changes.append((cred, local[cred]))
        elif kind in _DEREGISTRATIONS:
            held = deposit_of(cred)
            if held is None:
                raise e.StakeRegistrationError(
                    f"{name}: stake credential is not registered (StakeKeyNotRegisteredDELEG)"
                )
            reward = 0 if cred in drained or cred in local else view.reward(cred)
            if kind == 8 and cert[2] != held:
                rule = "RefundIncorrectDELEG" if pv11 else "IncorrectKeyDepositRefund"
                raise e.StakeRegistrationError(
                    f"{name}: refund {cert[2]} != deposit held {held} ({rule})"
                )
            if reward != 0:
                raise e.StakeRegistrationError(
                    f"{name}: reward balance is {reward}, must be withdrawn first "
                    "(StakeKeyHasNonZeroRewardAccountBalanceDELEG)"
                )
            local[cred] = None
            refunds += held
            changes.append((cred, None))
            drep_changes.append((cred, None))  # deregistering drops the vote delegation
        if drep_at is not None:
            drep_changes.append((cred, drep_from_cbor(cert[drep_at])))
    return changes, drep_changes, deposits, refunds


def _check_delegatees(cert: list[Any], pool_at: int | None, drep_at: int | None, name: str) -> None:
    """The devnet registers no pools and no DReps: only the two default DReps can be
    delegated to (the ledger requires a registered delegatee from protocol 10)."""
    if pool_at is not None:
        raise e.DelegateeNotRegistered(
            f"{name}: stake pool {cert[pool_at].hex()} is not registered (the devnet runs "
            "no pools) (DelegateeStakePoolNotRegisteredDELEG)"
        )
    if drep_at is not None:
        drep = drep_from_cbor(cert[drep_at])
        assert drep is not None  # checked by cert_credential
        if len(drep) > 1:
            raise e.DelegateeNotRegistered(
                f"{name}: DRep {'script' if drep[0] == SCRIPT else 'key'} {drep[1:].hex()} is "
                "not registered (the devnet registers no DReps; delegate to always-abstain "
                "or always-no-confidence) (DelegateeDRepNotRegisteredDELEG)"
            )


def _check_treasury(tx: DecodedTx) -> None:
    # The devnet's treasury is empty and never grows (no rewards, no fees to it).
    if tx.current_treasury is not None and tx.current_treasury != 0:
        raise e.TreasuryValueMismatch(
            f"current_treasury_value {tx.current_treasury} != the devnet's treasury 0"
        )


# --- value -------------------------------------------------------------------------------


def _add_assets(acc: Assets, assets: Assets, sign: int) -> None:
    for unit, qty in assets.items():
        total = acc.get(unit, 0) + sign * qty
        if total:
            acc[unit] = total
        else:
            acc.pop(unit, None)


def _describe(coin: int, assets: Assets) -> str:
    parts = [f"{coin} lovelace"]
    parts += [f"{q} {u[:28].hex()}.{u[28:].hex()}" for u, q in sorted(assets.items())]
    return " + ".join(parts)


def _check_value_preserved(
    tx: DecodedTx, resolved: dict[InputKey, Output], deposits: int, refunds: int
) -> None:
    in_coin = sum(resolved[k].coin for k in tx.inputs)
    consumed_coin = in_coin + sum(tx.withdrawals.values()) + refunds
    consumed: Assets = {}
    for k in tx.inputs:
        _add_assets(consumed, resolved[k].assets, 1)
    _add_assets(consumed, {u: q for u, q in tx.mint.items() if q > 0}, 1)
    produced_coin = sum(o.coin for o in tx.outputs) + tx.fee + deposits + tx.donation
    produced: Assets = {}
    for o in tx.outputs:
        _add_assets(produced, o.assets, 1)
    _add_assets(produced, {u: -q for u, q in tx.mint.items() if q < 0}, 1)
    if consumed_coin == produced_coin and consumed == produced:
        return
    diff = dict(consumed)
    _add_assets(diff, produced, -1)
    raise e.ValueNotConserved(
        f"consumed {_describe(consumed_coin, consumed)} (inputs {in_coin}, withdrawals "
        f"{sum(tx.withdrawals.values())}, refunds {refunds}) but produced "
        f"{_describe(produced_coin, produced)} (fee {tx.fee}, deposits {deposits}, donation "
        f"{tx.donation}); consumed - produced = {_describe(consumed_coin - produced_coin, diff)}"
    )


def total_output_lovelace(outputs: Iterable[Output]) -> int:
    return sum(o.coin for o in outputs)
