"""proofnet's proof of training: checkpoint commitments, the schedule a proof must follow,
and the harness that trains a job's trainer and replays its segments.

The leaf library of proofnet: standard library + numpy only (framework adapters import
PyTorch or TensorFlow lazily), importing nothing else of proofnet's, so it runs inside any
job container. The worker and verifiers provide their own copy to jobs (`pot.launch`).

    pot.trainer      the interface a job implements (TrainContext, TrainingState, Trainer)
    pot.harness      train / replay through one code path (run_segment)
    pot.cli          python -m pot train|replay|check|schedule
    pot.launch       the network's copy of the harness in a job's container
    pot.schedule     the declared schedule (derive_schedule) and what it implies
    pot.conformance  does a manifest commit the schedule? (no job code)
    pot.seeds        data-order seed, batch sampler, spot-check draws
    pot.manifest     leaves, Merkle root, file names;  pot.recorder  the recorder
    pot.replay       checkpoints loaded against commitments, replay results
    pot.env          the job environment;  pot.tensors, pot.indices  file formats
    pot.torch_adapter, pot.keras_adapter   framework adapters (optional extras)
"""

from pot.conformance import Violation, check_conformance
from pot.harness import replay, resume, run_segment, train
from pot.manifest import Leaf, Manifest, ProofError, check_resumed
from pot.recorder import ProofOfTraining
from pot.replay import ReplayReport, ReplayResult
from pot.schedule import Schedule, ScheduleError, derive_schedule
from pot.seeds import BatchSampler, derive_data_seed, draw_seed, select_spot_checks
from pot.trainer import TrainContext, Trainer, TrainerError, TrainingState

__all__ = [
    "BatchSampler",
    "Leaf",
    "Manifest",
    "ProofError",
    "ProofOfTraining",
    "ReplayReport",
    "ReplayResult",
    "Schedule",
    "ScheduleError",
    "TrainContext",
    "Trainer",
    "TrainerError",
    "TrainingState",
    "Violation",
    "check_conformance",
    "check_resumed",
    "derive_data_seed",
    "derive_schedule",
    "draw_seed",
    "replay",
    "resume",
    "run_segment",
    "select_spot_checks",
    "train",
]
