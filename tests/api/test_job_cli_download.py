"""`proofnet job results` over a connection that breaks off: the download resumes where it
stopped (`Range`), backs off between tries, gives up after its attempts with one clear
error, and signs in again once when the API drops the session. The API is an
`httpx.MockTransport` that cuts the body mid-stream, the way a dropped connection does."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from pycardano import PaymentSigningKey

from api.client_cli import JobClient, JobCliError

BODY = bytes(range(256)) * 40  # 10 KiB
DIGEST = hashlib.sha256(BODY).hexdigest()


class _CutOff(httpx.SyncByteStream):
    """Yields `data` in small blocks, then breaks off like a dropped connection."""

    def __init__(self, data: bytes, cut: bool) -> None:
        self.data, self.cut = data, cut

    def __iter__(self) -> Iterator[bytes]:
        for i in range(0, len(self.data), 1000):
            yield self.data[i : i + 1000]
        if self.cut:
            raise httpx.ReadError("connection reset by peer")


class FlakyApi:
    """Serves one result; the first `breaks` transfers stop after 3000 more bytes."""

    def __init__(self, breaks: int, *, refuse_session_once: bool = False) -> None:
        self.breaks = breaks
        self.refuse_session = refuse_session_once
        self.ranges: list[str | None] = []
        self.sign_ins = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/api/v1/auth/challenge":
            return httpx.Response(200, json={"nonce": "n", "message": "sign in"})
        if path == "/api/v1/auth/verify":
            self.sign_ins += 1
            return httpx.Response(200, json={"access_token": f"token-{self.sign_ins}"})
        if path == "/api/v1/jobs/j1/results":
            return httpx.Response(200, json=[{"name": "model.bin", "sha256": DIGEST}])
        assert path == "/api/v1/jobs/j1/results/model.bin", path
        if self.refuse_session:
            self.refuse_session = False
            return httpx.Response(401, json={"detail": "session expired"})
        wanted = request.headers.get("range")
        self.ranges.append(wanted)
        start = int(wanted.removeprefix("bytes=").removesuffix("-")) if wanted else 0
        cut = self.breaks > 0
        self.breaks -= 1
        data = BODY[start : start + 3000] if cut else BODY[start:]
        return httpx.Response(206 if wanted else 200, stream=_CutOff(data, cut))


def _client(api: FlakyApi, sleeps: list[float], tmp_path: Path) -> JobClient:
    return JobClient(
        "http://api.test",
        PaymentSigningKey.generate(),
        http=httpx.Client(transport=httpx.MockTransport(api)),
        token_cache=tmp_path / "session.json",
        sleep=sleeps.append,
    )


def test_a_broken_off_download_resumes_where_it_stopped(tmp_path: Path) -> None:
    api = FlakyApi(breaks=3)
    sleeps: list[float] = []
    saved = _client(api, sleeps, tmp_path).results("j1", tmp_path / "out")
    assert (tmp_path / "out" / "model.bin").read_bytes() == BODY
    assert saved[0].sha256 == DIGEST
    # Each retry asks only for the rest, and waits longer than the one before.
    assert api.ranges == [None, "bytes=3000-", "bytes=6000-", "bytes=9000-"]
    assert sleeps == [0.5, 1.0, 2.0]


def test_a_download_that_keeps_breaking_off_gives_up_with_one_clear_error(
    tmp_path: Path,
) -> None:
    api = FlakyApi(breaks=99)
    sleeps: list[float] = []
    with pytest.raises(JobCliError, match="the download of model.bin kept breaking off"):
        _client(api, sleeps, tmp_path).results("j1", tmp_path / "out")
    assert len(api.ranges) == 5  # the attempts, no more
    assert len(sleeps) == 4
    # Nothing half-downloaded is left where the result would be.
    assert not (tmp_path / "out" / "model.bin").exists()
    assert list((tmp_path / "out").iterdir()) == []


def test_a_dropped_session_signs_in_again_once_and_the_download_goes_on(
    tmp_path: Path,
) -> None:
    api = FlakyApi(breaks=1, refuse_session_once=True)
    sleeps: list[float] = []
    _client(api, sleeps, tmp_path).results("j1", tmp_path / "out")
    assert (tmp_path / "out" / "model.bin").read_bytes() == BODY
    assert api.sign_ins == 2  # the first session, and once more after the 401
    assert api.ranges == [None, "bytes=3000-"]
