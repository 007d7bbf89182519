"""Start proofnet roles as child processes and wait for them to answer (demo, chaos tests).

`RoleProcess` is one long-running `proofnet <role> ...` child with its output in a log file;
`RoleGroup` stops every child it started, last started first, however the caller leaves;
`run_role_command` runs a short `proofnet ...` command (key generation, seeding) to its end.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

import httpx
from tenacity import RetryCallState, Retrying, retry_if_result, stop_after_delay, wait_fixed

from proofnet.redaction import redact_credentials


class ProcessStartError(RuntimeError):
    """A child role exited or did not become healthy in time."""

    def __init__(self, message: str, role: str = "", log_path: Path | None = None) -> None:
        super().__init__(message)
        self.role = role
        self.log_path = log_path


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _tail(path: Path, lines: int) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return ""


def _command(argv: Sequence[str]) -> list[str]:
    # The interpreter running us: the children import the same installation.
    return [sys.executable, "-m", "proofnet.cli", *argv]


@dataclass
class RoleProcess:
    """One `proofnet <role> ...` child, with its output in a log file."""

    name: str
    argv: list[str]
    log_path: Path
    env: dict[str, str] = field(default_factory=dict)
    cwd: Path | None = None
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> RoleProcess:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        if self.cwd is not None:
            self.cwd.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("ab")
        # Own session: a Ctrl-C in the demo's terminal reaches the demo, which stops us cleanly.
        self.process = subprocess.Popen(
            _command(self.argv),
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **self.env},
            cwd=self.cwd,
            start_new_session=True,
        )
        log.close()
        return self

    @property
    def exited(self) -> bool:
        return self.process is not None and self.process.poll() is not None

    def check_running(self) -> None:
        """Raise ProcessStartError (with the log's tail) when the child has exited."""
        if self.exited:
            assert self.process is not None
            raise ProcessStartError(
                f"{self.name} exited with {self.process.returncode}; see {self.log_path}:\n"
                + self.tail(),
                self.name,
                self.log_path,
            )

    def wait_healthy(self, url: str, timeout: float = 30.0) -> None:
        """Ask `url` every 0.1 s until it answers 200; ProcessStartError at once when the
        process exits meanwhile, or after `timeout` seconds."""

        def healthy() -> bool:
            self.check_running()  # raises, ending the wait: a dead process never gets healthy
            try:
                return httpx.get(url, timeout=1.0).status_code == 200
            except httpx.HTTPError:
                return False

        def timed_out(_state: RetryCallState) -> None:
            raise ProcessStartError(
                f"{self.name} not healthy at {redact_credentials(url)} after {timeout}s:\n"
                f"{self.tail()}",
                self.name,
                self.log_path,
            )

        Retrying(
            stop=stop_after_delay(timeout),
            wait=wait_fixed(0.1),
            retry=retry_if_result(lambda ok: not ok),
            retry_error_callback=timed_out,
        )(healthy)

    def tail(self, lines: int = 20) -> str:
        return _tail(self.log_path, lines)

    def stop(self, timeout: float = 10.0) -> None:
        self.terminate()
        self.reap(time.monotonic() + timeout)

    def terminate(self) -> None:
        """Ask the child to stop (SIGTERM: every role shuts down cleanly on it)."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)

    def reap(self, deadline: float) -> None:
        """Wait for the child until `deadline` (monotonic), then kill it."""
        if self.process is None:
            return
        try:
            self.process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@dataclass
class RoleGroup:
    """The children of one run; leaving the `with` block stops them all (last first).
    Threads may start roles; once stopping has begun, no new role starts."""

    roles: list[RoleProcess] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _closed: bool = False

    def start(self, role: RoleProcess) -> RoleProcess:
        with self._lock:
            if self._closed:
                raise ProcessStartError(f"not starting {role.name}: the run is stopping", role.name)
            self.roles.append(role)
            return role.start()

    def check_running(self) -> None:
        for role in self.roles:
            role.check_running()

    def stop(self, role: RoleProcess, timeout: float = 10.0) -> None:
        """Stop one role and leave the run without it (an operator stopping one process):
        its exit is no longer a failure of the run."""
        with self._lock:
            if role in self.roles:
                self.roles.remove(role)
        role.stop(timeout)

    def stop_all(self, timeout: float = 10.0) -> None:
        """SIGTERM to all at once, then wait up to `timeout` for all together; whatever is
        left then, or when the wait itself is interrupted (a second Ctrl-C), is killed."""
        with self._lock:
            self._closed = True
        roles = list(reversed(self.roles))
        try:
            for role in roles:
                # OSError: already reaped by someone else, nothing left to stop.
                with contextlib.suppress(OSError):
                    role.terminate()
            deadline = time.monotonic() + timeout
            for role in roles:
                role.reap(deadline)
        finally:
            for role in roles:
                if role.process is not None and role.process.poll() is None:
                    with contextlib.suppress(OSError):
                        role.process.kill()
                    role.process.wait()

    def __enter__(self) -> RoleGroup:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop_all()


def run_role_command(
    name: str,
    argv: Sequence[str],
    log_path: Path,
    *,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = 120.0,
) -> str:
    """Run `proofnet <argv>` to its end; its stdout (stderr goes to `log_path`). A failure
    raises ProcessStartError with the output's tail."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    if cwd is not None:
        cwd.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run(
            _command(argv),
            capture_output=True,
            text=True,
            env={**os.environ, **(env or {})},
            cwd=cwd,
            timeout=timeout,
            check=False,
            start_new_session=True,
        )
    except subprocess.TimeoutExpired as exc:
        raise ProcessStartError(f"{name} did not finish in {timeout}s", name, log_path) from exc
    with log_path.open("a") as log:
        log.write(f"$ proofnet {' '.join(argv)}\n{done.stdout}{done.stderr}")
    if done.returncode != 0:
        raise ProcessStartError(
            f"{name} exited with {done.returncode}; see {log_path}:\n{_tail(log_path, 20)}",
            name,
            log_path,
        )
    return done.stdout
