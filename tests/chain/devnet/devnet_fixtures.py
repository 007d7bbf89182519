"""pytest fixtures for a running devnet (registered by tests/conftest.py for every suite).

    def test_pay(devnet):                      # a fresh chain per test, faults enabled
        ctx = devnet.chain_context()
        devnet.fund(str(address), lovelace=10_000_000)

Outside pytest, use `chain.devnet.testing.running_devnet` directly.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from chain.devnet.testing import RunningDevnet, running_devnet


@pytest.fixture
def devnet(tmp_path: Path) -> Iterator[RunningDevnet]:
    """A real ledger + block producer (0.2 s blocks) + REST server on a free port."""
    with running_devnet(tmp_path, block_time=0.2, enable_faults=True) as running:
        yield running
