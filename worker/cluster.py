"""A node of a multi-node job: waiting for the whole cluster, then running under torchrun.

Nothing of a multi-node job starts until every node is leased (docs/topologies.md). Node 0
picks a free port on this worker's advertised host and publishes `host:port` with its
lease heartbeats; that is where its torchrun hosts the c10d store. Every node heartbeats
its lease while it waits, and starts once the API says the cluster is ready and names the
endpoint. The wait is bounded: a cluster that does not form in time is given back rather
than holding this worker (and the other nodes) forever. While the run goes on, a heartbeat
answered with 409, or with the cluster marked failed, ends the lease: the agent then kills
the run, as for any lost lease, and every node goes back to the queue together.

Other machines reach this node at the worker's advertised host: torchrun is told it is
the node's address (`--local-addr`, which node 0's agent hands its workers as the master
address instead of a host name other providers cannot resolve), and gloo/NCCL are pointed
at the interface that holds it (`GLOO_SOCKET_IFNAME`, `NCCL_SOCKET_IFNAME`) instead of
whatever the host name resolves to, often a loopback address.
"""

from __future__ import annotations

import fcntl
import ipaddress
import logging
import socket
import struct
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from worker.api_client import LeaseLost
from worker.lease_keeper import LeaseKeeper
from worker.unit_claim import ClusterState, check_endpoint

log = logging.getLogger(__name__)

TORCHRUN = "torchrun"
# Which interface gloo and NCCL open their peer connections on.
SOCKET_IFNAME_VARS = ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME")
_SIOCGIFADDR = 0x8915


class ClusterError(Exception):
    """This node cannot join its cluster; the lease is given back (no fault of the job)."""


class ClusterTimeout(ClusterError):
    """The cluster did not form within the wait this worker allows."""


@dataclass(frozen=True)
class Rendezvous:
    """Where and as what this node joins its cluster."""

    endpoint: str
    rdzv_id: str
    nnodes: int
    rank: int
    # This node's address as the other nodes reach it (the worker's advertised host).
    local_addr: str | None = None

    @property
    def hosts_store(self) -> bool:
        return self.rank == 0


def free_endpoint(host: str) -> str:
    """`host:port` with a port the OS reports free on `host` now (bound, then released
    for torchrun's store to take; an address this machine does not have fails here)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.bind((host, 0))
            port = int(sock.getsockname()[1])
    except OSError as e:
        raise ValueError(f"cannot open a port on the advertised host {host!r}: {e}") from e
    return check_endpoint(f"[{host}]:{port}" if family == socket.AF_INET6 else f"{host}:{port}")


def check_reachable_host(host: str) -> str:
    """`host`, unless it is an address no other machine can reach this one at (loopback,
    unspecified), which would leave the other nodes of a cluster dialling themselves."""
    name = host.strip("[]")
    if name.lower() == "localhost" or name.lower().endswith(".localhost"):
        raise ValueError(f"the advertised host {host!r} is this machine's loopback name")
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return host  # a name: whether others resolve it is theirs to see
    if address.is_loopback or address.is_unspecified:
        raise ValueError(
            f"the advertised host {host!r} is a {'loopback' if address.is_loopback else 'wildcard'}"
            " address: the other nodes of a cluster cannot reach this machine there"
        )
    return host


def interface_of(address: str) -> str | None:
    """The network interface whose (primary) IPv4 address is `address`, or None (a name, an
    IPv6 address, or no such interface): where gloo and NCCL should talk to the peers."""
    try:
        packed = socket.inet_aton(address)
        ipaddress.IPv4Address(address)  # inet_aton also takes "10.1" and the like
    except (OSError, ValueError):
        return None
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for _, name in socket.if_nameindex():
            request = struct.pack("256s", name.encode()[:15])
            try:
                answer = fcntl.ioctl(sock.fileno(), _SIOCGIFADDR, request)
            except OSError:  # no IPv4 address on this interface
                continue
            if answer[20:24] == packed:
                return name
    return None


def network_environ(advertise_host: str) -> dict[str, str]:
    """The variables that make gloo and NCCL use the interface of the advertised host (none
    when it is not found: they then fall back to resolving the host name)."""
    name = interface_of(advertise_host)
    return {} if name is None else dict.fromkeys(SOCKET_IFNAME_VARS, name)


def wait_for_cluster(
    keeper: LeaseKeeper,
    *,
    rank: int,
    advertise_host: str,
    timeout_s: float,
    poll_s: float = 0.5,
    stopping: Callable[[], bool] = lambda: False,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], object] = time.sleep,
    on_wait: Callable[[ClusterState | None], None] = lambda _state: None,
) -> Rendezvous:
    """Heartbeat until the cluster is ready; the rendezvous this node joins.

    Raises LeaseLost when the lease ends (or the cluster attempt fails) meanwhile,
    ClusterTimeout after `timeout_s` or when the worker is stopping, and ClusterError when
    the API names another rendezvous than the one node 0 published."""
    if rank == 0:
        keeper.rendezvous = free_endpoint(advertise_host)
        log.info("node 0 hosts the rendezvous at %s", keeper.rendezvous)
    deadline = clock() + timeout_s
    last: ClusterState | None = None
    while True:
        if not keeper.beat():
            raise LeaseLost(keeper.lost_reason)
        state = keeper.cluster
        if state is not None and state != last:
            on_wait(state)
            last = state
        if state is not None and state.ready:
            assert state.endpoint is not None
            if rank == 0 and state.endpoint != keeper.rendezvous:
                raise ClusterError(
                    f"the API names {state.endpoint} as the rendezvous, not node 0's "
                    f"{keeper.rendezvous}"
                )
            return Rendezvous(
                endpoint=state.endpoint,
                rdzv_id=state.rdzv_id,
                nnodes=state.world_size,
                rank=rank,
                local_addr=advertise_host,
            )
        if stopping():
            raise ClusterTimeout("the worker is shutting down")
        if clock() >= deadline:
            seen = "no cluster state" if state is None else f"the cluster {state.state}"
            raise ClusterTimeout(f"the cluster did not form within {timeout_s:g}s ({seen})")
        sleep(poll_s)


def torchrun_argv(argv: Sequence[str], rdzv: Rendezvous, nproc_per_node: int) -> tuple[str, ...]:
    """`argv` under torchrun, joining the cluster's rendezvous as node `rdzv.rank`. The
    static backend: node R is torch's node rank R, so the proof a node records is its unit's
    rank (the c10d backend ignores `--node_rank` and ranks the nodes by address and process
    id: on one machine whichever torchrun started first became rank 0, and the oracle
    rejected an honest node's proof as another rank's). Node 0 hosts the store (`is_host`,
    said explicitly: on one machine, or behind a shared name, no heuristic can tell)."""
    local = () if rdzv.local_addr is None else ("--local-addr", rdzv.local_addr.strip("[]"))
    return (
        TORCHRUN,
        "--nnodes",
        str(rdzv.nnodes),
        "--node_rank",
        str(rdzv.rank),
        "--nproc_per_node",
        str(nproc_per_node),
        "--rdzv_backend",
        "static",
        "--rdzv_endpoint",
        rdzv.endpoint,
        "--rdzv_id",
        rdzv.rdzv_id,
        "--rdzv_conf",
        f"is_host={1 if rdzv.hosts_store else 0}",
        *local,
        "--no-python",
        *argv,
    )


def node_commands(
    commands: Sequence[Sequence[str]], rdzv: Rendezvous, nproc_per_node: int
) -> tuple[tuple[str, ...], ...]:
    """Every command as it is, but the last under torchrun."""
    *first, last = commands
    return (*(tuple(c) for c in first), torchrun_argv(last, rdzv, nproc_per_node))
