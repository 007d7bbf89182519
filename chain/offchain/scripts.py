"""The compiled protocol scripts, their parameters, hashes and addresses (for builders).

Scripts are read from the committed build artifacts (`chain/contracts/build/plutus.json`),
never compiled at run time. A deployment is fixed by two things: the seed UTxO the config
NFT is minted from, and the network. Everything else follows:

    oracle_config = oracle_config(seed)                    -> config_policy = its hash
    escrow        = escrow                                 (unparameterised)
    batch_settle  = batch_settle(escrow_hash, config_policy, oracle_config_hash)

The oracle-config script is also the config NFT's minting policy (one script), so the
policy id and the config address's payment credential are one hash: the NFT can only be
minted to, and the config only be read from, that address. The batch script still takes
both (equal) hashes as parameters.

`traces=True` (tests only) gives the same scripts from the trace-keeping build, whose
failures report the message of the assertion that rejected; it is compiled on first use
and cached under `.proofnet/` (`chain.offchain.compile.trace_blueprint`). Its hashes differ
from the production build's, so it is never deployed.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opshin.builder import apply_parameters
from pycardano import (
    Address,
    Network,
    PlutusData,
    PlutusV3Script,
    ScriptHash,
    TransactionInput,
    VerificationKeyHash,
    plutus_script_hash,
)

from chain.contracts import types as t
from chain.deep_stack import deep_recursion
from chain.offchain.errors import ChainError

BUILD_DIR = Path(__file__).resolve().parents[1] / "contracts" / "build"
BLUEPRINT_PATH = BUILD_DIR / "plutus.json"
CONFIG_NFT_NAME: bytes = t.CONFIG_NFT_NAME
SCRIPT_NAMES = ("escrow", "batch_settle", "oracle_config", "test_ntx", "bond")


class ScriptLoadError(ChainError):
    """The build artifacts are missing, malformed or do not name the wanted script."""


@functools.lru_cache(maxsize=4)
def _blueprint(path: Path) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ScriptLoadError(f"cannot read blueprint {path}: {exc}") from exc
    return data


def unapplied(name: str, blueprint_path: Path = BLUEPRINT_PATH) -> PlutusV3Script:
    """The compiled script `name` before any parameter is applied."""
    for v in _blueprint(blueprint_path).get("validators", []):
        if str(v.get("title", "")).split(".")[0] == name:
            return PlutusV3Script(bytes.fromhex(v["compiledCode"]))
    raise ScriptLoadError(f"no validator {name!r} in {blueprint_path}")


def parameter_titles(name: str, blueprint_path: Path = BLUEPRINT_PATH) -> list[str]:
    for v in _blueprint(blueprint_path).get("validators", []):
        if str(v.get("title", "")).split(".")[0] == name:
            return [p["title"] for p in v.get("parameters", [])]
    raise ScriptLoadError(f"no validator {name!r} in {blueprint_path}")


def blueprint_path(traces: bool = False) -> Path:
    """The committed production blueprint, or (traces) the cached trace-keeping build."""
    if not traces:
        return BLUEPRINT_PATH
    from chain.offchain import compile as compiler  # the compiler is needed only here

    try:
        return compiler.trace_blueprint()
    except compiler.CompileError as exc:
        raise ScriptLoadError(f"cannot build the trace-keeping scripts: {exc}") from exc


def load_scripts(traces: bool = False) -> dict[str, PlutusV3Script]:
    """Every unapplied script by name, from the production or the trace-keeping build."""
    path = blueprint_path(traces)
    return {name: unapplied(name, path) for name in SCRIPT_NAMES}


def apply_params(
    name: str, *params: bytes | int | PlutusData, traces: bool = False
) -> PlutusV3Script:
    """Apply exactly the parameters the blueprint declares, in order."""
    path = blueprint_path(traces)
    titles = parameter_titles(name, path)
    if len(params) != len(titles):
        raise ScriptLoadError(f"{name} takes {len(titles)} parameters {titles}, got {len(params)}")
    script = unapplied(name, path)
    if not params:
        return script
    with deep_recursion():
        return PlutusV3Script(bytes(apply_parameters(script, *params)))


def script_hash(script: PlutusV3Script) -> ScriptHash:
    return plutus_script_hash(script)


def out_ref(utxo: TransactionInput) -> t.TxOutRef:
    return t.TxOutRef(utxo.transaction_id.payload, utxo.index)


@dataclass(frozen=True)
class ProtocolScripts:
    """One deployment's scripts. Build with `protocol_scripts(seed, network)`."""

    seed: TransactionInput
    network: Network
    oracle_config: PlutusV3Script  # also the config NFT's minting policy
    escrow: PlutusV3Script
    batch_settle: PlutusV3Script

    @property
    def config_policy(self) -> ScriptHash:
        """The config NFT's policy: the oracle-config script's own hash."""
        return script_hash(self.oracle_config)

    @property
    def config_unit(self) -> str:
        return self.config_policy.payload.hex() + CONFIG_NFT_NAME.hex()

    @property
    def oracle_config_hash(self) -> ScriptHash:
        return script_hash(self.oracle_config)

    @property
    def escrow_hash(self) -> ScriptHash:
        return script_hash(self.escrow)

    @property
    def batch_hash(self) -> ScriptHash:
        return script_hash(self.batch_settle)

    @property
    def config_address(self) -> Address:
        return Address(payment_part=self.oracle_config_hash, network=self.network)

    def escrow_address(self, staking_part: VerificationKeyHash | None = None) -> Address:
        """The escrow address. Its staking part is empty by default: escrowed ADA must not be
        delegated to the batch credential (rewards there would break withdraw-zero, since
        Conway withdrawals must take the whole balance). The validators accept escrows at
        any staking part; pass a submitter's stake key hash to keep their stake."""
        return Address(
            payment_part=self.escrow_hash, staking_part=staking_part, network=self.network
        )

    @property
    def batch_stake_address(self) -> Address:
        """The reward address the batch withdraws zero from (register it once)."""
        return Address(staking_part=self.batch_hash, network=self.network)


def protocol_scripts(
    seed: TransactionInput, network: Network, *, traces: bool = False
) -> ProtocolScripts:
    oracle_config = apply_params("oracle_config", out_ref(seed), traces=traces)
    config_policy = script_hash(oracle_config).payload
    escrow = apply_params("escrow", traces=traces)
    batch = apply_params(
        "batch_settle",
        script_hash(escrow).payload,
        config_policy,
        config_policy,
        traces=traces,
    )
    return ProtocolScripts(seed, network, oracle_config, escrow, batch)


def ntx_test_policy(admin_pkh: VerificationKeyHash, *, traces: bool = False) -> PlutusV3Script:
    """The devnet/preprod test-NTX minting policy of one admin key."""
    return apply_params("test_ntx", admin_pkh.payload, traces=traces)
