"""Result destinations in the job spec: absent keeps every old job id; present, each is
checked before any worker sees it (https only, S3 names that the spec's results declare)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from proofnet.messages.destinations import S3PresignedDestination, WebhookDestination
from proofnet.messages.jobspec import JobSpec, JobSpecError
from tests.proofnet.test_jobspec import spec_dict

# The job id of `spec_dict()` as main computed it before destinations existed.
JOB_ID_BEFORE_DESTINATIONS = "a8794753782f481f3ae1fa4967541068b844366472529309724866c79a74e95c"
HOOK = {"kind": "webhook", "url": "https://hooks.example/results"}
PUT = {"name": "out/metrics.json", "url": "https://bucket.example/m?X-Amz-Signature=ab"}
S3 = {"kind": "s3_presigned", "puts": [PUT]}


def test_a_spec_without_destinations_keeps_its_job_id_and_encoding() -> None:
    spec = JobSpec.from_dict(spec_dict())
    assert spec.destinations == ()
    assert "destinations" not in json.loads(spec.canonical_bytes())
    assert spec.job_id == JOB_ID_BEFORE_DESTINATIONS
    assert JobSpec.from_dict(spec_dict(destinations=[])).job_id == JOB_ID_BEFORE_DESTINATIONS


def test_destinations_are_committed_by_the_job_id_and_round_trip() -> None:
    spec = JobSpec.from_dict(spec_dict(destinations=[{"kind": "api"}, HOOK, S3]))
    assert spec.job_id != JOB_ID_BEFORE_DESTINATIONS
    assert JobSpec.from_canonical(spec.canonical_bytes()) == spec
    assert isinstance(spec.destinations[1], WebhookDestination)
    assert isinstance(spec.destinations[2], S3PresignedDestination)
    other = dict(HOOK, url="https://hooks.example/elsewhere")
    assert (
        JobSpec.from_dict(spec_dict(destinations=[other])).job_id
        != JobSpec.from_dict(spec_dict(destinations=[HOOK])).job_id
    )


@pytest.mark.parametrize(
    ("destinations", "results", "fragment"),
    [
        ([dict(HOOK, url="http://hooks.example/r")], None, "https://"),
        ([dict(HOOK, url="https://user:pw@hooks.example/r")], None, "credentials"),
        ([dict(HOOK, url="file:///etc/passwd")], None, "https://"),
        ([HOOK], [{"path": "model.pt", "kind": "model"}], "JSON and CSV"),
        (
            [
                {
                    "kind": "s3_presigned",
                    "puts": [{"name": "secret.key", "url": PUT["url"]}],
                }
            ],
            None,
            "no result glob declares",
        ),
        (
            [
                {
                    "kind": "s3_presigned",
                    "puts": [{"name": "../x.json", "url": "https://b.example/"}],
                }
            ],
            None,
            "relative",
        ),
        ([{"kind": "s3_presigned", "puts": [PUT] * 2}], None, "twice"),
        ([{"kind": "s3_presigned", "puts": []}], None, "at least 1"),
        ([{"kind": "api"}, {"kind": "api"}], None, "API store twice"),
        ([{"kind": "ftp", "url": "https://x.example/"}], None, "kind"),
    ],
)
def test_bad_destinations_are_refused_with_the_reason(
    destinations: list[dict[str, Any]], results: list[dict[str, Any]] | None, fragment: str
) -> None:
    change: dict[str, Any] = {"destinations": destinations}
    if results is not None:
        change["results"] = results
    with pytest.raises(JobSpecError, match=fragment):
        JobSpec.from_dict(spec_dict(**change))
