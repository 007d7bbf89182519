"""Verification units: an oracle's signed task for a drawn verifier, and the verifier's
signed report of what its replay computed.

A spot check of a proof of training is work a verifier does, never an oracle: the oracle
checks the manifest against the schedule, draws the segments and a verifier with its own
signature over the attestation (`draw_signature`, randomness the provider could not know
when it signed), and signs a `VerificationTask`. The API relays the task to the verifier
(a registered worker other than the provider, paid elsewhere) and the verifier's
`VerificationReport` back; it can forge neither (no oracle or verifier key). The verifier
replays the task's segments with the network's harness (`python -m pot replay`) in the
job's own image and reports the hashes it computed; oracles compare them with the
commitments (`oracle.verification.verifiers`).

The provider's first segment (segment 1, or the one after the checkpoint a resumed attempt
started from) is always among a task's segments, its first, and is replayed twice
(`repeat`): two replays of the same segment from the same checkpoint that disagree show the
job's code is not deterministic, which is the job's fault, not the provider's.

A task has a `kind`. "replay" is the spot check above. "early" replays the first segment
of a whole job that is still training, from the committed prefix its worker uploaded
(`pot/prefix.json`, the task's first file; `attestation` is then `early_subject`, as no
attestation exists yet), so job code that cannot be replayed is found early. "claim"
replays drawn segments of a lost attempt of a resumed job from the prefix that attempt
committed (`pot/prefix.json`, the task's first file; `attestation` is the lost attempt's
signed claim for its segments, `oracle.verification.lost_attempts`). A unit of a topology job that trains
nothing is recomputed instead (docs/topologies.md): "aggregate" runs the job's aggregation
command on the unit's input checkpoints (`inputs`, the task's `files` in the same order)
and the report carries the SHA-256 of the checkpoint it wrote (`output_hash`); "eval" runs
the job's evaluation command on the evaluated checkpoint and the held-out data and the
report carries the metric it computed (`metric`). Oracles compare those with what the
provider attested (`oracle.verification.verifiers`). "node" replays drawn segments of a
cluster node's proof (`python -m pot replay-node`: every rank's contribution recomputed from
the opening checkpoint) and the report carries what it computed per segment
(`node_results`); oracles judge it against every node's commitments
(`oracle.verification.cluster_checks`).

Both messages sign the canonical JSON of their fields under a domain tag of their own.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Mapping
from typing import Annotated, Any, Literal

from nacl.exceptions import BadSignatureError
from nacl.signing import SigningKey, VerifyKey
from pydantic import Field, ValidationError

from proofnet.messages.canonical import canonical_json
from proofnet.messages.fields import DecimalStr, Frozen, Hex64, NonNegInt, PosInt, TupleOf
from proofnet.messages.result_paths import ResultNameError, check_result_name

TASK_DOMAIN = "proofnet/verification-task/v1"
REPORT_DOMAIN = "proofnet/verification-report/v1"
MAX_SEGMENTS = 256
MAX_FILES = 1024
MAX_MESSAGE = 2000
MAX_ROUNDS = 16
# The segment a task of a proof from step 0 replays twice: the first, from the trainer's
# own checkpoint 0 (a resumed attempt's task repeats its own first segment instead).
FIRST_SEGMENT = 1
_NONCE = r"[0-9a-f]{16,128}"
_SIGNATURE = r"[0-9a-f]{128}"
_DEVICE_CLASS = r"[A-Za-z0-9][A-Za-z0-9 ._()/-]{0,127}"
# A device class for jobs that lease no GPU: any worker can replay them.
CPU = "cpu"

# What a verifier's replay ended in: the harness's statuses, and "withheld" when the
# verifier could not get the proof files the task names (missing, or sealed and no key).
ReportStatus = Literal["passed", "failed", "error", "proof_error", "usage_error", "withheld"]


# What a task asks: replay proof-of-training segments, replay the first segment of a run
# still training from its committed prefix ("early"), replay the segments a lost attempt of
# a resumed job claims from its committed prefix ("claim"), replay a cluster node's segments
# with every rank's contribution ("node"), or recompute a unit that trains nothing.
TaskKind = Literal["replay", "aggregate", "eval", "early", "node", "claim"]
TASK_KINDS: tuple[str, ...] = ("replay", "aggregate", "eval", "early", "node", "claim")
REPLAY_KINDS: tuple[str, ...] = ("replay", "early", "node", "claim")
# Replayed from the committed prefix (`--prefix`), which may commit fewer segments.
PREFIX_KINDS: tuple[str, ...] = ("early", "claim")
# A cluster has at most this many ranks, a segment at most this many steps in a node report.
MAX_RANKS = 64
MAX_NODE_STEPS = 100_000
# The committed prefix an early task replays from (`pot.manifest.PREFIX_NAME`, under pot/).
PREFIX_FILE = "pot/prefix.json"
EARLY_DOMAIN = "proofnet/early-check/v1"
MAX_INPUTS = 64


# Whose fault a verdict is: the provider's (its proof does not hold) or the job's (its code
# cannot be loaded or does not replay deterministically); None when nobody is at fault.
Fault = Literal["provider", "job"]


class VerificationError(ValueError):
    """A task or report is malformed, or its signature or signer does not hold."""


def _verify(key_hex: str, signed: dict[str, Any], signature_hex: str, what: str) -> None:
    try:
        VerifyKey(bytes.fromhex(key_hex)).verify(
            canonical_json(signed), bytes.fromhex(signature_hex)
        )
    except (BadSignatureError, ValueError) as e:
        raise VerificationError(f"the {what}'s signature does not verify") from e


class VerificationTask(Frozen):
    job_id: Hex64
    # The lease whose proof is checked (the nonce revealed when it was claimed).
    nonce: Annotated[str, Field(pattern=_NONCE)]
    # The unit of a topology job (a relay stage), or None for a single-unit job.
    unit: Annotated[int, Field(ge=0, le=10_000)] | None = None
    # The attestation checked (its leaf hash) and the proof's root it names.
    attestation: Hex64
    pot_root: Hex64
    provider: Hex64
    verifier: Hex64
    device_class: Annotated[str, Field(pattern=_DEVICE_CLASS)]
    # Replay the drawn segments ("replay"), or recompute a unit ("aggregate", "eval").
    kind: TaskKind = "replay"
    # A replay's segments; empty for a recomputation.
    segments: Annotated[TupleOf[PosInt], Field(max_length=MAX_SEGMENTS)]
    # A recomputation's input checkpoints (SHA-256, in the unit's plan order), one per
    # file in `files`; empty for a replay.
    inputs: Annotated[TupleOf[Hex64], Field(max_length=MAX_INPUTS)] = ()
    # The proof files the replay reads (names as uploaded, e.g. "pot/ckpt-000001.weights").
    files: Annotated[TupleOf[str], Field(max_length=MAX_FILES)]
    # The oracle's signature over the attestation's draw message: seeds the segments and
    # the verifier drawn, checkable by anyone with the oracle's key.
    draw_signature: Annotated[str, Field(pattern=_SIGNATURE)]
    # The draw's round: a verifier that did not answer in time is replaced by the next
    # round's draw (among the candidates not drawn before).
    round: Annotated[int, Field(ge=0, le=MAX_ROUNDS)] = 0
    # The proof of a lease the oracle quorum stopped for the job's fault: its manifest may
    # commit the schedule's first segments only (replayed with `pot replay --partial`).
    partial: bool = False
    oracle_key: Hex64
    signature: Annotated[str, Field(pattern=_SIGNATURE)]

    def signed_part(self) -> dict[str, Any]:
        part = self.model_dump(mode="json", exclude={"signature"})
        part["segments"] = list(self.segments)
        part["files"] = list(self.files)
        part["inputs"] = list(self.inputs)
        if not self.partial:
            # Added later: a whole proof's task signs (and hashes) as it did before.
            part.pop("partial")
        return {"domain": TASK_DOMAIN, **part}

    @property
    def replays(self) -> bool:
        """Whether the task replays proof-of-training segments (not a recomputation)."""
        return self.kind in REPLAY_KINDS

    @property
    def digest(self) -> str:
        """Names the task (what a report answers)."""
        return hashlib.sha256(canonical_json(self.signed_part())).hexdigest()

    @classmethod
    def sign(cls, signing_key: SigningKey, **fields: Any) -> VerificationTask:
        draft = cls.from_json(
            {
                **fields,
                "oracle_key": bytes(signing_key.verify_key).hex(),
                "signature": "0" * 128,
            }
        )
        signature = signing_key.sign(canonical_json(draft.signed_part())).signature.hex()
        return draft.model_copy(update={"signature": signature})

    @classmethod
    def from_json(cls, obj: object) -> VerificationTask:
        try:
            task = cls.model_validate(obj)
        except ValidationError as e:
            raise VerificationError(f"the verification task is malformed: {e}") from e
        if task.replays and not task.segments:
            raise VerificationError("a verification task replays at least one segment")
        if task.replays and task.inputs:
            raise VerificationError("a replay task names no input checkpoints")
        if task.kind == "early":
            if task.unit is not None or task.segments != (FIRST_SEGMENT,):
                raise VerificationError("an early task replays a whole job's first segment only")
            if not task.files or task.files[0] != PREFIX_FILE:
                raise VerificationError(f"an early task reads the committed prefix {PREFIX_FILE}")
            if task.attestation != early_subject(task.job_id, task.nonce, task.pot_root):
                raise VerificationError("an early task names its lease's committed prefix")
        if task.kind == "node" and task.unit is None:
            raise VerificationError("a node task replays a node of a cluster (a unit)")
        if task.kind == "claim":
            if task.unit is not None:
                raise VerificationError("a claim task replays a lost attempt of a whole job")
            if not task.files or task.files[0] != PREFIX_FILE:
                raise VerificationError(f"a claim task reads the committed prefix {PREFIX_FILE}")
        if not task.replays:
            if task.unit is None:
                raise VerificationError(f"a task of kind {task.kind!r} recomputes a unit")
            if task.segments:
                raise VerificationError(f"a task of kind {task.kind!r} replays no segments")
            if not task.inputs or len(task.inputs) != len(task.files):
                raise VerificationError(
                    "a recomputation names one input checkpoint per file, at least one"
                )
        if sorted(set(task.segments)) != list(task.segments):
            raise VerificationError("a task's segments are distinct and in order")
        if task.verifier == task.provider:
            raise VerificationError("a provider never verifies its own proof")
        for name in task.files:
            try:
                check_result_name(name)
            except ResultNameError as e:
                raise VerificationError(f"file {name[:80]!r}: {e}") from e
        return task

    def to_json(self) -> dict[str, Any]:
        return {
            **self.model_dump(mode="json"),
            "segments": list(self.segments),
            "files": list(self.files),
            "inputs": list(self.inputs),
        }

    def lease_name(self, name: str) -> str:
        """The name under which the task's lease uploaded file `name`: a relay stage's
        uploads are named `units/<index>/<name>` to everyone but the stage's lease."""
        prefix = f"units/{self.unit}/"
        return name[len(prefix) :] if self.unit is not None and name.startswith(prefix) else name

    def verify(self, trusted_oracle_keys: Collection[str]) -> None:
        """Signed by one of `trusted_oracle_keys`; VerificationError otherwise."""
        if self.oracle_key not in trusted_oracle_keys:
            raise VerificationError(f"the task is signed by {self.oracle_key}, not an oracle")
        _verify(self.oracle_key, self.signed_part(), self.signature, "verification task")


class SegmentResult(Frozen):
    """What a replay of one segment computed (the harness's hashes and decimals)."""

    segment: PosInt
    weights_hash: Hex64
    update_norm: DecimalStr
    distance: DecimalStr

    @classmethod
    def from_harness(cls, obj: Mapping[str, Any]) -> SegmentResult:
        return cls.model_validate(
            {k: obj.get(k) for k in ("segment", "weights_hash", "update_norm", "distance")}
        )


class NodeStep(Frozen):
    """One step of a cluster replay: the digest of every rank's contribution, rank order."""

    step: PosInt
    digests: Annotated[TupleOf[Hex64], Field(max_length=MAX_RANKS)]


class NodeSegmentResult(Frozen):
    """What a cluster replay computed for one segment (`pot.cluster.SegmentReplay`): every
    rank's shard digest, every step's contribution digests in rank order, the weights."""

    segment: PosInt
    shards: Annotated[TupleOf[Hex64], Field(max_length=MAX_RANKS)]
    steps: Annotated[TupleOf[NodeStep], Field(max_length=MAX_NODE_STEPS)]
    weights_hash: Hex64

    def to_harness(self) -> dict[str, Any]:
        return {
            "segment": self.segment,
            "shards": list(self.shards),
            "steps": [[s.step, list(s.digests)] for s in self.steps],
            "weights_hash": self.weights_hash,
        }

    @classmethod
    def from_harness(cls, obj: Mapping[str, Any]) -> NodeSegmentResult:
        """From `python -m pot replay-node`'s result for one segment."""
        steps = obj.get("steps")
        return cls.model_validate(
            {
                "segment": obj.get("segment"),
                "shards": obj.get("shards"),
                "steps": [
                    {"step": s[0], "digests": s[1]}
                    for s in (steps if isinstance(steps, list) else [])
                    if isinstance(s, list) and len(s) == 2
                ],
                "weights_hash": obj.get("weights_hash"),
            }
        )


class VerificationReport(Frozen):
    task: Hex64  # the digest of the task answered
    job_id: Hex64
    verifier: Hex64
    status: ReportStatus
    message: Annotated[str, Field(max_length=MAX_MESSAGE)] = ""
    # The state the job's trainer builds from the job seed (None if it was not built).
    initial_weights_hash: Hex64 | None = None
    results: Annotated[TupleOf[SegmentResult], Field(max_length=MAX_SEGMENTS)] = ()
    # The first segment replayed a second time, from the same checkpoint.
    repeat: SegmentResult | None = None
    # Wall time of the drawn segments' replay (ms): bounds the payable GPU time of a
    # rate-card job by the committed steps (oracle.verification.metering).
    replay_ms: NonNegInt | None = None
    # Wall time of the first segment's repeat alone (ms), from a fresh container as the drawn
    # run: the difference takes the start-up out of the measured step time.
    repeat_ms: NonNegInt | None = None
    # A recomputation's answer: the SHA-256 of the checkpoint an "aggregate" task's command
    # wrote, or the metric value an "eval" task's command reported (the job's
    # `evaluation.metric`). None for a replay.
    output_hash: Hex64 | None = None
    metric: DecimalStr | None = None
    # Where the verifier's share of the verification fee goes (its registered payout
    # address; proofnet.messages.verification_fee). None earns no fee.
    payout_address: Annotated[str, Field(min_length=10, max_length=200)] | None = None
    # A "node" task's answer: what the cluster replay computed per drawn segment.
    node_results: Annotated[TupleOf[NodeSegmentResult], Field(max_length=MAX_SEGMENTS)] = ()
    signature: Annotated[str, Field(pattern=_SIGNATURE)]

    def signed_part(self) -> dict[str, Any]:
        part = self.model_dump(mode="json", exclude={"signature"})
        if not self.node_results:
            # Added later: other reports sign (and hash) as they did before.
            part.pop("node_results", None)
        else:
            part["node_results"] = [r.model_dump(mode="json") for r in self.node_results]
        if part.get("payout_address") is None:
            # Reports signed before the field existed still verify.
            part.pop("payout_address", None)
        if part["repeat_ms"] is None:
            # Added later: reports without it sign (and hash) as they did before.
            del part["repeat_ms"]
        part["results"] = [r.model_dump(mode="json") for r in self.results]
        return {"domain": REPORT_DOMAIN, **part}

    @property
    def digest(self) -> str:
        return hashlib.sha256(canonical_json(self.signed_part())).hexdigest()

    @classmethod
    def sign(
        cls, signing_key: SigningKey, task: VerificationTask, **fields: Any
    ) -> VerificationReport:
        draft = cls.from_json(
            {
                **fields,
                "task": task.digest,
                "job_id": task.job_id,
                "verifier": bytes(signing_key.verify_key).hex(),
                "signature": "0" * 128,
            }
        )
        signature = signing_key.sign(canonical_json(draft.signed_part())).signature.hex()
        return draft.model_copy(update={"signature": signature})

    @classmethod
    def from_json(cls, obj: object) -> VerificationReport:
        if isinstance(obj, Mapping) and isinstance(obj.get("message"), str):
            obj = {**obj, "message": obj["message"][:MAX_MESSAGE]}
        try:
            return cls.model_validate(obj)
        except ValidationError as e:
            raise VerificationError(f"the verification report is malformed: {e}") from e

    def to_json(self) -> dict[str, Any]:
        return {
            **self.model_dump(mode="json"),
            "results": [r.model_dump() for r in self.results],
            "node_results": [r.model_dump(mode="json") for r in self.node_results],
        }

    def verify_for(self, task: VerificationTask) -> None:
        """The report answers `task` and is signed by the verifier the task names."""
        if self.task != task.digest or self.job_id != task.job_id:
            raise VerificationError("the report answers another task")
        if self.verifier != task.verifier:
            raise VerificationError(
                f"the report is signed by {self.verifier}, not the drawn verifier {task.verifier}"
            )
        _verify(self.verifier, self.signed_part(), self.signature, "verification report")


def early_subject(job_id: str, nonce: str, prefix_root: str) -> str:
    """What an early task checks in place of an attestation (its `attestation` field): the
    committed prefix `prefix_root` of lease `nonce` of job `job_id`, before any attestation
    exists. Domain-separated, so it is never an attestation's leaf."""
    body = {"domain": EARLY_DOMAIN, "job_id": job_id, "nonce": nonce, "prefix_root": prefix_root}
    return hashlib.sha256(canonical_json(body)).hexdigest()


def draw_verifier(candidates: Collection[str], seed: bytes, round: int = 0) -> str:
    """The verifier drawn from `candidates` (worker keys) with a draw's seed in `round`:
    uniform, and the same for anyone who knows the candidates and the oracle's signature."""
    ordered = sorted(set(candidates))
    if not ordered:
        raise VerificationError("no verifier to draw from")
    material = b"proofnet/verifier-draw/v1" + seed + round.to_bytes(2, "big")
    pick = int.from_bytes(hashlib.sha256(material).digest(), "big")
    return ordered[pick % len(ordered)]
