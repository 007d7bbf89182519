"""Every wire-format parser in `proofnet/messages` meets hostile bytes with its own typed
error, never anything else (a `TypeError`, `KeyError`, `RecursionError`, a CBOR library's
exception or a crash): property-based, with Hypothesis.

Inputs: arbitrary bytes, arbitrary JSON documents, and honest messages mutated (bytes
replaced, cut, inserted), plus the classic hostile shapes pinned as explicit examples
(deep nesting, integers past 64 bits, lone surrogates). Each property is time-bounded by
`max_examples`, derandomized so a failure reproduces. The honest twins: each honest sample
parses.
"""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Callable
from typing import Any

from attestation_support import signed_attestation
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from nacl.public import PrivateKey
from nacl.signing import SigningKey
from pydantic import ValidationError

from proofnet.messages.address import AddressError, bech32_decode, payment_address_bytes
from proofnet.messages.attestation import (
    AttestationError,
    attestation_from_dict,
    verify_attestation,
)
from proofnet.messages.binding import BindingError, PayoutBinding, verify_payout_binding
from proofnet.messages.canonical import CanonicalJSONError, canonical_json, parse_canonical_json
from proofnet.messages.claim import Claim, LeaseAnswer
from proofnet.messages.envelope import SealingError, open_sealed, open_stream, seal_bytes
from proofnet.messages.escrow_info import EscrowInfo, EscrowInfoError
from proofnet.messages.jobspec import JobSpec, JobSpecError
from proofnet.messages.merkle import InclusionProof, MerkleError
from proofnet.messages.rate_card import RateCardDocument, RateCardError
from proofnet.messages.registration import ProviderRegistration
from proofnet.messages.result_paths import ResultNameError, check_result_name
from proofnet.messages.sealing import SealingTarget
from proofnet.messages.worker_auth import WorkerAuthError, parse_headers

EXAMPLES = 150
SCRIPT = "ab" * 28
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)

DEEP = b"[" * 20_000 + b"]" * 20_000
DEEP_OBJECT = b'{"a":' * 5_000 + b"1" + b"}" * 5_000
HUGE_INT = b'{"amount": ' + b"9" * 5_000 + b"}"
SURROGATE = b'{"a": "\\ud800"}'


# --- honest samples ---------------------------------------------------------------------------

SPEC: dict[str, Any] = {
    "model": {"repo_url": "https://example.org/train.git", "commit": "c" * 40},
    "framework": "numpy",
    "image": "python@sha256:" + "d" * 64,
    "commands": [["python", "train.py"]],
    "resources": {
        "gpus": 1,
        "gpu_memory_mb": 1024,
        "cpus": 1,
        "ram_mb": 1024,
        "disk_mb": 1024,
        "max_duration_s": 3600,
    },
    "results": [{"path": "metrics.json", "kind": "json"}],
    "pricing": {"kind": "fixed", "amount": 1_000_000},
    "seed": 7,
}
WORKER = SigningKey(b"\x07" * 32)


def _attestation() -> bytes:
    return signed_attestation(
        WORKER, bytes.fromhex("12" * 32), bytes(32), escrow_script_hash=SCRIPT
    )


ATTESTATION = _attestation()
SPEC_BYTES = canonical_json(SPEC)
RATE_CARD = canonical_json(
    {"version": 1, "provider": "ab" * 32, "ntx_per_gpu_hour": {"NVIDIA H100": 1_000}}
)
SEALING_KEY = PrivateKey(b"\x09" * 32)


def open_v2(blob: bytes) -> bytes:
    out = io.BytesIO()
    open_stream(io.BytesIO(blob), out, private_key=bytes(SEALING_KEY))
    return out.getvalue()


SEALED = seal_bytes(b"weights", name="model.pt", recipients=[bytes(SEALING_KEY.public_key).hex()])


# --- inputs -----------------------------------------------------------------------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=25,
)


def _dumps(value: Any) -> bytes:
    return json.dumps(value).encode()


@st.composite
def mutated(draw: st.DrawFn, sample: bytes) -> bytes:
    """`sample` with a few bytes replaced, cut or inserted."""
    out = bytearray(sample)
    for _ in range(draw(st.integers(1, 4))):
        where = draw(st.integers(0, max(len(out) - 1, 0)))
        how = draw(st.sampled_from(["replace", "cut", "insert"]))
        byte = draw(st.integers(0, 255))
        if how == "replace" and out:
            out[where] = byte
        elif how == "cut":
            del out[where:]
        else:
            out.insert(where, byte)
    return bytes(out)


def hostile(sample: bytes = b"") -> st.SearchStrategy[bytes]:
    strategies = [st.binary(max_size=600), json_values.map(_dumps)]
    if sample:
        strategies.append(mutated(sample))
    return st.one_of(*strategies)


def only(error: type[Exception] | tuple[type[Exception], ...], parse: Callable[[], Any]) -> None:
    """`parse()` succeeds or raises `error`; anything else fails the property."""
    with contextlib.suppress(error):
        parse()


def _json(data: bytes) -> Any:
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        return data.decode("latin-1")


# --- the honest twins ---------------------------------------------------------------------------


def test_every_honest_sample_parses() -> None:
    assert parse_canonical_json(SPEC_BYTES) == SPEC
    assert JobSpec.from_canonical(SPEC_BYTES).job_id
    assert RateCardDocument.from_canonical(RATE_CARD)
    assert verify_attestation(ATTESTATION, expected_network="devnet", expected_script_hash=SCRIPT)
    assert open_v2(SEALED) == b"weights"


# --- the properties -------------------------------------------------------------------------------


@FUZZ
@given(hostile(SPEC_BYTES))
@example(DEEP)
@example(DEEP_OBJECT)
@example(HUGE_INT)
@example(SURROGATE)
def test_canonical_json(data: bytes) -> None:
    only(CanonicalJSONError, lambda: parse_canonical_json(data))


@FUZZ
@given(hostile(SPEC_BYTES))
@example(DEEP)
@example(HUGE_INT)
def test_job_spec(data: bytes) -> None:
    only(JobSpecError, lambda: JobSpec.from_canonical(data))
    only(JobSpecError, lambda: JobSpec.from_json(data))
    value = _json(data)
    if isinstance(value, dict):
        only(JobSpecError, lambda: JobSpec.from_dict(value))


@FUZZ
@given(hostile(RATE_CARD))
@example(DEEP)
@example(HUGE_INT)
def test_rate_card(data: bytes) -> None:
    only(RateCardError, lambda: RateCardDocument.from_canonical(data))
    only(RateCardError, lambda: RateCardDocument.from_json(data))


@FUZZ
@given(hostile(ATTESTATION))
@example(b"\x9f" * 10_000)  # indefinite-length arrays nested deep
@example(b"\x81" * 10_000)
@example(b"\xd8\x12" + b"\x84" + b"\x40" * 3 + b"\x1b" + b"\xff" * 8)
def test_cose_attestation(data: bytes) -> None:
    only(
        AttestationError,
        lambda: verify_attestation(data, expected_network="devnet", expected_script_hash=SCRIPT),
    )


@FUZZ
@given(json_values)
def test_attestation_fields(value: Any) -> None:
    if isinstance(value, dict):
        only(AttestationError, lambda: attestation_from_dict(value))


@FUZZ
@given(hostile())
@example(DEEP)
@example(HUGE_INT)
def test_claims_and_registrations(data: bytes) -> None:
    for model in (Claim, LeaseAnswer, ProviderRegistration):
        only(ValidationError, lambda model=model: model.model_validate_json(data))  # type: ignore[misc]


@FUZZ
@given(json_values)
def test_oracle_answers(value: Any) -> None:
    only(EscrowInfoError, lambda: EscrowInfo.from_json(value))
    only(SealingError, lambda: SealingTarget.from_json(value))
    if isinstance(value, dict):
        only(MerkleError, lambda: InclusionProof.from_json(value))


@FUZZ
@given(st.text(max_size=40), st.text(max_size=300))
def test_sealing_signatures(public_key: str, signature: str) -> None:
    target = SealingTarget(public_key=public_key, signature=signature, cose_key=signature)
    only(SealingError, target.verify)


@FUZZ
@given(hostile(SEALED))
def test_sealed_results(data: bytes) -> None:
    only(SealingError, lambda: open_v2(data))
    only(SealingError, lambda: open_sealed(data, private_key=bytes(SEALING_KEY)))


@FUZZ
@given(st.text(max_size=120))
@example("addr_test1" + "q" * 200)
@example("\udcff")
def test_addresses_and_names(text: str) -> None:
    only(AddressError, lambda: bech32_decode(text))
    only(AddressError, lambda: payment_address_bytes(text, "devnet"))
    only(ResultNameError, lambda: check_result_name(text))


@FUZZ
@given(st.dictionaries(st.text(max_size=30), st.text(max_size=80), max_size=6))
def test_worker_request_headers(headers: dict[str, str]) -> None:
    only(WorkerAuthError, lambda: parse_headers(headers))


@FUZZ
@given(json_values)
def test_payout_bindings(value: Any) -> None:
    try:
        binding = PayoutBinding.model_validate(value)
    except ValidationError:
        return
    only(
        BindingError, lambda: verify_payout_binding(binding, network="devnet", nonce=binding.nonce)
    )


def test_headers_of_an_honest_shape_with_hostile_values() -> None:
    shaped = {
        "x-proofnet-worker-key": "zz" * 32,
        "x-proofnet-timestamp": "9" * 5_000,
        "x-proofnet-nonce": "ab" * 16,
        "x-proofnet-signature": "00",
    }
    only(WorkerAuthError, lambda: parse_headers(shaped))
