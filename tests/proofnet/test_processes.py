"""Role processes: a role that dies is named with its log; every started role is stopped; a
failing demo says which role failed and leaves nothing running."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from demos import demo
from proofnet.processes import (
    ProcessStartError,
    RoleGroup,
    RoleProcess,
    free_port,
    run_role_command,
)


def _dying_devnet(tmp_path: Path) -> RoleProcess:
    # `--block-time 0` is refused at start-up: the child exits with an error in its log.
    return RoleProcess(
        "devnet",
        ["devnet", "up", "--data-dir", str(tmp_path / "chain"), "--block-time", "0"],
        tmp_path / "logs" / "devnet.log",
        cwd=tmp_path,
    )


def test_a_role_that_exits_is_reported_with_its_log(tmp_path: Path) -> None:
    role = _dying_devnet(tmp_path).start()
    with pytest.raises(ProcessStartError) as caught:
        role.wait_healthy(f"http://127.0.0.1:{free_port()}/health", timeout=60)
    assert caught.value.role == "devnet"
    assert caught.value.log_path == tmp_path / "logs" / "devnet.log"
    assert "block-time must be positive" in str(caught.value)


def test_a_running_role_that_never_answers_health_times_out_naming_its_log(
    tmp_path: Path,
) -> None:
    port = free_port()
    with RoleGroup() as group:
        role = group.start(
            RoleProcess(
                "devnet",
                ["devnet", "up", "--data-dir", str(tmp_path / "chain"), "--port", str(port)],
                tmp_path / "devnet.log",
            )
        )
        elsewhere = f"http://127.0.0.1:{free_port()}/api/v0/health"  # nothing listens there
        with pytest.raises(ProcessStartError, match=r"devnet not healthy at .* after 0.5s"):
            role.wait_healthy(elsewhere, timeout=0.5)
        group.check_running()  # still running: the wait gave up, the role did not die
        role.wait_healthy(f"http://127.0.0.1:{port}/api/v0/health", timeout=60)


def test_the_group_stops_every_role_it_started(tmp_path: Path) -> None:
    port = free_port()
    with RoleGroup() as group:
        role = group.start(
            RoleProcess(
                "devnet",
                ["devnet", "up", "--data-dir", str(tmp_path / "chain"), "--port", str(port)],
                tmp_path / "devnet.log",
            )
        )
        role.wait_healthy(f"http://127.0.0.1:{port}/api/v0/health", timeout=60)
        group.check_running()
    assert role.process is not None and role.process.returncode is not None
    with pytest.raises(ProcessStartError):
        group.check_running()  # it has exited now
    # A thread still starting roles after the run stopped starts nothing.
    late = RoleProcess("late", ["version"], tmp_path / "late.log")
    with pytest.raises(ProcessStartError, match="stopping"):
        group.start(late)
    assert late.process is None


def test_one_role_stopped_on_purpose_leaves_the_run_going(tmp_path: Path) -> None:
    ports = free_port(), free_port()
    with RoleGroup() as group:
        kept, stopped = (
            group.start(
                RoleProcess(
                    f"devnet{i}",
                    ["devnet", "up", "--data-dir", str(tmp_path / f"chain{i}"), "--port", str(p)],
                    tmp_path / f"devnet{i}.log",
                )
            )
            for i, p in enumerate(ports)
        )
        for role, port in zip((kept, stopped), ports, strict=True):
            role.wait_healthy(f"http://127.0.0.1:{port}/api/v0/health", timeout=60)
        group.stop(stopped)
        assert stopped.exited and not kept.exited
        group.check_running()  # the stopped role's exit is not the run's failure
    assert kept.exited


def test_a_short_command_returns_its_output_or_fails_with_its_log(tmp_path: Path) -> None:
    out = run_role_command("version", ["version"], tmp_path / "v.log")
    assert out.strip()
    with pytest.raises(ProcessStartError, match="refusing to overwrite"):
        (tmp_path / "key").write_text("x")
        run_role_command("keygen", ["oracle", "keygen", str(tmp_path / "key")], tmp_path / "k.log")
    assert "refusing to overwrite" in (tmp_path / "k.log").read_text()


def test_a_failing_demo_names_the_role_and_stops_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[RoleProcess] = []

    def start_devnet(self: demo._Demo) -> None:
        # A healthy role first, then the devnet that dies on start-up.
        port = free_port()
        healthy = self.roles.start(
            RoleProcess(
                "healthy",
                ["devnet", "up", "--data-dir", str(tmp_path / "ok"), "--port", str(port)],
                self.logs / "healthy.log",
            )
        )
        started.append(healthy)
        healthy.wait_healthy(f"http://127.0.0.1:{port}/api/v0/health", timeout=60)
        dying = self.roles.start(_dying_devnet(tmp_path))
        started.append(dying)
        # Never true: only the dying role can end this wait (a timeout has no role).
        self._wait("the devnet", lambda: False, timeout=600)

    monkeypatch.setattr(demo._Demo, "start_devnet", start_devnet)
    buffer = io.StringIO()
    with pytest.raises(demo.DemoError) as caught:
        demo.run_demo(tmp_path / "data", Console(file=buffer, width=200))
    assert caught.value.role == "devnet"  # failed as the role died, not at the wait's timeout
    printed = buffer.getvalue()
    assert "failed role: devnet" in printed
    assert "block-time must be positive" in printed  # the tail of its log
    assert all(r.process is not None and r.process.poll() is not None for r in started)
