"""Jobs in hardened Docker containers, driven through the `docker` SDK.

Every job container gets: the image pinned by digest, no capabilities, no new
privileges, a read-only root with the work dir as the only writable mount (plus a
small tmpfs /tmp), no network unless egress is allowed, cgroup limits on CPU, memory
(without swap) and pids, a non-root user, and GPUs only through NVIDIA device requests.
Works against a rootless engine too: the client comes from `DOCKER_HOST`.

A rank of a multi-node job (`RunSpec.cluster_node`) is the one exception to "no network":
its c10d store and gloo/NCCL connections use ports chosen at run time between all ranks,
so it runs with the host's network, as is usual for multi-node training in containers.
That also gives it the host's egress and its listening sockets, so it is the provider's
opt-in (`allow_cluster_networking`); without it such a run is refused, never started
without the network it needs. Everything else about the container stays as above.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import requests
from docker.errors import APIError, DockerException, ImageNotFound, NotFound
from docker.models.images import Image
from docker.types import DeviceRequest, LogConfig

from pot.env import PYTHON_LIB, determinism_environ
from pot.launch import LIB_MOUNT
from worker.runtime.base import (
    EngineUnavailable,
    GpuRuntimeUnavailable,
    ImageMismatch,
    ImageUnavailable,
    InvalidRunSpec,
    JobStartFailed,
    LimitsUnenforceable,
    LogCallback,
    LogSink,
    ProgressCallback,
    PullProgress,
    Resources,
    RunHandle,
    RunReason,
    RunResult,
    RunSpec,
    Runtime,
)
from worker.runtime.gpu_diagnosis import diagnose_gpu_error
from worker.runtime.image_ref import ImageRef, parse_image_ref

DEFAULT_JOB_USER = "1000:1000"
MANAGED_LABEL = "proofnet.managed"
JOB_LABEL = "proofnet.job_id"
# Which network a job container got, so a provider can list the host-networked ones.
NETWORK_LABEL = "proofnet.network"
HOST_NETWORK = "host"
# How long to wait for output pumps and a killed container before giving up on them.
_DRAIN_S = 10.0
_KILL_GRACE_S = 30.0


def connect(timeout_s: float = 30.0) -> docker.DockerClient:
    """A client for the engine named by DOCKER_HOST (rootless too), checked with a ping."""
    try:
        client = docker.from_env(timeout=int(timeout_s))
        client.ping()
    except (DockerException, requests.RequestException) as exc:
        host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
        raise EngineUnavailable(
            f"cannot reach the Docker engine at {host}: {exc}. Is dockerd running, and "
            f"does this user have access to its socket (or set DOCKER_HOST for rootless)?"
        ) from exc
    return client


def _normalise_repo(name: str) -> str:
    # RepoDigests may spell Docker Hub names in full ("docker.io/library/x").
    for prefix in ("docker.io/library/", "docker.io/", "index.docker.io/library/"):
        if name.startswith(prefix):
            return name[len(prefix) :]
    return name.removeprefix("library/")


def _device_requests(resources: Resources, driver: str) -> list[DeviceRequest]:
    gpus = resources.gpus
    if isinstance(gpus, tuple):
        return [DeviceRequest(driver=driver, device_ids=list(gpus), capabilities=[["gpu"]])]
    if gpus > 0:
        return [DeviceRequest(driver=driver, count=gpus, capabilities=[["gpu"]])]
    return []


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


class DockerRunHandle(RunHandle):
    def __init__(self, spec: RunSpec, container_id: str, log: LogSink, image_id: str) -> None:
        super().__init__(spec, log)
        self.container_id = container_id
        self.image_id = image_id
        self.wait_response: dict[str, Any] | None = None
        self.wait_error: str | None = None


class DockerRuntime(Runtime):
    stop_grace_s = _KILL_GRACE_S
    isolated = True
    name = "docker"

    def __init__(
        self,
        client: docker.DockerClient | None = None,
        *,
        pull_missing: bool = True,
        allow_unpinned: bool = False,
        egress_network: str = "bridge",
        gpu_driver: str = "nvidia",
        log_max_size: str = "50m",
        allow_cluster_networking: bool = False,
    ) -> None:
        """`client` None connects lazily via DOCKER_HOST on first use.

        `pull_missing`: pull an image that is not present locally (needs a registry).
        `allow_unpinned`: accept `name:tag` references (development only).
        `egress_network`: the network used when a spec allows egress.
        `allow_cluster_networking`: run cluster nodes with the host's network (see above).
        """
        self._client = client
        self.pull_missing = pull_missing
        self.allow_unpinned = allow_unpinned
        self.egress_network = egress_network
        self.gpu_driver = gpu_driver
        self.log_max_size = log_max_size
        self.cluster_networking = allow_cluster_networking
        self._rootless: bool | None = None
        self._capabilities: dict[str, bool] | None = None

    @property
    def client(self) -> docker.DockerClient:
        if self._client is None:
            self._client = connect()
        return self._client

    # --- images -------------------------------------------------------------------------

    def prepare(self, image: str, progress: ProgressCallback | None = None) -> str:
        ref = self._parse(image)
        found = self._find_local(ref)
        if found is None:
            if ref.is_bare_id:
                raise ImageUnavailable(
                    f"image {ref} is not present on this engine, and a bare image ID "
                    f"cannot be pulled; pre-load it (docker load) or use name@sha256:..."
                )
            if not self.pull_missing:
                raise ImageUnavailable(f"image {ref} is not present and pulling is disabled")
            self._pull(ref, progress)
            found = self._find_local(ref)
            if found is None:
                raise ImageUnavailable(f"pull of {ref} finished but the image is not present")
        if progress is not None:
            progress(PullProgress(image=image, status=f"ready as {found.id}"))
        return str(found.id)

    def _parse(self, image: str) -> ImageRef:
        ref = parse_image_ref(image)
        if not ref.pinned and not self.allow_unpinned:
            raise InvalidRunSpec(
                f"image {image!r} is not pinned: use name@sha256:<digest> or an image ID"
            )
        return ref

    def _get_image(self, key: str) -> Image | None:
        try:
            return self.client.images.get(key)
        except ImageNotFound:
            return None
        except (APIError, requests.RequestException) as exc:
            raise EngineUnavailable(f"engine failed to look up image {key}: {exc}") from exc

    def _find_local(self, ref: ImageRef) -> Image | None:
        """The local image for `ref`, verified against its digest; None if absent."""
        if ref.digest is None:
            return self._get_image(str(ref))
        found = None
        if ref.name is not None:
            found = self._get_image(f"{ref.name}@{ref.digest}")
        if found is None:
            # Images built or loaded locally have no registry digest, only an ID.
            found = self._get_image(ref.digest)
        if found is None:
            return None
        self._verify(ref, found)
        if ref.name is not None and ref.tag is not None:
            tagged = self._get_image(f"{ref.name}:{ref.tag}")
            if tagged is not None and tagged.id != found.id:
                raise ImageMismatch(
                    f"{ref.name}:{ref.tag} now points to {tagged.id}, not the pinned "
                    f"{ref.digest}; refusing to guess which one the job meant"
                )
        return found

    def _verify(self, ref: ImageRef, image: Image) -> None:
        if image.id == ref.digest:
            return
        digests = image.attrs.get("RepoDigests") or []
        if ref.name is not None:
            wanted = (_normalise_repo(ref.name), ref.digest)
            for rd in digests:
                repo, _, digest = rd.partition("@")
                if (_normalise_repo(repo), digest) == wanted:
                    return
        raise ImageMismatch(
            f"{ref} resolved to image {image.id} (digests {digests}), which is not the "
            f"pinned digest; refusing to run it"
        )

    def _pull(self, ref: ImageRef, progress: ProgressCallback | None) -> None:
        assert ref.name is not None
        target = ref.digest or ref.tag or "latest"
        image = str(ref)
        if progress is not None:
            progress(PullProgress(image=image, status="pulling"))
        try:
            events: Iterator[dict[str, Any]] = self.client.api.pull(
                ref.name, tag=target, stream=True, decode=True
            )
            for event in events:
                if "error" in event:
                    raise ImageUnavailable(f"pull of {image} failed: {event['error']}")
                if progress is not None:
                    detail = event.get("progressDetail") or {}
                    progress(
                        PullProgress(
                            image=image,
                            status=str(event.get("status", "")),
                            layer=event.get("id"),
                            current=detail.get("current"),
                            total=detail.get("total"),
                        )
                    )
        except (APIError, requests.RequestException) as exc:
            raise ImageUnavailable(f"pull of {image} failed: {exc}") from exc

    # --- running ------------------------------------------------------------------------

    def _is_rootless(self) -> bool:
        if self._rootless is None:
            try:
                opts = self.client.info().get("SecurityOptions") or []
            except (APIError, requests.RequestException) as exc:
                raise EngineUnavailable(f"engine info failed: {exc}") from exc
            self._rootless = any("name=rootless" in o for o in opts)
        return self._rootless

    def _check_enforceable(self, res: Resources) -> None:
        """Refuse limits the engine would silently ignore (rootless Docker on cgroup v1, or
        a kernel without the controller): a job must never run believing it is contained."""
        if self._capabilities is None:
            try:
                info = self.client.info()
            except (APIError, requests.RequestException) as exc:
                raise EngineUnavailable(f"engine info failed: {exc}") from exc
            self._capabilities = {
                "memory": bool(info.get("MemoryLimit")),
                "cpus": bool(info.get("CpuCfsQuota")),
                "pids": bool(info.get("PidsLimit")),
            }
        wanted = {
            "memory": res.memory_bytes is not None,
            "cpus": res.cpus is not None,
            "pids": res.pids_limit is not None,
        }
        missing = sorted(k for k, on in wanted.items() if on and not self._capabilities[k])
        if missing:
            raise LimitsUnenforceable(
                f"the container engine cannot enforce {', '.join(missing)} limits "
                "(rootless Docker needs cgroup v2 with delegated controllers); refusing to run "
                "the job uncontained"
            )

    def _job_user(self, spec: RunSpec, work_dir: Path) -> str:
        """A non-root user that can write the work dir (see RunSpec.user)."""
        if spec.user is not None:
            return spec.user
        if self._is_rootless():
            # Container uids map to subordinate host uids that do not own the dir.
            work_dir.chmod(0o777)
            return DEFAULT_JOB_USER
        if os.geteuid() == 0:
            uid, gid = (int(x) for x in DEFAULT_JOB_USER.split(":"))
            for root, dirs, files in os.walk(work_dir):
                for name in [*dirs, *files]:
                    os.lchown(os.path.join(root, name), uid, gid)
            os.chown(work_dir, uid, gid)
            return DEFAULT_JOB_USER
        # Rootful engine, unprivileged worker: run as the worker's own (non-root) ids
        # so the job can write the dir and the worker can read what it wrote.
        return f"{os.geteuid()}:{os.getegid()}"

    def check_cluster_networking(self) -> None:
        """Refuse cluster networking this engine cannot give: a rootless engine's host
        network is RootlessKit's own namespace, which other machines cannot reach."""
        if self._is_rootless():
            raise JobStartFailed(
                "this Docker engine is rootless: its host network is RootlessKit's own "
                "namespace, so the other nodes of a multi-node job could not reach a job "
                "there; run cluster nodes on a rootful engine, or do not allow cluster "
                "networking"
            )

    def _network_mode(self, spec: RunSpec) -> str:
        if not spec.cluster_node:
            return self.egress_network if spec.network_egress else "none"
        if not self.cluster_networking:
            raise JobStartFailed(
                "refusing to run a node of a multi-node job: it needs the host's network "
                "(its ranks connect to each other on ports chosen at run time), and this "
                "worker does not allow cluster networking (--allow-cluster-networking, "
                "PROOFNET_WORKER_ALLOW_CLUSTER_NETWORKING)"
            )
        return HOST_NETWORK

    def container_config(
        self, spec: RunSpec, *, image_id: str, user: str, work_dir: Path
    ) -> dict[str, Any]:
        """The engine's create arguments for `spec` (refusing a cluster node this worker
        does not allow to network)."""
        res = spec.resources
        network_mode = self._network_mode(spec)
        # The host's numeric kernel settings go in: a replay of this training uses them too.
        env = {
            "PYTHONUNBUFFERED": "1",
            "HOME": "/tmp",
            **determinism_environ(os.environ),
            **spec.env,
        }
        volumes = {str(work_dir): {"bind": spec.mount_point, "mode": "rw"}}
        if spec.python_lib is not None:
            volumes[str(spec.python_lib)] = {"bind": LIB_MOUNT, "mode": "ro"}
            env[PYTHON_LIB] = LIB_MOUNT
            env["PYTHONPATH"] = LIB_MOUNT
        labels = {MANAGED_LABEL: "1", JOB_LABEL: spec.job_id or "", NETWORK_LABEL: network_mode}
        name = f"proofnet-{spec.job_id or 'job'}-{secrets.token_hex(4)}"
        kwargs: dict[str, Any] = {
            "image": image_id,
            "command": list(spec.argv),
            "name": name,
            "labels": labels,
            "environment": env,
            "user": user,
            "working_dir": spec.mount_point,
            "volumes": volumes,
            "read_only": spec.read_only_root,
            "cap_drop": ["ALL"],
            "security_opt": ["no-new-privileges"],
            "network_mode": network_mode,
            "ipc_mode": "private",
            "log_config": LogConfig(
                type="json-file", config={"max-size": self.log_max_size, "max-file": "2"}
            ),
            "device_requests": _device_requests(res, self.gpu_driver),
            "detach": True,
        }
        if network_mode != HOST_NETWORK:
            # With the host's network the job keeps the host's name: torchrun, gloo and NCCL
            # look their own name up in the host's /etc/hosts, where a made-up one is not.
            kwargs["hostname"] = "job"
        if spec.tmpfs_bytes:
            kwargs["tmpfs"] = {"/tmp": f"rw,nosuid,nodev,size={spec.tmpfs_bytes}"}
        if res.cpus is not None:
            kwargs["nano_cpus"] = int(res.cpus * 1e9)
        if res.memory_bytes is not None:
            # memswap == mem: the job cannot spill into swap and slow the host down.
            kwargs["mem_limit"] = res.memory_bytes
            kwargs["memswap_limit"] = res.memory_bytes
        if res.pids_limit is not None:
            kwargs["pids_limit"] = res.pids_limit
        return kwargs

    def run(
        self, spec: RunSpec, on_log: LogCallback | None = None, log_file: Path | None = None
    ) -> DockerRunHandle:
        # Before anything touches the engine or the work dir: a cluster node this worker
        # may not network is refused outright.
        self._network_mode(spec)
        if spec.cluster_node:
            self.check_cluster_networking()
        ref = self._parse(spec.image)
        image = self._find_local(ref)
        if image is None:
            raise ImageUnavailable(f"image {ref} is not present; call prepare() first")
        work_dir = spec.work_dir.resolve()
        if not work_dir.is_dir():
            raise InvalidRunSpec(f"work dir {work_dir} does not exist or is not a directory")
        self._check_enforceable(spec.resources)
        user = self._job_user(spec, work_dir)
        res = spec.resources
        kwargs = self.container_config(spec, image_id=str(image.id), user=user, work_dir=work_dir)
        try:
            container = self.client.containers.create(**kwargs)
        except ImageNotFound as exc:
            raise ImageUnavailable(f"image {ref} vanished before the job started") from exc
        except (APIError, requests.RequestException) as exc:
            raise self._start_error(exc, res) from exc

        log = LogSink(log_file, on_log)
        try:
            container.start()
        except (APIError, requests.RequestException) as exc:
            with contextlib.suppress(APIError, requests.RequestException):
                container.remove(force=True)
            log.close()
            raise self._start_error(exc, res) from exc

        handle = DockerRunHandle(spec, str(container.id), log, str(image.id))
        self._start_pumps(handle)
        return handle

    def _start_error(self, exc: Exception, res: Resources) -> Exception:
        text = str(exc)
        if res.gpu_count:
            diagnosis = diagnose_gpu_error(text)
            if diagnosis is not None:
                return GpuRuntimeUnavailable(f"{diagnosis[1]} (engine said: {text})")
        return JobStartFailed(f"engine refused the job: {text}")

    def _start_pumps(self, h: DockerRunHandle) -> None:
        api = self.client.api

        def waiter() -> None:
            try:
                h.wait_response = api.wait(h.container_id)
            except (APIError, requests.RequestException) as exc:
                h.wait_error = f"lost track of the container: {exc}"
            finally:
                h.ended_mono = time.monotonic()
                h.done.set()

        def pump(stream: str) -> None:
            try:
                chunks = api.logs(
                    h.container_id,
                    stdout=stream == "stdout",
                    stderr=stream == "stderr",
                    stream=True,
                    follow=True,
                )
                for chunk in chunks:
                    h.log.feed(stream, chunk)
            except (APIError, requests.RequestException) as exc:
                h.log.note(f"log stream {stream} ended early: {exc}")
            finally:
                h.log.flush_stream(stream)

        def stats() -> None:
            # cgroup v1 reports the kernel's own high-water mark; v2 has none, so the
            # largest 1 Hz sample is the best estimate there.
            try:
                for sample in api.stats(h.container_id, stream=True, decode=True):
                    mem = sample.get("memory_stats") or {}
                    seen = max(int(mem.get("max_usage") or 0), int(mem.get("usage") or 0))
                    if seen:
                        h.peak_memory_bytes = max(h.peak_memory_bytes or 0, seen)
                    if h.done.is_set():
                        return
            except (APIError, requests.RequestException, ValueError):
                return

        threads = [
            threading.Thread(target=waiter, name=f"{h.container_id[:12]}-wait", daemon=True),
            threading.Thread(
                target=pump, args=("stdout",), name=f"{h.container_id[:12]}-out", daemon=True
            ),
            threading.Thread(
                target=pump, args=("stderr",), name=f"{h.container_id[:12]}-err", daemon=True
            ),
            threading.Thread(target=stats, name=f"{h.container_id[:12]}-stats", daemon=True),
        ]
        for t in threads:
            t.start()
        # The stats thread is left out: it may sit up to a sample interval after exit.
        h.pumps = threads[:3]

    # --- ending -------------------------------------------------------------------------

    def _stop(self, h: DockerRunHandle, reason: RunReason) -> None:
        with h.lock:
            if h.kill_reason is None and not h.done.is_set():
                h.kill_reason = reason
        try:
            self.client.api.kill(h.container_id)
        except NotFound:
            pass
        except APIError as exc:
            # 409: it already stopped on its own, which the waiter will report.
            if exc.status_code != 409:
                h.log.note(f"kill failed: {exc}")
        except requests.RequestException as exc:
            h.log.note(f"kill failed: {exc}")

    def _finish(self, h: DockerRunHandle) -> RunResult:
        with h.lock:
            if h.result is not None:
                return h.result
            for t in h.pumps:
                t.join(_DRAIN_S)
            ended = h.ended_mono or time.monotonic()
            duration = ended - h.started_mono
            result = self._classify(h, duration)
            h.result = result
            return result

    def _classify(self, h: DockerRunHandle, duration: float) -> RunResult:
        def result(code: int | None, reason: RunReason, message: str) -> RunResult:
            return RunResult(code, reason, message, duration, h.peak_memory_bytes)

        if not h.done.is_set():
            return result(None, RunReason.RUNTIME_ERROR, "container did not stop after kill")
        state: dict[str, Any] = {}
        try:
            state = self.client.api.inspect_container(h.container_id).get("State") or {}
        except (APIError, requests.RequestException) as exc:
            if h.wait_error is None:
                h.wait_error = f"cannot inspect the finished container: {exc}"
        code: int | None = None
        if h.wait_response is not None:
            code = int(h.wait_response.get("StatusCode", -1))
        elif "ExitCode" in state:
            code = int(state["ExitCode"])
        oom = bool(state.get("OOMKilled"))
        mem = h.spec.resources.memory_bytes

        if h.kill_reason is RunReason.KILLED_TIMEOUT:
            msg = f"exceeded its wall-clock limit of {h.spec.wall_clock_limit_s:g}s and was killed"
            return result(code, RunReason.KILLED_TIMEOUT, msg)
        if h.kill_reason is RunReason.KILLED_BY_REQUEST:
            return result(code, RunReason.KILLED_BY_REQUEST, "killed on request")
        if code is None:
            return result(None, RunReason.RUNTIME_ERROR, h.wait_error or "no exit status")
        if oom and code != 0:
            limit = f" of {mem} bytes" if mem else ""
            # It reached the limit by definition, even if no 1 Hz sample caught it.
            peak = max(h.peak_memory_bytes or 0, mem or 0) or None
            return RunResult(
                code,
                RunReason.KILLED_OOM,
                f"exceeded its memory limit{limit}; the kernel OOM killer stopped it",
                duration,
                peak,
            )
        if code == 0:
            return result(0, RunReason.COMPLETED, "exited with code 0")
        return result(code, RunReason.FAILED, self._failure_message(h, code, state))

    @staticmethod
    def _failure_message(h: DockerRunHandle, code: int, state: dict[str, Any]) -> str:
        if code == 126:
            msg = f"command {h.spec.argv[0]!r} could not be executed (exit 126)"
        elif code == 127:
            msg = f"command {h.spec.argv[0]!r} not found in the image (exit 127)"
        elif code > 128:
            msg = f"killed by {_signal_name(code - 128)} (exit {code})"
        else:
            msg = f"exited with code {code}"
        if state.get("Error"):
            msg += f"; engine: {state['Error']}"
        last = [line.text for line in h.log.tail(5) if line.stream == "stderr" and line.text]
        if last:
            msg += f"; last error output: {last[-1][:300]}"
        return msg

    def cleanup(self, handle: RunHandle) -> None:
        h = self._own(handle)
        if h.cleaned:
            return
        if not h.done.is_set():
            self._stop(h, RunReason.KILLED_BY_REQUEST)
            h.done.wait(_KILL_GRACE_S)
        for t in h.pumps:
            t.join(_DRAIN_S)
        try:
            self.client.api.remove_container(h.container_id, force=True)
        except NotFound:
            pass
        except (APIError, requests.RequestException) as exc:
            h.log.note(f"could not remove container {h.container_id[:12]}: {exc}")
        h.log.close()
        h.cleaned = True

    def remove_stale_containers(self, include_running: bool = False) -> int:
        """Remove job containers left behind by a worker that died mid-job.

        Running ones are kept unless `include_running`: another worker may share the
        engine, and only the caller knows that none does.
        """
        removed = 0
        try:
            found = self.client.containers.list(all=True, filters={"label": f"{MANAGED_LABEL}=1"})
        except (APIError, requests.RequestException) as exc:
            raise EngineUnavailable(f"cannot list containers: {exc}") from exc
        for c in found:
            if c.status in ("running", "restarting", "paused") and not include_running:
                continue
            with contextlib.suppress(NotFound):
                c.remove(force=True)
                removed += 1
        return removed

    @staticmethod
    def _own(handle: RunHandle) -> DockerRunHandle:
        if not isinstance(handle, DockerRunHandle):
            raise TypeError(f"not a DockerRunHandle: {type(handle).__name__}")
        return handle
