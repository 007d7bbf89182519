"""Helpers for the tests of jobs with a topology: specs, and a worker driving unit leases."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from api_support import NETWORK, Worker, job_spec
from fastapi.testclient import TestClient

from proofnet.messages.topology import MultiNode, Relay, total_amount
from proofnet.messages.worker_auth import request_target, sign_request_headers

SHA = "ef" * 32
CHECKPOINT = "model.pt"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def evaluation(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "every": 2,
        "metric": "loss",
        "goal": "min",
        "threshold": "0.5",
        "command": ["python", "eval.py"],
        "data": [{"uri": "https://data.example/holdout", "sha256": SHA}],
        "amount": 10,
    }
    base.update(overrides)
    return base


def relay_spec(stages: list[dict[str, Any]], **topology: Any) -> dict[str, Any]:
    """A job spec with a relay over `stages` (4 data shards, results declared: metrics.json)."""
    relay: dict[str, Any] = {
        "kind": "relay",
        "stages": stages,
        "checkpoint": CHECKPOINT,
        "stage_amount": 100,
    }
    relay.update(topology)
    spec = job_spec(gpus=1)
    spec["data"] = [{"uri": f"https://data.example/shard-{i}", "sha256": SHA} for i in range(4)]
    spec["results"] = [{"path": "metrics.json", "kind": "json"}]
    spec["topology"] = relay
    spec["pricing"] = {"kind": "fixed", "amount": total_amount(Relay.model_validate(relay))}
    return spec


def chain(n: int) -> list[dict[str, Any]]:
    return [{"shards": [i % 4], "after": [i - 1] if i else []} for i in range(n)]


def multi_node_spec(nodes: int, checkpoint: str | None = None) -> dict[str, Any]:
    topology: dict[str, Any] = {"kind": "multi_node", "nodes": nodes, "node_amount": 50}
    if checkpoint is not None:
        topology["checkpoint"] = checkpoint
    spec = job_spec(gpus=1)
    spec["results"] = [{"path": "metrics.json", "kind": "json"}]
    spec["topology"] = topology
    spec["pricing"] = {"kind": "fixed", "amount": total_amount(MultiNode.model_validate(topology))}
    return spec


def submit(client: TestClient, auth: dict[str, str], spec: dict[str, Any]) -> str:
    response = client.post("/api/v1/jobs", json={"spec": spec}, headers=auth)
    assert response.status_code == 201, response.text
    return str(response.json()["job_id"])


def job(client: TestClient, auth: dict[str, str], job_id: str) -> dict[str, Any]:
    response = client.get(f"/api/v1/jobs/{job_id}", headers=auth)
    assert response.status_code == 200, response.text
    return dict(response.json())


def unit_statuses(client: TestClient, auth: dict[str, str], job_id: str) -> list[str]:
    return [u["status"] for u in job(client, auth, job_id)["units"]]


@dataclass
class UnitWorker:
    """A registered worker and the calls a unit's lease takes."""

    worker: Worker

    def claim(self) -> dict[str, Any]:
        response = self.worker.claim()
        assert response.status_code == 200, response.text
        body = dict(response.json())
        assert body["unit"] is not None, body
        return body

    def claim_nothing(self) -> None:
        response = self.worker.claim()
        assert response.status_code == 204, response.text

    def lease(self, token: str, action: str, body: Any = None) -> Any:
        return self.worker.request(
            "POST", f"/api/v1/worker/leases/{token}/{action}", {} if body is None else body
        )

    def heartbeat(self, token: str, **body: Any) -> Any:
        return self.lease(token, "heartbeat", body)

    def upload(self, token: str, name: str, data: bytes) -> Any:
        path = f"/api/v1/worker/leases/{token}/results/{name}"
        clock = self.worker.clock
        assert clock is not None
        headers = sign_request_headers(
            self.worker.key,
            network=NETWORK,
            method="PUT",
            path=request_target(path),
            body=data,
            timestamp=int(clock().timestamp()),
        )
        headers["content-type"] = "application/octet-stream"
        return self.worker.client.put(path, content=data, headers=headers)

    def complete(
        self,
        token: str,
        index: int,
        output: str | None = None,
        metrics: dict[str, Any] | None = None,
    ) -> Any:
        unit = {"index": index, "output": output, "metrics": metrics or {}}
        return self.lease(token, "complete", {"result": {"unit": unit}})

    def finish_stage(self, claim: dict[str, Any], data: bytes) -> None:
        """Upload `data` as the unit's checkpoint and complete with its hash."""
        token = claim["lease_token"]
        uploaded = self.upload(token, f"checkpoint/{CHECKPOINT}", data)
        assert uploaded.status_code == 200, uploaded.text
        done = self.complete(token, claim["unit"]["index"], sha(data))
        assert done.status_code == 200, done.text

    def input(self, token: str, position: int) -> Any:
        return self.worker.request("GET", f"/api/v1/worker/leases/{token}/inputs/{position}")


def unit_workers(
    worker_factory: Callable[[], Worker], gpu: tuple[str, int], count: int = 1
) -> Callable[[], UnitWorker]:
    """A factory of registered workers with `count` of `gpu` (model, memory MB) each (a GPU
    holds one lease at a time)."""

    def make() -> UnitWorker:
        worker = worker_factory()
        worker.register([gpu] * count)
        return UnitWorker(worker)

    return make
