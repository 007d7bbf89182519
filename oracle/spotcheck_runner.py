"""The replay subprocess: `python -m oracle.spotcheck_runner WORK_DIR < request.json`.

WORK_DIR holds `repo/` (the training code at the pinned commit), `pot/` (the manifest and
the checkpoint files of the requested segments) and, for a relay stage, `data/` (the stage's
shards, named in the request; the training code reads them through the unit environment set
here, as the worker set it for the stage). Prints one JSON report line:
{"status": "passed"|"failed"|"proof_error"|"error", "message", "results": [...]}.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import traceback
from pathlib import Path
from typing import Any

from oracle.spotcheck import REPLAY_MODULE, SpotCheckRequest
from worker.pot.env import INPUT_CHECKPOINTS, SHARDS, UNIT_INDEX, UNIT_KIND, JobEnv
from worker.pot.manifest import ProofError
from worker.pot.replay import spot_check


def run(work_dir: Path, request: SpotCheckRequest) -> dict[str, Any]:
    sys.path.insert(0, str(work_dir / "repo"))
    try:
        module = importlib.import_module(REPLAY_MODULE)
    except ImportError as exc:
        return {"status": "error", "message": f"repository has no {REPLAY_MODULE}.py: {exc}"}
    job = JobEnv(
        job_dir=work_dir,
        job_seed=request.job_seed,
        nonce=bytes.fromhex(request.nonce),
        steps_per_checkpoint=request.steps_per_checkpoint,
    )
    if request.unit_index is not None:
        os.environ.update(
            {
                UNIT_KIND: "stage",
                UNIT_INDEX: str(request.unit_index),
                SHARDS: ":".join(str(work_dir / s) for s in request.shards),
                INPUT_CHECKPOINTS: "",
            }
        )
    made = module.make_trainer(job, [list(c) for c in request.commands])
    trainer, expected = made if isinstance(made, tuple) else (made, None)
    try:
        report = spot_check(
            work_dir / "pot",
            trainer,
            expected_root=request.pot_root,
            seed=b"\x00" * 16,  # unused: the segments are given
            random_count=0,
            tolerance_ppm=request.tolerance_ppm,
            expected_indices=expected,
            segments=request.segments,
        )
    except ProofError as exc:
        return {"status": "proof_error", "message": str(exc)}
    failures = report.failures()
    return {
        "status": "passed" if report.passed else "failed",
        "message": ""
        if report.passed
        else f"segments {[f.segment for f in failures]} do not replay",
        "results": [r.to_json() for r in report.results],
    }


def main() -> int:
    work_dir = Path(sys.argv[1])
    try:
        request = SpotCheckRequest.from_json(sys.stdin.read())
        report = run(work_dir, request)
    except Exception as exc:
        report = {"status": "error", "message": f"{type(exc).__name__}: {exc}"}
        traceback.print_exc()
    print(json.dumps(report, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
