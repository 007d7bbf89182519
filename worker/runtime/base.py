"""The container-runtime interface the worker runs jobs through, and its value types.

A runtime turns a `RunSpec` into a running job (`Runtime.run`), streams its output
to a callback and a log file while it runs, enforces the wall-clock limit and ends in
exactly one `RunResult` whose `reason` always says why the job stopped, so that no job
ends "stuck without a reason".
"""

from __future__ import annotations

import enum
import re
import threading
import time
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from worker.faults import HostFault

# --- errors -----------------------------------------------------------------------------


class RuntimeErrorBase(Exception):
    """Anything a runtime cannot do; the message is meant for the provider to read."""


class InvalidRunSpec(RuntimeErrorBase, ValueError):
    """A RunSpec (or image reference) that no runtime should accept."""


class EngineUnavailable(RuntimeErrorBase, HostFault):
    """The container engine cannot be reached (this machine's fault, not the job's)."""


class ImageUnavailable(RuntimeErrorBase):
    """The pinned image is neither present locally nor pullable."""


class ImageMismatch(RuntimeErrorBase):
    """The image found under a reference is not the one its digest pins."""


class GpuRuntimeUnavailable(RuntimeErrorBase, HostFault):
    """The engine cannot hand GPUs to containers (no NVIDIA runtime, driver trouble)."""


class JobStartFailed(RuntimeErrorBase):
    """The engine refused to create or start the job."""


class LimitsUnenforceable(JobStartFailed, HostFault):
    """The engine cannot enforce the limits every job runs under (rootless on cgroup v1):
    no job can run here until the provider fixes the engine."""


# --- values -----------------------------------------------------------------------------


class RunReason(enum.StrEnum):
    COMPLETED = "completed"
    FAILED = "failed"
    KILLED_TIMEOUT = "killed_timeout"
    KILLED_OOM = "killed_oom"
    KILLED_BY_REQUEST = "killed_by_request"
    RUNTIME_ERROR = "runtime_error"


_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_GPU_UUID = re.compile(r"^(GPU|MIG)-[0-9A-Za-z-]+$")
_ROOT_USERS = {"0", "root"}


@dataclass(frozen=True)
class Resources:
    """Limits for one job. None means "no limit" (only sensible for development)."""

    cpus: float | None = None
    memory_bytes: int | None = None
    pids_limit: int | None = None
    # A count of GPUs, or the exact devices by NVML UUID (GPU-... or MIG-...).
    gpus: int | tuple[str, ...] = 0

    def __post_init__(self) -> None:
        if self.cpus is not None and not self.cpus > 0:
            raise InvalidRunSpec(f"cpus must be > 0, got {self.cpus}")
        if self.memory_bytes is not None and self.memory_bytes < 4 * 1024 * 1024:
            # The engine itself refuses limits under a few MiB with a less clear error.
            raise InvalidRunSpec(f"memory_bytes must be at least 4 MiB, got {self.memory_bytes}")
        if self.pids_limit is not None and self.pids_limit < 1:
            raise InvalidRunSpec(f"pids_limit must be >= 1, got {self.pids_limit}")
        if isinstance(self.gpus, bool) or not isinstance(self.gpus, int | tuple):
            raise InvalidRunSpec(f"gpus must be a count or a tuple of UUIDs, got {self.gpus!r}")
        if isinstance(self.gpus, int) and self.gpus < 0:
            raise InvalidRunSpec(f"gpus count must be >= 0, got {self.gpus}")
        if isinstance(self.gpus, tuple):
            bad = [g for g in self.gpus if not isinstance(g, str) or not _GPU_UUID.match(g)]
            if bad:
                raise InvalidRunSpec(f"GPU device ids must be NVML UUIDs (GPU-...), got {bad}")
            if len(set(self.gpus)) != len(self.gpus):
                raise InvalidRunSpec(f"duplicate GPU UUIDs in {self.gpus}")

    @property
    def gpu_count(self) -> int:
        return len(self.gpus) if isinstance(self.gpus, tuple) else self.gpus


@dataclass(frozen=True)
class RunSpec:
    """What to run and under which limits.

    `work_dir` is a host directory mounted read-write at `mount_point`; it is the only
    writable place besides a small tmpfs /tmp when `read_only_root` is set.
    `user` None lets the runtime pick a non-root user that can write `work_dir`.
    """

    image: str
    argv: tuple[str, ...]
    work_dir: Path
    env: Mapping[str, str] = field(default_factory=dict)
    resources: Resources = field(default_factory=Resources)
    network_egress: bool = False
    # A rank of a multi-node job: it dials the other nodes and accepts their connections
    # on ports chosen at run time (c10d store, gloo/NCCL), so it needs the host's network.
    # Only a runtime with `cluster_networking` runs it; no runtime runs it without.
    cluster_node: bool = False
    wall_clock_limit_s: float | None = None
    read_only_root: bool = True
    user: str | None = None
    mount_point: str = "/work"
    tmpfs_bytes: int = 64 * 1024 * 1024
    # Used to name/label the job so a provider can find it with ordinary tools.
    job_id: str | None = None
    # A host directory of Python packages the network provides (its copy of the `pot`
    # harness): read-only to the job and first on its PYTHONPATH, its path as the job sees
    # it in PROOFNET_PYTHON_LIB (`pot.launch`).
    python_lib: Path | None = None

    def __post_init__(self) -> None:
        if not self.image or not isinstance(self.image, str):
            raise InvalidRunSpec("image reference is empty")
        if isinstance(self.argv, str) or not isinstance(self.argv, tuple):
            raise InvalidRunSpec("argv must be a tuple of strings (not one shell string)")
        if not self.argv or not all(isinstance(a, str) for a in self.argv):
            raise InvalidRunSpec(f"argv must be a non-empty tuple of strings, got {self.argv!r}")
        if any("\x00" in a for a in self.argv):
            raise InvalidRunSpec("argv must not contain NUL bytes")
        for k, v in self.env.items():
            if not isinstance(k, str) or not _ENV_NAME.match(k):
                raise InvalidRunSpec(f"invalid environment variable name {k!r}")
            if not isinstance(v, str) or "\x00" in v:
                raise InvalidRunSpec(f"environment value for {k} must be a string without NUL")
        if self.wall_clock_limit_s is not None and not self.wall_clock_limit_s > 0:
            raise InvalidRunSpec(f"wall_clock_limit_s must be > 0, got {self.wall_clock_limit_s}")
        if self.user is not None:
            name = self.user.split(":", 1)[0]
            if not name or name in _ROOT_USERS:
                raise InvalidRunSpec(f"jobs never run as root (user {self.user!r})")
        if not self.mount_point.startswith("/") or self.mount_point == "/":
            raise InvalidRunSpec(
                f"mount_point must be an absolute path other than /, got {self.mount_point!r}"
            )
        if self.tmpfs_bytes < 0:
            raise InvalidRunSpec("tmpfs_bytes must be >= 0")
        if self.python_lib is not None and not (
            self.python_lib.is_absolute() and self.python_lib.is_dir()
        ):
            raise InvalidRunSpec(f"python_lib {self.python_lib} is not an absolute directory")
        if self.job_id is not None and not re.match(
            r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$", self.job_id
        ):
            raise InvalidRunSpec(f"job_id must be [A-Za-z0-9_.-], 1-128 chars, got {self.job_id!r}")


@dataclass(frozen=True)
class RunResult:
    exit_code: int | None
    reason: RunReason
    message: str
    duration_s: float
    # Highest memory use observed: exact for process jobs (rusage), sampled about once
    # a second for containers (so a lower bound for short jobs); None if never seen.
    peak_memory_bytes: int | None = None

    @property
    def ok(self) -> bool:
        return self.reason is RunReason.COMPLETED


@dataclass(frozen=True)
class PullProgress:
    """One step of getting an image ready; `current`/`total` are bytes when known."""

    image: str
    status: str
    layer: str | None = None
    current: int | None = None
    total: int | None = None


@dataclass(frozen=True)
class LogLine:
    # "stdout", "stderr", or "runtime" for lines the runtime itself adds (warnings).
    stream: str
    text: str
    at: float


ProgressCallback = Callable[[PullProgress], None]
LogCallback = Callable[[LogLine], None]


# --- log plumbing shared by runtimes ----------------------------------------------------


class LogSink:
    """Splits raw output into lines, writes them to a file and hands them to a callback.

    Thread-safe: each output stream is pumped by its own thread. A callback that raises
    must not kill the job's log pump, so its errors are counted and otherwise ignored.
    """

    #: A job printing without newlines must not grow the worker's memory without end.
    MAX_LINE_BYTES = 64 * 1024
    #: Nor fill the worker's disk: past this, lines still reach the callback only.
    MAX_FILE_BYTES = 256 * 1024 * 1024

    def __init__(
        self, path: Path | None, callback: LogCallback | None, tail_lines: int = 200
    ) -> None:
        self.path = path
        self._callback = callback
        self._file_bytes = 0
        self.file_truncated = False
        self._lock = threading.Lock()
        self._partial: dict[str, bytes] = {}
        self._tail: deque[LogLine] = deque(maxlen=tail_lines)
        self._file: IO[str] | None = None
        self.callback_errors = 0
        self.lines = 0
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._file = path.open("a", encoding="utf-8")

    def feed(self, stream: str, data: bytes) -> None:
        with self._lock:
            buf = self._partial.get(stream, b"") + data
            *complete, rest = buf.split(b"\n")
            for raw in complete:
                self._emit_locked(stream, raw)
            while len(rest) > self.MAX_LINE_BYTES:
                self._emit_locked(stream, rest[: self.MAX_LINE_BYTES])
                rest = rest[self.MAX_LINE_BYTES :]
            self._partial[stream] = rest

    def note(self, text: str) -> None:
        """A line from the runtime itself (e.g. the unisolated warning)."""
        with self._lock:
            self._emit_locked("runtime", text.encode())

    def flush_stream(self, stream: str) -> None:
        """The stream ended: emit any last line that had no newline."""
        with self._lock:
            rest = self._partial.pop(stream, b"")
            if rest:
                self._emit_locked(stream, rest)

    def _emit_locked(self, stream: str, raw: bytes) -> None:
        line = LogLine(stream, raw.decode("utf-8", "replace").rstrip("\r"), time.time())
        self._tail.append(line)
        self.lines += 1
        if self._file is not None and not self.file_truncated:
            record = f"{line.at:.3f} {stream} {line.text}\n"
            self._file_bytes += len(record)
            if self._file_bytes > self.MAX_FILE_BYTES:
                self.file_truncated = True
                record = f"{line.at:.3f} runtime log file limit reached; later output not kept\n"
            self._file.write(record)
            self._file.flush()
        if self._callback is not None:
            try:
                self._callback(line)
            except Exception:
                self.callback_errors += 1

    def tail(self, n: int = 20) -> list[LogLine]:
        with self._lock:
            return list(self._tail)[-n:]

    def close(self) -> None:
        with self._lock:
            for stream in list(self._partial):
                rest = self._partial.pop(stream)
                if rest:
                    self._emit_locked(stream, rest)
            if self._file is not None:
                self._file.close()
                self._file = None


# --- the interface ----------------------------------------------------------------------


class RunHandle:
    """A started job. Obtained from `Runtime.run`; pass it back to the same runtime.

    Holds the state every runtime tracks the same way; subclasses add how the job is reached.
    """

    def __init__(self, spec: RunSpec, log: LogSink) -> None:
        self.spec = spec
        self.log = log
        self.started_at = time.time()
        self.started_mono = time.monotonic()
        self.ended_mono: float | None = None
        self.done = threading.Event()
        self.kill_reason: RunReason | None = None
        self.peak_memory_bytes: int | None = None
        self.pumps: list[threading.Thread] = []
        self.result: RunResult | None = None
        self.cleaned = False
        self.lock = threading.Lock()

    @property
    def log_path(self) -> Path | None:
        return self.log.path


class Runtime(ABC):
    """Runs jobs. Implementations: DockerRuntime (isolated), ProcessRuntime (not)."""

    #: False for runtimes that cannot contain a job; the worker must say so to users.
    isolated: bool
    name: str
    #: Whether this runtime can run a cluster node (RunSpec.cluster_node): the worker
    #: claims multi-node units only when it can.
    cluster_networking: bool = False

    @abstractmethod
    def prepare(self, image: str, progress: ProgressCallback | None = None) -> str:
        """Make `image` available before the job (pull, verify). Returns the resolved ID."""

    @abstractmethod
    def run(
        self, spec: RunSpec, on_log: LogCallback | None = None, log_file: Path | None = None
    ) -> RunHandle:
        """Start the job; output goes to `on_log` and `log_file` as it is produced."""

    #: How long to wait for a stopped job to be reported gone before classifying it.
    stop_grace_s: float = 10.0

    @abstractmethod
    def _own(self, handle: RunHandle) -> Any:
        """`handle` as this runtime's handle type (refusing another runtime's)."""

    @abstractmethod
    def _stop(self, h: Any, reason: RunReason) -> None:
        """Ask the job to end, remembering `reason` unless it already ended."""

    @abstractmethod
    def _finish(self, h: Any) -> RunResult:
        """Classify an ended job (once) and return its result."""

    @staticmethod
    def _deadline(h: RunHandle) -> float | None:
        limit = h.spec.wall_clock_limit_s
        return None if limit is None else h.started_mono + limit

    def poll(self, handle: RunHandle) -> RunResult | None:
        """The result if the job has ended (enforcing the wall-clock limit), else None."""
        h = self._own(handle)
        if h.result is not None:
            return h.result
        if h.done.is_set():
            return self._finish(h)
        deadline = self._deadline(h)
        if deadline is not None and time.monotonic() >= deadline:
            self._stop(h, RunReason.KILLED_TIMEOUT)
            h.done.wait(self.stop_grace_s)
            return self._finish(h)
        return None

    def wait(self, handle: RunHandle) -> RunResult:
        """Block until the job ends; kills it at its wall-clock limit."""
        h = self._own(handle)
        if h.result is not None:
            return h.result
        deadline = self._deadline(h)
        remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
        if not h.done.wait(remaining):
            self._stop(h, RunReason.KILLED_TIMEOUT)
            h.done.wait(self.stop_grace_s)
        return self._finish(h)

    def kill(self, handle: RunHandle) -> None:
        """Stop the job now; its result reason becomes killed_by_request."""
        self._stop(self._own(handle), RunReason.KILLED_BY_REQUEST)

    @abstractmethod
    def cleanup(self, handle: RunHandle) -> None:
        """Release everything the job held (container, threads, log file). Idempotent."""

    def execute(
        self,
        spec: RunSpec,
        on_log: LogCallback | None = None,
        log_file: Path | None = None,
        progress: ProgressCallback | None = None,
    ) -> RunResult:
        """prepare + run + wait + cleanup; runtime failures become a runtime_error result."""
        started = time.monotonic()
        try:
            self.prepare(spec.image, progress)
            handle = self.run(spec, on_log=on_log, log_file=log_file)
        except RuntimeErrorBase as exc:
            return RunResult(
                exit_code=None,
                reason=RunReason.RUNTIME_ERROR,
                message=f"{type(exc).__name__}: {exc}",
                duration_s=time.monotonic() - started,
            )
        try:
            return self.wait(handle)
        finally:
            self.cleanup(handle)
