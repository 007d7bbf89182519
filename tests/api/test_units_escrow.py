"""A topology job's escrow deadline leaves room for its units that run one after another."""

from __future__ import annotations

from api_support import job_spec
from unit_support import chain, evaluation, multi_node_spec, relay_spec

from api.services.escrow_deadline import escrow_deadline_ms, sequential_units
from proofnet.messages.jobspec import JobSpec


def test_sequential_units_follow_the_longest_chain_of_waits() -> None:
    assert sequential_units(JobSpec.from_dict(job_spec())) == 1
    assert sequential_units(JobSpec.from_dict(multi_node_spec(4))) == 1
    assert sequential_units(JobSpec.from_dict(relay_spec(chain(3)))) == 3
    # Stage 1 is evaluated (unit 3) before stage 2 starts; the final stage is evaluated too.
    gated = JobSpec.from_dict(relay_spec(chain(3), evaluation=evaluation(every=2)))
    assert sequential_units(gated) == 5
    branches = relay_spec(
        [{"shards": [0]}, {"shards": [1]}, {"shards": [2], "after": [1]}],
        aggregation="average",
        aggregate_command=["python", "average.py"],
        aggregate_amount=1,
    )
    assert sequential_units(JobSpec.from_dict(branches)) == 3


def test_deadline_scales_with_sequential_units() -> None:
    single = JobSpec.from_dict(job_spec())
    pipeline = JobSpec.from_dict(relay_spec(chain(4)))
    hour_ms = single.resources.max_duration_s * 1000
    assert escrow_deadline_ms(0, single, 3, 10) == 3 * hour_ms + 10_000
    assert escrow_deadline_ms(0, pipeline, 3, 10) == 4 * 3 * hour_ms + 10_000
