"""A multi-node job's training code: a tiny MLP under torch DistributedDataParallel.

Runs as the last command of a multi-node job, which the worker starts under torchrun (see
docs/topologies.md); gloo on CPU, NCCL when the node leased GPUs.

    torchrun ... --no-python python3 -m pot.examples.torch_ddp --steps 30

A cluster's processes run their own loop (the harness is single-process), so this job
calls the recorder directly; when the spec declares a schedule, its steps, data set size
and batch size override the flags, and the first process's proof follows it.

Every process trains on its own batches (drawn from its node's claim nonce, so no two nodes
see the same order) and DDP averages the gradients, so every replica holds the same weights
after every step. The first process of each node records that node's proof of training in
`<job dir>/pot/`, writes `results/metrics.json` and, when the worker sets
PROOFNET_CHECKPOINT_OUT, the final weights: identical bytes on every node, which is what
each node's attestation names as its output and what the oracle checks they agree on.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

import numpy as np

from pot import env
from pot.recorder import ProofOfTraining
from pot.seeds import BatchSampler, derive_data_seed
from pot.tensors import decimal_string, write_tensors
from pot.trainer import TrainingState


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="torch_ddp", description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--examples", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=0.1)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel

    args = _parser().parse_args(argv)
    try:
        job = env.JobEnv.read(os.environ)
        unit = env.UnitEnv.read(os.environ)
    except env.JobEnvError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    dist.init_process_group(backend)
    try:
        if job.schedule is not None:
            args.steps = job.schedule.total_steps
            args.examples = job.schedule.dataset_size
            args.batch_size = job.schedule.batch_size
        rank, world = dist.get_rank(), dist.get_world_size()
        print(f"node {unit.node_rank}: process {rank} of {world} ({backend})", flush=True)
        torch.manual_seed(job.job_seed)
        gen = torch.Generator().manual_seed(job.job_seed)
        x = torch.randn(args.examples, 8, generator=gen, dtype=torch.float64)
        teacher = torch.randn(8, 2, generator=gen, dtype=torch.float64)
        y = torch.argmax(torch.tanh(x @ teacher), dim=1)
        model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 2)).double()
        ddp = DistributedDataParallel(model)  # broadcasts node 0's initial weights
        optimizer = torch.optim.SGD(ddp.parameters(), lr=args.lr)
        loss_fn = nn.CrossEntropyLoss()

        def state() -> TrainingState:
            return TrainingState(
                params={n: p.detach().cpu().numpy().copy() for n, p in model.named_parameters()}
            )

        recorder = None
        seed = derive_data_seed(job.job_seed, job.nonce)
        if local_rank == 0:
            recorder = ProofOfTraining.for_job(
                job.job_dir,
                job_seed=job.job_seed,
                nonce=job.nonce,
                steps_per_checkpoint=job.steps_per_checkpoint,
            )
            recorder.start(state())
        else:
            seed = int(np.random.SeedSequence(seed, spawn_key=(local_rank,)).generate_state(1)[0])
        sampler = BatchSampler(seed, args.examples, args.batch_size)
        for step in range(1, args.steps + 1):
            idx = sampler.indices(step)
            optimizer.zero_grad()
            loss = loss_fn(ddp(x[torch.from_numpy(idx)]), y[torch.from_numpy(idx)])
            loss.backward()
            optimizer.step()
            if recorder is not None and recorder.record_step(idx, float(loss.item())):
                recorder.commit(state())
            if step % 10 == 0:
                print(f"node {unit.node_rank}: step {step}/{args.steps}", flush=True)
        if recorder is not None:
            manifest = recorder.finish(state())
            with torch.no_grad():
                accuracy = float((model(x).argmax(dim=1) == y).double().mean())
            metrics = {
                "accuracy": decimal_string(accuracy),
                "final_loss": manifest.leaves[-1].loss,
                "steps": manifest.total_steps,
            }
            results = job.job_dir / "results"
            results.mkdir(parents=True, exist_ok=True)
            (results / "metrics.json").write_text(json.dumps(metrics, sort_keys=True) + "\n")
            if unit.checkpoint_out is not None:
                digest = write_tensors(unit.checkpoint_out, state().params)
                print(f"node {unit.node_rank}: checkpoint {digest}", flush=True)
        dist.barrier()
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
