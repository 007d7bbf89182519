"""Jobs as plain subprocesses, for machines without a container engine (development, demo).

This runtime does NOT isolate jobs: they see the host's files, network, users and
devices. It applies what rlimits can (address space, CPU time, process count), the
wall-clock limit and live logs, and it says loudly that it is unisolated: `isolated`
is False and every job's log starts with a warning.
"""

from __future__ import annotations

import contextlib
import math
import os
import resource
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import IO

from pot.env import PYTHON_LIB, determinism_environ
from worker.runtime.base import (
    InvalidRunSpec,
    JobStartFailed,
    LogCallback,
    LogSink,
    ProgressCallback,
    PullProgress,
    RunHandle,
    RunReason,
    RunResult,
    RunSpec,
    Runtime,
)

UNISOLATED_WARNING = (
    "WARNING: process runtime: this job is NOT isolated (no container). It can read the "
    "host's files and use its network; use the docker runtime for untrusted jobs."
)
_DRAIN_S = 10.0
_MEMORY_ERRORS = ("MemoryError", "std::bad_alloc", "Cannot allocate memory", "out of memory")


def _count_user_processes(uid: int) -> int:
    count = 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid:
                    count += 1
            except OSError:
                continue
    return count


def _descendants(pid: int) -> list[int]:
    """Every live descendant of `pid`, by parent links in /proc (children first found)."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                # The command name may contain spaces and parentheses: parse after the last ")".
                ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _signal_all(leader: int, tree: list[int], sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(leader, sig)
    for pid in tree:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


class ProcessRunHandle(RunHandle):
    def __init__(self, spec: RunSpec, proc: subprocess.Popen[bytes], log: LogSink) -> None:
        super().__init__(spec, log)
        self.proc = proc
        self.returncode: int | None = None


class ProcessRuntime(Runtime):
    isolated = False
    name = "process"
    # Jobs share the host's network anyway.
    cluster_networking = True
    stop_grace_s = _DRAIN_S

    def prepare(self, image: str, progress: ProgressCallback | None = None) -> str:
        # There is no image to fetch: the job runs with whatever the host has installed.
        if progress is not None:
            progress(
                PullProgress(image=image, status="ignored: the process runtime runs on the host")
            )
        return "host"

    def _limits(self, spec: RunSpec) -> list[tuple[int, int]]:
        res = spec.resources
        limits: list[tuple[int, int]] = []
        if res.memory_bytes is not None:
            # Address space, not resident memory: the closest rlimit, and stricter.
            limits.append((resource.RLIMIT_AS, res.memory_bytes))
        if spec.wall_clock_limit_s is not None:
            # CPU seconds the job may burn: its CPU share times the wall-clock limit.
            cpus = res.cpus if res.cpus is not None else float(os.cpu_count() or 1)
            limits.append((resource.RLIMIT_CPU, max(1, math.ceil(cpus * spec.wall_clock_limit_s))))
        if res.pids_limit is not None and os.geteuid() != 0:
            # RLIMIT_NPROC counts every process of the user, not just this job's, and
            # root ignores it; so it is only an approximate per-job cap.
            base = _count_user_processes(os.geteuid())
            limits.append((resource.RLIMIT_NPROC, base + res.pids_limit))
        return limits

    def run(
        self, spec: RunSpec, on_log: LogCallback | None = None, log_file: Path | None = None
    ) -> ProcessRunHandle:
        work_dir = spec.work_dir.resolve()
        if not work_dir.is_dir():
            raise InvalidRunSpec(f"work dir {work_dir} does not exist or is not a directory")
        res = spec.resources
        # A fresh environment: the worker's own (keys, tokens) must not leak into jobs.
        env = {
            "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
            "HOME": str(work_dir),
            "LANG": "C.UTF-8",
            "PYTHONUNBUFFERED": "1",
            # The host's numeric kernel settings: what a replay of this training uses too.
            **determinism_environ(os.environ),
        }
        if isinstance(res.gpus, tuple):
            env["CUDA_VISIBLE_DEVICES"] = ",".join(res.gpus)
        else:
            # Empty hides all GPUs, so a job that asked for none gets none.
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in range(res.gpus))
        env.update(spec.env)
        if spec.python_lib is not None:
            env[PYTHON_LIB] = str(spec.python_lib)
            env["PYTHONPATH"] = str(spec.python_lib)
        limits = self._limits(spec)

        def preexec() -> None:
            for which, value in limits:
                soft, hard = resource.getrlimit(which)
                cap = value if hard == resource.RLIM_INFINITY else min(value, hard)
                resource.setrlimit(which, (cap, cap))

        log = LogSink(log_file, on_log)
        log.note(UNISOLATED_WARNING)
        ignored = []
        if not spec.network_egress:
            ignored.append("network egress is NOT blocked")
        if spec.read_only_root:
            ignored.append("the host filesystem is NOT read-only")
        if spec.user is not None:
            ignored.append(f"user {spec.user!r} is ignored (runs as uid {os.geteuid()})")
        if res.cpus is not None:
            ignored.append("the CPU share is only enforced as a CPU-time limit")
        if ignored:
            log.note("process runtime limits: " + "; ".join(ignored))
        try:
            proc = subprocess.Popen(
                list(spec.argv),
                cwd=work_dir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                # Own session: kill() takes out the job's children too.
                start_new_session=True,
                preexec_fn=preexec if limits else None,
            )
        except OSError as exc:
            log.close()
            raise JobStartFailed(f"cannot start {spec.argv[0]!r}: {exc}") from exc
        handle = ProcessRunHandle(spec, proc, log)
        self._start_pumps(handle)
        return handle

    def _start_pumps(self, h: ProcessRunHandle) -> None:
        def waiter() -> None:
            # wait4 gives this child's own rusage (peak RSS), which Popen.wait drops.
            try:
                _, status, usage = os.wait4(h.proc.pid, 0)
                h.returncode = os.waitstatus_to_exitcode(status)
                h.peak_memory_bytes = usage.ru_maxrss * 1024
            except ChildProcessError:
                # Someone else reaped it (SIGCHLD ignored?): the exit status is lost.
                h.returncode = h.proc.returncode
                h.log.note("the job's exit status was lost (reaped elsewhere)")
            h.proc.returncode = h.returncode
            h.ended_mono = time.monotonic()
            h.done.set()

        def pump(stream: str, pipe: IO[bytes]) -> None:
            try:
                for chunk in iter(lambda: pipe.read1(65536), b""):  # type: ignore[attr-defined]
                    h.log.feed(stream, chunk)
            except (OSError, ValueError) as exc:
                h.log.note(f"log stream {stream} ended early: {exc}")
            finally:
                h.log.flush_stream(stream)

        assert h.proc.stdout is not None and h.proc.stderr is not None
        tag = f"pid{h.proc.pid}"
        threads = [
            threading.Thread(target=pump, args=("stdout", h.proc.stdout), name=f"{tag}-out"),
            threading.Thread(target=pump, args=("stderr", h.proc.stderr), name=f"{tag}-err"),
            threading.Thread(target=waiter, name=f"{tag}-wait"),
        ]
        for t in threads:
            t.daemon = True
            t.start()
        h.pumps = threads

    def _stop(self, h: ProcessRunHandle, reason: RunReason) -> None:
        with h.lock:
            if h.kill_reason is None and not h.done.is_set():
                h.kill_reason = reason
        # Process group id == pid because of start_new_session. Descendants that started
        # sessions of their own (torchrun starts each training process in one) are out of
        # that group: stop the whole tree first, so nothing forks meanwhile, then kill it.
        tree = _descendants(h.proc.pid)
        _signal_all(h.proc.pid, tree, signal.SIGSTOP)
        tree = _descendants(h.proc.pid) or tree
        _signal_all(h.proc.pid, tree, signal.SIGKILL)

    def _finish(self, h: ProcessRunHandle) -> RunResult:
        with h.lock:
            if h.result is not None:
                return h.result
            # The pipes stay open while any grandchild holds them; take the group down.
            # (The group outlives its reaped leader only while members remain, so the
            # id cannot have been reused by then.)
            if h.done.is_set():
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(h.proc.pid, signal.SIGKILL)
            for t in h.pumps:
                t.join(_DRAIN_S)
            duration = (h.ended_mono or time.monotonic()) - h.started_mono
            h.result = self._classify(h, duration)
            return h.result

    def _classify(self, h: ProcessRunHandle, duration: float) -> RunResult:
        code = h.returncode

        def result(reason: RunReason, message: str) -> RunResult:
            return RunResult(code, reason, message, duration, h.peak_memory_bytes)

        if code is None:
            return result(RunReason.RUNTIME_ERROR, "process did not stop after SIGKILL")
        if h.kill_reason is RunReason.KILLED_TIMEOUT:
            return result(
                RunReason.KILLED_TIMEOUT,
                f"exceeded its wall-clock limit of {h.spec.wall_clock_limit_s:g}s and was killed",
            )
        if h.kill_reason is RunReason.KILLED_BY_REQUEST:
            return result(RunReason.KILLED_BY_REQUEST, "killed on request")
        if code == 0:
            return result(RunReason.COMPLETED, "exited with code 0")
        if code == -signal.SIGXCPU:
            return result(
                RunReason.KILLED_TIMEOUT,
                "exceeded its CPU-time limit (cpus x wall-clock limit) and was stopped",
            )
        msg = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exited with code {code}"
        errors = [line.text for line in h.log.tail(20) if line.stream == "stderr" and line.text]
        if h.spec.resources.memory_bytes is not None and any(
            marker in text for text in errors for marker in _MEMORY_ERRORS
        ):
            # An rlimit makes allocations fail inside the job rather than killing it,
            # so this is the job failing on its memory limit, not an OOM kill.
            msg += (
                f"; it ran out of its address-space limit of {h.spec.resources.memory_bytes} bytes"
            )
        if errors:
            msg += f"; last error output: {errors[-1][:300]}"
        return result(RunReason.FAILED, msg)

    def cleanup(self, handle: RunHandle) -> None:
        h = self._own(handle)
        if h.cleaned:
            return
        if not h.done.is_set():
            self._stop(h, RunReason.KILLED_BY_REQUEST)
            h.done.wait(_DRAIN_S)
        self._finish(h)
        for pipe in (h.proc.stdout, h.proc.stderr):
            if pipe is not None:
                pipe.close()
        h.log.close()
        h.cleaned = True

    @staticmethod
    def _own(handle: RunHandle) -> ProcessRunHandle:
        if not isinstance(handle, ProcessRunHandle):
            raise TypeError(f"not a ProcessRunHandle: {type(handle).__name__}")
        return handle
