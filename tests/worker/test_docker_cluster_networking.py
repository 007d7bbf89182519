"""Cluster nodes under the Docker runtime: host networking as the provider's opt-in, with the
rest of the container hardening unchanged, and refused (never run without networking)
otherwise.

The engine-free tests check the engine's create arguments; the `docker` ones run node
containers on a real engine (see runtime_fixtures.py for skip/fail rules) and connect to a
port a node listens on, from the host and from another node's container.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import socket
import struct
import textwrap
import time
from pathlib import Path
from typing import Any, NoReturn

import pytest

from worker.runtime.base import JobStartFailed, LogLine, Resources, RunReason, RunSpec
from worker.runtime.docker_runtime import NETWORK_LABEL, DockerRuntime

MiB = 1024 * 1024
IMAGE = "sha256:" + "ab" * 32
GPUS = ("GPU-1a2b3c", "GPU-4d5e6f")


class _NoEngine:
    """A client that fails the test if anything reaches the engine."""

    def __getattr__(self, name: str) -> NoReturn:
        raise AssertionError(f"the runtime used the engine ({name}) for a refused run")


class _RootlessEngine:
    def info(self) -> dict[str, Any]:
        return {"SecurityOptions": ["name=seccomp,profile=default", "name=rootless"]}


def _spec(work: Path, **kw: Any) -> RunSpec:
    kw.setdefault(
        "resources", Resources(cpus=2.0, memory_bytes=512 * MiB, pids_limit=128, gpus=GPUS)
    )
    return RunSpec(
        image=IMAGE, argv=("torchrun", "train.py"), work_dir=work, job_id="j-u0-a1-c2", **kw
    )


def _config(runtime: DockerRuntime, spec: RunSpec) -> dict[str, Any]:
    return runtime.container_config(spec, image_id=IMAGE, user="1000:1000", work_dir=spec.work_dir)


def _comparable(config: dict[str, Any]) -> dict[str, Any]:
    # The name has a random suffix; the log config and device requests are objects.
    out = {k: v for k, v in config.items() if k not in ("name", "log_config", "device_requests")}
    out["log_config"] = dict(config["log_config"])
    out["device_requests"] = [dict(d) for d in config["device_requests"]]
    return out


# --- engine-free ------------------------------------------------------------------------


def test_a_node_gets_the_host_network_and_every_other_limit_unchanged(tmp_path: Path) -> None:
    runtime = DockerRuntime(_NoEngine(), allow_cluster_networking=True)  # type: ignore[arg-type]
    node = _config(runtime, _spec(tmp_path, cluster_node=True))
    plain = _config(runtime, _spec(tmp_path))

    assert node["network_mode"] == "host" and node["labels"][NETWORK_LABEL] == "host"
    assert plain["network_mode"] == "none" and plain["labels"][NETWORK_LABEL] == "none"
    # The job keeps the host's name there: its peers resolve it, a made-up one resolves nowhere.
    assert "hostname" not in node and plain["hostname"] == "job"
    differing = {
        k
        for k in set(_comparable(node)) | set(_comparable(plain))
        if _comparable(node).get(k) != _comparable(plain).get(k)
    }
    assert differing == {"network_mode", "labels", "hostname"}
    # ... and what stays is the hardening, spelled out.
    assert node["cap_drop"] == ["ALL"] and node["security_opt"] == ["no-new-privileges"]
    assert node["read_only"] is True and node["user"] == "1000:1000"
    assert node["ipc_mode"] == "private"
    assert node["volumes"] == {str(tmp_path): {"bind": "/work", "mode": "rw"}}
    assert node["tmpfs"] == {"/tmp": f"rw,nosuid,nodev,size={64 * MiB}"}
    assert node["pids_limit"] == 128 and node["nano_cpus"] == 2_000_000_000
    assert node["mem_limit"] == node["memswap_limit"] == 512 * MiB
    (gpus,) = node["device_requests"]
    assert gpus["DeviceIDs"] == list(GPUS) and gpus["Capabilities"] == [["gpu"]]


def test_egress_alone_never_gives_the_host_network(tmp_path: Path) -> None:
    runtime = DockerRuntime(_NoEngine(), allow_cluster_networking=True)  # type: ignore[arg-type]
    assert _config(runtime, _spec(tmp_path, network_egress=True))["network_mode"] == "bridge"


def test_a_node_is_refused_without_the_opt_in_before_the_engine_is_touched(
    tmp_path: Path,
) -> None:
    runtime = DockerRuntime(_NoEngine())  # type: ignore[arg-type]
    assert runtime.cluster_networking is False
    node = _spec(tmp_path, cluster_node=True)
    with pytest.raises(JobStartFailed, match="--allow-cluster-networking"):
        _config(runtime, node)
    with pytest.raises(JobStartFailed, match="does not allow cluster networking"):
        runtime.run(node)
    # Egress does not stand in for it either.
    with pytest.raises(JobStartFailed, match="host's network"):
        runtime.run(_spec(tmp_path, cluster_node=True, network_egress=True))
    assert list(tmp_path.iterdir()) == []  # nothing was prepared for it


def test_a_rootless_engine_cannot_network_a_node(tmp_path: Path) -> None:
    runtime = DockerRuntime(_RootlessEngine(), allow_cluster_networking=True)  # type: ignore[arg-type]
    with pytest.raises(JobStartFailed, match="rootless"):
        runtime.check_cluster_networking()
    with pytest.raises(JobStartFailed, match="RootlessKit"):
        runtime.run(_spec(tmp_path, cluster_node=True))


# --- real engine ------------------------------------------------------------------------

SERVER = textwrap.dedent(
    """
    import json, os, socket, sys
    port = int(sys.argv[1])
    status = dict(l.split(":", 1) for l in open("/proc/self/status"))
    facts = {"uid": os.getuid(), "cap_eff": status["CapEff"].strip(),
             "nnp": status["NoNewPrivs"].strip()}
    try:
        open("/root-write-test", "w")
        facts["root_write"] = "ok"
    except OSError as exc:
        facts["root_write"] = exc.errno
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("0.0.0.0", port))
    server.listen(4)
    json.dump(facts, open("/work/facts.json", "w"))
    os.rename("/work/facts.json", "/work/ready.json")
    server.settimeout(60)
    for peer in range(int(sys.argv[2])):
        conn, addr = server.accept()
        who = conn.recv(64).decode()
        conn.sendall(f"node 0 heard {who}".encode())
        conn.close()
        print("served", who, flush=True)
    """
)

CLIENT = textwrap.dedent(
    """
    import socket, sys
    with socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10) as conn:
        conn.sendall(b"node 1")
        print(conn.recv(64).decode(), flush=True)
    """
)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("0.0.0.0", 0))
        return int(sock.getsockname()[1])


def _host_address() -> str:
    """An IPv4 address of a non-loopback interface (as another host would dial this one);
    the loopback only on a machine that has none (still out of reach without host network)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for _, name in socket.if_nameindex():
            with contextlib.suppress(OSError):
                answer = fcntl.ioctl(sock.fileno(), 0x8915, struct.pack("256s", name.encode()[:15]))
                address = socket.inet_ntoa(answer[20:24])
                if not address.startswith("127."):
                    return address
    return "127.0.0.1"


def _wait_ready(work: Path, runtime: DockerRuntime, handle: Any) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while not (work / "ready.json").exists():
        result = runtime.poll(handle)
        assert result is None, f"the node server ended early: {result}"
        assert time.monotonic() < deadline, "the node server never got ready"
        time.sleep(0.1)
    return dict(json.loads((work / "ready.json").read_text()))


def _spec_for(image: str, argv: tuple[str, ...], work: Path, **kw: Any) -> RunSpec:
    return RunSpec(
        image=image,
        argv=argv,
        work_dir=work,
        resources=Resources(cpus=1.0, memory_bytes=256 * MiB, pids_limit=64),
        wall_clock_limit_s=90.0,
        **kw,
    )


@pytest.mark.docker
def test_a_node_container_listens_where_the_host_and_another_node_reach_it(
    docker_client: Any, test_image_id: str, tmp_path: Path
) -> None:
    runtime = DockerRuntime(docker_client, pull_missing=False, allow_cluster_networking=True)
    address, port = _host_address(), _free_port()
    node0, node1 = tmp_path / "node0", tmp_path / "node1"
    node0.mkdir()
    node1.mkdir()
    lines: list[LogLine] = []
    server = runtime.run(
        _spec_for(
            test_image_id,
            ("python3", "-c", SERVER, str(port), "2"),
            node0,
            cluster_node=True,
            job_id="node0",
        ),
        on_log=lines.append,
    )
    try:
        facts = _wait_ready(node0, runtime, server)
        # Hardening holds with the host's network: non-root, no capabilities, no new
        # privileges, read-only root.
        assert facts["uid"] != 0 and int(facts["cap_eff"], 16) == 0 and facts["nnp"] == "1"
        assert facts["root_write"] == 30  # EROFS
        with socket.create_connection((address, port), timeout=10) as conn:
            conn.sendall(b"the host")
            assert conn.recv(64) == b"node 0 heard the host"
        # Another node's container (host network too) dials it at the same address.
        peer_lines: list[LogLine] = []
        peer = runtime.execute(
            _spec_for(
                test_image_id,
                ("python3", "-c", CLIENT, address, str(port)),
                node1,
                cluster_node=True,
                job_id="node1",
            ),
            on_log=peer_lines.append,
        )
        assert peer.reason is RunReason.COMPLETED, (peer.message, [x.text for x in peer_lines])
        assert "node 0 heard node 1" in [x.text for x in peer_lines]
        done = runtime.wait(server)
        assert done.reason is RunReason.COMPLETED, (done.message, [x.text for x in lines])
    finally:
        runtime.cleanup(server)
    assert [x.text for x in lines if x.text.startswith("served")] == [
        "served the host",
        "served node 1",
    ]


@pytest.mark.docker
def test_the_same_server_without_cluster_networking_is_out_of_reach(
    docker_client: Any, test_image_id: str, tmp_path: Path
) -> None:
    # The contrast that makes the test above mean something: a job container that is not a
    # cluster node (no egress) has no network the host could reach it on.
    runtime = DockerRuntime(docker_client, pull_missing=False, allow_cluster_networking=True)
    address, port = _host_address(), _free_port()
    server = runtime.run(
        _spec_for(test_image_id, ("python3", "-c", SERVER, str(port), "1"), tmp_path)
    )
    try:
        _wait_ready(tmp_path, runtime, server)
        with pytest.raises(OSError), socket.create_connection((address, port), timeout=3):
            pass
    finally:
        runtime.kill(server)
        runtime.cleanup(server)
