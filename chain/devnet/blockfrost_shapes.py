"""Render ledger records (and the CBOR they carry) as Blockfrost's JSON shapes.

Pure functions: no ledger access, no I/O. The server looks records up and hands them here, so
the exact field names, string-encoded amounts and nullability rules live in one module that
the OpenAPI contract test pins down.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any

import cbor2
from pycardano import Address, Network
from pycardano.crypto.bech32 import Encoding as _Bech32Encoding
from pycardano.crypto.bech32 import bech32_encode, convertbits
from pycardano.hash import ScriptHash, VerificationKeyHash

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

LOVELACE = "lovelace"

# Ogmios v5 (what Blockfrost's evaluate endpoint wraps) names redeemer purposes like this;
# pycardano looks results up by `RedeemerTag.name.lower()`, which agrees for all six.
_OGMIOS_PURPOSE = {
    "spend": "spend",
    "mint": "mint",
    "cert": "certificate",
    "reward": "withdrawal",
    "vote": "voting",
    "propose": "proposing",
}

# A few labels from the CIP-10 registry that the project (and wallets) actually use.
CIP10_LABELS = {
    674: "CIP-0020 - Transaction message/comment metadata",
    721: "CIP-0025 - NFT Metadata Standard",
}


class ShapeError(ValueError):
    """Stored CBOR did not have the shape the Cardano CDDL promises."""


# --- small helpers ------------------------------------------------------------------------


def blake2b_256(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=32).digest()


def blake2b_224(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=28).digest()


def _unwrap_tag24(value: Any) -> bytes:
    if isinstance(value, cbor2.CBORTag) and value.tag == 24 and isinstance(value.value, bytes):
        return value.value
    raise ShapeError("expected CBOR-in-CBOR (tag 24)")


def asset_fingerprint(policy_id_hex: str, asset_name_hex: str) -> str:
    """CIP-14 fingerprint."""
    digest = hashlib.blake2b(bytes.fromhex(policy_id_hex + asset_name_hex), digest_size=20).digest()
    words = convertbits(list(digest), 8, 5) or []
    return str(bech32_encode("asset", words, _Bech32Encoding.BECH32))


def amount_list(coin: int, assets: Iterable[tuple[str, int]]) -> list[dict[str, str]]:
    """Blockfrost's `[{unit, quantity}]`: lovelace first, quantities as strings."""
    out = [{"unit": LOVELACE, "quantity": str(coin)}]
    out.extend({"unit": unit, "quantity": str(qty)} for unit, qty in assets)
    return out


# --- values and outputs ---------------------------------------------------------------------


def decode_value(value: Any) -> tuple[int, list[tuple[str, int]]]:
    """CDDL `value = coin / [coin, multiasset<positive_coin>]` -> (lovelace, [(unit, qty)])."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value, []
    if isinstance(value, list | tuple) and len(value) == 2 and isinstance(value[0], int):
        coin, multiasset = value
        assets: list[tuple[str, int]] = []
        if not isinstance(multiasset, dict):
            raise ShapeError("multiasset is not a map")
        for policy, names in multiasset.items():
            if not isinstance(policy, bytes) or not isinstance(names, dict):
                raise ShapeError("multiasset entry has the wrong type")
            for name, qty in names.items():
                assets.append((policy.hex() + bytes(name).hex(), int(qty)))
        return coin, assets
    raise ShapeError("value is neither a coin nor [coin, multiasset]")


@dataclass(frozen=True)
class DecodedOutput:
    coin: int
    assets: tuple[tuple[str, int], ...]
    data_hash: str | None
    inline_datum: str | None  # hex CBOR of the datum
    reference_script_hash: str | None

    def amount(self) -> list[dict[str, str]]:
        return amount_list(self.coin, self.assets)


def script_ref_hash(script_ref_cbor: bytes) -> str:
    """Hash of a `script_ref` (tag-24 content: `[type, script]`), as the ledger hashes it."""
    decoded = cbor2.loads(script_ref_cbor)
    if not isinstance(decoded, list) or len(decoded) != 2 or not isinstance(decoded[0], int):
        raise ShapeError("script_ref is not [type, script]")
    kind, script = decoded
    if kind == 0:
        # Hash the native script's own bytes, as they appear on chain: strip the array header
        # and the one-byte type, so re-encoding cannot change the hash.
        if script_ref_cbor[0] == 0x82:
            raw = script_ref_cbor[2:]
        elif script_ref_cbor[0] == 0x9F:
            raw = script_ref_cbor[2:-1]
        else:  # pragma: no cover - arrays of two always start with one of the above
            raw = cbor2.dumps(script)
        return blake2b_224(b"\x00" + raw).hex()
    if kind in (1, 2, 3) and isinstance(script, bytes):
        return blake2b_224(bytes([kind]) + script).hex()
    raise ShapeError(f"unknown script type {kind}")


@lru_cache(maxsize=65536)
def decode_output(output_cbor: bytes) -> DecodedOutput:
    """Decode a (legacy or post-Alonzo) transaction output. Cached: outputs never change."""
    out = cbor2.loads(output_cbor)
    datum_hash: str | None = None
    inline: str | None = None
    ref_hash: str | None = None
    if isinstance(out, list):
        if len(out) not in (2, 3):
            raise ShapeError("legacy output must have 2 or 3 fields")
        coin, assets = decode_value(out[1])
        if len(out) == 3:
            datum_hash = bytes(out[2]).hex()
    elif isinstance(out, dict):
        if 0 not in out or 1 not in out:
            raise ShapeError("output map lacks address or value")
        coin, assets = decode_value(out[1])
        option = out.get(2)
        if option is not None:
            if not isinstance(option, list) or len(option) != 2:
                raise ShapeError("datum option is not [kind, datum]")
            if option[0] == 0:
                datum_hash = bytes(option[1]).hex()
            elif option[0] == 1:
                datum_cbor = _unwrap_tag24(option[1])
                inline = datum_cbor.hex()
                # Blockfrost reports the hash of an inline datum too.
                datum_hash = blake2b_256(datum_cbor).hex()
            else:
                raise ShapeError("unknown datum option")
        if 3 in out:
            ref_hash = script_ref_hash(_unwrap_tag24(out[3]))
    else:
        raise ShapeError("output is neither an array nor a map")
    return DecodedOutput(coin, tuple(assets), datum_hash, inline, ref_hash)


def output_holds(decoded: DecodedOutput, unit: str) -> bool:
    return unit == LOVELACE or any(u == unit for u, _ in decoded.assets)


def sum_amounts(outputs: Iterable[DecodedOutput]) -> list[dict[str, str]]:
    coin = 0
    totals: dict[str, int] = {}
    for out in outputs:
        coin += out.coin
        for unit, qty in out.assets:
            totals[unit] = totals.get(unit, 0) + qty
    return amount_list(coin, ((u, q) for u, q in totals.items() if q != 0))


def address_utxo(rec: OutputRecord) -> dict[str, Any]:
    out = decode_output(rec.output_cbor)
    return {
        "address": rec.address,
        "tx_hash": rec.tx_hash,
        "tx_index": rec.index,
        "output_index": rec.index,
        "amount": out.amount(),
        "block": rec.block_hash,
        "data_hash": out.data_hash,
        "inline_datum": out.inline_datum,
        "reference_script_hash": out.reference_script_hash,
    }


def tx_utxo_input(rec: OutputRecord) -> dict[str, Any]:
    out = decode_output(rec.output_cbor)
    return {
        "address": rec.address,
        "amount": out.amount(),
        "tx_hash": rec.tx_hash,
        "output_index": rec.index,
        "data_hash": out.data_hash,
        "inline_datum": out.inline_datum,
        "reference_script_hash": out.reference_script_hash,
        "collateral": rec.collateral,
        "reference": rec.reference,
    }


def tx_utxo_output(rec: OutputRecord) -> dict[str, Any]:
    out = decode_output(rec.output_cbor)
    return {
        "address": rec.address,
        "amount": out.amount(),
        "output_index": rec.index,
        "data_hash": out.data_hash,
        "inline_datum": out.inline_datum,
        "collateral": rec.collateral,
        "reference_script_hash": out.reference_script_hash,
        "consumed_by_tx": rec.spent_by,
    }


# --- addresses -----------------------------------------------------------------------------


@dataclass(frozen=True)
class AddressInfo:
    bech32: str
    network: Network
    stake_address: str | None
    is_script: bool


@lru_cache(maxsize=16384)
def parse_address(text: str) -> AddressInfo:
    """Parse a bech32 Shelley address. Raises ValueError on anything else."""
    if not text or len(text) > 200 or not text.isascii():
        raise ValueError("not a bech32 address")
    try:
        addr = Address.from_primitive(text)
    except Exception as exc:  # pycardano raises several unrelated types on bad input
        raise ValueError(f"invalid address: {exc}") from exc
    stake: str | None = None
    if isinstance(addr.staking_part, VerificationKeyHash | ScriptHash):
        stake = Address(staking_part=addr.staking_part, network=addr.network).encode()
    return AddressInfo(
        bech32=text,
        network=addr.network,
        stake_address=stake,
        is_script=isinstance(addr.payment_part, ScriptHash),
    )


def expected_network(genesis: GenesisConfig) -> Network:
    return Network.MAINNET if genesis.network_id == 1 else Network.TESTNET


def address_content(info: AddressInfo, utxos: Sequence[OutputRecord]) -> dict[str, Any]:
    return {
        "address": info.bech32,
        "amount": sum_amounts(decode_output(u.output_cbor) for u in utxos),
        "stake_address": info.stake_address,
        "type": "shelley",
        "script": info.is_script,
    }


# --- blocks and epochs -----------------------------------------------------------------------


def block_content(block: BlockRecord, *, tip_height: int, next_hash: str | None) -> dict[str, Any]:
    return {
        "time": block.time,
        "height": block.height,
        "hash": block.hash,
        "slot": block.slot,
        "epoch": block.epoch,
        "epoch_slot": block.epoch_slot,
        # The devnet has one block producer and no stake pools.
        "slot_leader": "devnet",
        "size": block.size,
        "tx_count": len(block.tx_hashes),
        "output": str(block.output),
        "fees": str(block.fees),
        "block_vrf": None,
        "op_cert": None,
        "op_cert_counter": None,
        "previous_block": block.previous_hash,
        "next_block": next_hash,
        "confirmations": max(0, tip_height - block.height),
    }


@dataclass(frozen=True)
class EpochStats:
    epoch: int
    first_block_time: int
    last_block_time: int
    block_count: int
    tx_count: int
    output: int
    fees: int


def epoch_content(genesis: GenesisConfig, stats: EpochStats) -> dict[str, Any]:
    seconds = genesis.epoch_length * genesis.slot_length
    start = genesis.system_start + stats.epoch * seconds
    return {
        "epoch": stats.epoch,
        "start_time": start,
        "end_time": start + seconds,
        "first_block_time": stats.first_block_time,
        "last_block_time": stats.last_block_time,
        "block_count": stats.block_count,
        "tx_count": stats.tx_count,
        "output": str(stats.output),
        "fees": str(stats.fees),
        "active_stake": None,
    }


def genesis_content(genesis: GenesisConfig) -> dict[str, Any]:
    return {
        "active_slots_coefficient": genesis.active_slots_coefficient,
        "update_quorum": genesis.update_quorum,
        "max_lovelace_supply": str(genesis.max_lovelace_supply),
        "network_magic": genesis.network_magic,
        "epoch_length": genesis.epoch_length,
        "system_start": genesis.system_start,
        "slots_per_kes_period": genesis.slots_per_kes_period,
        "slot_length": genesis.slot_length,
        "max_kes_evolutions": genesis.max_kes_evolutions,
        "security_param": genesis.security_param,
    }


def _number(value: Fraction | int | float) -> float | int:
    if isinstance(value, Fraction):
        return value.numerator if value.denominator == 1 else float(value)
    return value


def _indexed_names(count: int) -> list[str]:
    # Zero-padded so that both insertion order and sorted order are ledger order, which is
    # what pycardano relies on (sorted for PlutusV1, insertion order for the others).
    width = max(3, len(str(count)))
    return [f"{i:0{width}d}" for i in range(count)]


def named_cost_model(language: str, values: Sequence[int]) -> dict[str, int]:
    """A cost model keyed by parameter name, in ledger order, as Blockfrost returns it."""
    try:
        from chain.devnet.cost_models import CostModelError, cost_model_names
    except ImportError:  # pragma: no cover - the module ships with the devnet
        names: list[str] = []
    else:
        try:
            names = cost_model_names(language, len(values))
        except CostModelError:
            names = []
    # pycardano takes PlutusV1's ledger order from the *sorted* names (insertion order for
    # the other languages); fall back to index names rather than ever hashing a wrong order.
    usable = len(names) == len(values) and (language != "PlutusV1" or names == sorted(names))
    keys = names if usable else _indexed_names(len(values))
    return dict(zip(keys, (int(v) for v in values), strict=True))


def protocol_params_content(params: ProtocolParams, epoch: int) -> dict[str, Any]:
    # Python dicts (and JSON objects as clients parse them) keep insertion order; pycardano
    # hashes cost models from that order, so names go in ledger order.
    cost_models = {
        language: named_cost_model(language, values)
        for language, values in params.cost_models.items()
    }
    raw = {language: list(values) for language, values in params.cost_models.items()}
    return {
        "epoch": epoch,
        "min_fee_a": params.min_fee_a,
        "min_fee_b": params.min_fee_b,
        "max_block_size": params.max_block_size,
        "max_tx_size": params.max_tx_size,
        "max_block_header_size": params.max_block_header_size,
        "key_deposit": str(params.key_deposit),
        "pool_deposit": str(params.pool_deposit),
        "e_max": params.e_max,
        "n_opt": params.n_opt,
        "a0": _number(params.a0),
        "rho": _number(params.rho),
        "tau": _number(params.tau),
        "decentralisation_param": 0,
        "extra_entropy": None,
        "protocol_major_ver": params.protocol_major_ver,
        "protocol_minor_ver": params.protocol_minor_ver,
        "min_utxo": str(params.coins_per_utxo_size),
        "min_pool_cost": str(params.min_pool_cost),
        "nonce": "0" * 64,
        "cost_models": cost_models,
        "cost_models_raw": raw,
        "price_mem": _number(params.price_mem),
        "price_step": _number(params.price_step),
        "max_tx_ex_mem": str(params.max_tx_ex_mem),
        "max_tx_ex_steps": str(params.max_tx_ex_steps),
        "max_block_ex_mem": str(params.max_block_ex_mem),
        "max_block_ex_steps": str(params.max_block_ex_steps),
        "max_val_size": str(params.max_val_size),
        "collateral_percent": params.collateral_percent,
        "max_collateral_inputs": params.max_collateral_inputs,
        "coins_per_utxo_size": str(params.coins_per_utxo_size),
        "coins_per_utxo_word": str(params.coins_per_utxo_size),
        # Conway governance parameters: the devnet runs no governance bodies, but a client
        # reads these to build proposals and registrations, so they are the profile's.
        "pvt_motion_no_confidence": _number(params.pvt_motion_no_confidence),
        "pvt_committee_normal": _number(params.pvt_committee_normal),
        "pvt_committee_no_confidence": _number(params.pvt_committee_no_confidence),
        "pvt_hard_fork_initiation": _number(params.pvt_hard_fork_initiation),
        "dvt_motion_no_confidence": _number(params.dvt_motion_no_confidence),
        "dvt_committee_normal": _number(params.dvt_committee_normal),
        "dvt_committee_no_confidence": _number(params.dvt_committee_no_confidence),
        "dvt_update_to_constitution": _number(params.dvt_update_to_constitution),
        "dvt_hard_fork_initiation": _number(params.dvt_hard_fork_initiation),
        "dvt_p_p_network_group": _number(params.dvt_pp_network_group),
        "dvt_p_p_economic_group": _number(params.dvt_pp_economic_group),
        "dvt_p_p_technical_group": _number(params.dvt_pp_technical_group),
        "dvt_p_p_gov_group": _number(params.dvt_pp_gov_group),
        "dvt_treasury_withdrawal": _number(params.dvt_treasury_withdrawal),
        "committee_min_size": str(params.committee_min_size),
        "committee_max_term_length": str(params.committee_max_term_length),
        "gov_action_lifetime": str(params.gov_action_lifetime),
        "gov_action_deposit": str(params.gov_action_deposit),
        "drep_deposit": str(params.drep_deposit),
        "drep_activity": str(params.drep_activity),
        # Blockfrost reports the pool security-group threshold under both spellings.
        "pvtpp_security_group": _number(params.pvt_pp_security_group),
        "pvt_p_p_security_group": _number(params.pvt_pp_security_group),
        "min_fee_ref_script_cost_per_byte": _number(params.min_fee_ref_script_cost_per_byte),
    }


# --- transactions ----------------------------------------------------------------------------

# Conway certificate kinds, by what Blockfrost counts them as.
_STAKE_CERTS = {0, 1, 7, 8, 11, 12, 13}
_DELEGATION_CERTS = {2, 10, 11, 13}
_POOL_UPDATE_CERTS = {3}
_POOL_RETIRE_CERTS = {4}


@dataclass(frozen=True)
class TxBodySummary:
    input_count: int
    output_count: int
    invalid_before: int | None
    invalid_hereafter: int | None
    withdrawal_count: int
    stake_cert_count: int
    delegation_count: int
    pool_update_count: int
    pool_retire_count: int
    mint_count: int
    treasury_donation: int
    redeemer_count: int
    fee: int


def _items(value: Any) -> list[Any]:
    # Conway encodes sets either as plain arrays or as tag 258 (which cbor2 turns into sets).
    if isinstance(value, cbor2.CBORTag) and value.tag == 258:
        value = value.value
    if isinstance(value, list | tuple | set | frozenset):
        return list(value)
    return []


def _redeemer_count(witnesses: Any) -> int:
    if not isinstance(witnesses, dict):
        return 0
    redeemers = witnesses.get(5)
    if isinstance(redeemers, dict):
        return len(redeemers)
    if isinstance(redeemers, list):
        return len(redeemers)
    return 0


@lru_cache(maxsize=8192)
def summarize_tx(tx_cbor: bytes) -> TxBodySummary:
    tx = cbor2.loads(tx_cbor)
    if not isinstance(tx, list) or len(tx) < 3 or not isinstance(tx[0], dict):
        raise ShapeError("transaction is not [body, witnesses, ...]")
    body = tx[0]
    certs = [c for c in _items(body.get(4)) if isinstance(c, list | tuple) and c]
    kinds = [c[0] for c in certs]
    mint = body.get(9)
    mint_count = (
        sum(len(names) for names in mint.values() if isinstance(names, dict))
        if isinstance(mint, dict)
        else 0
    )
    withdrawals = body.get(5)
    return TxBodySummary(
        input_count=len(_items(body.get(0))),
        output_count=len(_items(body.get(1))),
        invalid_before=body.get(8),
        invalid_hereafter=body.get(3),
        withdrawal_count=len(withdrawals) if isinstance(withdrawals, dict) else 0,
        stake_cert_count=sum(k in _STAKE_CERTS for k in kinds),
        delegation_count=sum(k in _DELEGATION_CERTS for k in kinds),
        pool_update_count=sum(k in _POOL_UPDATE_CERTS for k in kinds),
        pool_retire_count=sum(k in _POOL_RETIRE_CERTS for k in kinds),
        mint_count=mint_count,
        treasury_donation=int(body.get(22, 0) or 0),
        redeemer_count=_redeemer_count(tx[1]),
        fee=int(body.get(2, 0)),
    )


def _opt_str(value: int | None) -> str | None:
    return None if value is None else str(value)


def _tx_counts(summary: TxBodySummary) -> dict[str, Any]:
    return {
        "invalid_before": _opt_str(summary.invalid_before),
        "invalid_hereafter": _opt_str(summary.invalid_hereafter),
        "utxo_count": summary.input_count + summary.output_count,
        "withdrawal_count": summary.withdrawal_count,
        "mir_cert_count": 0,
        "delegation_count": summary.delegation_count,
        "stake_cert_count": summary.stake_cert_count,
        "pool_update_count": summary.pool_update_count,
        "pool_retire_count": summary.pool_retire_count,
        "asset_mint_or_burn_count": summary.mint_count,
    }


def tx_output_amount(tx_valid: bool, outputs: Sequence[OutputRecord]) -> list[dict[str, str]]:
    # A phase-2-invalid transaction produced only its collateral return.
    chosen = [o for o in outputs if o.collateral != tx_valid]
    return sum_amounts(decode_output(o.output_cbor) for o in chosen)


def tx_content(tx: TxRecord, outputs: Sequence[OutputRecord]) -> dict[str, Any]:
    summary = summarize_tx(tx.cbor)
    return {
        "hash": tx.hash,
        "block": tx.block_hash,
        "block_height": tx.block_height,
        "block_time": tx.block_time,
        "slot": tx.slot,
        "index": tx.index,
        "output_amount": tx_output_amount(tx.valid_contract, outputs),
        "fees": str(tx.fee),
        "deposit": str(tx.deposit),
        "size": tx.size,
        **_tx_counts(summary),
        "redeemer_count": len(tx.redeemers) or summary.redeemer_count,
        "valid_contract": tx.valid_contract,
        "treasury_donation": str(summary.treasury_donation),
    }


def _output_address(out: Any) -> str:
    raw = out.get(0, b"") if isinstance(out, dict) else out[0]
    return str(Address.from_primitive(bytes(raw)).encode())


def certificate_deposit(tx_cbor: bytes, key_deposit: int) -> int:
    """Net deposit the certificates of a transaction take (negative when refunded)."""
    body = cbor2.loads(tx_cbor)[0]
    total = 0
    for cert in _items(body.get(4)):
        if not isinstance(cert, list | tuple) or not cert:
            continue
        kind = cert[0]
        if kind == 0:
            total += key_deposit
        elif kind == 1:
            total -= key_deposit
        elif kind in (7, 11, 12, 13):
            total += int(cert[-1])
        elif kind == 8:
            total -= int(cert[-1])
    return total


def mempool_tx_content(tx_hash: str, tx_cbor: bytes, key_deposit: int) -> dict[str, Any]:
    """`/mempool/{hash}`, decoded from the submitted CBOR alone (inputs are not resolved)."""
    summary = summarize_tx(tx_cbor)
    tx = cbor2.loads(tx_cbor)
    body = tx[0]
    valid = not (len(tx) >= 4 and tx[2] is False)
    outputs = []
    for index, out in enumerate(_items(body.get(1))):
        decoded = decode_output(cbor2.dumps(out))
        outputs.append(
            {
                "address": _output_address(out),
                "amount": decoded.amount(),
                "output_index": index,
                "data_hash": decoded.data_hash,
                "inline_datum": decoded.inline_datum,
                "collateral": False,
                "reference_script_hash": decoded.reference_script_hash,
            }
        )
    inputs = []
    for key, flags in ((0, (False, False)), (13, (True, False)), (18, (False, True))):
        for ref in sorted(_items(body.get(key)), key=lambda r: (bytes(r[0]), r[1])):
            inputs.append(
                {
                    "tx_hash": bytes(ref[0]).hex(),
                    "output_index": ref[1],
                    "collateral": flags[0],
                    "reference": flags[1],
                }
            )
    output_total = sum_amounts(decode_output(cbor2.dumps(o)) for o in _items(body.get(1)))
    return {
        "tx": {
            "hash": tx_hash,
            "output_amount": output_total,
            "fees": str(summary.fee),
            "deposit": str(certificate_deposit(tx_cbor, key_deposit)),
            "size": len(tx_cbor),
            **_tx_counts(summary),
            "redeemer_count": summary.redeemer_count,
            "valid_contract": valid,
        },
        "inputs": inputs,
        "outputs": outputs,
        "redeemers": _mempool_redeemers(tx[1].get(5) if isinstance(tx[1], dict) else None),
    }


_TAG_NAMES = {0: "spend", 1: "mint", 2: "cert", 3: "reward", 4: "vote", 5: "propose"}


def _mempool_redeemers(redeemers: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if isinstance(redeemers, dict):  # Conway map: {[tag, index]: [data, [mem, steps]]}
        for key, value in redeemers.items():
            out.append(
                {
                    "tx_index": key[1],
                    "purpose": _TAG_NAMES.get(key[0], str(key[0])),
                    "unit_mem": str(value[1][0]),
                    "unit_steps": str(value[1][1]),
                }
            )
    elif isinstance(redeemers, list):  # legacy: [[tag, index, data, [mem, steps]], ...]
        for r in redeemers:
            out.append(
                {
                    "tx_index": r[1],
                    "purpose": _TAG_NAMES.get(r[0], str(r[0])),
                    "unit_mem": str(r[3][0]),
                    "unit_steps": str(r[3][1]),
                }
            )
    return out


def redeemer_content(r: RedeemerRecord) -> dict[str, Any]:
    return {
        "tx_index": r.index,
        "purpose": r.tag,
        "script_hash": r.script_hash,
        "redeemer_data_hash": r.redeemer_data_hash,
        # Deprecated in Blockfrost, where it has always carried the redeemer data hash.
        "datum_hash": r.redeemer_data_hash,
        "unit_mem": str(r.mem),
        "unit_steps": str(r.steps),
        "fee": str(r.fee),
    }


def script_redeemer_content(tx_hash: str, r: RedeemerRecord) -> dict[str, Any]:
    """One entry of `/scripts/{hash}/redeemers`: a run of the script and its transaction."""
    entry = {"tx_hash": tx_hash, **redeemer_content(r)}
    del entry["script_hash"]  # the listing is per script already
    return entry


# --- metadata and datums ----------------------------------------------------------------------


def metadatum_json(value: Any) -> Any:
    """Transaction metadata as db-sync (and so Blockfrost) renders it without a schema."""
    if isinstance(value, bytes):
        return "0x" + value.hex()
    if isinstance(value, str | int) and not isinstance(value, bool):
        return value
    if isinstance(value, list | tuple):
        return [metadatum_json(v) for v in value]
    if isinstance(value, dict):
        return {_metadatum_key(k): metadatum_json(v) for k, v in value.items()}
    if isinstance(value, cbor2.CBORTag):
        return metadatum_json(value.value)
    return str(value)


def _metadatum_key(key: Any) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, bytes):
        return "0x" + key.hex()
    if isinstance(key, int):
        return str(key)
    return str(metadatum_json(key))


def tx_metadata_json(metadata: dict[int, Any]) -> list[dict[str, Any]]:
    return [
        {"label": str(label), "json_metadata": metadatum_json(value)}
        for label, value in sorted(metadata.items())
    ]


def tx_metadata_cbor(metadata: dict[int, Any]) -> list[dict[str, Any]]:
    out = []
    for label, value in sorted(metadata.items()):
        encoded = cbor2.dumps(value).hex()
        out.append({"label": str(label), "cbor_metadata": "\\x" + encoded, "metadata": encoded})
    return out


def plutus_data_json(value: Any) -> Any:
    """Plutus data in the cardano-node 'detailed schema' JSON that Blockfrost returns."""
    if isinstance(value, cbor2.CBORTag):
        tag = value.tag
        if 121 <= tag <= 127:
            return {"constructor": tag - 121, "fields": _plutus_fields(value.value)}
        if 1280 <= tag <= 1400:
            return {"constructor": tag - 1280 + 7, "fields": _plutus_fields(value.value)}
        if tag == 102 and isinstance(value.value, list) and len(value.value) == 2:
            return {"constructor": value.value[0], "fields": _plutus_fields(value.value[1])}
        raise ShapeError(f"unexpected CBOR tag {tag} in plutus data")
    if isinstance(value, bool):
        raise ShapeError("booleans are not plutus data")
    if isinstance(value, int):
        return {"int": value}
    if isinstance(value, bytes):
        return {"bytes": value.hex()}
    if isinstance(value, list | tuple):
        return {"list": [plutus_data_json(v) for v in value]}
    if isinstance(value, dict):
        return {
            "map": [{"k": plutus_data_json(k), "v": plutus_data_json(v)} for k, v in value.items()]
        }
    raise ShapeError(f"{type(value).__name__} is not plutus data")


def _plutus_fields(value: Any) -> list[Any]:
    if not isinstance(value, list | tuple):
        raise ShapeError("constructor fields are not a list")
    return [plutus_data_json(v) for v in value]


# --- scripts and assets ------------------------------------------------------------------------

_NATIVE_KINDS = {0: "sig", 1: "all", 2: "any", 3: "atLeast", 4: "after", 5: "before"}


def native_script_json(script: Any) -> dict[str, Any]:
    """cardano-cli's (and pycardano's `NativeScript.from_dict`'s) JSON for a native script."""
    if not isinstance(script, list | tuple) or not script or script[0] not in _NATIVE_KINDS:
        raise ShapeError("not a native script")
    kind = script[0]
    if kind == 0:
        return {"type": "sig", "keyHash": bytes(script[1]).hex()}
    if kind in (1, 2):
        return {
            "type": _NATIVE_KINDS[kind],
            "scripts": [native_script_json(s) for s in _items(script[1])],
        }
    if kind == 3:
        return {
            "type": "atLeast",
            "required": script[1],
            "scripts": [native_script_json(s) for s in _items(script[2])],
        }
    return {"type": _NATIVE_KINDS[kind], "slot": script[1]}


def script_content(script: ScriptRecord) -> dict[str, Any]:
    return {
        "script_hash": script.hash,
        "type": script.type,
        "serialised_size": script.serialised_size,
    }


def script_json_content(script: ScriptRecord) -> dict[str, Any]:
    if script.type != "timelock":
        return {"json": None}
    return {"json": native_script_json(cbor2.loads(script.cbor))}


def script_cbor_content(script: ScriptRecord) -> dict[str, Any]:
    if script.type == "timelock":
        return {"cbor": None}
    return {"cbor": script.cbor.hex()}


def asset_content(asset: AssetRecord) -> dict[str, Any]:
    return {
        "asset": asset.policy_id + asset.asset_name,
        "policy_id": asset.policy_id,
        "asset_name": asset.asset_name or None,
        "fingerprint": asset_fingerprint(asset.policy_id, asset.asset_name),
        "quantity": str(asset.quantity),
        "initial_mint_tx_hash": asset.initial_mint_tx_hash,
        "mint_or_burn_count": asset.mint_or_burn_count,
        "onchain_metadata": None,
        # `onchain_metadata_standard` is left out: it is optional, and the spec's enum (which
        # lacks null) rejects the null Blockfrost would send for assets without metadata.
        "onchain_metadata_extra": None,
        "metadata": None,
    }


# --- evaluation ----------------------------------------------------------------------------------


def evaluation_envelope(results: Sequence[RedeemerEvaluation]) -> dict[str, Any]:
    """Ogmios v5 `EvaluateTx` JSON-WSP response, as Blockfrost returns it."""
    failures = {
        f"{_OGMIOS_PURPOSE.get(r.tag, r.tag)}:{r.index}": [
            {"validatorFailed": {"error": r.error or "script failed", "traces": list(r.logs)}}
        ]
        for r in results
        if not r.ok
    }
    if failures:
        result: dict[str, Any] = {"EvaluationFailure": {"ScriptFailures": failures}}
    else:
        result = {
            "EvaluationResult": {
                f"{_OGMIOS_PURPOSE.get(r.tag, r.tag)}:{r.index}": {
                    "memory": r.mem,
                    "steps": r.steps,
                }
                for r in results
            }
        }
    return _jsonwsp(result)


def evaluation_failure_envelope(reason: str, rule: str) -> dict[str, Any]:
    """Evaluation could not start (unknown inputs, malformed body...): Ogmios' context error."""
    return _jsonwsp(
        {"EvaluationFailure": {"CannotCreateEvaluationContext": {"reason": f"{rule}: {reason}"}}}
    )


# Ogmios v6 purposes (`validator.purpose`) by the devnet's redeemer tag names.
_OGMIOS_V6_PURPOSE = {
    "spend": "spend",
    "mint": "mint",
    "cert": "publish",
    "reward": "withdraw",
    "vote": "vote",
    "propose": "propose",
}


def evaluation_envelope_v6(results: Sequence[RedeemerEvaluation]) -> dict[str, Any]:
    """Ogmios v6 `evaluateTransaction` JSON-RPC response (Blockfrost's `?version=6`)."""
    failures = [
        {
            "validator": {"index": r.index, "purpose": _OGMIOS_V6_PURPOSE.get(r.tag, r.tag)},
            "error": {
                "code": 3012,
                "message": "Some of the scripts failed to evaluate to a positive outcome.",
                "data": {"validationError": r.error or "script failed", "traces": list(r.logs)},
            },
        }
        for r in results
        if not r.ok
    ]
    if failures:
        return _jsonrpc(
            error={
                "code": 3010,
                "message": "Some scripts of the transactions terminated with error(s).",
                "data": failures,
            }
        )
    return _jsonrpc(
        result=[
            {
                "validator": {"index": r.index, "purpose": _OGMIOS_V6_PURPOSE.get(r.tag, r.tag)},
                "budget": {"memory": r.mem, "cpu": r.steps},
            }
            for r in results
        ]
    )


def evaluation_failure_envelope_v6(reason: str, rule: str) -> dict[str, Any]:
    """Evaluation could not start: Ogmios v6's evaluation-context error."""
    return _jsonrpc(
        error={"code": 3004, "message": f"{rule}: {reason}", "data": {"reason": reason}}
    )


def _jsonrpc(**payload: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "evaluateTransaction", **payload, "id": None}


def account_content(stake_address: str, account: AccountRecord) -> dict[str, Any]:
    """Blockfrost's account: `active` is pool delegation (the devnet runs no pools), and
    `controlled_amount` the lovelace staked to the credential plus its rewards."""
    return {
        "stake_address": stake_address,
        "active": False,
        "registered": account.registered,
        "active_epoch": account.active_epoch,
        "controlled_amount": str(account.controlled_lovelace),
        "rewards_sum": "0",
        "withdrawals_sum": "0",
        "reserves_sum": "0",
        "treasury_sum": "0",
        "withdrawable_amount": str(account.withdrawable),
        "pool_id": None,
        "drep_id": account.drep_id,
    }


def _jsonwsp(result: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "jsonwsp/response",
        "version": "1.0",
        "servicename": "ogmios",
        "methodname": "EvaluateTx",
        "result": result,
        "reflection": None,
    }
