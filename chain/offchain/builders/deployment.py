"""A deployment of the protocol: what every other builder needs, saved as `deployment.json`."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from pycardano import Address, Network, ScriptHash, TransactionInput

from chain.contracts import types as t
from chain.offchain.builders.errors import BuilderError
from chain.offchain.builders.onchain import parse_out_ref

# Format 2: the oracle-config script is also the config NFT's policy (the deploy builder
# writes `config_policy == oracle_config_hash`), escrow refunds refuse reference scripts,
# and the file records the `protocol_version` of its scripts (absent: the current one).
# Format 1 files describe the scripts of protocol 1.0.0 (a config NFT policy apart from the
# oracle-config script) and are read only as 1.0.0 deployments, so escrows locked under them
# can still settle or refund with those scripts; deploy anew for the current version.
DEPLOYMENT_FORMAT = 2
LEGACY_FORMAT = 1
FIRST_PROTOCOL = "1.0.0"
# The version of the committed build (chain/offchain/compile.py PROTOCOL_VERSION).
CURRENT_PROTOCOL = "2.0.0"


@dataclass(frozen=True)
class Deployment:
    """Script hashes and where the deployment lives on chain. Out-refs are "txid#index"."""

    network: str  # "testnet" | "mainnet"
    seed: str
    config_policy: str
    config_name: str  # hex
    # The oracle-config script: the only address where the config NFT counts. Equal to
    # `config_policy` in deployments of this build (one script mints and holds the NFT).
    oracle_config_hash: str
    escrow_hash: str
    batch_hash: str
    config_ref: str  # the UTxO holding the config NFT and OracleConfigDatum
    escrow_script_ref: str
    batch_script_ref: str
    config_script_ref: str
    ntx_policy: str
    ntx_name: str  # hex
    tx_ids: tuple[str, ...] = ()
    format: int = DEPLOYMENT_FORMAT
    # The protocol version of its scripts (the blueprint's); format-1 files are 1.0.0
    # deployments, format-2 files without the field the current version.
    protocol_version: str = CURRENT_PROTOCOL

    def __post_init__(self) -> None:
        if self.network not in ("testnet", "mainnet"):
            raise BuilderError(f"deployment network must be testnet or mainnet: {self.network}")
        for name in (
            "config_policy",
            "oracle_config_hash",
            "escrow_hash",
            "batch_hash",
            "ntx_policy",
        ):
            value = getattr(self, name)
            if len(value) != 56 or not _is_hex(value):
                raise BuilderError(f"deployment {name} must be 28 bytes of hex: {value!r}")
        for name in ("config_name", "ntx_name"):
            if not _is_hex(getattr(self, name)) or len(getattr(self, name)) > 64:
                raise BuilderError(f"deployment {name} must be hex of at most 32 bytes")
        for name in (
            "seed",
            "config_ref",
            "escrow_script_ref",
            "batch_script_ref",
            "config_script_ref",
        ):
            parse_out_ref(getattr(self, name))

    # --- typed views -------------------------------------------------------------------

    @property
    def pycardano_network(self) -> Network:
        return Network.MAINNET if self.network == "mainnet" else Network.TESTNET

    @property
    def ntx_unit(self) -> str:
        return self.ntx_policy + self.ntx_name

    @property
    def config_unit(self) -> str:
        return self.config_policy + self.config_name

    @property
    def escrow_address(self) -> Address:
        return Address(ScriptHash(bytes.fromhex(self.escrow_hash)), network=self.pycardano_network)

    @property
    def config_address(self) -> Address:
        """The oracle-config script's address: the only place the config NFT counts."""
        return Address(
            ScriptHash(bytes.fromhex(self.oracle_config_hash)), network=self.pycardano_network
        )

    @property
    def batch_stake_address(self) -> Address:
        return Address(
            staking_part=ScriptHash(bytes.fromhex(self.batch_hash)), network=self.pycardano_network
        )

    def ref(self, name: str) -> TransactionInput:
        """One of the out-refs by field name ("config_ref", "escrow_script_ref", ...)."""
        return parse_out_ref(getattr(self, name))

    def trusts(self, datum: t.EscrowDatum) -> bool:
        """Whether an escrow datum names this deployment's batch script, config and NTX."""
        return (
            datum.batch_credential.hex() == self.batch_hash
            and datum.config_policy.hex() == self.config_policy
            and datum.config_name.hex() == self.config_name
            and datum.ntx_policy.hex() == self.ntx_policy
            and datum.ntx_name.hex() == self.ntx_name
        )

    # --- JSON ------------------------------------------------------------------------------

    def to_json(self) -> str:
        data = asdict(self)
        data["tx_ids"] = list(self.tx_ids)
        return json.dumps(data, indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Deployment:
        try:
            data: Any = json.loads(text)
        except ValueError as exc:
            raise BuilderError(f"deployment is not JSON: {exc}") from exc
        if not isinstance(data, dict):
            raise BuilderError("deployment JSON must be an object")
        if data.get("format") == LEGACY_FORMAT:
            if data.get("protocol_version", FIRST_PROTOCOL) != FIRST_PROTOCOL:
                raise BuilderError(
                    f"deployment format 1 names protocol {data.get('protocol_version')!r}: "
                    f"format 1 files are read only as protocol {FIRST_PROTOCOL} deployments "
                    "(a config NFT policy apart from the oracle-config script); deployments of "
                    f"later versions are format {DEPLOYMENT_FORMAT}"
                )
            data.setdefault("protocol_version", FIRST_PROTOCOL)
        elif data.get("format") != DEPLOYMENT_FORMAT:
            raise BuilderError(
                f"unsupported deployment format {data.get('format')!r} "
                f"(this release reads format {DEPLOYMENT_FORMAT}, and format {LEGACY_FORMAT} "
                f"as protocol {FIRST_PROTOCOL} deployments)"
            )
        names = {f.name for f in fields(cls)}
        unknown = set(data) - names
        missing = names - set(data) - {"tx_ids", "format", "protocol_version"}
        if unknown or missing:
            raise BuilderError(
                f"deployment JSON: unknown keys {sorted(unknown)}, missing {sorted(missing)}"
            )
        for key, value in data.items():
            if key == "tx_ids":
                if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                    raise BuilderError("deployment tx_ids must be a list of strings")
            elif key != "format" and not isinstance(value, str):
                raise BuilderError(f"deployment {key} must be a string")
        data["tx_ids"] = tuple(data.get("tx_ids", ()))
        data.setdefault("protocol_version", CURRENT_PROTOCOL)
        return cls(**data)

    def save(self, path: Path) -> None:
        Path(path).write_text(self.to_json(), encoding="utf-8")

    @classmethod
    def load(cls, path: Path) -> Deployment:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise BuilderError(f"cannot read deployment {path}: {exc}") from exc
        return cls.from_json(text)


def _is_hex(value: str) -> bool:
    try:
        bytes.fromhex(value)
    except ValueError:
        return False
    return True
