"""An auditor's path as docs/operations.md "Checking payouts as an auditor" tells it, from a
settlement hash to a verdict: `proofnet audit --tx <settlement hash> --deployment <the API's
URL>`, and `proofnet audit --job <job id>`, against the settlement of the shared paid loop
(role_loop.py::paid_loop). The hash is the one the provider's `worker status` shows."""

from __future__ import annotations

import json

import pytest
from role_loop import PaidLoop
from role_support import wait_for

pytestmark = pytest.mark.slow


def test_from_a_settlement_hash_to_a_verdict(paid_loop: PaidLoop) -> None:
    network, provider = paid_loop.network, paid_loop.provider
    payouts: list[dict[str, object]] = []

    def paid() -> bool:
        out = provider.run(f"worker status --api-url {network.api_url} --json")
        payouts[:] = json.loads(out).get("payouts") or []
        return bool(payouts)

    wait_for("a settlement", paid, provider.group)
    tx = str(payouts[0]["tx_hash"])
    auditor = network.root.enter("auditor")
    verdict = auditor.run(
        f"audit --tx {tx} --deployment {network.api_url} --oracle-url {network.api_url}"
    )
    assert verdict.splitlines()[-1].startswith("audit: OK"), verdict
    by_job = auditor.run(
        f"audit --job {paid_loop.job_id} --deployment {network.api_url}"
        f" --oracle-url {network.api_url}"
    )
    assert tx in by_job and by_job.splitlines()[-1].startswith("audit: OK"), by_job
