"""A small in-memory `DevnetLedger` for testing the REST server on its own.

It keeps a real UTxO set of real CBOR (built with pycardano) but checks only what the server
tests need: decodable CBOR, network id, known unspent inputs. Phase-1/2 rules are the real
ledger's business and are tested there. Evaluation reports each redeemer's units as
(1000 * (index + 1), 100_000 * (index + 1)) and fails a redeemer whose data is the integer 13,
so tests can tell results apart.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import cbor2
from pycardano import (
    Address,
    Asset,
    AssetName,
    MultiAsset,
    Network,
    PaymentSigningKey,
    PaymentVerificationKey,
    ScriptPubkey,
    Transaction,
    TransactionBody,
    TransactionInput,
    TransactionOutput,
    TransactionWitnessSet,
    Value,
    VerificationKeyWitness,
)
from pycardano.hash import ScriptHash

from chain.devnet import blockfrost_shapes as shapes
from chain.devnet.addresses import payment_credential
from chain.devnet.errors import BadInputs, LedgerError, MalformedTransaction, WrongNetwork
from chain.devnet.params import GenesisConfig, ProtocolParams
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

_TAGS = ("spend", "mint", "cert", "reward", "vote", "propose")
FAUCET_SEED = bytes(range(32))
FAIL_REDEEMER = 13


def _h256(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=32).hexdigest()


# The fake does not resolve scripts: every redeemer it records names this script.
REDEEMER_SCRIPT_HASH = "ab" * 28


class FakeLedger:
    def __init__(self, *, system_start: int = 1_700_000_000, network_id: int = 0) -> None:
        from chain.devnet.cost_models import default_cost_models

        self._lock = threading.RLock()
        self._genesis = GenesisConfig(system_start=system_start, network_id=network_id)
        self._params = ProtocolParams(cost_models=default_cost_models())
        self._network = Network.TESTNET if network_id == 0 else Network.MAINNET
        self.faucet_key = PaymentSigningKey.from_primitive(FAUCET_SEED)
        vkey = PaymentVerificationKey.from_signing_key(self.faucet_key)
        self._faucet_addr = Address(vkey.hash(), network=self._network)
        self.faucet_script = ScriptPubkey(vkey.hash())
        self._policy = self.faucet_script.hash()
        self._blocks: list[BlockRecord] = []
        self._txs: dict[str, TxRecord] = {}
        self._outputs: dict[tuple[str, int], OutputRecord] = {}
        self._tx_inputs: dict[str, list[OutputRecord]] = {}
        self._tx_outputs: dict[str, list[tuple[str, int]]] = {}
        self._metadata: dict[str, dict[int, Any]] = {}
        self._address_txs: dict[str, list[str]] = {}
        self._assets: dict[str, AssetRecord] = {}
        self._scripts: dict[str, ScriptRecord] = {}
        self._datums: dict[str, bytes] = {}
        self.rewards: dict[str, int] = {}
        self._mempool: list[tuple[str, bytes]] = []
        self._paused = False
        self._slot = 0
        genesis_tx = _h256(b"genesis")
        self._add_output(genesis_tx, 0, self._faucet_output(self._genesis.faucet_lovelace), None)
        self._faucet_utxo = (genesis_tx, 0)
        self._seal([])

    # --- configuration -------------------------------------------------------------------
    def genesis(self) -> GenesisConfig:
        return self._genesis

    def protocol_params(self) -> ProtocolParams:
        return self._params

    # --- queries -----------------------------------------------------------------------------
    def tip(self) -> BlockRecord:
        with self._lock:
            return self._blocks[-1]

    def block(self, hash_or_height: str | int) -> BlockRecord | None:
        with self._lock:
            if isinstance(hash_or_height, int):
                ok = 0 <= hash_or_height < len(self._blocks)
                return self._blocks[hash_or_height] if ok else None
            return next((b for b in self._blocks if b.hash == hash_or_height), None)

    def block_txs(self, hash_or_height: str | int) -> list[str]:
        found = self.block(hash_or_height)
        return list(found.tx_hashes) if found else []

    def current_slot(self) -> int:
        return self._slot

    def transaction(self, tx_hash: str) -> TxRecord | None:
        return self._txs.get(tx_hash)

    def tx_inputs(self, tx_hash: str) -> list[OutputRecord]:
        return list(self._tx_inputs.get(tx_hash, []))

    def tx_outputs(self, tx_hash: str) -> list[OutputRecord]:
        return [self._outputs[k] for k in self._tx_outputs.get(tx_hash, [])]

    def tx_metadata(self, tx_hash: str) -> dict[int, Any]:
        return dict(self._metadata.get(tx_hash, {}))

    def utxos_at(self, address: str, unit: str | None = None) -> list[OutputRecord]:
        with self._lock:
            out = [
                o
                for o in self._outputs.values()
                if o.address == address and o.spent_by is None and o.block_hash is not None
            ]
        if unit is not None:
            out = [o for o in out if shapes.output_holds(shapes.decode_output(o.output_cbor), unit)]
        return out

    def address_known(self, address: str) -> bool:
        return any(o.address == address for o in self._outputs.values())

    def address_txs(self, address: str) -> list[TxRecord]:
        return [self._txs[h] for h in self._address_txs.get(address, []) if h in self._txs]

    def metadata_label_txs(self, label: int) -> list[tuple[str, Any]]:
        return [
            (h, md[label]) for h, md in self._metadata.items() if label in md and h in self._txs
        ]

    def metadata_labels(self) -> list[tuple[int, int]]:
        counts: dict[int, int] = {}
        for h, md in self._metadata.items():
            if h in self._txs:
                for label in md:
                    counts[label] = counts.get(label, 0) + 1
        return sorted(counts.items())

    def asset(self, unit: str) -> AssetRecord | None:
        return self._assets.get(unit)

    def script(self, script_hash: str) -> ScriptRecord | None:
        return self._scripts.get(script_hash)

    def datum(self, datum_hash: str) -> bytes | None:
        return self._datums.get(datum_hash)

    def script_redeemers(self, script_hash: str) -> list[tuple[str, RedeemerRecord]]:
        return [
            (tx.hash, r)
            for tx in self._txs.values()
            for r in tx.redeemers
            if r.script_hash == script_hash
        ]

    def reward_balance(self, stake_address: str) -> int | None:
        return self.rewards.get(stake_address)

    def _unspent(self) -> list[OutputRecord]:
        with self._lock:
            return [
                o for o in self._outputs.values() if o.spent_by is None and o.block_hash is not None
            ]

    def utxos_by_payment(self, credential: bytes, unit: str | None = None) -> list[OutputRecord]:
        out = [
            o
            for o in self._unspent()
            if payment_credential(shapes.decode_output(o.output_cbor).address) == credential
        ]
        if unit is not None:
            out = [o for o in out if shapes.output_holds(shapes.decode_output(o.output_cbor), unit)]
        return out

    def asset_holders(self, unit: str) -> list[tuple[str, int]]:
        held: dict[str, int] = {}
        for o in self._unspent():
            assets = shapes.decode_output(o.output_cbor).assets  # ((unit hex, quantity), ...)
            quantity = sum(q for u, q in assets if u == unit)
            if quantity:
                held[o.address] = held.get(o.address, 0) + quantity
        return list(held.items())

    def account(self, stake_address: str) -> AccountRecord | None:
        reward = self.rewards.get(stake_address)
        if reward is None:
            return None
        return AccountRecord(
            registered=True,
            controlled_lovelace=reward,
            withdrawable=reward,
            active_epoch=0,
            drep_id="drep_always_abstain",
        )

    # --- transactions ------------------------------------------------------------------------
    def submit(self, tx_cbor: bytes) -> str:
        with self._lock:
            tx = self._decode(tx_cbor)
            for out in tx.transaction_body.outputs:
                if out.address.network != self._network:
                    raise WrongNetwork(f"output to {out.address} is not on the devnet's network")
            spent = {i for _, c in self._mempool for i in self._input_keys(self._decode(c))}
            for key in self._input_keys(tx):
                rec = self._outputs.get(key)
                if rec is None or rec.spent_by is not None or key in spent:
                    raise BadInputs(f"input {key[0]}#{key[1]} is unknown or already spent")
            tx_hash = str(tx.id)
            self._mempool.append((tx_hash, tx_cbor))
            return tx_hash

    def evaluate(
        self, tx_cbor: bytes, additional_utxos: Sequence[tuple[bytes, bytes]] = ()
    ) -> list[RedeemerEvaluation]:
        tx = self._decode(tx_cbor)
        extra = {(cbor2.loads(i)[0].hex(), cbor2.loads(i)[1]) for i, _ in additional_utxos}
        for key in self._input_keys(tx):
            if key not in self._outputs and key not in extra:
                raise BadInputs(f"input {key[0]}#{key[1]} is unknown")
        out = []
        for r in tx.transaction_witness_set.redeemer or []:
            n = r.index + 1
            fail = r.data == FAIL_REDEEMER
            out.append(
                RedeemerEvaluation(
                    tag=_TAGS[r.tag.value],
                    index=r.index,
                    mem=1000 * n,
                    steps=100_000 * n,
                    ok=not fail,
                    error="the validator said no" if fail else None,
                    logs=("trace: checking",) if fail else (),
                )
            )
        return out

    def mempool(self) -> list[str]:
        return [h for h, _ in self._mempool]

    # --- administration -----------------------------------------------------------------------
    def fund(self, address: str, lovelace: int, assets: dict[str, int] | None = None) -> str:
        with self._lock:
            target = Address.from_primitive(address)
            if target.network != self._network:
                raise WrongNetwork("wrong network")
            fee = 200_000
            source = self._outputs[self._faucet_utxo]
            available = shapes.decode_output(source.output_cbor).coin
            multi = MultiAsset()
            if assets:
                multi[ScriptHash(self._policy.payload)] = Asset(
                    {AssetName(bytes.fromhex(n)): q for n, q in assets.items()}
                )
            body = TransactionBody(
                inputs=[TransactionInput.from_primitive([source.tx_hash, source.index])],
                outputs=[
                    TransactionOutput(target, Value(lovelace, multi)),
                    TransactionOutput(self._faucet_addr, available - lovelace - fee),
                ],
                fee=fee,
                mint=multi if assets else None,
            )
            signature = self.faucet_key.sign(body.hash())
            witness = TransactionWitnessSet(
                vkey_witnesses=[
                    VerificationKeyWitness(self.faucet_key.to_verification_key(), signature)
                ],
                native_scripts=[self.faucet_script] if assets else None,
            )
            tx_hash = self.submit(Transaction(body, witness).to_cbor())
            self._faucet_utxo = (tx_hash, 1)
            return tx_hash

    def faucet_policy_id(self) -> str:
        return self._policy.payload.hex()

    def faucet_address(self) -> str:
        return str(self._faucet_addr)

    def produce_block(self) -> BlockRecord | None:
        with self._lock:
            if self._paused:
                return None
            pending, self._mempool = self._mempool, []
            return self._seal(pending)

    def rollback_from(self, height: int, drop_txs: bool = False) -> list[str]:
        with self._lock:
            return self.rollback(len(self._blocks) - height, drop_txs)

    def rollback(self, depth: int, drop_txs: bool = False) -> list[str]:
        with self._lock:
            undone: list[tuple[str, bytes]] = []
            for _ in range(depth):
                block = self._blocks.pop()
                for h in reversed(block.tx_hashes):
                    undone.insert(0, (h, self._txs.pop(h).cbor))
                    for key in self._tx_outputs.pop(h):
                        del self._outputs[key]
                    for rec in self._tx_inputs.pop(h):
                        key = (rec.tx_hash, rec.index)
                        if key in self._outputs and not (rec.reference or rec.collateral):
                            self._outputs[key] = replace(self._outputs[key], spent_by=None)
            if not drop_txs:
                self._mempool = undone + self._mempool
            return [h for h, _ in undone]

    def drop_mempool(self) -> list[str]:
        with self._lock:
            dropped, self._mempool = self._mempool, []
            return [h for h, _ in dropped]

    def pause(self) -> None:
        self._paused = True

    def resume(self) -> None:
        self._paused = False

    def paused(self) -> bool:
        return self._paused

    # --- internals ----------------------------------------------------------------------------
    def _decode(self, tx_cbor: bytes) -> Transaction:
        try:
            return Transaction.from_cbor(tx_cbor)
        except LedgerError:
            raise
        except Exception as exc:
            raise MalformedTransaction(f"cannot decode transaction: {exc}") from None

    @staticmethod
    def _input_keys(tx: Transaction) -> list[tuple[str, int]]:
        body = tx.transaction_body
        return [(str(i.transaction_id), i.index) for i in body.inputs]

    def _faucet_output(self, lovelace: int) -> bytes:
        return bytes(TransactionOutput(self._faucet_addr, lovelace).to_cbor())

    def _add_output(
        self, tx_hash: str, index: int, output_cbor: bytes, block: BlockRecord | None
    ) -> None:
        out = TransactionOutput.from_cbor(output_cbor)
        self._outputs[(tx_hash, index)] = OutputRecord(
            tx_hash=tx_hash,
            index=index,
            address=str(out.address),
            output_cbor=output_cbor,
            block_height=block.height if block else len(self._blocks),
            block_hash=block.hash if block else "00" * 32,
            block_time=block.time if block else self._genesis.system_start,
        )

    def _seal(self, pending: list[tuple[str, bytes]]) -> BlockRecord:
        height = len(self._blocks)
        self._slot += 20
        block_hash = _h256(height.to_bytes(8, "big") + "".join(h for h, _ in pending).encode())
        time_ = self._genesis.system_start + self._slot
        fees = 0
        output = 0
        for index, (tx_hash, tx_cbor) in enumerate(pending):
            tx = Transaction.from_cbor(tx_cbor)
            body = tx.transaction_body
            fees += body.fee
            raw_outputs = cbor2.loads(tx_cbor)[0][1]
            inputs = []
            for key in self._input_keys(tx):
                rec = self._outputs[key]
                inputs.append(rec)
                self._outputs[key] = replace(rec, spent_by=tx_hash)
                self._address_txs.setdefault(rec.address, []).append(tx_hash)
            for refs, flag in (
                (body.collateral, "collateral"),
                (body.reference_inputs, "reference"),
            ):
                for ref in refs or []:
                    key = (str(ref.transaction_id), ref.index)
                    if key in self._outputs:
                        inputs.append(replace(self._outputs[key], **{flag: True}))
            self._tx_inputs[tx_hash] = inputs
            keys = []
            for i, raw in enumerate(raw_outputs):
                out_cbor = cbor2.dumps(raw)
                self._outputs[(tx_hash, i)] = OutputRecord(
                    tx_hash, i, str(body.outputs[i].address), out_cbor, height, block_hash, time_
                )
                decoded = shapes.decode_output(out_cbor)
                output += decoded.coin
                if decoded.inline_datum and decoded.data_hash:
                    self._datums[decoded.data_hash] = bytes.fromhex(decoded.inline_datum)
                keys.append((tx_hash, i))
                addr_txs = self._address_txs.setdefault(str(body.outputs[i].address), [])
                if tx_hash not in addr_txs:
                    addr_txs.append(tx_hash)
            self._tx_outputs[tx_hash] = keys
            if tx.auxiliary_data is not None:
                raw_aux = cbor2.loads(tx_cbor)[3]
                md = raw_aux.value.get(0, {}) if isinstance(raw_aux, cbor2.CBORTag) else raw_aux
                self._metadata[tx_hash] = dict(md)
            for policy, names in (body.mint or {}).items():
                for name, qty in names.items():
                    unit = policy.payload.hex() + name.payload.hex()
                    prev = self._assets.get(unit)
                    self._assets[unit] = AssetRecord(
                        policy.payload.hex(),
                        name.payload.hex(),
                        (prev.quantity if prev else 0) + qty,
                        prev.initial_mint_tx_hash if prev else tx_hash,
                        (prev.mint_or_burn_count if prev else 0) + 1,
                    )
            wits = tx.transaction_witness_set
            for ns in wits.native_scripts or []:
                self._scripts[ns.hash().payload.hex()] = ScriptRecord(
                    ns.hash().payload.hex(), "timelock", ns.to_cbor(), None
                )
            for version, scripts in ((3, wits.plutus_v3_script or []),):
                for s in scripts:
                    from pycardano import plutus_script_hash

                    h = plutus_script_hash(s).payload.hex()
                    self._scripts[h] = ScriptRecord(h, f"plutusV{version}", bytes(s), len(s))
            for d in wits.plutus_data or []:
                raw = d.to_cbor() if hasattr(d, "to_cbor") else cbor2.dumps(d)
                self._datums[_h256(raw)] = raw
            redeemers = []
            for r in wits.redeemer or []:
                data = cbor2.dumps(r.data) if isinstance(r.data, int) else r.data.to_cbor()
                redeemers.append(
                    RedeemerRecord(
                        tag=_TAGS[r.tag.value],
                        index=r.index,
                        mem=r.ex_units.mem,
                        steps=r.ex_units.steps,
                        fee=int(r.ex_units.mem * 0.0577 + r.ex_units.steps * 0.0000721) + 1,
                        script_hash=REDEEMER_SCRIPT_HASH,
                        redeemer_data_hash=_h256(data),
                        redeemer_data_cbor=data,
                        datum_hash=None,
                    )
                )
            self._txs[tx_hash] = TxRecord(
                hash=tx_hash,
                cbor=tx_cbor,
                block_height=height,
                block_hash=block_hash,
                block_time=time_,
                slot=self._slot,
                index=index,
                fee=body.fee,
                size=len(tx_cbor),
                deposit=0,
                valid_contract=tx.valid,
                redeemers=tuple(redeemers),
            )
        block = BlockRecord(
            height=height,
            hash=block_hash,
            slot=self._slot,
            time=time_,
            epoch=self._slot // self._genesis.epoch_length,
            epoch_slot=self._slot % self._genesis.epoch_length,
            previous_hash=self._blocks[-1].hash if self._blocks else None,
            tx_hashes=tuple(h for h, _ in pending),
            size=sum(len(c) for _, c in pending),
            fees=fees,
            output=output,
        )
        self._blocks.append(block)
        return block
