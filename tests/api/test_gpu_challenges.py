"""The API checks hardware claims itself: attacks on the GPU challenge round and on the offer.

No GPU exists on the test machine: the honest worker here computes C = A @ B with numpy at a
small n (what a GPU would compute, bit for bit), and time is the app's settable clock, moved
by the test to stand for how long the worker took. The real GPU path (torch/cupy on CUDA,
NVML inventory) is `worker/challenge.py`, exercised on a GPU by `scripts/device_check.sh`.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from api_support import FakeClock, Wallet, Worker, capabilities, job_spec, sign_in
from fastapi.testclient import TestClient
from sqlalchemy import Engine
from sqlmodel import select

from api.app import create_app
from api.config import ApiConfig
from api.db import open_session
from api.models import Lease
from api.services.gpu_challenges import model_peak, plausible_tflops
from api.services.users import add_senior
from proofnet.messages.gpu_challenge import GPU_CHALLENGES_PATH, row_bytes, signed_matrices
from proofnet.messages.merkle import MerkleTree, leaf_hash

N = 64
INTERVAL_S = 3600
RETRY_S = 600


@pytest.fixture
def config(make_config: Callable[..., ApiConfig]) -> ApiConfig:
    return make_config(
        gpu_challenge_required=True,
        gpu_challenge_n=N,
        gpu_challenge_rows=4,
        gpu_challenge_interval_s=INTERVAL_S,
        gpu_challenge_overhead_s=2.0,
        gpu_challenge_retry_s=RETRY_S,
    )


@pytest.fixture
def headers(client: TestClient, engine: Engine, config: ApiConfig, clock: FakeClock) -> Any:
    wallet = Wallet()
    with open_session(engine) as s:
        add_senior(s, config, wallet.address, clock())
    return sign_in(client, wallet)


def _gpus(worker: Worker) -> list[dict[str, Any]]:
    response = worker.request("GET", "/api/v1/worker/gpus")
    assert response.status_code == 200, response.text
    return list(response.json()["gpus"])


def _listed_gpus(client: TestClient) -> list[dict[str, Any]]:
    providers = client.get("/api/v1/providers").json()["data"]
    return [g for p in providers for g in p["gpus"]]


def _honest_c(state: dict[str, Any]) -> np.ndarray:
    a, b = signed_matrices(state["seed"], state["n"], state["signs_key"])
    return a.astype(np.float32) @ b.astype(np.float32)


def _tree(c: np.ndarray) -> MerkleTree:
    c64 = np.asarray(c).astype(np.int64)
    return MerkleTree.from_leaf_hashes([leaf_hash(row_bytes(row)) for row in c64])


def _rows(c: np.ndarray, tree: MerkleTree, picks: list[int]) -> list[dict[str, Any]]:
    c64 = np.asarray(c).astype(np.int64)
    out = []
    for i in picks:
        proof = tree.proof(i)
        out.append(
            {
                "index": i,
                "values": [int(v) for v in c64[i]],
                "proof": {
                    "index": proof.index,
                    "size": proof.size,
                    "path": [h.hex() for h in proof.path],
                },
            }
        )
    return out


def run_round(
    worker: Worker,
    clock: FakeClock,
    uuid: str,
    *,
    took_s: float = 0.5,
    answer: Callable[[dict[str, Any]], np.ndarray] = _honest_c,
    reveal_rows: Callable[[list[int]], list[int]] = lambda picks: picks,
) -> dict[str, Any]:
    """One challenge round as a worker runs it: `took_s` on the API's clock between the start
    and the commitment; `answer` computes C; `reveal_rows` picks what to reveal."""
    issued = worker.request("POST", GPU_CHALLENGES_PATH, {"gpu_uuid": uuid})
    assert issued.status_code == 200, issued.text
    state = issued.json()
    assert state["status"] == "issued" and state["signs_key"] is None
    clock.advance(5.0)  # deriving A and B is not timed
    started = worker.request("POST", f"{GPU_CHALLENGES_PATH}/{state['id']}/start")
    assert started.status_code == 200, started.text
    state = started.json()
    c = answer(state)
    tree = _tree(c)
    clock.advance(took_s)
    committed = worker.request(
        "POST", f"{GPU_CHALLENGES_PATH}/{state['id']}/commit", {"commitment": tree.root.hex()}
    )
    assert committed.status_code == 200, committed.text
    state = committed.json()
    if state["status"] != "committed":
        return dict(state)
    picks = reveal_rows(state["reveal"])
    revealed = worker.request(
        "POST", f"{GPU_CHALLENGES_PATH}/{state['id']}/reveal", {"rows": _rows(c, tree, picks)}
    )
    assert revealed.status_code == 200, revealed.text
    return dict(revealed.json())


def _post_job(client: TestClient, headers: dict[str, str]) -> str:
    response = client.post(
        "/api/v1/jobs", json={"spec": job_spec(gpus=1, gpu_memory_mb=16384)}, headers=headers
    )
    assert response.status_code == 201, response.text
    return str(response.json()["job_id"])


def test_honest_gpu_passes_the_api_challenge_and_is_then_offered(
    client: TestClient, worker_factory: Callable[[], Worker], clock: FakeClock, headers: Any
) -> None:
    worker = worker_factory()
    worker.register([("NVIDIA H100 80GB HBM3", 81559)])
    (gpu,) = _gpus(worker)
    assert (gpu["offered"], gpu["check_status"]) == (False, "unchecked")
    assert "not yet challenged" in gpu["why"]
    assert _listed_gpus(client) == []
    _post_job(client, headers)
    assert worker.claim().status_code == 204  # an unchecked GPU runs nothing

    verdict = run_round(worker, clock, gpu["uuid"], took_s=0.5)
    assert verdict["status"] == "passed", verdict
    assert verdict["elapsed_s"] == pytest.approx(0.5)  # from the start, not the issue
    (gpu,) = _gpus(worker)
    assert gpu["offered"] and gpu["check_status"] == "passed"
    assert [g["uuid"] for g in _listed_gpus(client)] == [gpu["uuid"]]
    assert worker.claim().status_code == 200


def test_machine_without_gpu_claiming_8_h100_with_failed_checks_is_not_listed(
    client: TestClient,
    worker_factory: Callable[[], Worker],
    clock: FakeClock,
    headers: Any,
    make_config: Callable[..., ApiConfig],
) -> None:
    """The attack from the issue: 8 x H100 registered from a machine whose own report shows
    a failed container runtime check and a challenge run on the CPU that failed. None of the
    GPUs is listed or leased, the provider sees why, and no challenge round can begin."""

    def failed_report(offered: list[dict[str, Any]]) -> dict[str, Any]:
        report = capabilities(offered)
        report["runtime_check"] = {
            "status": "failed",
            "problem": "no-gpu",
            "diagnosis": "the container saw no GPU",
        }
        report["challenges"] = [
            {
                "gpu_index": g["index"],
                "gpu_uuid": g["uuid"],
                "seed": 1,
                "n": 64,
                "dtype": "float32",
                "commitment": "0" * 64,
                "elapsed_s": 1.0,
                "tflops": 0.0,
                "backend": "numpy",
                "device": "cpu",
                "self_check": "Freivalds round 1 of 2: A(Br) != Cr",
                "plausibility": "cpu",
                "plausibility_detail": "",
                "revealed": [],
            }
            for g in offered
        ]
        return report

    worker = worker_factory()
    worker.register([("NVIDIA H100 80GB HBM3", 81559)] * 8, report=failed_report)
    gpus = _gpus(worker)
    assert len(gpus) == 8
    assert all(not g["offered"] and g["check_status"] == "failed" for g in gpus)
    assert all("container GPU runtime check failed" in g["why"] for g in gpus)
    assert _listed_gpus(client) == []
    _post_job(client, headers)
    assert worker.claim().status_code == 204
    refused = worker.request("POST", GPU_CHALLENGES_PATH, {"gpu_uuid": gpus[0]["uuid"]})
    assert refused.status_code == 409
    assert "runtime check failed" in refused.json()["detail"]


def test_failed_self_check_keeps_a_gpu_off_even_where_the_challenge_is_optional(
    engine: Engine, clock: FakeClock, make_config: Callable[..., ApiConfig]
) -> None:
    """Where the API does not require its challenge, unchecked GPUs are offered, but one the
    worker's own report shows failing never is."""
    config = make_config(gpu_challenge_required=False)
    app = create_app(config=config, engine=engine, clock=clock, run_sweeper=False)

    def one_bad(offered: list[dict[str, Any]]) -> dict[str, Any]:
        report = capabilities(offered)
        bad = offered[0]
        report["challenges"] = [
            {
                "gpu_index": bad["index"],
                "gpu_uuid": bad["uuid"],
                "seed": 1,
                "n": 64,
                "dtype": "float32",
                "commitment": "0" * 64,
                "elapsed_s": 1.0,
                "tflops": 0.0,
                "backend": "torch",
                "device": "cuda:0",
                "self_check": "Freivalds round 1 of 2: A(Br) != Cr",
                "plausibility": "plausible",
                "plausibility_detail": "",
                "revealed": [],
            }
        ]
        return report

    with TestClient(app) as client:
        worker = Worker(client, clock=clock)
        worker.register([("L4", 23034), ("L4", 23034)], report=one_bad)
        bad, good = _gpus(worker)
        assert not bad["offered"] and "own challenge failed" in bad["why"]
        assert good["offered"] and good["check_status"] == "unchecked"
        assert [g["uuid"] for g in _listed_gpus(client)] == [good["uuid"]]


def test_too_slow_an_answer_for_an_h100_is_refused(
    client: TestClient, worker_factory: Callable[[], Worker], clock: FakeClock
) -> None:
    """A CPU computing the exact product still loses on the API's clock: its commitment comes
    later than an H100's minimum throughput plus the allowance permits."""
    worker = worker_factory()
    worker.register([("NVIDIA H100 80GB HBM3", 81559)])
    (gpu,) = _gpus(worker)
    verdict = run_round(worker, clock, gpu["uuid"], took_s=2.5)
    assert verdict["status"] == "failed"
    assert "too slow for a NVIDIA H100" in verdict["reason"], verdict["reason"]
    assert verdict["reveal"] == []
    (gpu,) = _gpus(worker)
    assert not gpu["offered"] and "too slow" in gpu["why"]
    # The honest twin: the same GPU answering in time, once its retry delay is over,
    # passes, and is offered again.
    clock.advance(RETRY_S)
    verdict = run_round(worker, clock, gpu["uuid"], took_s=1.0)
    assert verdict["status"] == "passed", verdict
    assert _gpus(worker)[0]["offered"]


def test_a_late_round_cannot_be_retried_until_the_timing_is_lucky(
    client: TestClient, worker_factory: Callable[[], Worker], clock: FakeClock
) -> None:
    """The attack: a device a little too slow for its claimed model asks for round after
    round, abandoning each one its own clock says will be late (or letting it fail), until
    one comes in time. A round that started and did not pass holds the GPU's next round
    off for `gpu_challenge_retry_s` from its start; a round never started showed nothing
    and holds nothing."""
    worker = worker_factory()
    worker.register([("NVIDIA H100 80GB HBM3", 81559)])
    (gpu,) = _gpus(worker)
    ask = {"gpu_uuid": gpu["uuid"]}
    # Failed: the next round is refused until RETRY_S after its start.
    assert run_round(worker, clock, gpu["uuid"], took_s=2.5)["status"] == "failed"
    again = worker.request("POST", GPU_CHALLENGES_PATH, ask)
    assert again.status_code == 429, again.text
    assert "next round from" in again.json()["detail"], again.text
    clock.advance(RETRY_S - 10)
    assert worker.request("POST", GPU_CHALLENGES_PATH, ask).status_code == 429
    clock.advance(10)
    # Abandoned after the start (the sign vector was out, the clock ran): held off alike.
    issued = worker.request("POST", GPU_CHALLENGES_PATH, ask).json()
    started = worker.request("POST", f"{GPU_CHALLENGES_PATH}/{issued['id']}/start")
    assert started.status_code == 200, started.text
    clock.advance(3.0)
    refused = worker.request("POST", GPU_CHALLENGES_PATH, ask)
    assert refused.status_code == 429 and "left unanswered" in refused.json()["detail"]
    # Never started: nothing was seen, so asking again at once is fine.
    clock.advance(RETRY_S)
    first = worker.request("POST", GPU_CHALLENGES_PATH, ask)
    second = worker.request("POST", GPU_CHALLENGES_PATH, ask)
    assert (first.status_code, second.status_code) == (200, 200), second.text
    # Held off, the GPU stayed off the market; in time after the delay, it passes.
    assert not _gpus(worker)[0]["offered"]
    assert run_round(worker, clock, gpu["uuid"], took_s=1.0)["status"] == "passed"
    assert _gpus(worker)[0]["offered"]


def test_an_answer_faster_than_the_claimed_model_can_compute_is_refused(
    client: TestClient, worker_factory: Callable[[], Worker], clock: FakeClock
) -> None:
    """The attack: a fast GPU (or several) answering for a claimed slower model, say to be
    counted as more GPUs than it is. The band has an upper end: no GPU beats its own peak by
    more than boost headroom, so a commitment sooner than the product takes at that rate
    came from something else."""
    worker = worker_factory()
    worker.register([("Tesla T4", 15360)])
    (gpu,) = _gpus(worker)
    verdict = run_round(worker, clock, gpu["uuid"], took_s=0.0)
    assert verdict["status"] == "failed"
    assert "too fast for a Tesla T4" in verdict["reason"], verdict["reason"]
    (gpu,) = _gpus(worker)
    assert not gpu["offered"] and "too fast" in gpu["why"]


def test_the_band_is_per_variant_with_a_lower_and_an_upper_end() -> None:
    """Each model's band comes from its own variant's datasheet peak (recorded with its
    source): an H100 PCIe is held to less than an H100 SXM, and the band of an H100 SXM no
    longer overlaps an L4's, so the challenge at a compute-bound size tells them apart."""
    sxm, pcie, l4 = (
        plausible_tflops(m) for m in ("NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe", "NVIDIA L4")
    )
    assert sxm == (33.5, pytest.approx(73.7)) and pcie[0] == 25.5
    assert l4[1] < sxm[0]  # an L4 at its very best is below an H100 SXM's least
    for row in (model_peak("NVIDIA H100 80GB HBM3"), model_peak("NVIDIA A100-SXM4-80GB")):
        assert row is not None and "nvidia.com" in row.source
    assert model_peak("NVIDIA A10G") is not None and model_peak("NVIDIA A10G").key == "A10G"
    assert plausible_tflops("Some Future GPU")[0] == 2.0


def test_wrong_product_fails_freivalds(
    client: TestClient, worker_factory: Callable[[], Worker], clock: FakeClock
) -> None:
    """A worker that commits to a guessed C (right shape and range, wrong values) fails on
    the rows the API draws after the commitment."""
    worker = worker_factory()
    worker.register([("L4", 23034)])
    (gpu,) = _gpus(worker)

    def guess(state: dict[str, Any]) -> np.ndarray:
        rng = np.random.default_rng(0)
        return rng.integers(-100, 100, size=(state["n"], state["n"])).astype(np.float32)

    verdict = run_round(worker, clock, gpu["uuid"], answer=guess)
    assert verdict["status"] == "failed"
    assert "Freivalds" in verdict["reason"], verdict["reason"]
    assert not _gpus(worker)[0]["offered"]


def test_one_wrong_entry_per_row_is_caught(
    client: TestClient, worker_factory: Callable[[], Worker], clock: FakeClock
) -> None:
    """A near miss (one entry of every row wrong): the committed rows the API draws after
    the commitment are checked exactly, so a single wrong entry fails the round."""
    worker = worker_factory()
    worker.register([("L4", 23034)])
    (gpu,) = _gpus(worker)

    def all_rows_off_by_one(state: dict[str, Any]) -> np.ndarray:
        c = _honest_c(state)
        c[:, 0] += 1  # every row wrong in one entry: whichever rows are drawn are wrong
        return c

    verdict = run_round(worker, clock, gpu["uuid"], answer=all_rows_off_by_one)
    assert verdict["status"] == "failed" and "Freivalds" in verdict["reason"]


def test_revealing_other_rows_than_asked_fails(
    client: TestClient, worker_factory: Callable[[], Worker], clock: FakeClock
) -> None:
    """Rows of the worker's choosing (the few it computed) instead of the API's draw."""
    worker = worker_factory()
    worker.register([("L4", 23034)])
    (gpu,) = _gpus(worker)
    verdict = run_round(
        worker,
        clock,
        gpu["uuid"],
        reveal_rows=lambda picks: [(p + 1) % N for p in picks],
    )
    assert verdict["status"] == "failed" and "not the rows asked" in verdict["reason"]


def test_challenge_repeats_after_the_interval(
    client: TestClient, worker_factory: Callable[[], Worker], clock: FakeClock
) -> None:
    worker = worker_factory()
    worker.register([("L4", 23034)])
    (gpu,) = _gpus(worker)
    assert run_round(worker, clock, gpu["uuid"])["status"] == "passed"
    clock.advance(INTERVAL_S + 1)
    (gpu,) = _gpus(worker)
    assert not gpu["offered"] and "older than the interval" in gpu["why"]
    assert _listed_gpus(client) == []
    assert run_round(worker, clock, gpu["uuid"])["status"] == "passed"
    assert _gpus(worker)[0]["offered"]


def test_a_round_is_answered_once_and_only_by_its_worker(
    client: TestClient, worker_factory: Callable[[], Worker], clock: FakeClock
) -> None:
    worker, other = worker_factory(), worker_factory()
    worker.register([("L4", 23034)])
    other.register([("L4", 23034)])
    (gpu,) = _gpus(worker)
    state = worker.request("POST", GPU_CHALLENGES_PATH, {"gpu_uuid": gpu["uuid"]}).json()
    path = f"{GPU_CHALLENGES_PATH}/{state['id']}/commit"
    root = {"commitment": secrets.token_hex(32)}
    # No commitment before the clock started (the product is not even defined yet).
    assert worker.request("POST", path, root).status_code == 409
    start = f"{GPU_CHALLENGES_PATH}/{state['id']}/start"
    assert other.request("POST", start).status_code == 404
    assert worker.request("POST", start).status_code == 200
    assert worker.request("POST", start).status_code == 409
    assert other.request("POST", path, root).status_code == 404
    foreign = other.request("POST", GPU_CHALLENGES_PATH, {"gpu_uuid": gpu["uuid"]})
    assert foreign.status_code == 404
    assert worker.request("POST", path, root).status_code == 200
    assert worker.request("POST", path, root).status_code == 409
    # An id no row can have is refused before any lookup.
    assert worker.request("POST", f"{GPU_CHALLENGES_PATH}/{2**70}/start").status_code == 422


def test_rate_card_names_only_models_that_passed(
    client: TestClient, worker_factory: Callable[[], Worker], clock: FakeClock
) -> None:
    """A GPU model's rate is earned only by GPUs that passed that model's challenge: a rate
    for a model none of whose GPUs passed is refused."""
    worker = worker_factory()
    worker.register([("L4", 23034), ("NVIDIA H100 80GB HBM3", 81559)])
    l4, h100 = _gpus(worker)
    assert run_round(worker, clock, l4["uuid"])["status"] == "passed"
    assert run_round(worker, clock, h100["uuid"], took_s=30)["status"] == "failed"
    refused = worker.request(
        "PUT", "/api/v1/worker/rate-card", {"rates": {"NVIDIA H100 80GB HBM3": 9_000_000}}
    )
    assert refused.status_code == 400
    assert "passed" in refused.json()["detail"]
    ok = worker.request("PUT", "/api/v1/worker/rate-card", {"rates": {"L4": 1_000_000}})
    assert ok.status_code == 200, ok.text


def test_a_lease_records_the_checked_models_it_was_made_on(
    client: TestClient,
    worker_factory: Callable[[], Worker],
    clock: FakeClock,
    headers: Any,
    engine: Engine,
) -> None:
    """What the oracle pays a rate for: the models of the checked GPUs that fit the job when
    it was claimed (the failed H100 is not among them)."""
    worker = worker_factory()
    worker.register([("L4", 23034), ("NVIDIA H100 80GB HBM3", 81559)])
    l4, h100 = _gpus(worker)
    assert run_round(worker, clock, l4["uuid"])["status"] == "passed"
    assert run_round(worker, clock, h100["uuid"], took_s=30)["status"] == "failed"
    _post_job(client, headers)
    assert worker.claim().status_code == 200
    with open_session(engine) as s:
        (lease,) = s.exec(select(Lease)).all()
        assert lease.gpu_models == ["L4"]


def test_one_gpu_registered_twice_under_its_uuid_is_refused(
    client: TestClient, worker_factory: Callable[[], Worker]
) -> None:
    """The same GPU (one UUID) offered as several would hold several leases at once."""
    worker = worker_factory()

    def same_uuid(offered: list[dict[str, Any]]) -> dict[str, Any]:
        # The offered GPUs and the report, both under one UUID (the body shares these dicts).
        for g in offered:
            g["uuid"] = "GPU-same"
        return capabilities(offered)

    with pytest.raises(AssertionError, match="GPU UUIDs must be unique"):
        worker.register([("L4", 23034)] * 3, report=same_uuid)


@pytest.mark.postgres
def test_the_round_and_the_offer_on_postgresql(postgres_url: str, clock: FakeClock) -> None:
    """The same round on PostgreSQL (migrated to head): a passing GPU is offered and leased
    once; a too-slow one is not."""
    from api.db import make_engine
    from api.migrate import upgrade_head

    engine = make_engine(postgres_url)
    upgrade_head(engine)
    config = ApiConfig(
        database_url=postgres_url,
        network="devnet",
        rate_limit_per_minute=100_000,
        gpu_challenge_required=True,
        gpu_challenge_n=N,
        gpu_challenge_overhead_s=2.0,
    )
    app = create_app(config=config, engine=engine, clock=clock, run_sweeper=False)
    try:
        with TestClient(app) as client:
            wallet = Wallet()
            with open_session(engine) as s:
                add_senior(s, config, wallet.address, clock())
            headers = sign_in(client, wallet)
            worker = Worker(client, clock=clock)
            worker.register([("L4", 23034), ("NVIDIA H100 80GB HBM3", 81559)])
            l4, h100 = _gpus(worker)
            assert run_round(worker, clock, l4["uuid"])["status"] == "passed"
            assert run_round(worker, clock, h100["uuid"], took_s=30)["status"] == "failed"
            assert [g["uuid"] for g in _listed_gpus(client)] == [l4["uuid"]]
            _post_job(client, headers)
            _post_job(client, headers)
            assert worker.claim().status_code == 200
            assert worker.claim().status_code == 204  # the one checked GPU is busy
    finally:
        engine.dispose()
