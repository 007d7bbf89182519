"""A deployment of the compiled protocol scripts, shared by the contract unit tests.

`deployment` comes in two builds: the production one (the escrow's Settle and the batch's
withdrawal answered by the hand-written cores of `chain.contracts.settle_core`) and the
OpShin programs alone (`compile.reference_blueprint`), so every unit test, attacks
included, must give the same verdict on both: the cores make the OpShin validators' checks.
`core_deployment` is the production build only (costs, sizes).
"""

from __future__ import annotations

import pytest
from contracts_harness import default_oracles, h28, h32
from opshin.builder import apply_parameters
from pycardano import Network, PlutusV3Script, TransactionId, TransactionInput

from chain.offchain import compile as C
from chain.offchain import scripts as S


def _seed() -> TransactionInput:
    return TransactionInput(TransactionId(h32("seed")), 0)


@pytest.fixture(scope="session")
def core_deployment() -> S.ProtocolScripts:
    return S.protocol_scripts(_seed(), Network.TESTNET)


@pytest.fixture(scope="session")
def reference_deployment() -> S.ProtocolScripts:
    """The same deployment with the escrow and batch scripts compiled without their cores."""
    path = C.reference_blueprint()
    prod = S.protocol_scripts(_seed(), Network.TESTNET)
    escrow = S.unapplied("escrow", path)
    batch = PlutusV3Script(
        bytes(
            apply_parameters(
                S.unapplied("batch_settle", path),
                S.script_hash(escrow).payload,
                prod.config_policy.payload,
                S.script_hash(prod.oracle_config).payload,
            )
        )
    )
    return S.ProtocolScripts(prod.seed, prod.network, prod.oracle_config, escrow, batch)


@pytest.fixture(scope="session", params=["core", "opshin"])
def deployment(request, core_deployment, reference_deployment) -> S.ProtocolScripts:  # type: ignore[no-untyped-def]
    return core_deployment if request.param == "core" else reference_deployment


@pytest.fixture(scope="session")
def oracles() -> list[bytes]:
    return default_oracles()


@pytest.fixture(scope="session")
def admins() -> list[bytes]:
    return sorted(h28(f"admin{i}") for i in range(3))
