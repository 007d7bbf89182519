"""The lease keeper reads a stop in the heartbeat answer (worker/lease_keeper.py): the lease
stays the worker's (not lost: it uploads and attests what it committed) and `stopped` is
set once, with the API's reason; an answer without a stop stops nothing."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from proofnet.messages.claim import LeaseAnswer
from worker.lease_keeper import LeaseKeeper


class FakeApi:
    def __init__(self, answers: list[dict[str, Any]]) -> None:
        self.answers = answers

    def lease_heartbeat(self, token: str, *, message: str | None = None) -> LeaseAnswer:
        base = {
            "job_id": "ab" * 32,
            "status": "running",
            "expires_at": datetime.now(UTC).isoformat(),
            "outcome": None,
        }
        return LeaseAnswer.model_validate(base | self.answers.pop(0))


def test_a_stop_in_the_heartbeat_answer_stops_training_but_keeps_the_lease() -> None:
    stop = {"reason": "job_fault", "message": "replays disagree", "segments": 3}
    api = FakeApi([{}, {"stop": stop}, {"stop": stop | {"segments": 9}}])
    keeper = LeaseKeeper(api, "tok", interval_s=5, ttl_s=30)  # type: ignore[arg-type]
    assert keeper.beat() and not keeper.stopped.is_set()
    assert keeper.beat() and keeper.stopped.is_set() and not keeper.lost.is_set()
    assert keeper.stop_order is not None and keeper.stop_order.segments == 3
    # The first stop stands: a later answer does not move what the worker was told.
    assert keeper.beat() and keeper.stop_order.segments == 3
