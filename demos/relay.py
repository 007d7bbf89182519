"""`proofnet demo --shape relay` (and `--shape stopped`): the loop with a relay pipeline.

    3 stages, each on its own data shard (pot.examples.numpy_relay's StageTrainer), an evaluation
    after stage 1 (every 2 stages) and on the final model -> one escrow for the whole job
    -> three workers take the units, each downloading the checkpoint the stage before it
    produced and refusing it unless its SHA-256 is the one the API recorded
    -> the oracles verify every unit (its attested inputs must be the verified outputs of
    the units it builds on; stages are spot-checked by replaying segments on their shards)
    -> the escrow is settled once: one payout per verified unit, the rest refunded.

`stopped` sets an evaluation threshold the model cannot reach: the evaluation after stage 1
fails, the pipeline stops, and the settlement pays stages 0-1 and that evaluation and
refunds what stage 2 and the final evaluation would have cost.

The oracles settle a topology job's escrow once the API reports it over and every completed
unit's attestation is decided; they would wait up to PROOFNET_SETTLEMENT_UNIT_GRACE_S
(600 s by default) for a missing one. The demo sets UNIT_GRACE_S and says so.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
from rich.table import Table

from demos import job as demo_job
from proofnet.messages.jobspec import JobSpec
from proofnet.messages.topology import Unit, plan

if TYPE_CHECKING:
    from auditor.audit import AuditReport
    from demos.demo import _Demo, _Job

REPO_NAME = "numpy-relay.git"
REPO_URL = demo_job.URL_PREFIX + REPO_NAME
STAGES = 3
STEPS = 60  # per stage
HIDDEN = 32
STEPS_PER_CHECKPOINT = 20
EXAMPLES = 512  # per training shard
FEATURES = 32
CLASSES = 4
DATA_SEED = 11
CHECKPOINT = "model.bin"
METRIC = "loss"
# The held-out loss of a model that knows nothing is ln 4 = 1.386; the stages bring it down
# to about 0.55-0.6 (measured), so 0.9 passes with room and 0.3 is out of reach.
PASS_THRESHOLD = "0.9"
STOP_THRESHOLD = "0.3"
STAGE_AMOUNT = 600_000
EVAL_AMOUNT = 100_000
# What the escrow locks: the price of every unit (3 stages + 2 evaluations = 2,000,000)
# plus a margin that goes back to the submitter.
BUDGET = 2_500_000
WORKERS = 3  # one more than the single job's: hand-offs between providers show
UNIT_GRACE_S = 20

BATCH_SIZE = 64

RELAY_PY = '''"""Relay units: StageTrainer trains a stage (the harness), main evaluates."""
import sys

from pot.examples.numpy_relay import StageTrainer, main

__all__ = ["StageTrainer"]

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
'''
JOB_OVER = ("completed", "stopped", "failed", "cancelled")


@dataclass(frozen=True)
class RelayShape:
    """What a relay shape of the demo posts: the evaluation's threshold decides whether
    the pipeline runs to the end."""

    name: str
    threshold: str
    description: str

    @property
    def stops(self) -> bool:
        return self.name == "stopped"


SHAPES: dict[str, RelayShape] = {
    "relay": RelayShape(
        "relay", PASS_THRESHOLD, "a 3-stage relay pipeline across 3 workers, with evaluations"
    ),
    "stopped": RelayShape(
        "stopped",
        STOP_THRESHOLD,
        "a relay whose evaluation after stage 1 fails: the pipeline stops, the rest is refunded",
    ),
}


@dataclass(frozen=True)
class RelayData:
    train: tuple[Path, ...]  # one shard per stage
    held_out: Path  # what the evaluations measure the model on


def create_repo(root: Path) -> demo_job.FixtureRepo:
    """The relay's training and evaluation code, committed under `root`."""
    return demo_job.commit_repo(
        root,
        REPO_NAME,
        {"relay.py": RELAY_PY},
        "numpy MLP trained stage by stage, with proof of training",
    )


def make_data(root: Path) -> RelayData:
    """Three training shards and a held-out shard, labelled by one teacher network."""
    from pot.examples.numpy_relay import make_shards

    # One call, so every shard is labelled by the same teacher; the last one is held out
    # (examples the stages never train on).
    *train, held = make_shards(
        root / "train",
        shards=STAGES + 1,
        examples=EXAMPLES,
        features=FEATURES,
        classes=CLASSES,
        seed=DATA_SEED,
    )
    (root / "held-out").mkdir(parents=True, exist_ok=True)
    # A distinct file name: an evaluation's data/ dir must not be mistaken for a stage's.
    renamed = held.rename(root / "held-out" / "held-out.bin")
    return RelayData(tuple(train), renamed)


def _shard(path: Path) -> dict[str, str]:
    return {"uri": f"file://{path}", "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}


def job_spec(commit: str, data: RelayData, *, threshold: str, seed: int) -> dict[str, Any]:
    """Stages 0-2 in a chain, stage i on shard i; evaluations of stage 1 (unit 3) and of
    the final model (unit 4). Priced at exactly what paying every unit costs."""
    return {
        "model": {"repo_url": REPO_URL, "commit": commit},
        "framework": "numpy",
        "image": demo_job.IMAGE,
        "commands": [],
        "resources": {
            "gpus": 0,
            "gpu_memory_mb": 0,
            "cpus": 1,
            "ram_mb": 1024,
            "disk_mb": 200,
            "max_duration_s": 300,
        },
        "data": [_shard(p) for p in data.train],
        "results": [
            {"path": "results/metrics.json", "kind": "json"},
            {"path": "pot/**", "kind": "model"},
        ],
        "pricing": {"kind": "fixed", "amount": STAGES * STAGE_AMOUNT + 2 * EVAL_AMOUNT},
        "seed": seed,
        "proof": {
            "trainer": "relay:StageTrainer",
            "config": {"hidden": HIDDEN, "classes": CLASSES},
            # Per stage: its shard holds EXAMPLES examples.
            "schedule": {"steps": STEPS, "dataset_size": EXAMPLES, "batch_size": BATCH_SIZE},
            "steps_per_checkpoint": STEPS_PER_CHECKPOINT,
            "spot_checks": 1,
            "tolerance_ppm": 0,
        },
        "topology": {
            "kind": "relay",
            "stages": [{"shards": [i], "after": [i - 1] if i else []} for i in range(STAGES)],
            "checkpoint": CHECKPOINT,
            "stage_amount": STAGE_AMOUNT,
            "evaluation": {
                "every": 2,
                "metric": METRIC,
                "goal": "min",
                "threshold": threshold,
                "command": ["python3", "relay.py", "evaluate"],
                "data": [_shard(data.held_out)],
                "amount": EVAL_AMOUNT,
            },
        },
    }


def planned_units(spec: Mapping[str, Any]) -> dict[int, Unit]:
    topology = JobSpec.from_dict(dict(spec)).topology
    assert topology is not None
    return {u.index: u for u in plan(topology)}


def label(unit: Unit) -> str:
    if unit.kind == "eval":
        return f"eval {unit.index} (of stage {unit.evaluates})"
    return f"{unit.kind} {unit.index}"


def _short(sha: str | None) -> str:
    return f"{sha[:16]}..." if sha else "-"


# --- following the pipeline -------------------------------------------------------------------


@dataclass
class RelayFollower:
    """Polls the API (as the submitter) and the proposing oracle; prints what changed, unit
    by unit, until the escrow is settled."""

    demo: _Demo
    job: _Job
    headers: dict[str, str]
    units: dict[int, Unit] = field(init=False)
    _api: dict[int, tuple[str, str | None, int]] = field(default_factory=dict)
    _oracle: dict[int, str] = field(default_factory=dict)
    _outputs: dict[int, str] = field(default_factory=dict)
    # Checkpoints the submitter downloads once their unit's verdict releases them.
    _to_download: dict[int, str] = field(default_factory=dict)
    _status: str = ""

    def __post_init__(self) -> None:
        self.units = planned_units(self.job.spec)

    def say(self, text: str) -> None:
        self.demo.console.print(f"  {text}", soft_wrap=True, highlight=False)

    def worker(self, key_id: str | None) -> str:
        for w in self.demo.state.workers:
            if key_id and w.key_id == key_id:
                return w.name
        return f"provider {key_id}" if key_id else "?"

    def _job(self) -> dict[str, Any]:
        response = self.demo.http.get(
            f"{self.demo.state.api_url}/api/v1/jobs/{self.job.job_id}", headers=self.headers
        )
        if response.status_code != 200:
            from demos.job import DemoError

            raise DemoError(f"job status: the API answered {response.status_code}", "api")
        body: dict[str, Any] = response.json()
        return body

    def poll(self) -> bool:
        from demos.job import DemoError
        from oracle.settlement.audit import settlement_tx_of

        job = self._job()
        for row in job.get("units") or []:
            self._unit_event(row)
        if job["status"] != self._status:
            self._status = job["status"]
            if job["status"] == "failed":
                raise DemoError(f"job {self.job.job_id} failed: {job['last_error']}")
            if job["status"] in JOB_OVER:
                why = f": {job['last_error']}" if job.get("last_error") else ""
                self.say(f"[bold]pipeline {job['status']}[/]{why}")
        completed = {r["index"] for r in job.get("units") or [] if r["status"] == "completed"}
        atts = self.demo._attestations(self.job)
        latest: dict[int, dict[str, Any]] = {}
        for att in atts:
            if att.get("unit") is not None:
                latest[int(att["unit"])] = att
        for index, att in sorted(latest.items()):
            status = att["status"]
            if status == "rejected":
                raise DemoError(
                    f"the oracle rejected {label(self.units[index])}'s attestation: "
                    f"{att.get('reason')}: {att.get('message')}",
                    self.demo.state.oracles[0].name,
                )
            if self._oracle.get(index) != status:
                self._oracle[index] = status
                self._oracle_event(index, status)
            if status in ("batched", "settled") and not self.job.settled_by:
                self.job.settled_by = (
                    settlement_tx_of(self.demo.state.devnet_url, self.job.escrow) or ""
                )
                if self.job.settled_by:
                    self.say(f"settlement tx {self.job.settled_by} spent the escrow")
        if self._to_download:
            self._download_released()
        return (
            job["status"] in JOB_OVER
            and bool(completed)
            and set(latest) == completed
            and all(latest[i]["status"] == "settled" for i in completed)
            and bool(self.job.settled_by)
            and not self._to_download
        )

    def _unit_event(self, row: dict[str, Any]) -> None:
        index = int(row["index"])
        unit = self.units[index]
        key = (str(row["status"]), row.get("provider"), int(row["attempts"]))
        if self._api.get(index) == key:
            return
        self._api[index] = key
        status, who = key[0], self.worker(row.get("provider"))
        name = f"[cyan]{label(unit)}[/]"
        if status == "leased":
            given = self._given(unit)
            self.say(f"{name} -> {who} (attempt {key[2]})" + (f", handed {given}" if given else ""))
        elif status == "completed":
            self._completed(unit, row, who, name)
        elif status == "cancelled":
            self.say(f"{name}: cancelled (the pipeline stopped before it)")
        elif status == "failed":
            self.say(f"{name}: attempt {key[2]} on {who} failed")

    def _given(self, unit: Unit) -> str:
        """The checkpoints `unit` starts from (its input units' outputs, as completed)."""
        return ", ".join(
            f"stage {j}'s checkpoint {_short(self._outputs.get(j))}" for j in unit.inputs
        )

    def _completed(self, unit: Unit, row: dict[str, Any], who: str, name: str) -> None:
        if unit.kind == "eval":
            evaluation = self.job.spec["topology"]["evaluation"]
            value = (row.get("metrics") or {}).get(METRIC)
            threshold = evaluation["threshold"]
            passed = value is not None and Decimal(str(value)) <= Decimal(threshold)
            gates = any(unit.index in u.after for u in self.units.values())
            if not passed:
                verdict = "[red]fail[/]: the pipeline stops"
            elif gates:
                verdict = "[green]pass[/]: the units after it may run"
            else:
                verdict = "[green]pass[/]: the final model meets the threshold"
            relation = "<=" if passed else ">"
            self.say(
                f"{name} on {who}: {METRIC} {value} {relation} {threshold} (threshold) -> {verdict}"
            )
            return
        output = row.get("output")
        if not output:
            from demos.job import DemoError

            raise DemoError(f"{label(unit)} completed without an output checkpoint", "api")
        self._outputs[unit.index] = output
        self._to_download[unit.index] = output
        given = self._given(unit)
        self.say(
            f"{name} done on {who}"
            + (f" from {given}" if given else " from the model's initialisation")
            + f": checkpoint {_short(output)} (released to the submitter with the verdict)"
        )

    def _download_released(self) -> None:
        """Download each completed unit's checkpoint once the API serves it (its verdict
        released it: 409 before) and check it hashes to the unit's output."""
        from demos.job import DemoError

        for index, output in sorted(self._to_download.items()):
            name = f"units/{index}/checkpoint/{CHECKPOINT}"
            response = self.demo.http.get(
                f"{self.demo.state.api_url}/api/v1/jobs/{self.job.job_id}/results/{name}",
                headers=self.headers,
            )
            if response.status_code == 409:
                continue  # not released yet: the verdict comes
            del self._to_download[index]
            matches = (
                response.status_code == 200
                and hashlib.sha256(response.content).hexdigest() == output
            )
            unit = f"[cyan]{label(self.units[index])}[/]"
            self.say(
                f"{unit}: the submitter downloaded checkpoint {_short(output)} once released"
                + (" (SHA-256 matches)" if matches else " (SHA-256 DIFFERS)")
            )
            if not matches:
                raise DemoError(f"{label(self.units[index])}'s checkpoint does not hash", "api")

    def _oracle_event(self, index: int, status: str) -> None:
        unit = self.units[index]
        name = f"[cyan]{label(unit)}[/]"
        oracle = self.demo.state.oracles[0].name
        if status == "verified":
            checks = []
            if unit.inputs:
                checks.append(
                    "inputs = verified output of " + ", ".join(f"stage {j}" for j in unit.inputs)
                )
            if unit.kind == "stage":
                checks.append(f"segments replayed on shard {list(unit.shards)}")
            more = f" ({'; '.join(checks)})" if checks else ""
            self.say(f"{oracle}: {name} attestation verified{more}")
        else:
            self.say(f"{oracle}: {name} attestation {status}")


def follow(demo: _Demo, job: _Job, headers: dict[str, str]) -> str:
    """Follow the pipeline from the queue to the confirmed settlement; the settlement tx."""
    follower = RelayFollower(demo, job, headers)
    demo._wait("the pipeline's settlement", follower.poll, demo.options.loop_timeout_s, 0.3)
    return job.settled_by


# --- the summary --------------------------------------------------------------------------------


@dataclass(frozen=True)
class AttestedUnit:
    """A unit as its attestation in the settlement's bundle states it."""

    index: int
    kind: str
    inputs: tuple[str, ...]
    output: str | None
    payout_address: str
    amount: int
    metrics: Mapping[str, Any]


def bundle_units(client: httpx.Client, oracle_urls: list[str], sha256: str) -> list[AttestedUnit]:
    """The unit attestations of a settlement's bundle (fetched by its hash)."""
    from auditor.audit import bundle_attestations, fetch_bundle

    raw, _ = fetch_bundle(client, oracle_urls, sha256)
    _, _, payloads = bundle_attestations(raw)
    out = []
    for payload in payloads:
        body = json.loads(payload)
        unit = body.get("unit")
        if unit is None:
            continue
        out.append(
            AttestedUnit(
                index=int(unit["index"]),
                kind=str(unit["kind"]),
                inputs=tuple(unit.get("inputs") or ()),
                output=unit.get("output"),
                payout_address=str(body["payout_address"]),
                amount=int(body["amount"]),
                metrics=dict(body.get("metrics") or {}),
            )
        )
    return sorted(out, key=lambda u: u.index)


def chain_breaks(units: dict[int, Unit], attested: list[AttestedUnit]) -> list[str]:
    """Units whose attested inputs are not the attested outputs of their planned inputs."""
    outputs = {a.index: a.output for a in attested}
    breaks = []
    for a in attested:
        want = tuple(outputs.get(j) for j in units[a.index].inputs)
        if a.inputs != want:
            breaks.append(f"unit {a.index} attests inputs {a.inputs}, its inputs made {want}")
    return breaks


def print_summary(demo: _Demo, report: AuditReport, shape: RelayShape) -> dict[str, str]:
    """The per-unit table (who ran what, the checkpoint chain, what each was paid), the
    payout per provider and the submitter's refund; extra summary fields."""
    from demos.job import DemoError

    job = demo.state.jobs[0]
    units = planned_units(job.spec)
    attested = bundle_units(demo.http, [o.url for o in demo.state.oracles], report.bundle_sha256)
    breaks = chain_breaks(units, attested)
    if breaks:
        raise DemoError("the settled units do not chain: " + "; ".join(breaks))
    names = {w.payout.address: w.name for w in demo.state.workers}
    (escrow,) = report.escrows
    paid = {u.index: u for u in escrow.units}
    table = Table(title="units: who ran what, the checkpoint chain, what each was paid (NTX)")
    for column in ("unit", "provider", "input checkpoint", "output / metric", "paid", "output #"):
        table.add_column(column, justify="right" if column in ("paid", "output #") else "left")
    for a in attested:
        result = _short(a.output) if a.output else f"{METRIC} {a.metrics.get(METRIC, '?')}"
        table.add_row(
            label(units[a.index]),
            names.get(a.payout_address, a.payout_address[:20]),
            ", ".join(_short(i) for i in a.inputs) or "(initialisation)",
            result,
            f"{paid[a.index].paid:,}" if a.index in paid else "-",
            str(paid[a.index].output) if a.index in paid else "-",
        )
    demo.console.print(table)
    never = [label(units[i]) for i in sorted(units) if i not in {a.index for a in attested}]
    demo.console.print(
        "checkpoint chain: every unit's attested inputs are the attested outputs of the units "
        "it was planned on (checked here and by the audit)"
    )
    for worker in demo.state.workers:
        mine = [a for a in attested if a.payout_address == worker.payout.address]
        total = sum(paid[a.index].paid for a in mine if a.index in paid)
        ran = ", ".join(label(units[a.index]) for a in mine) or "nothing"
        demo.console.print(f"payout to {worker.name}: {total:,} NTX ({ran})")
    unused = f"; never ran: {', '.join(never)}" if never else ""
    demo.console.print(
        f"refund to the submitter: {escrow.refunded:,} NTX of the {escrow.held:,} escrowed "
        f"(units attested {escrow.attested:,}{unused})"
    )
    return {
        "shape": shape.name,
        "units_paid": ",".join(str(a.index) for a in attested),
        "refund": str(escrow.refunded),
    }
