"""Job code that reads a verifier's or an oracle's files, played end to end under Docker.

`proofnet bench cheat --end-to-end`'s row `job_code_reads_verifier_or_oracle_files`. The
submitter's job code tries, wherever it runs, to read every secret file of the network's
roles on this host (each worker's key, each oracle's key and database, the API's database)
and to reach every service (the API, each oracle, the devnet). It changes what it computes
whenever it reaches any of them, so a replay that matches the provider's commitments is a
replay that reached nothing, and so is the provider's own run (the twin under the process
runtime, reaching both, is tests/worker/test_verifier_units.py's).

The loop is the cheat loop's (`benchmarks.cheat_e2e._CheatLoop`: a local devnet with the
protocol deployed, the API, three oracles settling 2-of-3 and drawing verifier workers) in
a run of its own, as production runs: the provider and the only verifier the oracles can
draw both run `proofnet worker run --runtime docker`, so the job trains and is replayed in
its digest-pinned image, without network, with a read-only root and only the work dir
mounted. (In the cheat loop itself the workers verify under the process runtime, which
only the local devnet allows: this job's draw there could land on one of them.)

Before the loop, the same code runs on the host (`python mlp.py`): what it reaches there is
what isolation took away (`observed.reached_on_host`). Caught (contained) when the job
settles, the provider is paid, and the drawn Docker verifier's fee is in the same
settlement: nothing was reached in either container. The submitter paid for a job and
learned nothing.

Needs a Docker engine and a local image with python3 and numpy
(`scripts/ci/build-test-image.sh` builds `proofnet/test-numpy:local`); without them the
row stays `model_only` and says why (`snoop_unavailable`).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from urllib.parse import urlsplit

from rich.console import Console

from benchmarks.cheat_e2e import (
    LoopResult,
    _CheatLoop,
    job_spec,
)
from benchmarks.cheat_e2e_more import PhaseRow
from demos import job as demo_job
from demos.demo import _Wallet, _Worker
from proofnet.processes import RoleProcess

SNOOP_STRATEGY = "job_code_reads_verifier_or_oracle_files"
DEFAULT_IMAGE = "proofnet/test-numpy:local"
# The phase's whole loop, from the devnet up to the job's settlement.
SNOOP_TIMEOUT_S = 420.0

# The submitter's trainer (the repository's mlp.py): the demo's, nudged whenever it reaches
# any of FILES or ENDPOINTS (filled in with this loop's paths and ports).
SNOOP_PY = '''"""The demo's trainer, but it trains differently whenever it reaches what job code must
not: a worker's or an oracle's key, an oracle's or the API's database, a network service."""

import json
import socket

from pot.examples.numpy_mlp import MLPTrainer as _Honest

FILES = __FILES__
ENDPOINTS = __ENDPOINTS__


def reached():
    found = []
    for path in FILES:
        try:
            with open(path, "rb") as f:
                f.read(1)
            found.append(path)
        except OSError:
            pass
    for host, port in ENDPOINTS:
        try:
            socket.create_connection((host, port), timeout=1).close()
            found.append(f"{host}:{port}")
        except OSError:
            pass
    return found


class MLPTrainer(_Honest):
    def __init__(self, ctx):
        super().__init__(ctx)
        self.reached = reached()

    def train_step(self, step, indices):
        loss = super().train_step(step, indices)
        # Nothing tells it whether it trains or replays: it departs wherever it reaches
        # something, so a matching replay reached nothing, on either side.
        if self.reached:
            self.params["b2"] += 1e-3
        return loss


if __name__ == "__main__":
    print(json.dumps(reached()))
'''


class SnoopUnavailable(RuntimeError):
    """No Docker engine, or no such image: the phase cannot run here."""


def image_id(image: str) -> str:
    """`image`'s ID (`sha256:...`) from the local engine; SnoopUnavailable says why not."""
    try:
        done = subprocess.run(
            ["docker", "image", "inspect", "--format", "{{.Id}}", image],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SnoopUnavailable(f"no docker CLI or engine: {exc}") from exc
    if done.returncode != 0:
        raise SnoopUnavailable(
            f"no local image {image} ({done.stderr.strip()[:200]}); build it with "
            "scripts/ci/build-test-image.sh (a Docker engine: scripts/ci/start-dockerd.sh)"
        )
    return done.stdout.strip()


def repository(image: str) -> str:
    """`image` without its tag or digest (a registry's `host:port/` kept)."""
    name = image.split("@", 1)[0]
    head, _, last = name.rpartition("/")
    return f"{head}/{last.split(':', 1)[0]}" if head else last.split(":", 1)[0]


def snoop_trainer(files: list[str], endpoints: list[tuple[str, int]]) -> str:
    return SNOOP_PY.replace("__FILES__", repr(files)).replace("__ENDPOINTS__", repr(endpoints))


class SnoopLoop(_CheatLoop):
    """The cheat loop with one snooping job, its provider and verifier on Docker."""

    def __init__(self, workdir: Path, console: Console, image: str) -> None:
        super().__init__(workdir, console, (), saboteur=False)
        # One job, so one settlement batch of one.
        self.options = replace(self.options, jobs=1, loop_timeout_s=SNOOP_TIMEOUT_S)
        self.image = image
        self.probe_error = ""

    def docker_env(self) -> dict[str, str]:
        return {
            **self._base_env(),
            "PROOFNET_WORKER_RUNTIME": "docker",
            "PROOFNET_WORKER_VERIFICATION_POLL_S": "1",
            "PROOFNET_WORKER_ORACLE_KEYS": ",".join(o.public_key for o in self.state.oracles),
        }

    def run_argv(self, worker: _Worker) -> list[str]:
        argv = super().run_argv(worker)
        at = argv.index("--runtime")
        argv[at + 1] = "docker"
        return argv

    def targets(self, workers: list[_Worker]) -> tuple[list[str], list[tuple[str, int]]]:
        """What the job code must not reach: every secret file of this host's roles, and
        every service."""
        files = [str(w.dir / "worker.skey") for w in workers]
        for oracle in self.state.oracles:
            files += [str(oracle.key_file), str(self.workdir / oracle.name / "oracle.db")]
        files += [str(p) for p in sorted((self.workdir / "api").glob("*.db"))]
        files += [str(p) for p in sorted((self.workdir / "data").rglob("*.skey"))]
        endpoints = []
        for url in (
            self.state.api_url,
            self.state.devnet_url,
            *(o.url for o in self.state.oracles),
        ):
            parts = urlsplit(url)
            if parts.hostname and parts.port:
                endpoints.append((parts.hostname, parts.port))
        return [f for f in files if Path(f).exists()], endpoints

    def reached_on_host(self, repo: Path) -> list[str]:
        """The same code run on this host, as job code outside a container would be."""
        done = subprocess.run(
            [sys.executable, str(repo / "mlp.py")],
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
            cwd=repo,
        )
        if done.returncode != 0:
            # Nothing shown live: the row cannot say the containers stopped anything.
            self.probe_error = done.stderr.strip()[-300:]
            return []
        return list(json.loads(done.stdout))

    def containers(self, job_id: str, since: int) -> list[dict[str, str]]:
        """The containers the engine created for the job since `since` (epoch seconds):
        the provider's training (labelled with the job's id) and the verifier's replays
        (labelled with the ids of the job's verification units, from the API's database)."""
        import sqlite3

        db = self.workdir / "api" / "api.db"
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
            digests = [
                str(row[0])
                for row in con.execute(
                    "SELECT digest FROM verification_units WHERE json_extract(task, '$.job_id') = ?",
                    (job_id,),
                )
            ]
        done = subprocess.run(
            ["docker", "events", "--since", str(since), "--until", str(int(time.time()) + 1),
             "--filter", "type=container", "--filter", "event=create",
             "--filter", "label=proofnet.managed=1", "--format", "{{json .Actor.Attributes}}"],
            capture_output=True, text=True, check=False, timeout=60,
        )  # fmt: skip
        ours = (job_id[:32], *(f"verify-{d[:12]}" for d in digests))
        created = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
        return [c for c in created if str(c.get("proofnet.job_id", "")).startswith(ours)]

    def play_snoop(self) -> PhaseRow:
        started = time.monotonic()
        since = int(time.time()) - 1
        pinned = f"{repository(self.image)}@{image_id(self.image)}"
        headers = self.start_network()
        assert self.state.repo is not None
        provider = _Worker("docker-provider", self.workdir / "docker-provider", _Wallet.generate())
        verifier = _Worker("docker-verifier", self.workdir / "docker-verifier", _Wallet.generate())
        env = self.docker_env()
        self.onboard([provider, verifier], env)
        files, endpoints = self.targets([provider, verifier])
        repo = demo_job.commit_repo(
            self.state.repo.root,
            "snoop.git",
            {"mlp.py": snoop_trainer(files, endpoints)},
            "reads what it must not",
        )
        on_host = self.reached_on_host(repo.path)
        spec = job_spec(repo.commit, demo_job.SEED + 3000, demo_job.URL_PREFIX + "snoop.git")
        spec["image"] = pinned
        job = self.post_job(spec, headers)
        self.state.jobs.append(job)
        self.lock_escrows(headers)
        # The verifier first: a candidate before the proof is attested, and never a claim.
        for worker, flag in ((verifier, "--verify-only"), (provider, "--once")):
            worker.process = RoleProcess(
                worker.name,
                [*self.run_argv(worker), flag],
                self.logs / f"{worker.name}.log",
                env=env,
                cwd=worker.dir,
            ).start()
            self.verifiers.append(worker)
        att = self.follow_jobs({"snooping job": job})["snooping job"]
        status = str(att.get("status", "none"))
        settled = ""
        if status == "settled":
            from oracle.settlement.audit import settlement_tx_of

            settled = settlement_tx_of(self.state.devnet_url, job.escrow) or ""
        paid = self.paid_in(settled, provider.payout.address) if settled else 0
        fee = self.paid_in(settled, verifier.payout.address) if settled else 0
        created = self.containers(job.job_id, since)
        trained = [c for c in created if c["proofnet.job_id"].startswith(job.job_id[:32])]
        replayed = [c for c in created if c["proofnet.job_id"].startswith("verify-")]
        isolated = all(
            c.get("image") == pinned.split("@", 1)[1] and c.get("proofnet.network") == "none"
            for c in created
        )
        contained = (
            status == "settled"
            and paid > 0
            and fee > 0
            and bool(on_host)
            and bool(trained)
            and bool(replayed)
            and isolated
        )
        if contained:
            by = (
                f"contained: settled in tx {settled[:16]}..., the provider paid {paid} and the "
                f"drawn verifier's fee ({fee}) in the same batch. Its code departs wherever it "
                f"reaches any of {len(files)} secret files or {len(endpoints)} services; on "
                f"this host it reached {len(on_host)}, in the provider's {len(trained)} and "
                f"the verifier's {len(replayed)} containers (the pinned image, no network, "
                "read-only root) none"
            )
        else:
            by = (
                f"NOT contained: oracle {status} ({att.get('reason') or '-'}): "
                f"{str(att.get('message') or '')[:200]}; provider paid {paid}, verifier fee "
                f"{fee}, reached on the host: {len(on_host)}"
                + (f" (the probe failed: {self.probe_error})" if self.probe_error else "")
                + f"; containers: {len(trained)} "
                f"training, {len(replayed)} replaying, all isolated: {isolated}"
            )
        return PhaseRow(
            strategy=SNOOP_STRATEGY,
            status=status,
            reason=str(att.get("reason") or ""),
            message=str(att.get("message") or "")[:300],
            fault=str(att.get("fault") or ""),
            paid_ntx=paid,
            settlement_tx=settled,
            job_id=job.job_id,
            seconds=round(time.monotonic() - started, 1),
            verification="drawn_verifiers",
            caught=contained,
            by=by,
            observed={
                "runtime": "docker",
                "image": pinned,
                "targets": {"files": files, "endpoints": [f"{h}:{p}" for h, p in endpoints]},
                "reached_on_host": on_host,
                "verifier_fee_ntx": fee,
                "containers": {
                    "training": len(trained),
                    "replaying": len(replayed),
                    "networks": sorted({str(c.get("proofnet.network")) for c in created}),
                    "images": sorted({str(c.get("image")) for c in created}),
                },
                "snoop_loop_s": round(time.monotonic() - started, 1),
            },
        )


def run_snoop(
    image: str = DEFAULT_IMAGE, *, data_dir: Path | None = None, console: Console | None = None
) -> LoopResult:
    """Play the snooping job through its own loop; SnoopUnavailable when Docker or the
    image is missing. Every process started is stopped on return."""
    console = console or Console(stderr=True)
    image_id(image)  # fail fast, before a devnet is started
    if data_dir is None:
        with tempfile.TemporaryDirectory(
            prefix="proofnet-cheat-snoop-", ignore_cleanup_errors=True
        ) as tmp:
            return run_snoop(image, data_dir=Path(tmp), console=console)
    workdir = data_dir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    loop = SnoopLoop(workdir, console, image)
    try:
        with loop.roles:
            try:
                return loop.play_snoop()
            finally:
                loop.stop_workers()
    finally:
        loop.http.close()
