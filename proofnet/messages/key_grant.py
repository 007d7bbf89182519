"""Key requests and grants: how a drawn verifier gets the keys of a sealed job's proof files.

A sealed job's proof files are stored sealed to the submitter only (envelope v2, per-file
content keys derived from a secret the provider keeps). When the oracles draw a verifier to
replay some segments, an oracle signs a `KeyRequest`: this job, this lease (its nonce), this
verifier (a registered worker's Ed25519 key), these files. The API relays it to the provider
that held the lease; the provider's worker checks the oracle's signature against the oracle
keys it trusts, derives each file's content key again and wraps it for the verifier's X25519
key (`envelope.worker_recipient`): a `Stanza` per file, the grant. The API stores the grant
and serves it, with the files' ciphertexts, to the verifier alone.

What each party can do:

- the API host relays requests and grants but cannot forge a request (no oracle key) nor
  open a grant (wrapped for the verifier) or a file (sealed);
- an oracle names the verifier, but never receives a key unless it is that verifier;
- the provider can refuse or send a wrong key; the verifier sees it at once (the key
  commitment in each file's header) and reports it as the provider withholding its proof;
- the verifier learns the plaintext of the files it must replay, and only those.

A resumed job's attempts share one lease nonce (`api.services.resume`), so a request may
also name the lease's provider (`provider`, its worker key): the API then looks the lease
up by nonce *and* provider, so a request for a lost attempt's files reaches the lost
provider's worker (whose secret sealed them), never the resuming one, and a worker answers
no request naming another provider. A lost provider's worker answers requests for its own
attempts' files for as long as it keeps their secrets, lease lost or not: nothing but its
worker key and the lease's nonce authorise it.

The signature covers the canonical JSON of the request's fields under `KEY_REQUEST_DOMAIN`.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection, Mapping
from typing import Annotated, Any

from nacl.exceptions import BadSignatureError
from nacl.signing import SigningKey, VerifyKey
from pydantic import Field, ValidationError

from proofnet.messages.canonical import canonical_json
from proofnet.messages.envelope import SealingError, Stanza, worker_recipient
from proofnet.messages.fields import Frozen, Hex64, TupleOf
from proofnet.messages.result_paths import ResultNameError, check_result_name

KEY_REQUEST_DOMAIN = "proofnet/key-request/v1"
MAX_FILES = 1024
_NONCE = re.compile(r"[0-9a-f]{16,128}")
_SIGNATURE = re.compile(r"[0-9a-f]{128}")


class KeyGrantError(ValueError):
    """A key request or grant is malformed, or its signature or recipient does not hold."""


def _names(value: tuple[str, ...]) -> tuple[str, ...]:
    if not value:
        raise ValueError("a key request names at least one file")
    if len(set(value)) != len(value):
        raise ValueError("a key request names each file once")
    for name in value:
        try:
            check_result_name(name)
        except ResultNameError as e:
            raise ValueError(f"file {name[:80]!r}: {e}") from e
    return value


class KeyRequest(Frozen):
    job_id: Hex64
    nonce: Annotated[str, Field(pattern=_NONCE.pattern)]
    # The drawn verifier: a registered worker's Ed25519 public key.
    recipient: Hex64
    files: Annotated[TupleOf[str], Field(min_length=1, max_length=MAX_FILES)]
    oracle_key: Hex64
    signature: Annotated[str, Field(pattern=_SIGNATURE.pattern)]
    # The lease's provider (worker key) whose secret sealed the files; None: the newest
    # lease with `nonce` (the only one unless the job resumed).
    provider: Hex64 | None = None

    def signed_part(self) -> dict[str, Any]:
        part: dict[str, Any] = {
            "domain": KEY_REQUEST_DOMAIN,
            "files": list(self.files),
            "job_id": self.job_id,
            "nonce": self.nonce,
            "oracle_key": self.oracle_key,
            "recipient": self.recipient,
        }
        if self.provider is not None:
            # Signed only when named: a request without one keeps its digest.
            part["provider"] = self.provider
        return part

    @property
    def digest(self) -> str:
        """Names the request (what a grant answers)."""
        return hashlib.sha256(canonical_json(self.signed_part())).hexdigest()

    @property
    def recipient_x25519(self) -> str:
        return worker_recipient(self.recipient)

    @classmethod
    def sign(
        cls,
        signing_key: SigningKey,
        *,
        job_id: str,
        nonce: str,
        recipient: str,
        files: Collection[str],
        provider: str | None = None,
    ) -> KeyRequest:
        unsigned = {
            "job_id": job_id,
            "nonce": nonce,
            "recipient": recipient,
            "files": tuple(files),
            "oracle_key": bytes(signing_key.verify_key).hex(),
            "signature": "0" * 128,
            "provider": provider,
        }
        draft = cls.from_json(unsigned)
        signature = signing_key.sign(canonical_json(draft.signed_part())).signature.hex()
        return draft.model_copy(update={"signature": signature})

    @classmethod
    def from_json(cls, obj: object) -> KeyRequest:
        if isinstance(obj, Mapping) and isinstance(obj.get("files"), list):
            obj = {**obj, "files": tuple(obj["files"])}
        try:
            request = cls.model_validate(obj)
            _names(request.files)
        except (ValidationError, ValueError) as e:
            raise KeyGrantError(f"the key request is malformed: {e}") from e
        return request

    def to_json(self) -> dict[str, Any]:
        out = {**self.model_dump(mode="json"), "files": list(self.files)}
        if self.provider is None:
            del out["provider"]  # as an older oracle signed it
        return out

    def verify(self, trusted_oracle_keys: Collection[str]) -> None:
        """The request is signed by one of `trusted_oracle_keys`; KeyGrantError otherwise."""
        if self.oracle_key not in trusted_oracle_keys:
            raise KeyGrantError(
                f"the key request is signed by {self.oracle_key}, not a trusted oracle"
            )
        try:
            VerifyKey(bytes.fromhex(self.oracle_key)).verify(
                canonical_json(self.signed_part()), bytes.fromhex(self.signature)
            )
        except (BadSignatureError, ValueError) as e:
            raise KeyGrantError("the key request's oracle signature does not verify") from e


def check_grant(request: KeyRequest, grants: Mapping[str, object]) -> dict[str, Stanza]:
    """A grant answering `request`: a stanza for exactly its files, each wrapped for its
    recipient. (Whether the wrapped key is right only the recipient can see.)"""
    if not isinstance(grants, Mapping) or set(grants) != set(request.files):
        raise KeyGrantError("a grant wraps a key for exactly the files the request names")
    to = request.recipient_x25519
    checked: dict[str, Stanza] = {}
    for name, raw in grants.items():
        try:
            stanza = Stanza.from_json(raw)
        except SealingError as e:
            raise KeyGrantError(f"the grant for {name!r} is malformed: {e}") from e
        if stanza.to != to:
            raise KeyGrantError(f"the grant for {name!r} is wrapped for another key")
        checked[name] = stanza
    return checked
