"""A drawn verifier stays a candidate while it replays.

The API counts a worker as a candidate verifier for `verifier_online_s` after it last asked
for tasks, and an oracle that finds the drawn verifier gone draws again from the workers
online then: the busy verifier's replay goes unused and unpaid, and the job waits for
another. A replay of real segments outlasts that window (on the devnet loop of
tests/roles/test_docker_loop.py a PyTorch replay on a busy CPU took 92 s of a 120 s window,
and the oracle found no verifier online), so while a round replays the loop keeps asking.
"""

from __future__ import annotations

import threading
from typing import Any

from waiting import until

from worker.verifier import VerifierLoop


class CountingApi:
    """What the API hears of this worker: its requests for verification tasks."""

    def __init__(self) -> None:
        self.asked = 0
        self._lock = threading.Lock()

    def verification_tasks(self) -> list[dict[str, Any]]:
        with self._lock:
            self.asked += 1
        return []


class ReplayingVerifier:
    """A verifier whose first round replays until released; later rounds find nothing."""

    def __init__(self, api: CountingApi) -> None:
        self.api = api
        self.rounds = 0
        self.replaying = threading.Event()
        self.release = threading.Event()

    def run_once(self) -> list[object]:
        self.rounds += 1
        if self.rounds == 1:
            self.replaying.set()
            self.release.wait(120)
        return []


def test_a_verifier_busy_replaying_keeps_asking_so_it_is_not_redrawn() -> None:
    api = CountingApi()
    verifier = ReplayingVerifier(api)
    loop = VerifierLoop(verifier, interval_s=0.02)  # type: ignore[arg-type]
    loop.start()
    try:
        until("the replay to start", verifier.replaying.is_set)
        until("three requests for tasks during the replay", lambda: api.asked >= 3)
        # All of them while round 1 was still replaying: no later round asked.
        assert verifier.rounds == 1 and not verifier.release.is_set()
        assert loop.announcements >= 3
        verifier.release.set()
        until("the next round", lambda: verifier.rounds >= 2)
    finally:
        verifier.release.set()
        loop.stop()


def test_a_failing_request_while_replaying_does_not_end_the_loop() -> None:
    class DownApi(CountingApi):
        def verification_tasks(self) -> list[dict[str, Any]]:
            super().verification_tasks()
            raise ConnectionError("the API is down")

    api = DownApi()
    verifier = ReplayingVerifier(api)
    loop = VerifierLoop(verifier, interval_s=0.02)  # type: ignore[arg-type]
    loop.start()
    try:
        until("requests that fail", lambda: api.asked >= 2)
        verifier.release.set()
        until("rounds after the failures", lambda: verifier.rounds >= 2)
        assert all(t.is_alive() for t in loop._threads)
    finally:
        verifier.release.set()
        loop.stop()
