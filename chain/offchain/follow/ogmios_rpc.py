"""A small client for Ogmios v6 (JSON-RPC 2.0 over a websocket): chain-sync and the few
network queries the follower and the auditor need.

One `OgmiosSession` is one websocket, hence one chain-sync cursor on the node: open it,
`find_intersection`, then `next_block` as often as needed, close it. Requests are sent one
at a time (no pipelining): followers here read a deployment's few blocks per pass, not the
chain from origin.

Ogmios must run with `--include-transaction-cbor` (or `--include-cbor`): transactions are
decoded from their ledger bytes (`chain.offchain.follow.decode`), never from Ogmios' JSON.
I/O happens here only; the `websockets` errors become `BackendUnavailableError` with the
setting to fix (PROOFNET_OGMIOS_URL).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from chain.offchain.errors import BackendUnavailableError, ChainError
from chain.offchain.follow.model import ChainDataError

# Ogmios' error code for "none of these points is on the chain".
INTERSECTION_NOT_FOUND = 1000
TIMEOUT_S = 30.0


class OgmiosError(ChainError):
    """Ogmios answered a request with a JSON-RPC error."""

    def __init__(self, method: str, code: int, message: str, data: Any = None) -> None:
        super().__init__(f"Ogmios {method}: {message} (code {code})")
        self.code = code
        self.data = data


@dataclass(frozen=True)
class Point:
    """A chain-sync point: a block's slot and header hash."""

    slot: int
    id: str

    def json(self) -> dict[str, Any]:
        return {"slot": self.slot, "id": self.id}


def point_of(value: Any) -> Point | None:
    """An Ogmios point ({"slot", "id"}); None for "origin"."""
    if value == "origin":
        return None
    try:
        return Point(int(value["slot"]), str(value["id"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise ChainDataError(f"Ogmios sent no point: {value!r}") from exc


class OgmiosSession:
    """One websocket to Ogmios. Use as a context manager."""

    def __init__(self, url: str, *, timeout_s: float = TIMEOUT_S) -> None:
        self.url = url
        self.timeout_s = timeout_s
        self._ids = itertools.count(1)
        self._ws: Any = None
        self._stack: ExitStack | None = None

    def __enter__(self) -> OgmiosSession:
        from websockets.sync.client import connect

        stack = ExitStack()
        try:
            self._ws = stack.enter_context(
                connect(self.url, open_timeout=self.timeout_s, max_size=None, proxy=None)
            )
        except Exception as exc:  # OSError, InvalidURI, InvalidHandshake, TimeoutError, ...
            stack.close()
            raise BackendUnavailableError(
                f"Ogmios at {self.url} is unreachable ({exc}); start it or set PROOFNET_OGMIOS_URL"
            ) from exc
        self._stack = stack
        return self

    def __exit__(self, *exc: object) -> None:
        stack, self._stack, self._ws = self._stack, None, None
        if stack is not None:
            stack.close()

    def call(self, method: str, params: Mapping[str, Any] | None = None) -> Any:
        """Send one request and wait for its answer: the result, or OgmiosError."""
        if self._ws is None:
            raise RuntimeError("OgmiosSession used outside its `with` block")
        request_id = next(self._ids)
        request: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "id": request_id}
        if params is not None:
            request["params"] = dict(params)
        try:
            self._ws.send(json.dumps(request))
            while True:
                answer = json.loads(self._ws.recv(timeout=self.timeout_s))
                if answer.get("id") == request_id:
                    break
        except (TimeoutError, OSError, ValueError) as exc:
            raise BackendUnavailableError(f"Ogmios at {self.url} ({method}): {exc}") from exc
        except Exception as exc:  # websockets' ConnectionClosed and friends
            raise BackendUnavailableError(
                f"Ogmios at {self.url} closed the connection ({method}): {exc}"
            ) from exc
        error = answer.get("error")
        if error is not None:
            raise OgmiosError(
                method, int(error.get("code", 0)), str(error.get("message")), error.get("data")
            )
        return answer.get("result")

    # --- chain-sync -------------------------------------------------------------------------

    def find_intersection(
        self, points: Sequence[Point | None]
    ) -> tuple[Point | None, dict[str, Any]] | None:
        """(the first of `points` on chain, None for origin; the tip), or None when none is.
        The next `next_block` then rolls backward to that point."""
        wire = ["origin" if p is None else p.json() for p in points]
        try:
            result = self.call("findIntersection", {"points": wire})
        except OgmiosError as exc:
            if exc.code == INTERSECTION_NOT_FOUND:
                return None
            raise
        return point_of(result["intersection"]), dict(result["tip"])

    def next_block(self) -> dict[str, Any]:
        """{"direction": "forward", "block", "tip"} or {"direction": "backward", "point",
        "tip"}. Blocks at the tip until the chain moves: ask only below the tip."""
        result = self.call("nextBlock")
        if not isinstance(result, dict) or result.get("direction") not in ("forward", "backward"):
            raise ChainDataError(f"Ogmios nextBlock answered {str(result)[:200]}")
        return result

    # --- network queries --------------------------------------------------------------------

    def slot_clock(self) -> SlotClock:
        start = self.call("queryNetwork/startTime")
        eras = self.call("queryLedgerState/eraSummaries")
        return SlotClock.of(start, eras)


@dataclass(frozen=True)
class SlotClock:
    """Slot -> POSIX seconds, from the system start and the era summaries (slot lengths
    changed between eras: Byron's were 20 s)."""

    system_start: float
    eras: tuple[tuple[int, float, float], ...]  # (first slot, start seconds, slot length s)

    @classmethod
    def of(cls, start: Any, summaries: Any) -> SlotClock:
        try:
            at = datetime.fromisoformat(str(start).replace("Z", "+00:00")).timestamp()
            eras = tuple(
                (
                    int(e["start"]["slot"]),
                    float(e["start"]["time"]["seconds"]),
                    float(e["parameters"]["slotLength"]["milliseconds"]) / 1000.0,
                )
                for e in summaries
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ChainDataError(f"Ogmios' era summaries do not read: {exc}") from exc
        if not eras:
            raise ChainDataError("Ogmios sent no era summaries")
        return cls(at, tuple(sorted(eras)))

    def time(self, slot: int) -> int:
        first, seconds, length = self.eras[0]
        for era in self.eras:
            if era[0] <= slot:
                first, seconds, length = era
        return int(self.system_start + seconds + (slot - first) * length)
