"""A deployment of the compiled protocol scripts, shared by the contract unit tests."""

from __future__ import annotations

import pytest
from contracts_harness import default_oracles, h28, h32
from pycardano import Network, TransactionId, TransactionInput

from chain.offchain import scripts as S


@pytest.fixture(scope="session")
def deployment() -> S.ProtocolScripts:
    seed = TransactionInput(TransactionId(h32("seed")), 0)
    return S.protocol_scripts(seed, Network.TESTNET)


@pytest.fixture(scope="session")
def oracles() -> list[bytes]:
    return default_oracles()


@pytest.fixture(scope="session")
def admins() -> list[bytes]:
    return sorted(h28(f"admin{i}") for i in range(3))
