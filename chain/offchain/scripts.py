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

Released versions stay loadable: `release="1.0.0"` reads the frozen blueprint of that
protocol version (`chain/contracts/releases/<version>/plutus.json`), so escrows locked under
an old version keep settling and refunding under their own scripts after an upgrade (see
docs/protocol.md, Upgrades). The current build's version is `current_version()`.
Version 1.0.0 keeps its own derivation: a separate config NFT policy,
`config_nft(seed) -> config_policy`, and `oracle_config(config_policy)`; its
`ProtocolScripts.config_nft` holds that policy (None for the current build).

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
RELEASES_DIR = BUILD_DIR.parent / "releases"
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


def _has_validator(name: str, blueprint_path: Path) -> bool:
    validators = _blueprint(blueprint_path).get("validators", [])
    return any(str(v.get("title", "")).split(".")[0] == name for v in validators)


def current_version() -> str:
    """The protocol version of the committed production build (its blueprint preamble)."""
    return str(_blueprint(BLUEPRINT_PATH)["preamble"]["version"])


def release_blueprint(version: str) -> Path:
    """The frozen blueprint of an earlier protocol version, or the current one."""
    if version == current_version():
        return BLUEPRINT_PATH
    path = RELEASES_DIR / version / "plutus.json"
    if "/" in version or not path.is_file():
        raise ScriptLoadError(f"no released protocol version {version!r} under {RELEASES_DIR}")
    return path


def blueprint_path(traces: bool = False, release: str | None = None) -> Path:
    """The committed production blueprint, a released one, or (traces) the cached
    trace-keeping build of the current sources."""
    if release is not None:
        if traces and release != current_version():
            raise ScriptLoadError(f"release {release} has no trace-keeping build")
        if not traces:
            return release_blueprint(release)
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
    name: str,
    *params: bytes | int | PlutusData,
    traces: bool = False,
    release: str | None = None,
) -> PlutusV3Script:
    """Apply exactly the parameters the blueprint declares, in order."""
    path = blueprint_path(traces, release)
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
    oracle_config: PlutusV3Script  # also the config NFT's minting policy (current build)
    escrow: PlutusV3Script
    batch_settle: PlutusV3Script
    config_nft: PlutusV3Script | None = None  # the separate NFT policy of release 1.0.0

    @property
    def config_policy(self) -> ScriptHash:
        """The config NFT's policy: the oracle-config script's own hash (release 1.0.0:
        the separate config_nft policy)."""
        if self.config_nft is not None:
            return script_hash(self.config_nft)
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
    seed: TransactionInput, network: Network, *, traces: bool = False, release: str | None = None
) -> ProtocolScripts:
    """The scripts of the deployment `seed` on `network`: the current build, or those of
    an earlier protocol version (`release`)."""
    path = blueprint_path(traces, release)
    config_nft: PlutusV3Script | None = None
    if _has_validator("config_nft", path):  # release 1.0.0: a separate NFT policy
        config_nft = apply_params("config_nft", out_ref(seed), traces=traces, release=release)
        config_policy = script_hash(config_nft).payload
        oracle_config = apply_params("oracle_config", config_policy, traces=traces, release=release)
    else:
        oracle_config = apply_params("oracle_config", out_ref(seed), traces=traces, release=release)
        config_policy = script_hash(oracle_config).payload
    escrow = apply_params("escrow", traces=traces, release=release)
    batch = apply_params(
        "batch_settle",
        script_hash(escrow).payload,
        config_policy,
        script_hash(oracle_config).payload,
        traces=traces,
        release=release,
    )
    return ProtocolScripts(seed, network, oracle_config, escrow, batch, config_nft)


def ntx_test_policy(admin_pkh: VerificationKeyHash, *, traces: bool = False) -> PlutusV3Script:
    """The devnet/preprod test-NTX minting policy of one admin key."""
    return apply_params("test_ntx", admin_pkh.payload, traces=traces)
