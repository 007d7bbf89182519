"""The job spec: what a submitter asks for, fixed before any worker sees it.

Everything that determines the work (code, image, data, the trainer and its configuration,
seed, proof-of-training parameters, price) is in here, so `job_id` commits to all of it:

    job_id = SHA-256(b"proofnet/jobspec/v1" || canonical JSON of the spec)

The domain tag ends in a fixed string and canonical JSON always starts with "{", so the
concatenation cannot be read two ways.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Final, Literal

from pydantic import AfterValidator, Field, ValidationError, model_validator

from pot.env import JobEnv, JobEnvError, check_trainer_ref, encode_config
from pot.schedule import Schedule, ScheduleError, derive_schedule
from proofnet.messages.canonical import CanonicalJSONError, canonical_json, parse_canonical_json
from proofnet.messages.destinations import (
    WEBHOOK_KINDS,
    ApiDestination,
    Destinations,
    S3PresignedDestination,
    WebhookDestination,
)
from proofnet.messages.fields import (
    Digest,
    Frozen,
    Hex40,
    NonNegInt,
    PosInt,
    TupleOf,
    Version1,
)
from proofnet.messages.result_paths import declared_by
from proofnet.messages.shards import DataShard
from proofnet.messages.storage import MAX_NTX, StoragePlacement
from proofnet.messages.topology import MultiNode, Relay, Topology, total_amount

JOB_ID_DOMAIN = b"proofnet/jobspec/v1"
# Fields of `proof` left out of the canonical encoding when unset (added with the harness).
_PROOF_OPTIONAL = ("trainer", "config", "schedule")
COMMAND_HASH_DOMAIN = b"proofnet/commands/v1"
JOBSPEC_VERSION = 1
MAX_SEED = 2**64 - 1

Framework = Literal["pytorch", "tensorflow", "numpy"]
ResultKind = Literal["json", "csv", "model"]


class JobSpecError(ValueError):
    """A job spec could not be parsed or is invalid; the message says which field and why."""


# Docker reference grammar (distribution/reference), restricted to digest-pinned references:
# [registry[:port]/]path[:tag]@sha256:<64 hex>.
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_IMAGE = re.compile(
    rf"(?:[A-Za-z0-9.-]+(?::[0-9]+)?/)?{_COMPONENT}(?:/{_COMPONENT})*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?@sha256:[0-9a-f]{64}"
)
_REPO_URL = re.compile(r"(?:https|ssh|git)://[^\s/]+/\S+")


def _image(value: str) -> str:
    if not _IMAGE.fullmatch(value):
        raise ValueError(
            "image must be pinned by digest: 'name@sha256:<64 lowercase hex>' "
            f"(a tag alone is mutable), got {value[:120]!r}"
        )
    return value


def _repo_url(value: str) -> str:
    if len(value) > 2048 or not _REPO_URL.fullmatch(value):
        raise ValueError(f"repo_url must be an https://, ssh:// or git:// URL, got {value[:120]!r}")
    return value


def _result_glob(value: str) -> str:
    parts = value.split("/")
    if (
        not value
        or value.startswith("/")
        or "\\" in value
        or "\x00" in value
        or any(p in ("", ".", "..") for p in parts)
    ):
        raise ValueError(
            "result path must be a relative glob inside the work dir "
            f"(no leading '/', no '.' or '..' segments, no backslashes), got {value[:120]!r}"
        )
    return value


def _argv(value: tuple[str, ...]) -> tuple[str, ...]:
    if not value:
        raise ValueError("each command must be a non-empty argv list")
    if any("\x00" in arg for arg in value):
        raise ValueError("command arguments cannot contain NUL bytes")
    return value


ImageRef = Annotated[str, AfterValidator(_image)]
RepoUrl = Annotated[str, AfterValidator(_repo_url)]
ResultGlob = Annotated[str, AfterValidator(_result_glob)]
Argv = Annotated[TupleOf[str], AfterValidator(_argv)]


class ModelSource(Frozen):
    """The training code: a repository pinned to one commit."""

    repo_url: RepoUrl
    commit: Hex40


class Resources(Frozen):
    gpus: Annotated[int, Field(ge=0, le=64)]
    gpu_memory_mb: NonNegInt
    cpus: Annotated[int, Field(ge=1, le=1024)]
    ram_mb: PosInt
    disk_mb: PosInt
    max_duration_s: PosInt

    @model_validator(mode="after")
    def _gpu_memory_needs_gpu(self) -> Resources:
        if self.gpus == 0 and self.gpu_memory_mb != 0:
            raise ValueError("gpu_memory_mb must be 0 when gpus is 0")
        return self


class ResultSpec(Frozen):
    """Files to return: a glob relative to the job's work dir, and how to treat them."""

    path: ResultGlob
    kind: ResultKind


# An auction's bidding window: long enough for workers polling every few seconds to see the
# job, short enough that a job does not wait a week for its price.
MIN_BID_WINDOW_S: Final = 30
MAX_BID_WINDOW_S: Final = 7 * 24 * 3600


class FixedPrice(Frozen):
    """One price for the whole job, in NTX base units."""

    kind: Literal["fixed"] = "fixed"
    amount: PosInt


class RateCardPrice(Frozen):
    """Pay per metered use under a published rate card, capped at `max_amount`.

    The rate card is referenced by the SHA-256 of its document so its terms cannot change
    after the job is signed; `max_amount` is what the escrow locks.
    """

    kind: Literal["rate_card"] = "rate_card"
    rate_card: Digest
    max_amount: PosInt


class AuctionPrice(Frozen):
    """A sealed-bid reverse auction among providers whose hardware fits
    (`proofnet.messages.auction`): the lowest bid at or under `reserve` wins and is paid the
    second-lowest bid (the reserve when it bid alone). `reserve` is what the escrow locks;
    bids are taken for `bid_window_s` after the job is posted, then revealed."""

    kind: Literal["auction"] = "auction"
    reserve: PosInt
    bid_window_s: Annotated[int, Field(ge=MIN_BID_WINDOW_S, le=MAX_BID_WINDOW_S)]


Pricing = Annotated[FixedPrice | RateCardPrice | AuctionPrice, Field(discriminator="kind")]


def _trainer_ref(value: str) -> str:
    try:
        return check_trainer_ref(value)
    except JobEnvError as exc:
        raise ValueError(str(exc)) from None


class FrozenConfig(dict[str, Any]):
    """A trainer's configuration, immutable like the rest of the spec (nested objects are
    frozen too, arrays become tuples); it hashes by its canonical encoding."""

    def _refuse(self, *args: object, **kwargs: object) -> None:
        raise TypeError("a job spec is immutable")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _refuse  # type: ignore[assignment]
    __ior__ = _refuse  # type: ignore[assignment]

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(canonical_json(self))

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenConfig, (dict(self),))


def _freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return FrozenConfig({k: _freeze(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return tuple(_freeze(v) for v in value)
    return value


def _config(value: dict[str, Any]) -> FrozenConfig:
    try:
        encode_config(value)
    except JobEnvError as exc:
        raise ValueError(str(exc)) from None
    frozen: FrozenConfig = _freeze(value)
    return frozen


TrainerRef = Annotated[str, AfterValidator(_trainer_ref)]
TrainerConfig = Annotated[dict[str, Any], AfterValidator(_config)]


class TrainingSchedule(Frozen):
    """What the job trains: `steps` optimiser steps, or `epochs` passes over `dataset_size`
    examples in batches of `batch_size` (exactly one of steps and epochs). The data order of
    every step is drawn from the seed over `dataset_size` indices (`pot.seeds`)."""

    steps: PosInt | None = None
    epochs: PosInt | None = None
    dataset_size: PosInt
    batch_size: PosInt

    @model_validator(mode="after")
    def _steps_or_epochs(self) -> TrainingSchedule:
        if (self.steps is None) == (self.epochs is None):
            raise ValueError("declare exactly one of steps and epochs")
        return self


class ProofParams(Frozen):
    """Proof-of-training parameters (see docs/jobs.md and notes/compute.md)."""

    # The trainer the harness drives ("module:Class" in the repository), its configuration
    # (a JSON object; numbers other than integers as decimal strings) and the schedule the
    # proof must commit. A job without a schedule cannot be verified by any oracle.
    trainer: TrainerRef | None = None
    config: TrainerConfig | None = None
    schedule: TrainingSchedule | None = None
    # A checkpoint commitment every k optimiser steps; segment = k steps.
    steps_per_checkpoint: Annotated[int, Field(ge=1, le=1_000_000)] = 100
    # Segments re-executed, drawn at random from all of them, on top of the top-2 by
    # committed update norm.
    spot_checks: Annotated[int, Field(ge=1, le=1000)] = 3
    # Relative L2 distance (parts per million) accepted when a replay runs on hardware other
    # than the worker's; replays on the same GPU model and image must match bitwise.
    tolerance_ppm: Annotated[int, Field(ge=0, le=1_000_000)] = 0

    @model_validator(mode="after")
    def _trainer_needs_schedule(self) -> ProofParams:
        if self.trainer is not None and self.schedule is None:
            raise ValueError("a trainer needs a schedule: the harness trains what it declares")
        if self.config is not None and self.trainer is None:
            raise ValueError("config is the trainer's configuration: it needs a trainer")
        if self.schedule is not None:
            self.resolved_schedule()  # refuses schedules no harness could train or check
        return self

    def resolved_schedule(self) -> Schedule | None:
        """The schedule as the harness runs it (`pot.schedule.derive_schedule`)."""
        s = self.schedule
        if s is None:
            return None
        try:
            return derive_schedule(
                steps=s.steps,
                epochs=s.epochs,
                dataset_size=s.dataset_size,
                batch_size=s.batch_size,
                steps_per_checkpoint=self.steps_per_checkpoint,
            )
        except ScheduleError as exc:
            raise ValueError(f"schedule: {exc}") from None


class JobSpec(Frozen):
    version: Version1 = JOBSPEC_VERSION
    model: ModelSource
    framework: Framework
    image: ImageRef
    # Run in order before the harness trains `proof.trainer` (none is needed then); a job
    # without a trainer trains in them.
    commands: Annotated[TupleOf[Argv], Field(max_length=64)]
    resources: Resources
    data: Annotated[TupleOf[DataShard], Field(max_length=10_000)] = ()
    results: Annotated[TupleOf[ResultSpec], Field(max_length=256)] = ()
    pricing: Pricing
    seed: Annotated[int, Field(ge=0, le=MAX_SEED)]
    egress: bool = False
    proof: ProofParams = ProofParams()
    # Absent: one unit of work for one worker. Present: see proofnet.messages.topology.
    topology: Topology | None = None
    # NTX base units the provider must hold bonded (chain.contracts.bond) to claim the job;
    # absent: none. A fraud proven against its attestation is slashed from that bond.
    min_bond: PosInt | None = None
    # Where the results go (proofnet.messages.destinations); absent: the API's store only.
    destinations: Destinations = ()
    # Where the job's data, results and checkpoints are kept beyond the API's store
    # (proofnet.messages.storage): absent, nowhere else.
    storage: StoragePlacement | None = None

    @model_validator(mode="after")
    def _something_runs(self) -> JobSpec:
        if not self.commands and self.proof.trainer is None:
            raise ValueError("commands is empty and proof.trainer is not set: nothing would run")
        # A multi-node job's trainer is the data-parallel one verifiers replay a node's
        # segments with (`python -m pot replay-node`); the nodes' processes run their own
        # loop (`pot.cluster_harness.train_node`) in the commands.
        multi = isinstance(self.topology, MultiNode)
        if multi and self.proof.trainer is not None and not self.commands:
            raise ValueError(
                "a multi_node job's processes run their own loop: its commands train "
                "(pot.cluster_harness.train_node); proof.trainer only names the "
                "data-parallel trainer verifiers replay with"
            )
        return self

    @model_validator(mode="after")
    def _destinations_fit(self) -> JobSpec:
        globs = [r.path for r in self.results]
        if self.destinations and self.topology is not None:
            raise ValueError("destinations are for single-unit jobs (no topology) for now")
        if sum(isinstance(d, ApiDestination) for d in self.destinations) > 1:
            raise ValueError("destinations names the API store twice")
        for i, dest in enumerate(self.destinations):
            if isinstance(dest, WebhookDestination) and not any(
                r.kind in WEBHOOK_KINDS for r in self.results
            ):
                raise ValueError(
                    f"destinations[{i}] is a webhook, which receives JSON and CSV results "
                    "inline, but the spec declares none"
                )
            if isinstance(dest, S3PresignedDestination):
                bad = [p.name for p in dest.puts if declared_by(globs, p.name) is None]
                if bad:
                    raise ValueError(
                        f"destinations[{i}].puts names files no result glob declares: {bad}"
                    )
        return self

    @model_validator(mode="after")
    def _storage_fits(self) -> JobSpec:
        if self.storage is None:
            return self
        if "data" in self.storage.kinds and not self.data:
            raise ValueError("storage.kinds names 'data' but the spec has no data shards")
        if "results" in self.storage.kinds and not self.results:
            raise ValueError("storage.kinds names 'results' but the spec declares no results")
        if self.compute_amount + self.storage.budget > MAX_NTX:
            raise ValueError(
                f"the compute price plus storage.budget exceeds {MAX_NTX}, the most an "
                "escrow can hold"
            )
        return self

    @model_validator(mode="after")
    def _topology_fits(self) -> JobSpec:
        topo = self.topology
        if topo is None:
            return self
        if not isinstance(self.pricing, FixedPrice):
            raise ValueError("a job with a topology is priced per unit: pricing must be 'fixed'")
        total = total_amount(topo)
        if self.pricing.amount != total:
            raise ValueError(
                f"pricing.amount must equal what paying every unit costs ({total}), "
                f"got {self.pricing.amount}"
            )
        if isinstance(topo, Relay):
            for i, stage in enumerate(topo.stages):
                bad = [s for s in stage.shards if s >= len(self.data)]
                if bad:
                    raise ValueError(
                        f"topology.stages[{i}].shards {bad} are not indices into data "
                        f"({len(self.data)} shards)"
                    )
        elif isinstance(topo, MultiNode) and topo.nproc_per_node > max(1, self.resources.gpus):
            raise ValueError("topology.nproc_per_node exceeds the GPUs each node leases")
        return self

    def canonical_bytes(self) -> bytes:
        body = self.model_dump(mode="python")
        if body["topology"] is None:
            # Single-unit specs keep the encoding (and job ids) they had before topologies.
            del body["topology"]
        evaluation = (body.get("topology") or {}).get("evaluation")
        if evaluation is not None and evaluation["tolerance"] is None:
            del evaluation["tolerance"]  # likewise specs from before the stated tolerance
        if body["min_bond"] is None:
            del body["min_bond"]  # specs without a bond keep their encoding and job ids
        if not body["destinations"]:
            del body["destinations"]  # specs without destinations keep theirs too
        if body["storage"] is None:
            del body["storage"]  # and specs without storage placement theirs
        # ... and specs without a harness the one they had before it.
        for name in _PROOF_OPTIONAL:
            if body["proof"][name] is None:
                del body["proof"][name]
        if body["proof"].get("schedule") is not None:
            schedule = body["proof"]["schedule"]
            for name in ("steps", "epochs"):
                if schedule[name] is None:
                    del schedule[name]
        return canonical_json(body)

    @property
    def schedule(self) -> Schedule | None:
        """The training schedule the proof must commit (None: the spec declares none)."""
        return self.proof.resolved_schedule()

    def job_env(self, job_dir: Path, nonce: bytes) -> JobEnv:
        """The proof-of-training environment of this job's commands and harness (`pot.env`)
        under claim nonce `nonce`: what the worker sets, and a verifier replaying it."""
        return JobEnv(
            job_dir=job_dir,
            job_seed=self.seed,
            nonce=nonce,
            steps_per_checkpoint=self.proof.steps_per_checkpoint,
            schedule=self.schedule,
            trainer=self.proof.trainer,
            config=dict(self.proof.config or {}),
        )

    @property
    def job_id(self) -> str:
        return job_id_of(self.canonical_bytes())

    @property
    def image_digest(self) -> str:
        """`sha256:<hex>`: what the attestation's `image_digest` must equal."""
        return self.image.rsplit("@", 1)[1]

    @property
    def command_hash(self) -> str:
        return command_hash(self.commands)

    @property
    def max_amount(self) -> int:
        """The most this job can cost, i.e. what the escrow must lock: the compute price
        and, when the spec places storage, the storage budget beside it."""
        storage = 0 if self.storage is None else self.storage.budget
        return self.compute_amount + storage

    @property
    def compute_amount(self) -> int:
        """The most the compute can cost (what a compute claim is capped at)."""
        if isinstance(self.pricing, FixedPrice):
            return self.pricing.amount
        if isinstance(self.pricing, AuctionPrice):
            return self.pricing.reserve
        return self.pricing.max_amount

    @classmethod
    def from_canonical(cls, data: bytes) -> JobSpec:
        """Parse bytes that must be exactly the canonical encoding (what `job_id` hashed)."""
        try:
            return cls.model_validate(parse_canonical_json(data))
        except (CanonicalJSONError, ValidationError) as exc:
            raise JobSpecError(f"invalid job spec: {exc}") from exc

    @classmethod
    def from_json(cls, data: bytes | str) -> JobSpec:
        """Parse any JSON text (for humans' files); floats and unknown fields are refused."""
        try:
            return cls.model_validate_json(data, strict=True)
        except ValidationError as exc:
            raise JobSpecError(f"invalid job spec: {exc}") from exc

    @classmethod
    def from_dict(cls, obj: dict[str, Any]) -> JobSpec:
        try:
            return cls.model_validate(obj)
        except ValidationError as exc:
            raise JobSpecError(f"invalid job spec: {exc}") from exc


def job_id_of(canonical: bytes) -> str:
    return hashlib.sha256(JOB_ID_DOMAIN + canonical).hexdigest()


def command_hash(commands: Sequence[Sequence[str]]) -> str:
    """SHA-256 of the commands as canonical JSON; what the worker attests it ran."""
    argvs = [list(argv) for argv in commands]
    return hashlib.sha256(COMMAND_HASH_DOMAIN + canonical_json(argvs)).hexdigest()
