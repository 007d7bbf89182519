"""ProcessRuntime: the unisolated fallback, tested for what a plain process can show."""

from __future__ import annotations

import json
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from worker.runtime.base import (
    JobStartFailed,
    LogLine,
    LogSink,
    PullProgress,
    Resources,
    RunReason,
    RunSpec,
)
from worker.runtime.process_runtime import UNISOLATED_WARNING, ProcessRuntime

MiB = 1024 * 1024


def py(script: str) -> tuple[str, ...]:
    # The test interpreter: the host's `python3` may lack what the job imports.
    return (sys.executable, "-c", textwrap.dedent(script))


def spec(argv: tuple[str, ...], work: Path, **kw: object) -> RunSpec:
    kw.setdefault("wall_clock_limit_s", 60.0)
    return RunSpec(image="host", argv=argv, work_dir=work, **kw)  # type: ignore[arg-type]


def process_gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state in ("Z", "X")


@pytest.fixture
def runtime() -> ProcessRuntime:
    return ProcessRuntime()


def test_says_it_is_unisolated_in_flag_and_logs(runtime: ProcessRuntime, job_dir: Path) -> None:
    assert runtime.isolated is False
    events: list[PullProgress] = []
    assert runtime.prepare("proofnet/test@sha256:" + "0" * 64, events.append) == "host"
    assert "ignored" in events[0].status
    lines: list[LogLine] = []
    log_file = job_dir.parent / "job.log"
    result = runtime.execute(spec(("true",), job_dir), on_log=lines.append, log_file=log_file)
    assert result.reason is RunReason.COMPLETED
    assert (lines[0].stream, lines[0].text) == ("runtime", UNISOLATED_WARNING)
    assert any("network egress is NOT blocked" in line.text for line in lines)
    assert "NOT isolated" in log_file.read_text()


def test_job_runs_in_its_work_dir_without_the_worker_environment(
    runtime: ProcessRuntime, job_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PROOFNET_WORKER_SECRET", "do-not-leak")
    job = py(
        """
        import json, os
        json.dump({"cwd": os.getcwd(), "home": os.environ["HOME"],
                   "secret": os.environ.get("PROOFNET_WORKER_SECRET"),
                   "seed": os.environ.get("SEED"),
                   "cuda": os.environ.get("CUDA_VISIBLE_DEVICES")}, open("out.json", "w"))
        """
    )
    result = runtime.execute(spec(job, job_dir, env={"SEED": "42"}))
    assert result.reason is RunReason.COMPLETED and result.exit_code == 0
    out = json.loads((job_dir / "out.json").read_text())
    assert out == {
        "cwd": str(job_dir.resolve()),
        "home": str(job_dir.resolve()),
        "secret": None,
        "seed": "42",
        "cuda": "",  # no GPUs asked for, none visible
    }
    gpu_job = py("import os; print(os.environ['CUDA_VISIBLE_DEVICES'])")
    lines: list[LogLine] = []
    runtime.execute(
        spec(gpu_job, job_dir, resources=Resources(gpus=("GPU-aa", "GPU-bb"))),
        on_log=lines.append,
    )
    assert [line.text for line in lines if line.stream == "stdout"] == ["GPU-aa,GPU-bb"]


def test_training_gets_the_hosts_numeric_kernel_settings_and_nothing_else(
    runtime: ProcessRuntime, job_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A replay on a verifier or the demo's oracle runs with the host's OPENBLAS_CORETYPE
    (and the like); the training it checks must too, or honest proofs fail to replay
    bit for bit. Nothing but those settings comes along."""
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Haswell")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("PROOFNET_WORKER_SECRET", "do-not-leak")
    job = py(
        """
        import json, os
        json.dump({k: os.environ.get(k) for k in
                   ("OPENBLAS_CORETYPE", "OMP_NUM_THREADS", "PROOFNET_WORKER_SECRET")},
                  open("out.json", "w"))
        """
    )
    assert runtime.execute(spec(job, job_dir)).reason is RunReason.COMPLETED
    assert json.loads((job_dir / "out.json").read_text()) == {
        "OPENBLAS_CORETYPE": "Haswell",
        "OMP_NUM_THREADS": "1",
        "PROOFNET_WORKER_SECRET": None,
    }


def test_exit_codes_and_last_error_are_reported(runtime: ProcessRuntime, job_dir: Path) -> None:
    result = runtime.execute(spec(py("import sys; sys.exit('bad hyperparameter: lr=-1')"), job_dir))
    assert result.reason is RunReason.FAILED and result.exit_code == 1
    assert "exited with code 1" in result.message
    assert "bad hyperparameter: lr=-1" in result.message
    killed = runtime.execute(spec(py("import os, signal; os.kill(os.getpid(), 9)"), job_dir))
    assert killed.reason is RunReason.FAILED and killed.exit_code == -9
    assert "SIGKILL" in killed.message


def test_missing_command_is_a_start_failure(runtime: ProcessRuntime, job_dir: Path) -> None:
    with pytest.raises(JobStartFailed, match="no-such-binary"):
        runtime.run(spec(("no-such-binary-proofnet",), job_dir))
    result = runtime.execute(spec(("no-such-binary-proofnet",), job_dir))
    assert result.reason is RunReason.RUNTIME_ERROR and result.exit_code is None


def test_time_limit_kills_the_job_and_its_children(runtime: ProcessRuntime, job_dir: Path) -> None:
    job = ("sh", "-c", "sleep 120 & echo $! > child.pid; sleep 120")
    result = runtime.execute(spec(job, job_dir, wall_clock_limit_s=1.0))
    # The reason says the limit killed it, and not before it; how soon after is load.
    assert result.reason is RunReason.KILLED_TIMEOUT
    assert "wall-clock limit of 1s" in result.message
    assert result.duration_s >= 0.9
    child = int((job_dir / "child.pid").read_text())
    deadline = time.monotonic() + 60  # a hang bound; the event is the child gone
    while not process_gone(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert process_gone(child)


def test_kill_on_request(runtime: ProcessRuntime, job_dir: Path) -> None:
    handle = runtime.run(spec(("sleep", "120"), job_dir))
    try:
        assert runtime.poll(handle) is None
        runtime.kill(handle)
        result = runtime.wait(handle)
    finally:
        runtime.cleanup(handle)
    runtime.cleanup(handle)  # idempotent
    assert result.reason is RunReason.KILLED_BY_REQUEST
    assert runtime.poll(handle) is result


def test_logs_stream_while_the_job_runs(runtime: ProcessRuntime, job_dir: Path) -> None:
    ticker = py(
        """
        import sys, time
        for i in range(8):
            print("tick", i)
            time.sleep(0.2)
        sys.stderr.write("no newline at the end")
        """
    )
    lines: list[LogLine] = []
    first_tick = threading.Event()

    def on_log(line: LogLine) -> None:
        lines.append(line)
        if line.text == "tick 0":
            first_tick.set()

    handle = runtime.run(spec(ticker, job_dir), on_log, job_dir.parent / "live.log")
    try:
        assert first_tick.wait(10)
        assert runtime.poll(handle) is None  # the line arrived while it was running
        result = runtime.wait(handle)
    finally:
        runtime.cleanup(handle)
    assert result.reason is RunReason.COMPLETED
    out = [line for line in lines if line.stream == "stdout"]
    assert [line.text for line in out] == [f"tick {i}" for i in range(8)]
    assert out[-1].at - out[0].at > 1.0
    assert [line.text for line in lines if line.stream == "stderr"] == ["no newline at the end"]
    assert "stderr no newline at the end" in (job_dir.parent / "live.log").read_text()


def test_memory_limit_and_peak_memory(runtime: ProcessRuntime, job_dir: Path) -> None:
    hog = py("b = bytearray(2 * 1024 ** 3); print(len(b))")
    result = runtime.execute(spec(hog, job_dir, resources=Resources(memory_bytes=256 * MiB)))
    assert result.reason is RunReason.FAILED
    assert "address-space limit of 268435456 bytes" in result.message
    fits = py("b = bytearray(96 * 1024 ** 2); b[::4096] = b'x' * len(b[::4096]); print('ok')")
    ok = runtime.execute(spec(fits, job_dir, resources=Resources(memory_bytes=512 * MiB)))
    assert ok.reason is RunReason.COMPLETED, ok.message
    assert ok.peak_memory_bytes is not None and ok.peak_memory_bytes >= 96 * MiB


def test_poll_enforces_the_time_limit_without_wait(runtime: ProcessRuntime, job_dir: Path) -> None:
    handle = runtime.run(spec(("sleep", "120"), job_dir, wall_clock_limit_s=0.5))
    try:
        deadline = time.monotonic() + 60  # a hang bound
        result = runtime.poll(handle)
        while result is None and time.monotonic() < deadline:
            time.sleep(0.05)
            result = runtime.poll(handle)
    finally:
        runtime.cleanup(handle)
    assert result is not None and result.reason is RunReason.KILLED_TIMEOUT


def test_log_sink_splits_bounds_and_survives_callback_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(LogSink, "MAX_LINE_BYTES", 8)
    monkeypatch.setattr(LogSink, "MAX_FILE_BYTES", 200)
    seen: list[tuple[str, str]] = []

    def callback(line: LogLine) -> None:
        seen.append((line.stream, line.text))
        if line.text == "boom":
            raise RuntimeError("a broken callback must not stop the log pump")

    sink = LogSink(tmp_path / "logs" / "job.log", callback)
    sink.feed("stdout", b"par")
    sink.feed("stderr", b"boom\n")
    sink.feed("stdout", b"tial\r\nnext")
    sink.feed("stdout", b"0123456789ABCDEFGH")  # no newline, longer than the line bound
    sink.flush_stream("stdout")
    assert seen == [
        ("stderr", "boom"),
        ("stdout", "partial"),
        ("stdout", "next0123"),
        ("stdout", "456789AB"),
        ("stdout", "CDEFGH"),
    ]
    assert sink.callback_errors == 1
    for i in range(20):
        sink.feed("stdout", f"line {i}\n".encode())
    sink.close()
    text = (tmp_path / "logs" / "job.log").read_text()
    assert sink.file_truncated and "log file limit reached" in text
    assert len(text) < 300 and "line 19" not in text
    assert seen[-1] == ("stdout", "line 19")  # the callback still got everything


def test_kill_takes_descendants_in_sessions_of_their_own(
    runtime: ProcessRuntime, job_dir: Path
) -> None:
    # As torchrun does: each training process is started in a new session, out of the job's
    # process group; killing the job must still take them down.
    script = py(
        """
        import subprocess, sys, time
        child = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True
        )
        print("child", child.pid, flush=True)
        time.sleep(120)
        """
    )
    lines: list[LogLine] = []
    handle = runtime.run(spec(script, job_dir), on_log=lines.append)
    try:
        deadline = time.monotonic() + 30
        while not any(line.text.startswith("child ") for line in lines):
            assert time.monotonic() < deadline, [line.text for line in lines]
            time.sleep(0.05)
        child = int(next(line.text for line in lines if line.text.startswith("child ")).split()[1])
        assert not process_gone(child)
        runtime.kill(handle)
        result = runtime.wait(handle)
    finally:
        runtime.cleanup(handle)
    assert result.reason is RunReason.KILLED_BY_REQUEST
    deadline = time.monotonic() + 60  # a hang bound
    while not process_gone(child):
        assert time.monotonic() < deadline, f"process {child} outlived the killed job"
        time.sleep(0.05)
