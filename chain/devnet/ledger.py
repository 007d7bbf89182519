"""The devnet ledger: UTxO state, mempool, blocks, faucet and faults behind one lock.

State lives in SQLite (`store.Store`) and, for validation speed, as a compact in-memory
index: unspent output CBOR by 34-byte input key, and stake registrations. The mempool is
an overlay on that index (outputs it creates, outputs it spends, stake it changes), so a
submitted transaction may chain on mempool outputs but never double-spend one.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import threading
import time
from collections.abc import Iterable, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import cbor2
from pycardano import (
    Address,
    Asset,
    AssetName,
    MultiAsset,
    Network,
    PaymentSigningKey,
    ScriptHash,
    ScriptPubkey,
    Transaction,
    TransactionBody,
    TransactionInput,
    TransactionOutput,
    TransactionWitnessSet,
    Value,
    VerificationKeyWitness,
)

from chain.devnet import errors as e
from chain.devnet.addresses import (
    Credential,
    address_bytes,
    address_text,
    drep_id_text,
    payment_credential,
    reward_credential,
    stake_credential,
)
from chain.devnet.cost_models import default_cost_models
from chain.devnet.fees import min_fee, script_fee
from chain.devnet.interface import DevnetLedger
from chain.devnet.params import GenesisConfig, ProtocolParams
from chain.devnet.plutus_tx import Output as PlutusOutput
from chain.devnet.plutus_tx import TxIn
from chain.devnet.records import (
    AccountRecord,
    AssetRecord,
    BlockRecord,
    OutputRecord,
    RedeemerEvaluation,
    RedeemerRecord,
    ScriptRecord,
    TxRecord,
)
from chain.devnet.rules import (
    Phase1Result,
    RuleEnv,
    auxiliary_metadata,
    validate_phase1,
)
from chain.devnet.store import (
    INPUT_COLLATERAL,
    INPUT_REFERENCE,
    INPUT_SPEND,
    AppliedTx,
    NewOutput,
    Store,
)
from chain.devnet.txdecode import (
    LANG_NAMES,
    REDEEMER_TAGS,
    DecodedTx,
    InputKey,
    blake2b_256,
    decode_output,
    decode_tx,
    input_key,
    key_str,
    script_hash,
    tx_in,
)

log = logging.getLogger(__name__)

DB_NAME = "ledger.sqlite3"
FAUCET_KEY_NAME = "faucet.skey"
GENESIS_FAUCET_OUTPUTS = 8


# --- parameter (de)serialisation ------------------------------------------------------------


def _to_json(value: Any) -> Any:
    if isinstance(value, Fraction):
        return {"fraction": [value.numerator, value.denominator]}
    return value


def _from_json(value: Any) -> Any:
    if isinstance(value, dict) and set(value) == {"fraction"}:
        return Fraction(*value["fraction"])
    return value


def params_to_json(params: ProtocolParams) -> str:
    return json.dumps(
        {f.name: _to_json(getattr(params, f.name)) for f in dataclasses.fields(params)}
    )


def params_from_json(text: str) -> ProtocolParams:
    raw = json.loads(text)
    known = {f.name for f in dataclasses.fields(ProtocolParams)}
    return ProtocolParams(**{k: _from_json(v) for k, v in raw.items() if k in known})


def genesis_to_json(genesis: GenesisConfig) -> str:
    return json.dumps(dataclasses.asdict(genesis))


def genesis_from_json(text: str) -> GenesisConfig:
    raw = json.loads(text)
    known = {f.name for f in dataclasses.fields(GenesisConfig)}
    return GenesisConfig(**{k: v for k, v in raw.items() if k in known})


# --- state overlays -------------------------------------------------------------------------


class _Overlay:
    """Changes on top of the confirmed state: the mempool's, or a block's being sealed."""

    __slots__ = ("utxo", "spent", "stake", "dreps")

    def __init__(self) -> None:
        self.utxo: dict[InputKey, bytes] = {}  # created here and not yet spent
        self.spent: dict[InputKey, str] = {}  # spent here -> spending tx hash
        self.stake: dict[Credential, int | None] = {}
        self.dreps: dict[Credential, bytes | None] = {}  # None: delegation cleared

    def apply(self, result: Phase1Result) -> None:
        tx = result.tx
        tx_hash = tx.tx_hash
        spends = tx.inputs if tx.is_valid else tx.collateral
        for key in spends:
            self.utxo.pop(key, None)
            self.spent[key] = tx_hash
        if tx.is_valid:
            for i, out in enumerate(tx.outputs):
                self.utxo[input_key(tx.tx_id, i)] = out.raw
            for cred, deposit in result.stake_changes:
                self.stake[cred] = deposit
            for cred, drep in result.drep_changes:
                self.dreps[cred] = drep
        elif tx.collateral_return is not None:
            self.utxo[input_key(tx.tx_id, len(tx.outputs))] = tx.collateral_return.raw


class _View:
    """Confirmed state seen through an overlay (implements `rules.LedgerView`)."""

    __slots__ = ("_utxo", "_stake", "_dreps", "_overlay")

    def __init__(
        self,
        utxo: dict[InputKey, bytes],
        stake: dict[Credential, tuple[int, int]],
        overlay: _Overlay,
        dreps: dict[Credential, bytes] | None = None,
    ) -> None:
        self._utxo = utxo
        self._stake = stake
        self._dreps = {} if dreps is None else dreps
        self._overlay = overlay

    def lookup(self, key: InputKey) -> bytes | None:
        if key in self._overlay.spent:
            return None
        found = self._overlay.utxo.get(key)
        return found if found is not None else self._utxo.get(key)

    def spent_in_mempool(self, key: InputKey) -> str | None:
        return self._overlay.spent.get(key)

    def stake_deposit(self, credential: Credential) -> int | None:
        if credential in self._overlay.stake:
            return self._overlay.stake[credential]
        held = self._stake.get(credential)
        return None if held is None else held[0]

    def reward(self, credential: Credential) -> int:
        held = self._stake.get(credential)
        return 0 if held is None else held[1]

    def drep_delegation(self, credential: Credential) -> bytes | None:
        if credential in self._overlay.dreps:
            return self._overlay.dreps[credential]
        return self._dreps.get(credential)


@dataclasses.dataclass(frozen=True)
class _PoolEntry:
    tx: DecodedTx
    result: Phase1Result


class Ledger:
    """A Conway-era ledger for the devnet (implements `interface.DevnetLedger`)."""

    def __init__(
        self,
        data_dir: Path,
        store: Store,
        genesis: GenesisConfig,
        params: ProtocolParams,
        faucet_key: PaymentSigningKey,
        enable_faults: bool,
    ) -> None:
        self.data_dir = data_dir
        self.enable_faults = enable_faults
        self._store = store
        self._genesis = genesis
        self._params = params
        self._lock = threading.RLock()
        self._paused = False
        self._closed = False
        self._faucet_key = faucet_key
        network = Network.TESTNET if genesis.network_id == 0 else Network.MAINNET
        vkey_hash = faucet_key.to_verification_key().hash()
        self._faucet_address = Address(vkey_hash, network=network)
        self._faucet_address_text = str(self._faucet_address)
        self._faucet_policy = ScriptPubkey(vkey_hash)
        self._faucet_policy_id = self._faucet_policy.hash()
        self._utxo: dict[InputKey, bytes] = {}
        for tx_hash, index, cbor in store.unspent_outputs():
            self._utxo[input_key(bytes.fromhex(tx_hash), index)] = bytes(cbor)
        self._stake = store.stake_state()
        self._dreps = store.drep_state()
        self._tip = store.tip()
        self._pool: list[_PoolEntry] = []
        self._pool_overlay = _Overlay()
        self._rebuild_pool([(h, c) for h, c in store.mempool_entries()])

    # --- opening and closing ---------------------------------------------------------

    @classmethod
    def open(
        cls,
        data_dir: Path,
        *,
        genesis: GenesisConfig | None = None,
        params: ProtocolParams | None = None,
        enable_faults: bool = False,
    ) -> Ledger:
        """Open the ledger in `data_dir`, creating the genesis state when it is new.

        An existing data dir keeps the genesis it was created with; `params`, when given,
        replace the stored protocol parameters.
        """
        data_dir = Path(data_dir)
        data_dir.mkdir(parents=True, exist_ok=True)
        store = Store(data_dir / DB_NAME)
        try:
            stored_genesis = store.meta("genesis")
            if stored_genesis is None:
                genesis = genesis or GenesisConfig()
                if genesis.system_start == 0:
                    genesis = dataclasses.replace(genesis, system_start=int(time.time()))
                params = _with_cost_models(params or ProtocolParams())
                key_path = data_dir / FAUCET_KEY_NAME
                # A key left by a crash between writing it and writing genesis is reused.
                if key_path.exists():
                    key = PaymentSigningKey.load(str(key_path))
                else:
                    key = PaymentSigningKey.generate()
                    key.save(str(key_path))
                cls._write_genesis(store, genesis, params, key)
            else:
                genesis = genesis_from_json(stored_genesis)
                if params is None:
                    stored_params = store.meta("params")
                    params = params_from_json(stored_params) if stored_params else None
                params = _with_cost_models(params or ProtocolParams())
                store.set_meta("params", params_to_json(params))
                key = PaymentSigningKey.load(str(data_dir / FAUCET_KEY_NAME))
            return cls(data_dir, store, genesis, params, key, enable_faults)
        except BaseException:
            store.close()
            raise

    @staticmethod
    def _write_genesis(
        store: Store, genesis: GenesisConfig, params: ProtocolParams, key: PaymentSigningKey
    ) -> None:
        network = Network.TESTNET if genesis.network_id == 0 else Network.MAINNET
        address = Address(key.to_verification_key().hash(), network=network)
        raw_address = bytes(address.to_primitive())
        genesis_tx = blake2b_256(
            b"proofnet-devnet-genesis" + genesis.system_start.to_bytes(8, "big") + raw_address
        )
        share, rest = divmod(genesis.faucet_lovelace, GENESIS_FAUCET_OUTPUTS)
        outputs = [
            NewOutput(i, str(address), cbor2.dumps([raw_address, share + (rest if i == 0 else 0)]))
            for i in range(GENESIS_FAUCET_OUTPUTS)
        ]
        block = BlockRecord(
            height=0,
            hash=blake2b_256(
                b"proofnet-devnet-genesis-block" + genesis_to_json(genesis).encode()
            ).hex(),
            slot=0,
            time=genesis.system_start,
            epoch=0,
            epoch_slot=0,
            previous_hash=None,
            tx_hashes=(),
            size=0,
            fees=0,
            output=genesis.faucet_lovelace,
        )
        store.write_genesis(
            {
                "genesis": genesis_to_json(genesis),
                "params": params_to_json(params),
                "genesis_tx": genesis_tx.hex(),
            },
            block,
            genesis_tx.hex(),
            outputs,
        )

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._store.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- static configuration --------------------------------------------------------

    def genesis(self) -> GenesisConfig:
        return self._genesis

    def protocol_params(self) -> ProtocolParams:
        return self._params

    # --- chain queries ---------------------------------------------------------------

    def tip(self) -> BlockRecord:
        with self._lock:
            return self._tip

    def block(self, hash_or_height: str | int) -> BlockRecord | None:
        with self._lock:
            return self._store.block(hash_or_height)

    def block_txs(self, hash_or_height: str | int) -> list[str]:
        found = self.block(hash_or_height)
        return [] if found is None else list(found.tx_hashes)

    def current_slot(self) -> int:
        with self._lock:
            return max(self._genesis.slot_at(time.time()), self._tip.slot)

    def transaction(self, tx_hash: str) -> TxRecord | None:
        with self._lock:
            return self._store.transaction(tx_hash.lower())

    def tx_inputs(self, tx_hash: str) -> list[OutputRecord]:
        with self._lock:
            return self._store.tx_inputs(tx_hash.lower())

    def tx_outputs(self, tx_hash: str) -> list[OutputRecord]:
        with self._lock:
            return self._store.tx_outputs(tx_hash.lower())

    def tx_metadata(self, tx_hash: str) -> dict[int, Any]:
        with self._lock:
            rows = self._store.tx_metadata(tx_hash.lower())
        return {label: cbor2.loads(value) for label, value in rows}

    def utxos_at(self, address: str, unit: str | None = None) -> list[OutputRecord]:
        with self._lock:
            found = self._store.utxos_at(address)
        if unit is None or unit == "lovelace":
            return found
        try:
            wanted = bytes.fromhex(unit)
        except ValueError:
            return []
        return [r for r in found if wanted in decode_output(r.output_cbor).assets]

    def address_known(self, address: str) -> bool:
        with self._lock:
            return self._store.address_known(address)

    def address_txs(self, address: str) -> list[TxRecord]:
        with self._lock:
            records = [self._store.transaction(h) for h in self._store.address_tx_hashes(address)]
        return [r for r in records if r is not None]

    def metadata_label_txs(self, label: int) -> list[tuple[str, Any]]:
        with self._lock:
            rows = self._store.metadata_label_values(label)
        return [(h, cbor2.loads(v)) for h, v in rows]

    def metadata_labels(self) -> list[tuple[int, int]]:
        with self._lock:
            return self._store.metadata_labels()

    def asset(self, unit: str) -> AssetRecord | None:
        unit = unit.lower()
        if len(unit) < 56:
            return None
        with self._lock:
            return self._store.asset(unit[:56], unit[56:])

    def script(self, script_hash: str) -> ScriptRecord | None:
        with self._lock:
            return self._store.script(script_hash.lower())

    def script_redeemers(self, script_hash: str) -> list[tuple[str, RedeemerRecord]]:
        with self._lock:
            return self._store.script_redeemers(script_hash.lower())

    def datum(self, datum_hash: str) -> bytes | None:
        with self._lock:
            return self._store.datum(datum_hash.lower())

    def utxos_by_payment(
        self, credential: Credential, unit: str | None = None
    ) -> list[OutputRecord]:
        """Confirmed unspent outputs whose payment credential is `credential`."""
        with self._lock:
            keys = [
                (k[:32].hex(), int.from_bytes(k[32:], "big"))
                for k, raw in self._utxo.items()
                if payment_credential(decode_output(raw).address) == credential
            ]
            found = self._store.utxos_of(keys)
        if unit is None or unit == "lovelace":
            return found
        wanted = bytes.fromhex(unit)
        return [r for r in found if wanted in decode_output(r.output_cbor).assets]

    def asset_holders(self, unit: str) -> list[tuple[str, int]]:
        """(address, quantity) of every confirmed unspent holding of `unit`, first seen first."""
        wanted = bytes.fromhex(unit)
        held: dict[str, int] = {}
        with self._lock:
            for raw in self._utxo.values():
                out = decode_output(raw)
                quantity = out.assets.get(wanted)
                if quantity:
                    text = address_text(out.address)
                    held[text] = held.get(text, 0) + quantity
        return list(held.items())

    def account(self, stake_address: str) -> AccountRecord | None:
        """The reward account's state; None when the chain has never seen its credential."""
        try:
            cred = reward_credential(address_bytes(stake_address))
        except ValueError:
            return None
        if cred is None:
            return None
        with self._lock:
            held = self._stake.get(cred)
            staked = [
                decode_output(raw).coin
                for raw in self._utxo.values()
                if stake_credential(decode_output(raw).address) == cred
            ]
            height = self._store.stake_last_event_height(cred)
            block = self._store.block(height) if height is not None else None
            drep = self._dreps.get(cred)
        if held is None and not staked and height is None:
            return None
        reward = 0 if held is None else held[1]
        return AccountRecord(
            registered=held is not None,
            controlled_lovelace=sum(staked) + reward,
            withdrawable=reward,
            active_epoch=None if block is None else block.epoch,
            drep_id=None if drep is None or held is None else drep_id_text(drep),
        )

    def reward_balance(self, stake_address: str) -> int | None:
        try:
            cred = reward_credential(address_bytes(stake_address))
        except ValueError:
            return None
        if cred is None:
            return None
        with self._lock:
            held = self._stake.get(cred)
        return None if held is None else held[1]

    # --- transactions ----------------------------------------------------------------

    def _env(self, slot: int | None = None) -> RuleEnv:
        return RuleEnv(
            self._params, self._genesis.network_id, self.current_slot() if slot is None else slot
        )

    def _slot_config(self) -> Any:
        from chain.devnet.phase2 import SlotConfig

        return SlotConfig(
            zero_time_ms=self._genesis.system_start * 1000,
            zero_slot=0,
            slot_length_ms=self._genesis.slot_length * 1000,
        )

    def submit(self, tx_cbor: bytes) -> str:
        tx = decode_tx(tx_cbor)
        with self._lock:
            self._check_open()
            view = _View(self._utxo, self._stake, self._pool_overlay, self._dreps)
            result = validate_phase1(tx, view, self._env())
            self._phase2(result)
            self._pool.append(_PoolEntry(tx, result))
            self._pool_overlay.apply(result)
            self._store.mempool_add(tx.tx_hash, tx.raw)
        return tx.tx_hash

    def _phase2(self, result: Phase1Result) -> None:
        tx = result.tx
        if not tx.redeemers:
            if not tx.is_valid:
                raise e.ValidationTagMismatch(
                    "is_valid is false but the transaction runs no Plutus script"
                )
            return
        from chain.devnet.phase2 import evaluate_redeemers

        try:
            evaluations = evaluate_redeemers(
                tx.view,
                _phase2_resolved(result),
                slot_config=self._slot_config(),
                cost_models=self._params.cost_models,
            )
        except Exception as exc:
            raise e.ScriptFailure(f"phase-2 evaluation failed: {exc}") from exc
        failed = [ev for ev in evaluations if not ev.ok]
        if tx.is_valid and failed:
            first = failed[0]
            logs = tuple(log for ev in failed for log in ev.logs)
            trace = f"; trace: {' | '.join(first.logs)}" if first.logs else ""
            raise e.ScriptFailure(
                f"{first.tag} #{first.index} failed: {first.error}{trace}", logs=logs
            )
        if not tx.is_valid and not failed:
            raise e.ValidationTagMismatch(
                "is_valid is false but every script succeeds; the transaction would be "
                "charged its collateral for nothing"
            )

    def evaluate(
        self, tx_cbor: bytes, additional_utxos: Sequence[tuple[bytes, bytes]] = ()
    ) -> list[RedeemerEvaluation]:
        from chain.devnet.phase2 import evaluate_redeemers

        tx = decode_tx(tx_cbor)
        extra: dict[InputKey, bytes] = {}
        for input_cbor, output_cbor in additional_utxos:
            value = cbor2.loads(input_cbor)
            if not (isinstance(value, list) and len(value) == 2 and isinstance(value[0], bytes)):
                raise e.MalformedTransaction(
                    f"additional utxo input {input_cbor.hex()} is not [txid, index]"
                )
            decode_output(output_cbor, "additional utxo output")
            extra[input_key(value[0], int(value[1]))] = output_cbor
        with self._lock:
            view = _View(self._utxo, self._stake, self._pool_overlay, self._dreps)
            resolved: dict[TxIn, bytes] = {}
            for key in (*tx.inputs, *tx.reference_inputs):
                raw = extra.get(key) or view.lookup(key)
                if raw is None:
                    raise e.BadInputs(f"input {key_str(key)} does not exist or is already spent")
                resolved[tx_in(key)] = raw
            budget = (self._params.max_tx_ex_mem, self._params.max_tx_ex_steps)
            slot_config = self._slot_config()
        return evaluate_redeemers(
            tx.view,
            resolved,
            slot_config=slot_config,
            cost_models=self._params.cost_models,
            budget=budget,
        )

    def mempool(self) -> list[str]:
        with self._lock:
            return [entry.tx.tx_hash for entry in self._pool]

    def _rebuild_pool(self, entries: Iterable[tuple[str, bytes]]) -> list[str]:
        """Re-validate queued transactions in order against the confirmed state; drop (and
        return) those that no longer apply."""
        self._pool = []
        self._pool_overlay = _Overlay()
        dropped: list[str] = []
        env = self._env()
        for tx_hash, cbor in entries:
            try:
                tx = decode_tx(cbor)
                view = _View(self._utxo, self._stake, self._pool_overlay, self._dreps)
                result = validate_phase1(tx, view, env)
            except e.LedgerError as exc:
                log.info("dropping mempool transaction %s: %s", tx_hash, exc)
                dropped.append(tx_hash)
                continue
            self._pool.append(_PoolEntry(tx, result))
            self._pool_overlay.apply(result)
        if dropped:
            self._store.mempool_remove(dropped)
        return dropped

    # --- blocks ----------------------------------------------------------------------

    def produce_block(self) -> BlockRecord | None:
        with self._lock:
            self._check_open()
            if self._paused:
                return None
            tip = self._tip
            slot = max(self._genesis.slot_at(time.time()), tip.slot + 1)
            env = self._env(slot)
            overlay = _Overlay()
            included: list[Phase1Result] = []
            leftover: list[tuple[str, bytes]] = []
            dropped: list[str] = []
            size = mem = steps = 0
            p = self._params
            for entry in self._pool:
                tx = entry.tx
                if leftover:
                    leftover.append((tx.tx_hash, tx.raw))
                    continue
                try:
                    result = validate_phase1(
                        tx, _View(self._utxo, self._stake, overlay, self._dreps), env
                    )
                except e.LedgerError as exc:
                    log.info("dropping mempool transaction %s at block: %s", tx.tx_hash, exc)
                    dropped.append(tx.tx_hash)
                    continue
                tx_mem, tx_steps = result.ex_units
                if (
                    size + tx.size > p.max_block_size
                    or mem + tx_mem > p.max_block_ex_mem
                    or steps + tx_steps > p.max_block_ex_steps
                ):
                    leftover.append((tx.tx_hash, tx.raw))
                    continue
                size += tx.size
                mem += tx_mem
                steps += tx_steps
                overlay.apply(result)
                included.append(result)
            applied = [self._applied(result) for result in included]
            height = tip.height + 1
            nonce = os.urandom(16)
            block_hash = blake2b_256(
                bytes.fromhex(tip.hash)
                + height.to_bytes(8, "big")
                + slot.to_bytes(8, "big")
                + b"".join(r.tx.tx_id for r in included)
                + nonce
            ).hex()
            block = BlockRecord(
                height=height,
                hash=block_hash,
                slot=slot,
                time=self._genesis.system_start + slot * self._genesis.slot_length,
                epoch=slot // self._genesis.epoch_length,
                epoch_slot=slot % self._genesis.epoch_length,
                previous_hash=tip.hash,
                tx_hashes=tuple(a.hash for a in applied),
                size=size,
                fees=sum(a.fee for a in applied),
                output=sum(decode_output(o.cbor).coin for a in applied for o in a.outputs),
            )
            self._store.commit_block(block, applied)
            if dropped:
                self._store.mempool_remove(dropped)
            for key in overlay.spent:
                self._utxo.pop(key, None)
            self._utxo.update(overlay.utxo)
            for cred, deposit in overlay.stake.items():
                if deposit is None:
                    self._stake.pop(cred, None)
                else:
                    self._stake[cred] = (deposit, 0)
            for cred, drep in overlay.dreps.items():
                if drep is None:
                    self._dreps.pop(cred, None)
                else:
                    self._dreps[cred] = drep
            self._tip = block
            self._rebuild_pool(leftover)
            return block

    def _applied(self, result: Phase1Result) -> AppliedTx:
        """What the store records for one sealed transaction."""
        tx = result.tx
        resolved = result.resolved
        inputs = [(INPUT_SPEND, k) for k in sorted(tx.inputs)]
        inputs += [(INPUT_COLLATERAL, k) for k in tx.collateral]
        inputs += [(INPUT_REFERENCE, k) for k in tx.reference_inputs]
        input_rows = tuple(
            (kind, k[:32].hex(), int.from_bytes(k[32:], "big")) for kind, k in inputs
        )
        spends = tx.inputs if tx.is_valid else tx.collateral
        spent = tuple((k[:32].hex(), int.from_bytes(k[32:], "big")) for k in spends)
        if tx.is_valid:
            outputs = tuple(
                NewOutput(i, address_text(o.address), o.raw) for i, o in enumerate(tx.outputs)
            )
            fee = tx.fee
            deposit = result.deposits - result.refunds
        else:
            ret = tx.collateral_return
            outputs = (
                ()
                if ret is None
                else (NewOutput(len(tx.outputs), address_text(ret.address), ret.raw, True),)
            )
            fee = result.collateral_balance
            deposit = 0
        mints = (
            tuple((unit[:28].hex(), unit[28:].hex(), qty) for unit, qty in tx.mint.items())
            if tx.is_valid
            else ()
        )
        datums: dict[str, bytes] = {}
        scripts: dict[str, ScriptRecord] = {}
        if tx.is_valid:
            for d in tx.datums:
                datums.setdefault(blake2b_256(d).hex(), d)
            for o in tx.outputs:
                if o.inline_datum is not None:
                    datums.setdefault(blake2b_256(o.inline_datum).hex(), o.inline_datum)
                if o.script_ref is not None:
                    rec = _script_record(*o.script_ref)
                    scripts.setdefault(rec.hash, rec)
        for native in tx.native_scripts:
            rec = _script_record(0, native)
            scripts.setdefault(rec.hash, rec)
        for lang, body in tx.plutus_scripts:
            rec = _script_record(lang, body)
            scripts.setdefault(rec.hash, rec)
        metadata: tuple[tuple[int, bytes], ...] = ()
        if tx.aux_data_raw is not None:
            metadata = tuple(
                (label, cbor2.dumps(value))
                for label, value in sorted(auxiliary_metadata(tx.aux_data_raw).items())
            )
        addresses = {o.address for o in outputs}
        addresses.update(address_text(resolved[k].address) for k in spends)
        return AppliedTx(
            hash=tx.tx_hash,
            cbor=tx.raw,
            fee=fee,
            size=tx.size,
            deposit=deposit,
            valid=tx.is_valid,
            redeemers=self._redeemer_records(result),
            inputs=input_rows,
            spent=spent,
            outputs=outputs,
            stake=result.stake_changes if tx.is_valid else (),
            dreps=result.drep_changes if tx.is_valid else (),
            mints=mints,
            datums=tuple(datums.items()),
            scripts=tuple(scripts.values()),
            metadata=metadata,
            addresses=tuple(sorted(addresses)),
        )

    def _redeemer_records(self, result: Phase1Result) -> tuple[RedeemerRecord, ...]:
        tx = result.tx
        purposes = {(p.tag, p.index): p for p in result.purposes}
        sorted_inputs = sorted(tx.inputs)
        records = []
        for r in sorted(tx.redeemers, key=lambda r: (r.tag, r.index)):
            purpose = purposes.get((r.tag, r.index))
            datum_hash = None
            if r.tag == 0 and r.index < len(sorted_inputs):
                out = result.resolved[sorted_inputs[r.index]]
                if out.datum_hash is not None:
                    datum_hash = out.datum_hash.hex()
                elif out.inline_datum is not None:
                    datum_hash = blake2b_256(out.inline_datum).hex()
            records.append(
                RedeemerRecord(
                    tag=REDEEMER_TAGS[r.tag],
                    index=r.index,
                    mem=r.mem,
                    steps=r.steps,
                    fee=script_fee(self._params, r.mem, r.steps),
                    script_hash=purpose.script_hash.hex() if purpose else "",
                    redeemer_data_hash=blake2b_256(r.data_cbor).hex(),
                    redeemer_data_cbor=r.data_cbor,
                    datum_hash=datum_hash,
                )
            )
        return tuple(records)

    # --- faucet ----------------------------------------------------------------------

    def faucet_policy_id(self) -> str:
        return self._faucet_policy_id.payload.hex()

    def faucet_address(self) -> str:
        return self._faucet_address_text

    def fund(self, address: str, lovelace: int, assets: dict[str, int] | None = None) -> str:
        if not isinstance(lovelace, int) or lovelace <= 0:
            raise ValueError(f"lovelace must be a positive integer, got {lovelace!r}")
        try:
            recipient = Address.from_primitive(address_bytes(address))
        except Exception as exc:
            raise ValueError(f"cannot fund {address!r}: not a payment address") from exc
        minted = MultiAsset()
        if assets:
            policy_assets = Asset()
            for name_hex, qty in assets.items():
                name = bytes.fromhex(name_hex)
                if len(name) > 32 or not isinstance(qty, int) or qty <= 0:
                    raise ValueError(f"bad asset {name_hex!r}: {qty!r}")
                policy_assets[AssetName(name)] = qty
            minted[ScriptHash(self._faucet_policy_id.payload)] = policy_assets
        with self._lock:
            self._check_open()
            source, source_coin = self._faucet_source(lovelace)
            tx_cbor = self._faucet_tx(source, source_coin, recipient, lovelace, minted)
            return self.submit(tx_cbor)

    def _faucet_source(self, lovelace: int) -> tuple[InputKey, int]:
        """The richest faucet output the mempool has not spent (mempool outputs included,
        so funds chain within a block)."""
        overlay = self._pool_overlay
        faucet_raw = bytes(self._faucet_address.to_primitive())
        candidates: list[tuple[int, InputKey]] = []
        for record in self._store.utxos_at(self._faucet_address_text):
            key = input_key(bytes.fromhex(record.tx_hash), record.index)
            if key not in overlay.spent:
                candidates.append((decode_output(record.output_cbor).coin, key))
        for key, raw in overlay.utxo.items():
            if faucet_raw in raw:
                out = decode_output(raw)
                if out.address == faucet_raw:
                    candidates.append((out.coin, key))
        if not candidates:
            raise e.BadInputs("the faucet has no unspent outputs left")
        coin, key = max(candidates)
        if coin < lovelace + 10_000_000:
            raise e.ValueNotConserved(
                f"the faucet's largest output holds {coin} lovelace, not enough for {lovelace}"
            )
        return key, coin

    def _faucet_tx(
        self,
        source: InputKey,
        source_coin: int,
        recipient: Address,
        lovelace: int,
        minted: MultiAsset,
    ) -> bytes:
        vkey = self._faucet_key.to_verification_key()
        tx_in = TransactionInput.from_primitive([source[:32], int.from_bytes(source[32:], "big")])

        def build(fee: int) -> Transaction:
            pay = TransactionOutput(recipient, Value(lovelace, minted) if minted else lovelace)
            change = TransactionOutput(self._faucet_address, source_coin - lovelace - fee)
            body = TransactionBody(
                inputs=[tx_in], outputs=[pay, change], fee=fee, mint=minted or None
            )
            witness = TransactionWitnessSet(
                vkey_witnesses=[VerificationKeyWitness(vkey, self._faucet_key.sign(body.hash()))],
                native_scripts=[self._faucet_policy] if minted else None,
            )
            return Transaction(body, witness)

        # Size with a fee that encodes at least as wide as the real one, then charge it.
        draft = build(0xFFFF_FFFF)
        fee = min_fee(self._params, len(draft.to_cbor()), (), 0)
        return bytes(build(fee).to_cbor())

    # --- faults ----------------------------------------------------------------------

    def rollback(self, depth: int, drop_txs: bool = False) -> list[str]:
        if not isinstance(depth, int) or depth < 1:
            raise ValueError(f"rollback depth must be a positive integer, got {depth!r}")
        with self._lock:
            return self._rollback(depth, drop_txs)

    def rollback_from(self, height: int, drop_txs: bool = False) -> list[str]:
        # The depth is read under the ledger's lock: a block sealed between a caller reading
        # the tip and asking for a depth would otherwise leave `height` on the chain.
        if not isinstance(height, int) or height < 1:
            raise ValueError(f"rollback height must be a positive integer, got {height!r}")
        with self._lock:
            if height > self._tip.height:
                raise ValueError(f"no block at height {height}: the tip is {self._tip.height}")
            return self._rollback(self._tip.height - height + 1, drop_txs)

    def _rollback(self, depth: int, drop_txs: bool) -> list[str]:
        # The caller holds the ledger's lock.
        self._check_open()
        undone = self._store.rollback(depth, keep_txs=not drop_txs)
        for block in undone:  # newest first
            for tx_hash, index in block.created:
                self._utxo.pop(input_key(bytes.fromhex(tx_hash), index), None)
            for tx_hash, index, cbor in block.restored:
                self._utxo[input_key(bytes.fromhex(tx_hash), index)] = cbor
        self._stake = self._store.stake_state()
        self._dreps = self._store.drep_state()
        self._tip = self._store.tip()
        self._rebuild_pool(self._store.mempool_entries())
        return [h for block in reversed(undone) for h in block.tx_hashes]

    def drop_mempool(self) -> list[str]:
        with self._lock:
            self._check_open()
            hashes = [entry.tx.tx_hash for entry in self._pool]
            self._store.mempool_remove(hashes)
            self._pool = []
            self._pool_overlay = _Overlay()
            return hashes

    def pause(self) -> None:
        with self._lock:
            self._paused = True

    def resume(self) -> None:
        with self._lock:
            self._paused = False

    def paused(self) -> bool:
        with self._lock:
            return self._paused

    # --- introspection for benchmarks and tests --------------------------------------

    def utxo_count(self) -> int:
        with self._lock:
            return len(self._utxo)

    def _check_open(self) -> None:
        if self._closed:
            raise e.DevnetError("the ledger is closed")


def _as_devnet_ledger(ledger: Ledger) -> DevnetLedger:
    """Never called: makes mypy check that `Ledger` satisfies the front ends' protocol."""
    return ledger


def _with_cost_models(params: ProtocolParams) -> ProtocolParams:
    if params.cost_models:
        return params
    return dataclasses.replace(params, cost_models=default_cost_models())


def _script_record(lang: int, body: bytes) -> ScriptRecord:
    return ScriptRecord(
        hash=script_hash(lang, body).hex(),
        type=LANG_NAMES[lang],
        cbor=body,
        serialised_size=None if lang == 0 else len(body),
    )


def _phase2_resolved(result: Phase1Result) -> dict[TxIn, PlutusOutput]:
    tx = result.tx
    return {tx_in(k): result.resolved[k].view for k in (*tx.inputs, *tx.reference_inputs)}
