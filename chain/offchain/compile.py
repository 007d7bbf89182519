"""Compile the OpShin validators into the committed build artifacts.

`python -m chain.offchain.compile` writes, for every validator, `chain/contracts/build/
<name>.plutus` (a cardano-cli text envelope of the UNAPPLIED script) and a CIP-57
blueprint `plutus.json` with datum, redeemer and parameter schemas. Parameters are applied
off-chain (`chain.offchain.scripts`), so the artifacts do not depend on any deployment.
`--check` compiles afresh and fails when the committed files differ.

Two builds come from the same sources: the production build (committed, the one whose
hashes a deployment uses) and a trace-keeping build (`compile_all(traces=True)`), whose
only difference is that failing assertions report their message. The latter is compiled
on demand and cached outside the repository (`trace_build_dir()`); tests use it to show
which check rejected a transaction.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cbor2
import uplc
import uplc.ast
from opshin import __version__ as opshin_version
from opshin import builder
from opshin.builder import to_plutus_schema
from opshin.compiler_config import DEFAULT_CONFIG, OPT_O3_CONFIG
from pycardano import PlutusV3Script, plutus_script_hash

from chain.contracts import bond_types as bt
from chain.contracts import settle_core
from chain.contracts import types as t
from chain.deep_stack import deep_recursion
from chain.offchain.errors import ChainError

REPO_ROOT = Path(__file__).resolve().parents[2]
CONTRACTS_DIR = REPO_ROOT / "chain" / "contracts"
BUILD_DIR = CONTRACTS_DIR / "build"
BLUEPRINT_NAME = "plutus.json"
# Bumped with every change of the on-chain rules; the blueprint of each earlier version is
# kept, frozen, under chain/contracts/releases/<version>/ (docs/protocol.md, Upgrades).
PROTOCOL_VERSION = "2.0.0"
# -O3: about half the size and a sixth less memory than the default -O2 on these scripts.
# Its adjacent inlining may reorder pure expressions, never drop a check. Pattern
# compression off: it shares code through extra lambdas that every run pays for (escrow
# Settle 105k -> 67k memory, batch 0.30M -> 0.26M per escrow) at about twice the size,
# which only the per-transaction reference-script fee sees.
COMPILER_CONFIG = DEFAULT_CONFIG.update(OPT_O3_CONFIG).update(compress_patterns=False)
# The trace-keeping build: identical but for the assertion messages -O3 strips.
TRACE_COMPILER_CONFIG = COMPILER_CONFIG.update(remove_trace=False)
# Where trace builds are cached (outside the repository; override with the variable).
TRACE_CACHE_ENV = "PROOFNET_TRACE_BUILD_DIR"
# OpShin's compiler recurses deeply on nested expressions.
_RECURSION_LIMIT = 100_000


class CompileError(ChainError):
    """A validator failed to compile or the committed artifacts are stale."""


@dataclass(frozen=True)
class ValidatorSpec:
    name: str
    purpose: str  # CIP-57 purpose of the redeemer: spend | mint | withdraw | publish
    description: str
    redeemer: tuple[str, Any]
    parameters: tuple[tuple[str, Any], ...] = ()
    datum: tuple[str, Any] | None = None
    extra_purposes: tuple[str, ...] = ()
    # Compiler settings of this validator on top of COMPILER_CONFIG (and of the trace build).
    compiler_overrides: tuple[tuple[str, Any], ...] = ()
    # A hand-written UPLC core that answers the hot path itself and hands the rest to the
    # OpShin program (`chain.contracts.settle_core`): (program term, traces) -> term.
    core: Callable[..., Any] | None = None

    @property
    def source(self) -> Path:
        return CONTRACTS_DIR / f"{self.name}.py"


VALIDATORS: tuple[ValidatorSpec, ...] = (
    ValidatorSpec(
        name="escrow",
        purpose="spend",
        description="Job escrow: Settle forwards to the batch stake script; Refund; Cancel.",
        datum=("datum", t.EscrowDatum),
        redeemer=("redeemer", t.EscrowRedeemer),
        core=settle_core.escrow_core,
    ),
    ValidatorSpec(
        name="batch_settle",
        purpose="withdraw",
        extra_purposes=("publish",),
        description="Withdraw-zero batch settlement of every escrow input (oracle quorum).",
        redeemer=("redeemer", t.BatchRedeemer),
        parameters=(
            ("escrow_hash", bytes),
            ("config_policy", bytes),
            ("config_script_hash", bytes),
        ),
        core=settle_core.batch_core,
    ),
    ValidatorSpec(
        name="oracle_config",
        purpose="spend",
        extra_purposes=("mint",),
        description=(
            "Oracle config: one-shot policy of the config NFT (minted only to this script) "
            "and the script holding it; updates need the admin quorum. Spend redeemer "
            "UpdateConfig, mint redeemer MintConfigNft (same shape)."
        ),
        datum=("datum", t.OracleConfigDatum),
        redeemer=("redeemer", t.UpdateConfig),
        parameters=(("seed", t.TxOutRef),),
        # Runs once per mint or config update, never in settlements: size matters more
        # than execution here (3.0 KB instead of 10.2 KB; the deploy mint carries it in its
        # witness set, and the trace build would not fit the 16 KB transaction otherwise).
        compiler_overrides=(("compress_patterns", True),),
    ),
    ValidatorSpec(
        name="test_ntx",
        purpose="mint",
        description="Test-NTX minting policy (devnet/preprod): admin mints, anyone burns.",
        redeemer=("redeemer", t.MintTestNtx),
        parameters=(("admin_pkh", bytes),),
    ),
    ValidatorSpec(
        name="bond",
        purpose="spend",
        description="Provider bond: Unbond, Withdraw after the delay, Slash by the oracle quorum.",
        datum=("datum", bt.BondDatum),
        redeemer=("redeemer", bt.BondRedeemer),
        parameters=(
            ("config_policy", bytes),
            ("config_script_hash", bytes),
            ("ntx_policy", bytes),
            ("ntx_name", bytes),
            ("unbonding_delay", int),
            ("slash_permille", int),
        ),
    ),
)


def spec(name: str) -> ValidatorSpec:
    for s in VALIDATORS:
        if s.name == name:
            return s
    raise CompileError(f"unknown validator {name!r}")


@contextlib.contextmanager
def _compiler_environment() -> Iterator[None]:
    """OpShin resolves `from chain.contracts... import *` through sys.path, and the editable
    install hides the repository root from it; both changes are undone afterwards."""
    added = str(REPO_ROOT) not in sys.path
    if added:
        sys.path.insert(0, str(REPO_ROOT))
    try:
        with deep_recursion(_RECURSION_LIMIT):
            yield
    finally:
        if added:
            sys.path.remove(str(REPO_ROOT))


def compile_validator(name: str, *, traces: bool = False, core: bool = True) -> PlutusV3Script:
    """The unapplied script (CBOR-wrapped flat UPLC, as it appears in a witness set).
    `traces=True`: the same script keeping its assertion messages (never deployed).
    `core=False`: the OpShin program alone, without its hand-written core (the reference
    the core must agree with; never deployed)."""
    s = spec(name)
    base = TRACE_COMPILER_CONFIG if traces else COMPILER_CONFIG
    config = base.update(**dict(s.compiler_overrides)) if s.compiler_overrides else base
    source = s.source
    try:
        with _compiler_environment():
            script = builder.build(str(source), config=config)
            if s.core is None or not core:
                return script
            program = uplc.unflatten(bytes(script))
            wrapped = uplc.ast.Program(program.version, s.core(program.term, traces=traces))
            return PlutusV3Script(uplc.flatten(wrapped))
    except Exception as exc:  # the compiler raises many kinds; callers need one
        raise CompileError(f"{name}: {exc}") from exc


def text_envelope(name: str, script: bytes) -> str:
    envelope = {
        "type": "PlutusScriptV3",
        "description": f"proofnet {name} (unapplied; opshin {opshin_version})",
        "cborHex": cbor2.dumps(bytes(script)).hex(),
    }
    return json.dumps(envelope, indent=2) + "\n"


def _schema(typ: Any) -> dict[str, Any]:
    return to_plutus_schema(typ)


def blueprint(compiled: dict[str, bytes]) -> dict[str, Any]:
    validators = []
    for s in VALIDATORS:
        script = compiled[s.name]
        purposes = (s.purpose, *s.extra_purposes)
        entry: dict[str, Any] = {"title": f"{s.name}.{s.purpose}", "description": s.description}
        if s.datum is not None:
            entry["datum"] = {"title": s.datum[0], "schema": _schema(s.datum[1])}
        entry["redeemer"] = {
            "title": s.redeemer[0],
            "purpose": purposes[0] if len(purposes) == 1 else {"oneOf": list(purposes)},
            "schema": _schema(s.redeemer[1]),
        }
        if s.parameters:
            entry["parameters"] = [
                {"title": title, "schema": _schema(typ)} for title, typ in s.parameters
            ]
        entry["compiledCode"] = bytes(script).hex()
        entry["hash"] = plutus_script_hash(PlutusV3Script(script)).payload.hex()
        validators.append(entry)
    return {
        "preamble": {
            "title": "proofnet/protocol",
            "description": "NTX escrow and batch settlement for proven GPU work",
            "version": PROTOCOL_VERSION,
            "plutusVersion": "v3",
            "compiler": {"name": "opshin", "version": opshin_version},
            "license": "Apache-2.0",
        },
        "validators": validators,
    }


def render(compiled: dict[str, bytes]) -> dict[str, str]:
    """File name -> exact file content of every build artifact."""
    files = {f"{name}.plutus": text_envelope(name, script) for name, script in compiled.items()}
    files[BLUEPRINT_NAME] = json.dumps(blueprint(compiled), indent=2, sort_keys=False) + "\n"
    return files


def compile_all(*, traces: bool = False, core: bool = True) -> dict[str, bytes]:
    return {s.name: bytes(compile_validator(s.name, traces=traces, core=core)) for s in VALIDATORS}


def sources_digest() -> str:
    """Identifies the on-chain sources and the compiler: a trace build is reused only while
    this is unchanged."""
    h = hashlib.blake2b(digest_size=16)
    h.update(opshin_version.encode())
    h.update(repr(TRACE_COMPILER_CONFIG).encode())
    h.update(repr([(s.name, s.compiler_overrides) for s in VALIDATORS]).encode())
    for path in sorted(CONTRACTS_DIR.glob("*.py")):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def trace_build_dir() -> Path:
    """The cache of trace builds (one blueprint per sources digest)."""
    configured = os.environ.get(TRACE_CACHE_ENV)
    if configured:
        return Path(configured)
    return REPO_ROOT / ".proofnet" / "trace-build"


def trace_blueprint(cache_dir: Path | None = None) -> Path:
    """A CIP-57 blueprint of the trace-keeping build of the current sources, compiled on the
    first call (minutes) and cached. Not committed, never deployed: its hashes differ from
    the production build's."""
    directory = cache_dir if cache_dir is not None else trace_build_dir()
    path = directory / f"plutus-traces-{sources_digest()}.json"
    if not path.exists():
        directory.mkdir(parents=True, exist_ok=True)
        content = json.dumps(blueprint(compile_all(traces=True)), indent=2) + "\n"
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(content, encoding="utf-8")
        tmp.replace(path)  # atomic: parallel test workers may race to build it
    return path


def reference_blueprint(cache_dir: Path | None = None) -> Path:
    """A CIP-57 blueprint of the OpShin programs without their hand-written cores
    (`chain.contracts.settle_core`), production settings, compiled on the first call and
    cached beside the trace builds. Never deployed: tests run the unit suites against it
    and the production build alike, so the cores keep the OpShin validators' verdicts."""
    directory = cache_dir if cache_dir is not None else trace_build_dir()
    path = directory / f"plutus-reference-{sources_digest()}.json"
    if not path.exists():
        directory.mkdir(parents=True, exist_ok=True)
        content = json.dumps(blueprint(compile_all(core=False)), indent=2) + "\n"
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(content, encoding="utf-8")
        tmp.replace(path)
    return path


def write_build(build_dir: Path = BUILD_DIR) -> list[Path]:
    build_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for fname, content in render(compile_all()).items():
        path = build_dir / fname
        path.write_text(content, encoding="utf-8")
        written.append(path)
    return written


def stale_artifacts(build_dir: Path = BUILD_DIR) -> list[str]:
    """Names of committed artifacts that differ from a fresh compile (empty: up to date)."""
    stale = []
    for fname, content in render(compile_all()).items():
        path = build_dir / fname
        if not path.exists() or path.read_text(encoding="utf-8") != content:
            stale.append(fname)
    return stale


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if artifacts are stale")
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_artifacts()
        if stale:
            print("stale build artifacts: " + ", ".join(stale), file=sys.stderr)
            return 1
        print("build artifacts are up to date")
        return 0
    for path in write_build():
        print(path.relative_to(REPO_ROOT))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
