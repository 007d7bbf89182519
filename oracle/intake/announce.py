"""Telling the API this oracle's verdict, so the submitter gets the results only with it.

The API serves a lease's results to the submitter only once enough trusted oracles posted a
verdict that releases them (issue 12.4; `api.services.result_release`). After every verdict
the intake applies (verified or rejected, with whose fault), the oracle posts it to the API
as a request signed with its own key (`HttpApiFeed.post_verdict`): the API takes a verdict
from nobody else. A post that fails (API unreachable) is kept in memory and posted again at
the next sweep; an oracle restart forgets the ones still unposted (see NOT DONE in
docs/protocol.md "Result release").

I/O: the feed's signed POST only; decides nothing (the verdict is the store's).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Protocol

from oracle.inputs.feed import FeedError

log = logging.getLogger("oracle.intake")

# Statuses the API's release rule reads; `received` (postponed) is no verdict.
ANNOUNCED = frozenset({"verified", "rejected", "unproven"})
MAX_UNPOSTED = 10_000


@dataclass(frozen=True)
class Verdict:
    """One oracle verdict on the attestation of lease `nonce` of job `job_id`."""

    job_id: str
    nonce: str
    status: str
    fault: str | None
    reason: str
    message: str


class VerdictSink(Protocol):
    def post_verdict(self, verdict: Verdict) -> None: ...


class Announcer:
    """Posts verdicts to the API; keeps the ones that failed for the next `retry`."""

    def __init__(self, sink: VerdictSink) -> None:
        self.sink = sink
        self._unposted: dict[tuple[str, str], Verdict] = {}
        self._lock = threading.Lock()

    def announce(self, verdict: Verdict) -> bool:
        if verdict.status not in ANNOUNCED:
            return False
        try:
            self.sink.post_verdict(verdict)
        except FeedError as exc:
            log.warning(
                "verdict not posted to the API (posted again later): %s",
                exc,
                extra={"job_id": verdict.job_id},
            )
            with self._lock:
                if len(self._unposted) < MAX_UNPOSTED:
                    self._unposted[(verdict.job_id, verdict.nonce)] = verdict
            return False
        with self._lock:
            self._unposted.pop((verdict.job_id, verdict.nonce), None)
        return True

    def retry(self) -> int:
        """Post again every verdict that failed; returns how many went through."""
        with self._lock:
            pending = list(self._unposted.values())
        return sum(self.announce(v) for v in pending)

    @property
    def unposted(self) -> int:
        with self._lock:
            return len(self._unposted)
