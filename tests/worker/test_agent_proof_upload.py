"""Proof-of-training files: uploaded as `pot/<file>` when the spec declares `pot/**`, never
named in the attestation; a spec that does not declare them leaves them on the worker."""

from __future__ import annotations

from agent_fixtures import (  # noqa: F401  (fixtures)
    AgentHarness,
    ApiServer,
    FixtureRepo,
    RecordingOracle,
    api_server,
    harness,
    job_path,
    job_spec,
    model_repo,
    oracle,
)


def test_undeclared_proof_files_are_not_uploaded_and_the_log_says_so(
    harness: AgentHarness,  # noqa: F811
    api_server: ApiServer,  # noqa: F811
    oracle: RecordingOracle,  # noqa: F811
    model_repo: FixtureRepo,  # noqa: F811
) -> None:
    spec = job_spec(model_repo, steps=20)
    spec["results"] = [r for r in spec["results"] if r["path"] != "pot/**"]
    job_id = api_server.submit(spec)
    outcome = harness.agent.run(once=True).outcomes[0]
    assert outcome.status == "attested", outcome.reason
    api_server.release(job_id)
    uploads = {r["name"] for r in api_server.get(f"/api/v1/jobs/{job_id}/results")}
    assert uploads == {"results/metrics.json", "results/model.weights"}
    assert set(oracle.accepted[job_id][0].result_hashes) == uploads
    lines = [line["text"] for line in api_server.get(f"/api/v1/jobs/{job_id}/logs")["lines"]]
    assert any("declares no pot/**" in t for t in lines)
    job_dir = harness.config.jobs_dir / f"{job_id}-a1"
    assert (job_dir / "pot" / "manifest.json").is_file()  # the proof exists, kept locally
