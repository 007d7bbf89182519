"""`ProofOfTraining`: the recorder a training job calls while it trains.

Typical loop (see `pot/examples/numpy_mlp.py`):

    pot = ProofOfTraining.for_job(job_dir, job_seed=seed, nonce=nonce, steps_per_checkpoint=100)
    sampler = BatchSampler(pot.data_seed, len(dataset), batch_size)
    pot.start(trainer.state())
    for step in range(1, total_steps + 1):
        idx = sampler.indices(step)
        loss = trainer.train_step(step, idx)
        if pot.record_step(idx, loss):
            pot.commit(trainer.state())
    manifest = pot.finish(trainer.state())

Every k steps it writes checkpoint i (weights, optimizer state, RNG state) and segment i's
data indices into `<job dir>/pot/`, and commits their hashes as Merkle leaf i; `finish`
writes `manifest.json` with the leaves and the root the worker attests.

After every checkpoint it also rewrites `prefix.json`: the manifest of the checkpoints
committed so far, whose files are all on disk. A worker uploads it with the files as it
goes, so when its lease ends early the next provider can `resume` from the last committed
checkpoint (`pot.harness.resume`), and the finished proof's first leaves are exactly the
prefix's (`pot.manifest.check_resumed`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import numpy as np

from pot import env
from pot.indices import SegmentIndices
from pot.manifest import (
    MANIFEST_NAME,
    PREFIX_NAME,
    Leaf,
    Manifest,
    ProofError,
    indices_path,
    optimizer_path,
    rng_bytes,
    rng_path,
    state_hash,
    weights_path,
)
from pot.seeds import derive_data_seed
from pot.tensors import (
    check_arrays,
    decimal_string,
    l2_norm_of_difference,
    tensors_hash,
    write_tensors,
)
from pot.trainer import TrainingState

POT_SUBDIR = "pot"


class ProofOfTraining:
    """Records one training run's proof. Not thread-safe: call it from the training loop.

    Checkpoint files are hashed and written by one background thread (SHA-256 and file
    writes release the GIL), so the training loop only pays for copying the state; at most
    one checkpoint is in flight, which bounds the extra memory to one copy of the state.
    """

    def __init__(self, pot_dir: Path, *, steps_per_checkpoint: int, data_seed: int) -> None:
        if steps_per_checkpoint < 1:
            raise ValueError("steps_per_checkpoint must be >= 1")
        self.pot_dir = Path(pot_dir)
        if (self.pot_dir / MANIFEST_NAME).exists():
            raise ProofError(
                f"{self.pot_dir} already holds a finished proof; refusing to overwrite"
            )
        self.pot_dir.mkdir(parents=True, exist_ok=True)
        self.steps_per_checkpoint = steps_per_checkpoint
        self.data_seed = data_seed
        self._pending: list[Future[Leaf]] = []
        self._written: list[Leaf] = []  # appended by the writer thread, in order
        self._step = 0
        self._segment = SegmentIndices()
        self._segment_steps = 0
        self._last_loss: float | None = None
        self._previous: dict[str, np.ndarray] | None = None
        self._writer: ThreadPoolExecutor | None = None
        self._finished = False

    @classmethod
    def for_job(
        cls, job_dir: Path, *, job_seed: int, nonce: bytes, steps_per_checkpoint: int
    ) -> ProofOfTraining:
        return cls(
            Path(job_dir) / POT_SUBDIR,
            steps_per_checkpoint=steps_per_checkpoint,
            data_seed=derive_data_seed(job_seed, nonce),
        )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ProofOfTraining:
        """Build from the variables the worker sets for a job (see `pot.env`)."""
        job = env.JobEnv.read(os.environ if environ is None else environ)
        return cls.for_job(
            job.job_dir,
            job_seed=job.job_seed,
            nonce=job.nonce,
            steps_per_checkpoint=job.steps_per_checkpoint,
        )

    @property
    def step(self) -> int:
        return self._step

    @property
    def leaves(self) -> tuple[Leaf, ...]:
        """The committed leaves so far (waits for checkpoints still being written)."""
        return tuple(f.result() for f in self._pending)

    def start(self, state: TrainingState) -> int:
        """Commit the initial checkpoint (step 0). Call once, before the first step."""
        if self._pending:
            raise ProofError("start() was already called")
        return self._commit(state, segment=None, loss=None)

    def resume(self, prefix: Manifest, at: int, state: TrainingState) -> int:
        """Continue a proof another run committed up to checkpoint `at` of `prefix`, from
        `state` (that checkpoint, loaded); call instead of `start`. The leaves 0..`at` are
        the prefix's, unchanged, so the finished manifest chains to it; `state`'s weights
        must be the ones leaf `at` commits (ProofError otherwise: a forged checkpoint)."""
        if self._pending:
            raise ProofError("resume() must come before start() or any step")
        if not 0 <= at < len(prefix.leaves):
            raise ProofError(f"checkpoint {at} is not in the prefix (0..{prefix.segments})")
        if (prefix.steps_per_checkpoint, prefix.data_seed) != (
            self.steps_per_checkpoint,
            self.data_seed,
        ):
            raise ProofError(
                "the prefix was recorded with another checkpoint interval or data seed"
            )
        if tensors_hash(state.params) != prefix.leaves[at].weights:
            raise ProofError(
                f"the state resumed from is not checkpoint {at} of the prefix: its weights "
                "differ from the committed ones"
            )
        for leaf in prefix.leaves[: at + 1]:
            done: Future[Leaf] = Future()
            done.set_result(leaf)
            self._pending.append(done)
            self._written.append(leaf)
        self._step = prefix.leaves[at].step
        self._previous = {name: np.array(a, copy=True) for name, a in state.params.items()}
        return at

    def record_step(self, indices: np.ndarray | Iterable[int], loss: float) -> bool:
        """Record one optimiser step; True when a checkpoint is due (call `commit` then)."""
        if not self._pending:
            raise ProofError("call start() with the initial state before recording steps")
        if self._finished:
            raise ProofError("the proof is finished")
        if self._segment_steps >= self.steps_per_checkpoint:
            raise ProofError(f"checkpoint due at step {self._step} was not committed")
        self._step += 1
        self._segment.add(self._step, np.asarray(indices))
        self._segment_steps += 1
        self._last_loss = float(loss)
        return self._segment_steps == self.steps_per_checkpoint

    def commit(self, state: TrainingState) -> int:
        """Commit the checkpoint that ends the current segment; returns its index."""
        if self._segment_steps == 0:
            raise ProofError("no steps recorded since the last checkpoint")
        assert self._last_loss is not None
        index = self._commit(state, segment=self._segment, loss=decimal_string(self._last_loss))
        self._segment = SegmentIndices()
        self._segment_steps = 0
        return index

    def maybe_commit(
        self, indices: np.ndarray, loss: float, state: Callable[[], TrainingState]
    ) -> None:
        """`record_step` + `commit` when due; `state` is only called at checkpoints."""
        if self.record_step(indices, loss):
            self.commit(state())

    def finish(self, state: TrainingState) -> Manifest:
        """Commit a trailing partial segment if any, write the manifest, return it."""
        if self._finished:
            raise ProofError("finish() was already called")
        if not self._pending:
            raise ProofError("call start() before finish()")
        if self._segment_steps:
            self.commit(state)
        try:
            leaves = self.leaves
        finally:
            self._close()
        manifest = Manifest(
            steps_per_checkpoint=self.steps_per_checkpoint,
            data_seed=self.data_seed,
            leaves=leaves,
        )
        manifest.save(self.pot_dir)
        self._finished = True
        return manifest

    def _close(self) -> None:
        if self._writer is not None:
            self._writer.shutdown(wait=True)
            self._writer = None

    def _commit(
        self, state: TrainingState, *, segment: SegmentIndices | None, loss: str | None
    ) -> int:
        index = len(self._pending)
        if self._pending:
            # One checkpoint in flight at most; it had a whole segment to finish. This also
            # surfaces a failed write (disk full) at the next checkpoint.
            self._pending[-1].result()
        check_arrays(state.params)
        check_arrays(state.optimizer)
        # Snapshot now: training mutates the arrays in place once we return.
        params = {name: np.array(a, copy=True) for name, a in state.params.items()}
        optimizer = {name: np.array(a, copy=True) for name, a in state.optimizer.items()}
        rng = rng_bytes(state.rng)
        previous, self._previous = self._previous, params
        if self._writer is None:
            self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pot-writer")
        self._pending.append(
            self._writer.submit(
                self._write, index, self._step, params, optimizer, rng, previous, segment, loss
            )
        )
        return index

    def _write(
        self,
        index: int,
        step: int,
        params: dict[str, np.ndarray],
        optimizer: dict[str, np.ndarray],
        rng: bytes,
        previous: dict[str, np.ndarray] | None,
        segment: SegmentIndices | None,
        loss: str | None,
    ) -> Leaf:
        data = None
        if segment is not None:
            segment.write(indices_path(self.pot_dir, index))
            data = segment.hexdigest()
        weights = write_tensors(weights_path(self.pot_dir, index), params)
        optim = write_tensors(optimizer_path(self.pot_dir, index), optimizer)
        path = rng_path(self.pot_dir, index)
        path.with_name(path.name + ".tmp").write_bytes(rng)
        path.with_name(path.name + ".tmp").replace(path)
        norm = None
        if previous is not None:
            norm = decimal_string(l2_norm_of_difference(params, previous))
        leaf = Leaf(
            step=step,
            weights=weights,
            state=state_hash(optim, rng),
            data=data,
            loss=loss,
            update_norm=norm,
        )
        # One writer thread: the leaves before this one are written and listed already.
        self._written.append(leaf)
        Manifest(
            steps_per_checkpoint=self.steps_per_checkpoint,
            data_seed=self.data_seed,
            leaves=tuple(self._written),
        ).save(self.pot_dir, name=PREFIX_NAME)
        return leaf
