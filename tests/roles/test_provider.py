"""A provider's path as docs/operations.md "Running a worker as a provider" tells it, from
onboarding to the first payout: `proofnet worker onboard --api-url ... --payout-address ...`
with the default key and work dir (under a relative PROOFNET_DATA_DIR), `proofnet worker run
--api-url ... --oracle-url ...`, and `proofnet worker status --api-url ... --json` showing the
payout once the oracle's settlement is in a block (the loop: role_loop.py::paid_loop)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from role_loop import PaidLoop
from role_support import wait_for

pytestmark = pytest.mark.slow


def test_onboarding_to_the_first_payout(paid_loop: PaidLoop) -> None:
    provider, api = paid_loop.provider, paid_loop.network.api_url
    status: dict[str, Any] = {}

    def paid() -> bool:
        status.update(json.loads(provider.run(f"worker status --api-url {api} --json")))
        return bool(status.get("payouts"))

    wait_for("the first payout", paid, provider.group)
    assert (provider.cwd / "data" / "worker").is_dir()
    payout = status["payouts"][0]
    assert payout, status
    assert paid_loop.network.ntx_at(paid_loop.payout_address) > 0
    human = provider.run(f"worker status --api-url {api}")
    assert payout["tx_hash"] in human, human
