"""Proof of training: checkpoint commitments recorded inside a job, and segment replays.

Standard library + numpy only (plus proofnet.messages' stdlib-only Merkle tree and canonical
JSON), so it can run inside any job container; framework adapters import their framework
lazily. See notes/compute.md for the protocol this implements.
"""

from worker.pot.manifest import Leaf, Manifest, ProofError
from worker.pot.recorder import ProofOfTraining, Trainer, TrainingState, run_training
from worker.pot.replay import ReplayResult, SpotCheckReport, replay_segment, spot_check
from worker.pot.seeds import BatchSampler, derive_data_seed, select_spot_checks

__all__ = [
    "BatchSampler",
    "Leaf",
    "Manifest",
    "ProofError",
    "ProofOfTraining",
    "ReplayResult",
    "SpotCheckReport",
    "Trainer",
    "TrainingState",
    "derive_data_seed",
    "replay_segment",
    "run_training",
    "select_spot_checks",
    "spot_check",
]
