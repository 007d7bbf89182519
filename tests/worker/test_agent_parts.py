"""The agent's parts on their own: workspace, results, pricing, outbox, request signing."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest
from agent_fixtures import REPO_URL, FixtureRepo, job_spec, model_repo  # noqa: F401

from proofnet.messages.jobspec import ResultSpec
from proofnet.messages.worker_auth import request_message, request_target
from worker.agent import Agent
from worker.api_client import ApiRefused, ApiUnavailable, LeaseLost
from worker.oracle_client import OracleClient, Outbox, OutboxEntry, send_with_retries
from worker.results import ResultsError, collect_results, final_metrics
from worker.workspace import RepoCache, WorkspaceError


def test_checkout_is_the_pinned_commit_and_reuses_the_mirror(
    tmp_path: Path,
    model_repo: FixtureRepo,  # noqa: F811
) -> None:
    cache = RepoCache(tmp_path / "cache", rewrites=model_repo.rewrites)
    first = cache.checkout(REPO_URL, model_repo.commit, tmp_path / "a")
    assert "from pot" in (first / "mlp.py").read_text()  # not the later tip
    mirror = cache.mirror_path(REPO_URL)
    assert (mirror / "refs" / "proofnet" / model_repo.commit).exists()
    # A second checkout reuses the mirror (the commit is already there).
    again = cache.checkout(REPO_URL, model_repo.commit, tmp_path / "b")
    assert (again / "mlp.py").read_text() == (first / "mlp.py").read_text()
    with pytest.raises(WorkspaceError, match="not in"):
        cache.checkout(REPO_URL, "0" * 40, tmp_path / "c")
    with pytest.raises(WorkspaceError, match="not empty"):
        cache.checkout(REPO_URL, model_repo.commit, tmp_path / "a")


def test_results_are_collected_by_glob_without_following_links(tmp_path: Path) -> None:
    job = tmp_path / "job"
    (job / "results" / "ckpt").mkdir(parents=True)
    (job / "results" / "metrics.json").write_text(
        json.dumps({"accuracy": 0.5, "steps": 7, "note": "x", "loss": "0.25", "nan": float("nan")})
    )
    (job / "results" / "ckpt" / "a.bin").write_bytes(b"a")
    (job / ".git").mkdir()
    (job / ".git" / "x.bin").write_bytes(b"ignored")
    specs = [
        ResultSpec(path="results/metrics.json", kind="json"),
        ResultSpec(path="results/**/*.bin", kind="model"),
    ]
    found = collect_results(job, specs)
    assert [r.name for r in found] == ["results/ckpt/a.bin", "results/metrics.json"]
    assert found[0].sha256 == hashlib.sha256(b"a").hexdigest()
    assert final_metrics(found) == {"accuracy": "0.5", "loss": "0.25", "steps": 7}

    (job / "results" / "ckpt" / "leak.bin").symlink_to("/etc/hostname")
    with pytest.raises(ResultsError, match="not a regular file"):
        collect_results(job, specs)
    with pytest.raises(ResultsError, match="not produced: out/\\*.csv"):
        collect_results(tmp_path / "job", [ResultSpec(path="out/*.csv", kind="csv")])


def test_refused_attestation_leaves_the_queue(tmp_path: Path) -> None:
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        if len(calls) == 1:
            return httpx.Response(503)
        return httpx.Response(422, json={"detail": "wrong escrow"})

    oracle = OracleClient("http://oracle", transport=httpx.MockTransport(handler))
    outbox = Outbox(tmp_path)
    entry = outbox.put(
        OutboxEntry(
            job_id="ab" * 32, attempt=1, lease_token="t", cose_hex="a0", completion={}, created_at=1
        )
    )
    assert send_with_retries(oracle, outbox, entry, attempts=3, sleep=lambda _: None) is None
    assert len(calls) == 2 and calls[0].headers["content-type"] == "application/cose"
    assert calls[0].content == b"\xa0"
    assert outbox.pending() == []
    [refused] = outbox.refused()
    assert "wrong escrow" in refused.last_error


def test_an_unavailable_oracle_is_retried_with_growing_bounded_waits(tmp_path: Path) -> None:
    """Out of attempts, the attestation stays queued with the count and the last error; the
    waits between attempts are jittered, bounded by base * 2**n and by the maximum."""
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        return httpx.Response(503, json={"detail": "busy"})

    oracle = OracleClient("http://oracle", transport=httpx.MockTransport(handler))
    outbox = Outbox(tmp_path)
    entry = outbox.put(
        OutboxEntry(
            job_id="cd" * 32, attempt=1, lease_token="t", cose_hex="a0", completion={}, created_at=1
        )
    )
    waits: list[float] = []
    left = send_with_retries(
        oracle, outbox, entry, attempts=5, base_delay_s=1.0, max_delay_s=4.0, sleep=waits.append
    )
    assert left is not None and not left.delivered and left.send_attempts == 5
    assert len(calls) == 5 and len(waits) == 4  # no wait after the last attempt
    assert all(0 <= w <= min(4.0, 2**i) for i, w in enumerate(waits)), waits
    [pending] = outbox.pending()
    assert pending.send_attempts == 5 and pending.last_error


def test_signed_path_is_what_the_server_sees() -> None:
    raw = httpx.URL("http://api/api/v1/worker/leases/t/results/out/run%201/a.bin?x=%2F").raw_path
    assert request_target(raw.decode()) == "/api/v1/worker/leases/t/results/out/run 1/a.bin?x=%2F"
    kwargs = dict(network="devnet", method="put", path="/p", timestamp=1, nonce="00" * 16)
    assert request_message(**kwargs, body=b"x") != request_message(**kwargs, body=b"y")  # type: ignore[arg-type]


class _FlakyLeases:
    """An API whose lease release answers with the given outcomes in turn."""

    def __init__(self, *outcomes: Exception | None) -> None:
        self.outcomes, self.calls = list(outcomes), 0

    def release(self, token: str, reason: str) -> None:
        self.calls += 1
        outcome = self.outcomes.pop(0) if self.outcomes else None
        if outcome is not None:
            raise outcome


@pytest.mark.parametrize(
    ("outcomes", "calls", "pauses"),
    [
        ((ApiUnavailable("down"), ApiUnavailable("down"), None), 3, [1, 2]),
        ((LeaseLost("gone"),), 1, []),  # nothing to end: never retried
        ((ApiRefused("no"),), 1, []),  # refused for good: never retried
        ((ApiUnavailable("down"),) * 9, 5, [1, 2, 4, 4]),  # gives up; the lease expires
    ],
)
def test_ending_a_lease_retries_only_while_the_api_is_unavailable(
    outcomes: tuple[Exception | None, ...], calls: int, pauses: list[float]
) -> None:
    api = _FlakyLeases(*outcomes)
    waited: list[float] = []
    agent = SimpleNamespace(api=api, _pause=waited.append, config=SimpleNamespace(max_backoff_s=4))
    Agent._end_lease(agent, "release", "tok", "because")  # type: ignore[arg-type]
    assert api.calls == calls and waited == pauses


class _BreakingUploads:
    """`upload_file` that breaks off (ApiUnavailable) as scripted; each entry is the offset
    the API reports reaching before the break, or None for a try that completes."""

    def __init__(self, *reached: int | None) -> None:
        self.reached = list(reached)
        self.calls = 0

    def upload_file(self, token: str, name: str, path: Path, sha256: str, **kw: object) -> None:
        self.calls += 1
        offset = self.reached.pop(0)
        if offset is None:
            return
        kw["on_progress"](offset)  # type: ignore[operator]
        raise ApiUnavailable(f"broke off at byte {offset}")


def _upload(api: object, waited: list[float]) -> None:
    from worker.results import CollectedResult

    agent = SimpleNamespace(api=api, _pause=waited.append, config=SimpleNamespace(max_backoff_s=8))
    result = CollectedResult("out/model.bin", Path("/nonexistent"), "0" * 64, 10, "model", "out/*")
    Agent._upload(agent, SimpleNamespace(lease_token="tok"), [result], None, quiet=True)  # type: ignore[arg-type]


def test_an_upload_that_moves_on_each_try_is_never_given_up() -> None:
    # Eight breaks in a row, each after more bytes than the last: every try counts as the
    # first stall, so none of them gives up and each wait is the shortest.
    api = _BreakingUploads(*range(1, 9), None)
    waited: list[float] = []
    _upload(api, waited)
    assert api.calls == 9 and waited == [2] * 8


def test_an_upload_that_moves_no_byte_gives_up_after_five_tries_backing_off() -> None:
    api = _BreakingUploads(5, 5, 5, 5, 5, 5, 5)
    waited: list[float] = []
    with pytest.raises(ApiUnavailable, match="broke off at byte 5"):
        _upload(api, waited)
    # The first try moved the upload to byte 5; the next four moved nothing.
    assert api.calls == 5 and waited == [2, 4, 8, 8]


def _verifying_agent(
    tmp_path: Path, *, isolated: bool = True, demo_process_verify: bool = False
) -> SimpleNamespace:
    return SimpleNamespace(
        api=object(),
        key=object(),
        repos=RepoCache(tmp_path / "git"),
        runtime=SimpleNamespace(isolated=isolated, name="docker" if isolated else "process"),
        config=SimpleNamespace(
            verify=True,
            trusted_oracle_keys=("ab" * 32,),
            work_dir=tmp_path / "work",
            pids_limit=None,
            data=None,
            verification_poll_s=30.0,
            verify_only=False,
            payout_address="addr_test1vqverifier",
            demo_process_verify=demo_process_verify,
        ),
    )


def test_a_process_runtime_worker_verifies_only_in_the_local_demo(tmp_path: Path) -> None:
    """The process runtime does not isolate other providers' job code: the worker does not
    verify with it, unless it is the local devnet demo's (PROOFNET_WORKER_DEMO_PROCESS_VERIFY,
    which `proofnet worker run` refuses on any other network)."""
    assert Agent._verifier_loop(_verifying_agent(tmp_path, isolated=False)) is None  # type: ignore[arg-type]
    demo = _verifying_agent(tmp_path, isolated=False, demo_process_verify=True)
    loop = Agent._verifier_loop(demo)  # type: ignore[arg-type]
    assert loop is not None
    loop.stop()


def test_the_verifier_replays_from_the_workers_own_mirror_cache(tmp_path: Path) -> None:
    """One git mirror cache per machine: the background verifier checks repositories out of
    the same mirrors the agent's jobs use, never a second clone of each."""
    agent = _verifying_agent(tmp_path)
    repos = agent.repos
    loop = Agent._verifier_loop(agent)  # type: ignore[arg-type]
    assert loop is not None
    loop.stop()
    assert loop.verifier.repos is repos
