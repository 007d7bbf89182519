"""A worker's input download over a connection that breaks off: each try resumes from the
last byte written (never re-appending what arrived), backs off, and gives up after its
attempts as `ApiUnavailable` (the caller retries later). The API is an `httpx.MockTransport`
whose body stream breaks mid-transfer, as a dropped connection does."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from worker.api_client import ApiClient, ApiUnavailable
from worker.identity import load_or_create_key

MiB = 1 << 20
DATA = hashlib.sha256(b"seed").digest() * (3 * MiB // 32 + 5)  # a little over 3 MiB
DIGEST = hashlib.sha256(DATA).hexdigest()


class _BreaksOff(httpx.SyncByteStream):
    def __init__(self, data: bytes, cut: bool) -> None:
        self.data, self.cut = data, cut

    def __iter__(self) -> Iterator[bytes]:
        for i in range(0, len(self.data), 64 * 1024):
            yield self.data[i : i + 64 * 1024]
        if self.cut:
            raise httpx.RemoteProtocolError("peer closed connection without sending body")


class FlakyInputs:
    """Serves input 0; the first `breaks` transfers stop after 1.5 MiB more."""

    def __init__(self, breaks: int) -> None:
        self.breaks = breaks
        self.ranges: list[str | None] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        assert request.url.path.endswith("/inputs/0"), request.url.path
        wanted = request.headers.get("range")
        self.ranges.append(wanted)
        start = int(wanted.removeprefix("bytes=").removesuffix("-")) if wanted else 0
        cut = self.breaks > 0
        self.breaks -= 1
        body = DATA[start : start + 3 * MiB // 2] if cut else DATA[start:]
        return httpx.Response(
            206 if wanted else 200,
            stream=_BreaksOff(body, cut),
            headers={"X-Content-SHA256": DIGEST},
        )


def _client(tmp_path: Path, api: FlakyInputs, sleeps: list[float]) -> ApiClient:
    key, _ = load_or_create_key(tmp_path / "w.skey")
    return ApiClient(
        "http://api.test", key, "devnet", transport=httpx.MockTransport(api), sleep=sleeps.append
    )


def test_a_broken_off_input_resumes_from_the_last_byte_written(tmp_path: Path) -> None:
    api = FlakyInputs(breaks=2)
    sleeps: list[float] = []
    dest = tmp_path / "in" / "input-0"
    with _client(tmp_path, api, sleeps) as client:
        assert client.download_input("tok", 0, dest, DIGEST) == (len(DATA), DIGEST)
    assert dest.read_bytes() == DATA
    half = 3 * MiB // 2
    # What arrived before each break counts: the next try asks for the rest only.
    assert api.ranges == [None, f"bytes={half}-", f"bytes={2 * half}-"]
    assert sleeps == [0.5, 1.0]  # backing off, longer each time


def test_an_input_that_keeps_breaking_off_is_unavailable_and_leaves_nothing(
    tmp_path: Path,
) -> None:
    api = FlakyInputs(breaks=99)
    sleeps: list[float] = []
    dest = tmp_path / "in" / "input-0"
    with (
        _client(tmp_path, api, sleeps) as client,
        pytest.raises(ApiUnavailable, match="broke off at byte"),
    ):
        client.download_input("tok", 0, dest, DIGEST)
    assert len(api.ranges) == 5 and len(sleeps) == 4
    assert list((tmp_path / "in").iterdir()) == []  # no partial file left behind
