"""A spec's storage placement: specs without it keep their job ids; bad placements are
refused with a line naming the field; the escrow locks the storage budget beside the
compute price, and a compute claim is never capped by the storage budget."""

from __future__ import annotations

import json
from typing import Any

import pytest

from proofnet.messages.jobspec import JobSpec, JobSpecError
from tests.proofnet.test_jobspec import spec_dict

STORAGE = {
    "kinds": ["data", "results"],
    "replicas": 2,
    "term_days": 30,
    "max_ntx_per_gb_month": 5_000,
    "budget": 1_000_000,
}


def test_a_spec_without_storage_keeps_its_encoding_and_job_id() -> None:
    spec = JobSpec.from_dict(spec_dict())
    assert b"storage" not in spec.canonical_bytes()
    assert spec.storage is None
    placed = JobSpec.from_dict(spec_dict(storage=STORAGE))
    assert placed.job_id != spec.job_id  # the placement is part of what the id commits to


def test_the_escrow_locks_the_storage_budget_beside_the_compute_price() -> None:
    spec = JobSpec.from_dict(spec_dict(storage=STORAGE))
    assert spec.compute_amount == 25_000_000
    assert spec.max_amount == 25_000_000 + 1_000_000
    assert spec.storage is not None and spec.storage.term_s == 30 * 86400


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"replicas": 0}, "storage.replicas"),
        ({"replicas": 17}, "storage.replicas"),
        ({"kinds": []}, "storage.kinds"),
        ({"kinds": ["data", "data"]}, "names a kind twice"),
        ({"kinds": ["logs"]}, "storage.kinds"),
        ({"term_days": 0}, "storage.term_days"),
        ({"max_ntx_per_gb_month": 0}, "storage.max_ntx_per_gb_month"),
        ({"max_ntx_per_gb_month": -1}, "storage.max_ntx_per_gb_month"),
        ({"budget": 0}, "storage.budget"),
        ({"budget": 2**63 - 1}, "exceeds"),
        ({"colour": "blue"}, "storage.colour"),
    ],
)
def test_bad_placements_are_refused_naming_the_field(change: dict[str, Any], fragment: str) -> None:
    with pytest.raises(JobSpecError, match=fragment):
        JobSpec.from_json(json.dumps(spec_dict(storage={**STORAGE, **change})))


def test_placing_data_needs_data_and_placing_results_needs_results() -> None:
    with pytest.raises(JobSpecError, match="no data shards"):
        JobSpec.from_dict(spec_dict(data=[], storage=STORAGE))
    with pytest.raises(JobSpecError, match="declares no results"):
        JobSpec.from_dict(spec_dict(results=[], storage={**STORAGE, "kinds": ["results"]}))
