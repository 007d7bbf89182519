"""worker.cluster: where the other nodes reach this one (the advertised host, checked for
reachability; torchrun's --local-addr; the gloo/NCCL interface), and the CLI that refuses a
Docker worker allowing cluster networking on an address no other machine can reach."""

from __future__ import annotations

import fcntl
import socket
import struct
from pathlib import Path

import docker
import pytest
from typer.testing import CliRunner

from worker.cli import RunSetupError, _make_runtime, app
from worker.cluster import (
    SOCKET_IFNAME_VARS,
    Rendezvous,
    check_reachable_host,
    interface_of,
    network_environ,
    torchrun_argv,
)
from worker.identity import create_key


def test_loopback_and_wildcard_hosts_are_not_reachable_from_other_machines() -> None:
    for host in ("127.0.0.1", "127.0.1.1", "::1", "[::1]", "0.0.0.0", "::", "localhost"):
        with pytest.raises(ValueError, match="advertised host"):
            check_reachable_host(host)
    for host in ("10.1.2.3", "192.0.2.7", "fd00::5", "node7.provider.example"):
        assert check_reachable_host(host) == host


def test_the_interface_of_the_advertised_address_is_found() -> None:
    assert interface_of("127.0.0.1") == "lo"
    assert network_environ("127.0.0.1") == dict.fromkeys(SOCKET_IFNAME_VARS, "lo")
    # Not an address of this machine, or not an IPv4 address: nothing to point gloo at.
    for other in ("192.0.2.99", "::1", "node7.provider.example", "10.1", ""):
        assert interface_of(other) is None, other
        assert network_environ(other) == {}


def test_every_interface_is_found_by_its_address() -> None:
    found = {}
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for _, name in socket.if_nameindex():
            # The inverse lookup, independent of interface_of: each interface's address.
            try:
                raw = fcntl.ioctl(sock.fileno(), 0x8915, struct.pack("256s", name.encode()[:15]))
            except OSError:  # no IPv4 address
                continue
            found[socket.inet_ntoa(raw[20:24])] = name
    assert found.get("127.0.0.1") == "lo"
    for address, name in found.items():
        assert interface_of(address) == name, address


def test_torchrun_is_told_the_nodes_own_address() -> None:
    rdzv = Rendezvous(
        endpoint="10.1.2.3:29400", rdzv_id="abc-1", nnodes=2, rank=1, local_addr="10.1.2.4"
    )
    argv = torchrun_argv(["python3", "train.py"], rdzv, 1)
    at = argv.index("--local-addr")
    assert argv[at + 1] == "10.1.2.4" and at < argv.index("--no-python")
    assert argv[-2:] == ("python3", "train.py")
    v6 = Rendezvous(
        endpoint="[fd00::1]:29400", rdzv_id="x", nnodes=2, rank=0, local_addr="[fd00::1]"
    )
    argv = torchrun_argv(["a"], v6, 1)
    assert argv[argv.index("--local-addr") + 1] == "fd00::1"  # an address, not an endpoint
    # Without an address (none advertised), torchrun looks the host up as before.
    assert "--local-addr" not in torchrun_argv(["a"], Rendezvous("h:1", "x", 2, 0), 1)


# --- the worker's start-up --------------------------------------------------------------


def _run_args(tmp_path: Path, *extra: str) -> list[str]:
    key = tmp_path / "keys" / "worker.skey"
    if not key.exists():
        create_key(key)
    return [
        "run",
        "--runtime",
        "docker",
        "--key-file",
        str(key),
        "--work-dir",
        str(tmp_path / "work"),
        "--payout-address",
        "addr_test1vz0000000000000000000000000000000000000000000000000",
        "--network",
        "devnet",
        *extra,
    ]


def test_cluster_networking_on_a_loopback_advertised_host_stops_the_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no stray .env
    monkeypatch.delenv("PROOFNET_WORKER_ALLOW_CLUSTER_NETWORKING", raising=False)
    monkeypatch.delenv("PROOFNET_WORKER_ADVERTISE_HOST", raising=False)
    runner = CliRunner()
    by_flag = runner.invoke(app, _run_args(tmp_path, "--allow-cluster-networking"))
    assert by_flag.exit_code == 2, by_flag.output
    assert "loopback" in by_flag.output and "--advertise-host" in by_flag.output

    # The same from the environment (PROOFNET_WORKER_ALLOW_CLUSTER_NETWORKING).
    monkeypatch.setenv("PROOFNET_WORKER_ALLOW_CLUSTER_NETWORKING", "true")
    monkeypatch.setenv("PROOFNET_WORKER_ADVERTISE_HOST", "0.0.0.0")
    by_env = runner.invoke(app, _run_args(tmp_path))
    assert by_env.exit_code == 2, by_env.output
    assert "wildcard" in by_env.output


@pytest.mark.docker
def test_the_docker_runtime_networks_nodes_only_when_allowed(
    docker_client: docker.DockerClient,
) -> None:
    # A loopback host is fine when the worker takes no clusters at all.
    plain = _make_runtime("docker", advertise_host="127.0.0.1")
    assert plain.name == "docker" and plain.cluster_networking is False
    allowed = _make_runtime("docker", allow_cluster_networking=True, advertise_host="192.0.2.7")
    assert allowed.cluster_networking is True
    with pytest.raises(RunSetupError, match="loopback"):
        _make_runtime("docker", allow_cluster_networking=True, advertise_host="127.0.0.1")


def test_the_process_runtime_always_runs_cluster_nodes() -> None:
    assert _make_runtime("process").cluster_networking is True
