"""DockerRuntime on a real engine with the local test image (python3 + numpy).

Tests marked `docker` need the engine; see runtime_fixtures.py for skip/fail rules.
The others check the engine-free parts (references, specs, GPU error diagnosis).
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
import threading
from pathlib import Path

import docker
import pytest
from docker.errors import NotFound

from worker.runtime.base import (
    EngineUnavailable,
    GpuRuntimeUnavailable,
    ImageMismatch,
    ImageUnavailable,
    InvalidRunSpec,
    LogLine,
    PullProgress,
    Resources,
    RunReason,
    RunSpec,
)
from worker.runtime.docker_runtime import MANAGED_LABEL, DockerRuntime, connect
from worker.runtime.gpu_diagnosis import GpuProblem, diagnose_gpu_error, validate_gpu_runtime
from worker.runtime.image_ref import parse_image_ref

MiB = 1024 * 1024
DIGEST = "sha256:" + "ab" * 32


def py(script: str) -> tuple[str, ...]:
    return ("python3", "-c", textwrap.dedent(script))


def spec(image: str, argv: tuple[str, ...], work: Path, **kw: object) -> RunSpec:
    kw.setdefault("resources", Resources(cpus=1.0, memory_bytes=256 * MiB, pids_limit=64))
    kw.setdefault("wall_clock_limit_s", 60.0)
    return RunSpec(image=image, argv=argv, work_dir=work, **kw)  # type: ignore[arg-type]


# --- engine-free ------------------------------------------------------------------------


def test_image_refs_parse_and_reject_short_digests() -> None:
    r = parse_image_ref(f"ghcr.io/acme/train:1.2@{DIGEST}")
    assert (r.name, r.tag, r.digest, r.pinned) == ("ghcr.io/acme/train", "1.2", DIGEST, True)
    assert parse_image_ref(DIGEST).is_bare_id
    assert parse_image_ref("localhost:5000/x/y").tag is None
    assert not parse_image_ref("python:3.11").pinned
    for bad in ("sha256:abc", f"Upper/Case@{DIGEST}", "x@sha256:zz", "x:t@md5:00", " "):
        with pytest.raises(InvalidRunSpec):
            parse_image_ref(bad)


def test_run_spec_rejects_bad_input(tmp_path: Path) -> None:
    ok = {"image": DIGEST, "argv": ("true",), "work_dir": tmp_path}
    RunSpec(**ok)  # type: ignore[arg-type]
    bad: list[dict[str, object]] = [
        {"argv": "python3 train.py"},
        {"argv": ()},
        {"user": "root"},
        {"user": "0:0"},
        {"env": {"BAD NAME": "x"}},
        {"wall_clock_limit_s": 0},
        {"mount_point": "/"},
        {"job_id": "../etc"},
    ]
    for change in bad:
        with pytest.raises(InvalidRunSpec):
            RunSpec(**{**ok, **change})  # type: ignore[arg-type]
    with pytest.raises(InvalidRunSpec):
        Resources(memory_bytes=1024)
    with pytest.raises(InvalidRunSpec):
        Resources(gpus=-1)
    with pytest.raises(InvalidRunSpec, match="NVML UUIDs"):
        Resources(gpus=("nvidia0",))
    assert Resources(gpus=("GPU-1a2b", "GPU-3c4d")).gpu_count == 2


def test_gpu_error_texts_get_actionable_diagnoses() -> None:
    cases = {
        'could not select device driver "nvidia" with capabilities: [[gpu]]': (
            GpuProblem.NO_NVIDIA_RUNTIME
        ),
        "nvidia-container-cli: initialization error: nvml error: driver/library version "
        "mismatch: unknown": GpuProblem.DRIVER_MISMATCH,
        "nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.4, "
        "please update your driver to a newer version": GpuProblem.DRIVER_MISMATCH,
        "nvidia-container-cli: initialization error: nvml error: driver not loaded": (
            GpuProblem.DRIVER_NOT_LOADED
        ),
        "nvidia-container-cli: device error: GPU-deadbeef: unknown device": (
            GpuProblem.GPU_NOT_FOUND
        ),
        "No devices were found": GpuProblem.NO_GPUS,
    }
    for text, problem in cases.items():
        found = diagnose_gpu_error(text)
        assert found is not None and found[0] is problem, text
        assert len(found[1]) > 30  # advice, not just a label
    assert diagnose_gpu_error("permission denied") is None


def test_connect_reports_an_unreachable_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    with pytest.raises(EngineUnavailable, match="nonexistent"):
        connect(timeout_s=5)


# --- real engine ------------------------------------------------------------------------


@pytest.mark.docker
def test_numpy_training_job_writes_results(
    docker_runtime: DockerRuntime, test_image_id: str, job_dir: Path
) -> None:
    (job_dir / "config.json").write_text(json.dumps({"steps": 300, "lr": 0.1, "seed": 7}))
    train = py(
        """
        import json, numpy as np
        cfg = json.load(open("config.json"))
        rng = np.random.default_rng(cfg["seed"])
        x = rng.normal(size=(256, 4)); w_true = np.array([1.0, -2.0, 0.5, 3.0])
        y = x @ w_true + 0.01 * rng.normal(size=256)
        w = np.zeros(4)
        for step in range(cfg["steps"]):
            grad = 2 * x.T @ (x @ w - y) / len(y)
            w -= cfg["lr"] * grad
            if step % 100 == 0:
                print("step", step, "loss", float(np.mean((x @ w - y) ** 2)), flush=True)
        loss = float(np.mean((x @ w - y) ** 2))
        json.dump({"loss": loss, "w": w.tolist()}, open("result.json", "w"))
        np.save("weights.npy", w)
        """
    )
    lines: list[LogLine] = []
    result = docker_runtime.execute(
        spec(f"proofnet/test-numpy@{test_image_id}", train, job_dir, job_id="train-1"),
        on_log=lines.append,
        log_file=job_dir.parent / "job.log",
    )
    assert result.reason is RunReason.COMPLETED, result.message
    assert result.exit_code == 0 and result.ok
    out = json.loads((job_dir / "result.json").read_text())
    assert out["loss"] < 1e-3
    assert [round(v, 1) for v in out["w"]] == [1.0, -2.0, 0.5, 3.0]
    assert (job_dir / "weights.npy").stat().st_size > 0
    assert [line.text.split()[1] for line in lines if line.stream == "stdout"] == [
        "0",
        "100",
        "200",
    ]
    assert "step 200 loss" in (job_dir.parent / "job.log").read_text()


@pytest.mark.docker
def test_memory_hog_is_killed_oom(
    docker_runtime: DockerRuntime, test_image_id: str, job_dir: Path
) -> None:
    hog = py(
        """
        import numpy as np
        blocks = [np.ones(16 * 1024 * 1024 // 8) for _ in range(64)]  # 1 GiB, touched
        print("allocated", len(blocks))
        """
    )
    result = docker_runtime.execute(
        spec(test_image_id, hog, job_dir, resources=Resources(memory_bytes=96 * MiB))
    )
    assert result.reason is RunReason.KILLED_OOM, result
    assert result.exit_code == 137
    assert "memory limit of 100663296 bytes" in result.message
    assert result.peak_memory_bytes is not None and result.peak_memory_bytes >= 96 * MiB


@pytest.mark.docker
def test_job_over_its_time_limit_is_killed(
    docker_runtime: DockerRuntime, test_image_id: str, job_dir: Path
) -> None:
    result = docker_runtime.execute(
        spec(test_image_id, ("sleep", "120"), job_dir, wall_clock_limit_s=1.5)
    )
    # The reason says the limit killed it, and not before it; how soon after is load.
    assert result.reason is RunReason.KILLED_TIMEOUT, result
    assert "wall-clock limit of 1.5s" in result.message
    assert result.duration_s >= 1.4


@pytest.mark.docker
def test_fork_bomb_is_contained_by_the_pids_limit(
    docker_runtime: DockerRuntime, test_image_id: str, job_dir: Path
) -> None:
    bomb = py(
        """
        import os, sys, time
        children = []
        try:
            for _ in range(100000):
                pid = os.fork()
                if pid == 0:
                    time.sleep(60)
                    os._exit(0)
                children.append(pid)
        except OSError as exc:
            print("forks", len(children), type(exc).__name__, flush=True)
            sys.exit(3)
        print("forks", len(children), "unlimited", flush=True)
        """
    )
    lines: list[LogLine] = []
    result = docker_runtime.execute(
        spec(test_image_id, bomb, job_dir, resources=Resources(cpus=0.5, pids_limit=32)),
        on_log=lines.append,
    )
    assert result.reason is RunReason.FAILED, result
    assert result.exit_code == 3
    words = next(line.text for line in lines if line.text.startswith("forks")).split()
    assert int(words[1]) < 32 and words[2] == "BlockingIOError"
    # The host kept its ability to start processes throughout.
    assert subprocess.run(["true"], check=False).returncode == 0


@pytest.mark.docker
def test_endless_fork_bomb_ends_at_the_time_limit(
    docker_runtime: DockerRuntime, test_image_id: str, job_dir: Path
) -> None:
    bomb = ("sh", "-c", "b() { b | b & }; b; sleep 60")
    result = docker_runtime.execute(
        spec(
            test_image_id,
            bomb,
            job_dir,
            resources=Resources(cpus=0.5, pids_limit=64),
            wall_clock_limit_s=3,
        )
    )
    assert result.reason is RunReason.KILLED_TIMEOUT, result
    assert subprocess.run(["true"], check=False).returncode == 0


@pytest.mark.docker
def test_network_is_off_without_egress(
    docker_runtime: DockerRuntime, test_image_id: str, job_dir: Path
) -> None:
    probe = py(
        """
        import os, socket
        print("ifaces", sorted(os.listdir("/sys/class/net")))
        try:
            socket.create_connection(("1.1.1.1", 53), timeout=3)
            print("connect ok")
        except OSError as exc:
            print("connect failed", exc.errno)
            raise SystemExit(4)
        """
    )
    lines: list[LogLine] = []
    result = docker_runtime.execute(spec(test_image_id, probe, job_dir), on_log=lines.append)
    texts = [line.text for line in lines]
    assert "ifaces ['lo']" in texts
    assert result.reason is RunReason.FAILED and result.exit_code == 4, texts
    assert "connect ok" not in texts


@pytest.mark.docker
def test_job_is_unprivileged_with_a_read_only_root(
    docker_runtime: DockerRuntime, test_image_id: str, job_dir: Path
) -> None:
    probe = py(
        """
        import json, os
        status = dict(l.split(":", 1) for l in open("/proc/self/status"))
        facts = {"uid": os.getuid(), "gid": os.getgid(), "cap_eff": status["CapEff"].strip(),
                 "cap_bnd": status["CapBnd"].strip(), "nnp": status["NoNewPrivs"].strip()}
        for path in ("/root-write-test", "/etc/passwd", "/tmp/scratch", "/work/out.txt"):
            try:
                with open(path, "a") as f:
                    f.write("x")
                facts[path] = "ok"
            except OSError as exc:
                facts[path] = exc.errno
        json.dump(facts, open("/work/facts.json", "w"))
        """
    )
    result = docker_runtime.execute(spec(test_image_id, probe, job_dir))
    assert result.reason is RunReason.COMPLETED, result.message
    facts = json.loads((job_dir / "facts.json").read_text())
    assert facts["uid"] != 0 and facts["gid"] != 0
    assert int(facts["cap_eff"], 16) == 0 and int(facts["cap_bnd"], 16) == 0
    assert facts["nnp"] == "1"
    assert facts["/root-write-test"] == 30  # EROFS
    assert facts["/etc/passwd"] in (13, 30)  # EACCES as non-root, EROFS anyway
    assert facts["/tmp/scratch"] == "ok"
    assert facts["/work/out.txt"] == "ok"
    assert (job_dir / "out.txt").read_text() == "x"


@pytest.mark.docker
def test_logs_stream_while_the_job_runs(
    docker_runtime: DockerRuntime, test_image_id: str, job_dir: Path
) -> None:
    ticker = py(
        """
        import sys, time
        for i in range(10):
            print("tick", i)
            time.sleep(0.3)
        print("done", file=sys.stderr)
        """
    )
    lines: list[LogLine] = []
    first = threading.Event()

    def on_log(line: LogLine) -> None:
        lines.append(line)
        first.set()

    log_file = job_dir.parent / "live.log"
    docker_runtime.prepare(test_image_id)
    handle = docker_runtime.run(spec(test_image_id, ticker, job_dir), on_log, log_file)
    try:
        assert first.wait(20), "no output arrived while the job was running"
        assert docker_runtime.poll(handle) is None  # still running: the line came live
        assert "tick 0" in log_file.read_text()
        result = docker_runtime.wait(handle)
    finally:
        docker_runtime.cleanup(handle)
    assert result.reason is RunReason.COMPLETED
    assert [line.text for line in lines if line.stream == "stdout"] == [
        f"tick {i}" for i in range(10)
    ]
    assert [(line.stream, line.text) for line in lines if line.stream == "stderr"] == [
        ("stderr", "done")
    ]
    # Lines arrived spread over the job's life, not in one batch at the end.
    assert lines[-1].at - lines[0].at > 2.0


@pytest.mark.docker
def test_failure_reports_exit_code_and_last_error(
    docker_runtime: DockerRuntime, test_image_id: str, job_dir: Path
) -> None:
    result = docker_runtime.execute(
        spec(test_image_id, py("import sys; sys.exit('dataset missing: /work/train.csv')"), job_dir)
    )
    assert result.reason is RunReason.FAILED and result.exit_code == 1
    assert "dataset missing: /work/train.csv" in result.message
    missing = docker_runtime.execute(spec(test_image_id, ("no-such-binary",), job_dir))
    assert missing.reason is RunReason.RUNTIME_ERROR
    assert "no-such-binary" in missing.message


@pytest.mark.docker
def test_kill_on_request_and_cleanup_removes_the_container(
    docker_runtime: DockerRuntime,
    docker_client: docker.DockerClient,
    test_image_id: str,
    job_dir: Path,
) -> None:
    handle = docker_runtime.run(spec(test_image_id, ("sleep", "120"), job_dir, job_id="kill-me"))
    container = docker_client.containers.get(handle.container_id)
    assert container.labels[MANAGED_LABEL] == "1"
    assert container.labels["proofnet.job_id"] == "kill-me"
    host = container.attrs["HostConfig"]
    assert host["NetworkMode"] == "none" and host["ReadonlyRootfs"] is True
    assert host["CapDrop"] == ["ALL"] and host["SecurityOpt"] == ["no-new-privileges"]
    assert host["Memory"] == host["MemorySwap"] == 256 * MiB
    assert host["NanoCpus"] == 1_000_000_000 and host["PidsLimit"] == 64
    docker_runtime.kill(handle)
    result = docker_runtime.wait(handle)
    assert result.reason is RunReason.KILLED_BY_REQUEST
    docker_runtime.cleanup(handle)
    docker_runtime.cleanup(handle)  # idempotent
    with pytest.raises(NotFound):
        docker_client.containers.get(handle.container_id)


@pytest.mark.docker
def test_images_are_pinned_by_digest(
    docker_runtime: DockerRuntime,
    docker_client: docker.DockerClient,
    test_image_id: str,
    job_dir: Path,
) -> None:
    events: list[PullProgress] = []
    assert docker_runtime.prepare(f"proofnet/test-numpy@{test_image_id}", events.append) == (
        test_image_id
    )
    assert docker_runtime.prepare(test_image_id) == test_image_id
    assert events and test_image_id in events[-1].status
    with pytest.raises(InvalidRunSpec, match="not pinned"):
        docker_runtime.prepare("proofnet/test-numpy:local")
    with pytest.raises(ImageUnavailable):
        docker_runtime.prepare(f"proofnet/test-numpy@{DIGEST}")
    with pytest.raises(ImageUnavailable):
        docker_runtime.run(spec(DIGEST, ("true",), job_dir))

    # A second image under a tag that the reference pins to the first one's digest.
    base = docker_client.containers.create(test_image_id, ["true"])
    try:
        other = base.commit(repository="proofnet/test-mismatch", tag="x", changes="LABEL v=2")
    finally:
        base.remove(force=True)
    try:
        assert other.id != test_image_id
        with pytest.raises(ImageMismatch, match="now points to"):
            docker_runtime.prepare(f"proofnet/test-mismatch:x@{test_image_id}")
        assert docker_runtime.prepare(f"proofnet/test-mismatch:x@{other.id}") == other.id
    finally:
        docker_client.images.remove(str(other.id), force=True)


@pytest.mark.docker
def test_gpu_requests_diagnose_the_engine(
    docker_runtime: DockerRuntime,
    docker_client: docker.DockerClient,
    test_image_id: str,
    job_dir: Path,
) -> None:
    diagnosis = validate_gpu_runtime(docker_client, image=test_image_id, timeout_s=60)
    has_nvidia = "nvidia" in (docker_client.info().get("Runtimes") or {}) or os.path.exists(
        "/dev/nvidia0"
    )
    if has_nvidia:
        assert diagnosis.ok, diagnosis
        assert diagnosis.gpus and diagnosis.gpus[0].uuid.startswith(("GPU-", "MIG-"))
        return
    assert diagnosis.problem is GpuProblem.NO_NVIDIA_RUNTIME, diagnosis
    assert "no NVIDIA runtime" in diagnosis.message
    assert "nvidia-ctk runtime configure" in diagnosis.message
    with pytest.raises(GpuRuntimeUnavailable, match="no NVIDIA runtime"):
        docker_runtime.run(
            spec(test_image_id, ("true",), job_dir, resources=Resources(gpus=1), job_id="gpu-try")
        )
    # Neither the check nor the refused job leaves a container behind.
    leftovers = docker_client.containers.list(all=True, filters={"label": f"{MANAGED_LABEL}=1"})
    assert [
        c
        for c in leftovers
        if c.labels.get("proofnet.purpose") == "gpu-check"
        or c.labels.get("proofnet.job_id") == "gpu-try"
    ] == []


@pytest.mark.docker
def test_start_overhead_benchmark(docker_runtime: DockerRuntime, test_image_id: str) -> None:
    from benchmarks.runtime import measure_start_overhead

    report = measure_start_overhead(docker_runtime, test_image_id, runs=3)
    assert len(report.process_samples_s) == len(report.container_samples_s) == 3
    assert report.process_median_s > 0 and report.container_median_s > 0
    assert report.image_id == test_image_id
    assert "container" in report.summary() and report.storage_driver in report.summary()
    with pytest.raises(InvalidRunSpec):
        measure_start_overhead(docker_runtime, test_image_id, runs=0)
