"""Writing a job: `proofnet job init` writes a repository that trains and replays through the
harness as written; `proofnet job validate` names every problem's field on its own line;
`proofnet job try` catches a trainer that a verifier could not replay."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from api.client_cli import app
from proofnet.job_authoring.spec_file import SpecFileError, read_spec_file
from proofnet.job_authoring.templates import FRAMEWORKS, write_template
from proofnet.job_authoring.trial import try_job
from proofnet.job_authoring.validation import explain
from proofnet.messages.jobspec import JobSpec

runner = CliRunner()


def filled(repo: Path) -> Path:
    """The template's spec with the placeholders an author replaces, replaced."""
    doc = read_spec_file(repo / "job.yaml")
    doc["model"] = {"repo_url": "https://git.proofnet.test/me/job.git", "commit": "ab" * 20}
    doc["image"] = "registry.proofnet.test/me/job:1@sha256:" + "cd" * 32
    path = repo / "ready.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def merge(doc: dict[str, Any], change: dict[str, Any]) -> dict[str, Any]:
    """`doc` with `change` merged in, object by object; None removes a field."""
    out = dict(doc)
    for key, value in change.items():
        current = out.get(key)
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(current, dict):
            out[key] = merge(current, value)
        else:
            out[key] = value
    return out


def test_the_numpy_template_trains_and_replays_through_the_harness(tmp_path: Path) -> None:
    result = runner.invoke(app, ["init", str(tmp_path / "job"), "--framework", "numpy"])
    assert result.exit_code == 0, result.output
    repo = tmp_path / "job"
    assert {p.name for p in repo.iterdir()} == {
        "trainer.py",
        "job.yaml",
        "Dockerfile",
        "README.md",
        ".gitignore",
    }
    spec = JobSpec.from_dict(read_spec_file(repo / "job.yaml"))
    assert spec.proof.trainer == "trainer:Trainer" and spec.commands == ()
    # No copy of the harness in the repository: the worker provides it.
    assert not (repo / "pot").exists() and "pot" in (repo / "trainer.py").read_text()

    report = try_job(spec, repo, tmp_path / "runs")
    assert report.ok, report
    assert report.steps == 200 and report.segments == 10 and report.replayed == (1, 10)
    assert report.results is not None and float(report.results["accuracy"]) > 0.8
    metrics = json.loads((report.job_dir / "results" / "metrics.json").read_text())
    assert metrics == report.results
    assert (report.job_dir / "results" / "model.weights").exists()


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("torch") is None,
    reason="torch is not installed (optional extra: pip install 'proofnet-pot[torch]')",
)
def test_the_pytorch_template_trains_and_replays_through_the_harness(tmp_path: Path) -> None:
    write_template(tmp_path / "job", "pytorch")
    spec = JobSpec.from_dict(read_spec_file(tmp_path / "job" / "job.yaml"))
    assert spec.framework == "pytorch" and spec.resources.gpus == 1
    report = try_job(spec, tmp_path / "job", tmp_path / "runs")
    assert report.ok, report
    assert (report.job_dir / "results" / "model.pt").exists()


def test_a_trainer_a_verifier_could_not_replay_is_caught(tmp_path: Path) -> None:
    """The attack on one's own job: randomness outside the committed state (here, an
    unseeded generator in the step). The twin above replays."""
    repo = tmp_path / "job"
    write_template(repo, "numpy")
    source = (repo / "trainer.py").read_text()
    source = source.replace(
        "        x, y = self.x[indices], self.y[indices]\n",
        "        x, y = self.x[indices], self.y[indices]\n"
        "        x = x + 0.01 * np.random.default_rng().standard_normal(x.shape)\n",
    )
    (repo / "trainer.py").write_text(source)
    spec = JobSpec.from_dict(read_spec_file(repo / "job.yaml"))
    report = try_job(spec, repo, tmp_path / "runs")
    assert not report.replay_passed and not report.ok
    result = runner.invoke(app, ["try", str(repo / "job.yaml")])
    assert result.exit_code == 1 and "do not replay" in result.output


def test_validate_names_the_templates_placeholders_then_accepts_it(tmp_path: Path) -> None:
    for framework in FRAMEWORKS:
        write_template(tmp_path / framework, framework)
        result = runner.invoke(app, ["validate", str(tmp_path / framework / "job.yaml")])
        assert result.exit_code == 2
        lines = result.output.strip().splitlines()
        assert [line.split(":")[0] for line in lines] == ["model.repo_url", "model.commit", "image"]
        ready = runner.invoke(app, ["validate", str(filled(tmp_path / framework))])
        assert ready.exit_code == 0, ready.output
        assert "valid" in ready.output and "10 segments of 20 steps" in ready.output


@pytest.mark.parametrize(
    ("change", "field", "fragment"),
    [
        ({"proof": {"config": {"lr": 0.1}}}, "proof.config", "floats are not allowed"),
        (
            {
                "commands": [["python3", "train.py"]],
                "proof": {"schedule": None, "trainer": None, "config": None},
            },
            "proof.schedule",
            "missing",
        ),
        (
            {"commands": [["python3", "train.py"]], "proof": {"trainer": None, "config": None}},
            "proof.trainer",
            "missing",
        ),
        ({"proof": {"schedule": {"epochs": 2}}}, "proof.schedule", "exactly one"),
        ({"results": [{"path": "results/metrics.json", "kind": "json"}]}, "results", "pot/**"),
        ({"resources": {"gpus": 0, "gpu_memory_mb": 10}}, "resources", "gpu_memory_mb must be 0"),
        ({"image": "python:3.11"}, "image", "pinned by digest"),
        ({"seed": -1}, "seed", "greater than or equal to 0"),
        ({"proof": {"trainer": None, "config": None}}, "spec", "nothing would run"),
    ],
)
def test_each_problem_is_one_line_naming_its_field(
    tmp_path: Path, change: dict[str, Any], field: str, fragment: str
) -> None:
    write_template(tmp_path / "job", "numpy")
    doc = read_spec_file(filled(tmp_path / "job"))
    doc = merge(doc, change)
    _, problems = explain(doc)
    assert any(p.field == field and fragment in p.message for p in problems), problems
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(doc))
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 2
    assert f"{field}: " in result.output and all(
        ": " in line for line in result.output.splitlines()
    )


def test_several_problems_give_several_lines(tmp_path: Path) -> None:
    write_template(tmp_path / "job", "numpy")
    doc = read_spec_file(filled(tmp_path / "job"))
    doc["seed"] = "seven"
    doc["resources"]["cpus"] = 0
    doc["pricing"]["amount"] = 0
    _, problems = explain(doc)
    assert {p.field for p in problems} >= {"seed", "resources.cpus", "pricing.fixed.amount"}


def test_spec_files_are_json_or_yaml_and_bad_ones_are_one_line(tmp_path: Path) -> None:
    (tmp_path / "a.yml").write_text("seed: 7  # a comment\n")
    assert read_spec_file(tmp_path / "a.yml") == {"seed": 7}
    (tmp_path / "a.json").write_text('{"seed": 7}')
    assert read_spec_file(tmp_path / "a.json") == {"seed": 7}
    (tmp_path / "bad.json").write_text("seed: 7")
    with pytest.raises(SpecFileError, match="not valid JSON"):
        read_spec_file(tmp_path / "bad.json")
    (tmp_path / "list.yaml").write_text("- 1\n")
    with pytest.raises(SpecFileError, match="one object"):
        read_spec_file(tmp_path / "list.yaml")
    result = runner.invoke(app, ["validate", str(tmp_path / "missing.yaml")])
    assert result.exit_code == 2 and result.output.startswith("file: cannot read")


def test_init_refuses_an_unknown_framework_or_a_used_directory(tmp_path: Path) -> None:
    result = runner.invoke(app, ["init", str(tmp_path / "a"), "--framework", "jax"])
    assert result.exit_code == 2 and "--framework must be one of" in result.output
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "keep.txt").write_text("mine")
    result = runner.invoke(app, ["init", str(tmp_path / "b")])
    assert result.exit_code == 2 and "not empty" in result.output
    assert (tmp_path / "b" / "keep.txt").read_text() == "mine"
