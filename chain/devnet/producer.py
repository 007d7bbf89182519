"""The devnet's block producer: a thread that seals the mempool every `block_time` seconds."""

from __future__ import annotations

import logging
import threading
import time

from chain.devnet.interface import DevnetLedger

log = logging.getLogger(__name__)

_MAX_BACKOFF_S = 30.0


class BlockProducer:
    """Calls `ledger.produce_block()` on a fixed cadence until stopped.

    The loop never dies: a failing block is logged and retried after a growing back-off,
    so a transient problem (a locked database, a full disk) delays blocks but does not stop
    the chain.
    """

    def __init__(self, ledger: DevnetLedger, block_time: float) -> None:
        if block_time <= 0:
            raise ValueError(f"block_time must be positive, got {block_time}")
        self._ledger = ledger
        self._block_time = block_time
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.blocks_produced = 0
        self.failures = 0

    def start(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="devnet-producer", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _run(self) -> None:
        delay = self._block_time
        next_at = time.monotonic() + delay
        while not self._stop.wait(max(0.0, next_at - time.monotonic())):
            try:
                if self._ledger.produce_block() is not None:
                    self.blocks_produced += 1
                delay = self._block_time
            except Exception:
                self.failures += 1
                delay = min(_MAX_BACKOFF_S, max(self._block_time, delay * 2))
                log.exception("devnet block production failed; retrying in %.1fs", delay)
            next_at = time.monotonic() + delay
