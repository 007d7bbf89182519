"""A topology job the oracle can be shown one fact at a time: its spec, its escrow, the
feed's units (status, completing lease, uploads, output) and honest unit attestations.

`RelayWorld` is a 3-stage relay with an evaluation every 2 stages: units 0, 1, 2 are the
stages (a chain), 3 evaluates stage 1 and 4 evaluates stage 2 (the final model). Each unit
is run by its own worker, so each has its own payout address.
"""

from __future__ import annotations

import dataclasses
import secrets
import time
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from nacl.signing import SigningKey
from oracle_fixtures import (
    NETWORK,
    NTX_NAME,
    NTX_POLICY,
    FakeFeed,
    escrow_datum,
    escrow_output,
    signed_binding,
)

from oracle.inputs.chain import EscrowLookup, StaticChainView
from oracle.inputs.feed import JobInfo, LeaseInfo, WorkerInfo
from oracle.inputs.feed_units import UnitInfo
from oracle.service import escrow_script_hash
from oracle.verification.verify import VerificationContext
from proofnet.messages.address import enterprise_address
from proofnet.messages.attestation import (
    Attestation,
    AttestationDomain,
    EscrowRef,
    UnitWork,
    sign_attestation,
)
from proofnet.messages.jobspec import JobSpec
from proofnet.messages.topology import MultiNode, Relay, Unit, plan, total_amount

STAGE_AMOUNT = 1_000
EVAL_AMOUNT = 100
NODE_AMOUNT = 500
CHECKPOINT = "model.npz"


def relay_topology(stages: int = 3, every: int | None = 2) -> dict[str, Any]:
    topology: dict[str, Any] = {
        "kind": "relay",
        "stages": [{"shards": [i], "after": [i - 1] if i else []} for i in range(stages)],
        "checkpoint": CHECKPOINT,
        "stage_amount": STAGE_AMOUNT,
    }
    if every is not None:
        topology["evaluation"] = {
            "every": every,
            "metric": "loss",
            "goal": "min",
            "threshold": "0.5",
            "command": ["python", "evaluate.py"],
            "data": [{"uri": "https://example.org/heldout.bin", "sha256": "a" * 64}],
            "amount": EVAL_AMOUNT,
        }
    return topology


def node_topology(nodes: int = 2) -> dict[str, Any]:
    return {"kind": "multi_node", "nodes": nodes, "node_amount": NODE_AMOUNT, "checkpoint": "m.pt"}


def topology_spec(
    topology: dict[str, Any], *, seed: int | None = None, proof: dict[str, Any] | None = None
) -> JobSpec:
    """A job spec with `topology`, priced at what paying every unit costs (and `proof`, its
    proof-of-training section, when given)."""
    shape = Relay if topology["kind"] == "relay" else MultiNode
    total = total_amount(shape.model_validate(topology))
    shards = max((max(s["shards"]) + 1 for s in topology.get("stages", [])), default=0)
    return JobSpec.from_dict(
        {
            "model": {"repo_url": "https://example.org/train.git", "commit": "c" * 40},
            "framework": "numpy",
            "image": "python@sha256:" + "d" * 64,
            "commands": [["python", "train.py"]],
            "resources": {
                "gpus": 1,
                "gpu_memory_mb": 1024,
                "cpus": 1,
                "ram_mb": 1024,
                "disk_mb": 1024,
                "max_duration_s": 3600,
            },
            "data": [
                {"uri": f"https://example.org/shard-{i}.bin", "sha256": f"{i:064x}"}
                for i in range(shards)
            ],
            "results": [{"path": "metrics.json", "kind": "json"}],
            "pricing": {"kind": "fixed", "amount": total},
            "seed": secrets.randbelow(2**63) if seed is None else seed,
            "topology": topology,
            **({} if proof is None else {"proof": proof}),
        }
    )


@dataclass
class UnitWorld:
    """One topology job on one escrow, its units completed on demand."""

    spec: JobSpec
    escrow: EscrowRef
    feed: FakeFeed
    chain: StaticChainView
    store: Any
    workers: dict[int, SigningKey]
    outputs: dict[int, str | None] = field(default_factory=dict)
    nonces: dict[int, str] = field(default_factory=dict)
    # The checkpoint every node of a cluster run attests (rank 0 writes it).
    cluster_output: str = field(default_factory=lambda: secrets.token_hex(32))
    now_ms: int = field(default_factory=lambda: int(time.time() * 1000))

    @property
    def job_id(self) -> str:
        return self.spec.job_id

    @property
    def units(self) -> dict[int, Unit]:
        assert self.spec.topology is not None
        return {u.index: u for u in plan(self.spec.topology)}

    @property
    def total(self) -> int:
        assert self.spec.topology is not None
        return total_amount(self.spec.topology)

    def job(self) -> JobInfo:
        return self.feed.jobs[self.job_id]

    def payout(self, index: int) -> str:
        return self.feed.workers[self.worker_key(index)].payout_address

    def worker_key(self, index: int) -> str:
        return bytes(self.workers[index].verify_key).hex()

    def context(self, **overrides: Any) -> VerificationContext:
        values: dict[str, Any] = {
            "network": NETWORK,
            "escrow_script_hash": escrow_script_hash(),
            "chain": self.chain,
            "feed": self.feed,
            "store": self.store,
            "ntx_policy": NTX_POLICY,
            "ntx_name": NTX_NAME,
        }
        values.update(overrides)
        return VerificationContext(**values)

    def set_job(self, **changes: Any) -> None:
        self.feed.jobs[self.job_id] = dataclasses.replace(self.job(), **changes)

    def set_unit(self, index: int, **changes: Any) -> None:
        units = tuple(
            dataclasses.replace(u, **changes) if u.index == index else u for u in self.job().units
        )
        self.set_job(units=units)

    def lease(self, index: int) -> LeaseInfo:
        return LeaseInfo(
            worker_key=self.worker_key(index),
            payout_address=self.payout(index),
            nonce=self.nonces[index],
            gpus=1,
            started_ms=self.now_ms - 600_000,
            completed_ms=self.now_ms - 1_000,
            attempt=1,
        )

    def uploads(self, index: int) -> dict[str, str]:
        results = {"metrics.json": f"{index + 1:064x}"}
        output = self.outputs.get(index)
        if output is not None and self.units[index].produces_checkpoint:
            results[f"checkpoint/{CHECKPOINT}"] = output
        return results

    def complete(self, index: int, *, metrics: dict[str, int | str] | None = None) -> None:
        """The API's record of unit `index` completing under its worker's lease."""
        unit = self.units[index]
        if unit.kind == "node":
            self.outputs.setdefault(index, self.cluster_output)
        elif unit.produces_checkpoint:
            self.outputs.setdefault(index, secrets.token_hex(32))
        inputs = tuple(self.outputs[j] or "" for j in unit.inputs)
        self.set_unit(
            index,
            status="completed",
            lease=self.lease(index),
            inputs=inputs,
            output=self.outputs.get(index),
            metrics=MappingProxyType(dict(metrics or {"loss": "0.25"})),
            results=MappingProxyType(self.uploads(index)),
        )

    def attestation(self, index: int, **changes: Any) -> Attestation:
        """Unit `index`'s honest attestation (fields in `changes` replaced, re-validated)."""
        unit = self.units[index]
        work = UnitWork(
            index=index,
            kind=unit.kind,
            inputs=tuple(self.outputs[j] or "" for j in unit.inputs),
            output=self.outputs.get(index) if unit.kind != "eval" else None,
        )
        att = Attestation(
            domain=AttestationDomain(
                network=NETWORK,
                escrow_script_hash=escrow_script_hash(),
                escrow=self.escrow,
                job_id=self.job_id,
            ),
            worker_key=self.worker_key(index),
            payout_address=self.payout(index),
            started_ms=self.now_ms - 590_000,
            ended_ms=self.now_ms - 2_000,
            gpu_milliseconds=500_000,
            gpu_model="NVIDIA H100",
            gpu_uuid_sha256="f" * 64,
            image_digest=self.spec.image_digest,
            command_hash=self.spec.command_hash,
            result_hashes=self.uploads(index),
            pot_root="0" * 64,
            metrics=self._metrics(index),
            nonce=self.nonces[index],
            amount=unit.amount,
            unit=work,
        )
        if not changes:
            return att
        data = att.model_dump(mode="python")
        data.update(changes)
        return Attestation.model_validate(data)

    def _metrics(self, index: int) -> dict[str, int | str]:
        """An evaluation attests the metrics it reported to the API; others a fixed loss."""
        info = self.job().unit(index)
        if self.units[index].kind == "eval" and info is not None and info.metrics:
            return dict(info.metrics)
        return {"loss": "0.25"}

    def sign(self, index: int, att: Attestation | None = None) -> bytes:
        return sign_attestation(att or self.attestation(index), self.workers[index]).cose


def make_unit_world(
    store: Any,
    topology: dict[str, Any] | None = None,
    *,
    budget: int | None = None,
    status: str = "running",
    proof: dict[str, Any] | None = None,
) -> UnitWorld:
    spec = topology_spec(topology or relay_topology(), proof=proof)
    assert spec.topology is not None
    planned = plan(spec.topology)
    escrow = EscrowRef(tx_id=secrets.token_hex(32), index=0)
    feed = FakeFeed()
    workers = {u.index: SigningKey.generate() for u in planned}
    for key in workers.values():
        payout = enterprise_address(bytes(SigningKey.generate().verify_key), NETWORK)
        feed.workers[bytes(key.verify_key).hex()] = WorkerInfo(
            worker_key=bytes(key.verify_key).hex(),
            payout_address=payout,
            binding=signed_binding(key, payout),
            network=NETWORK,
        )
    first = {u.index for u in planned if not u.after}
    feed.jobs[spec.job_id] = JobInfo(
        job_id=spec.job_id,
        spec=spec,
        status=status,
        escrow=escrow,
        lease=None,
        units=tuple(
            UnitInfo(u.index, u.kind, "queued" if u.index in first else "blocked", None, (), None)
            for u in planned
        ),
    )
    total = total_amount(spec.topology)
    locked = budget if budget is not None else total + 500
    chain = StaticChainView()
    chain.put(
        EscrowLookup(
            "unspent",
            escrow_output(escrow, escrow_datum(spec.job_id, budget=locked), locked=locked),
        ),
        escrow,
    )
    return UnitWorld(
        spec=spec,
        escrow=escrow,
        feed=feed,
        chain=chain,
        store=store,
        workers=workers,
        nonces={u.index: secrets.token_hex(32) for u in planned},
    )
