"""Resume grants: how a sealed job's checkpoint keys reach the provider that resumes it.

A sealed job's checkpoint files are sealed to the submitter (envelope v2) under content
keys derived from the lost provider's per-lease secret. The lost provider is gone, so it
cannot grant them as it grants a drawn verifier's (`key_grant`); the submitter can: each
file's header wraps its content key for the submitter's sealing key. When the API hands the
job to a new provider from a sealed checkpoint, the submitter unwraps each checkpoint
file's key and wraps it again for the new provider's X25519 key (`regrant`); the API
checks the grant's shape (`check_resume_grant`: exactly the checkpoint's files, each
wrapped for that provider) and relays it. The new provider opens the files with it and
checks the plaintext against the leaf the committed prefix holds before training
(worker/sealed_resume.py).

What each party can do:

- the API host sees ciphertexts and stanzas wrapped for the new provider: it opens nothing;
- the new provider opens only the checkpoint the submitter granted it, and only files
  whose key commitment the granted key matches (a key of another job or file is refused
  by `EnvelopeHeader.key_for`);
- a lost provider that sealed a forged checkpoint is caught by the new provider's leaf
  check, grant or not: the grant says who may read, the prefix says what is right.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import BinaryIO

from proofnet.messages.envelope import (
    SealingError,
    Stanza,
    read_header,
    worker_recipient,
    wrap_key,
)


class ResumeGrantError(ValueError):
    """A resume grant is malformed, for other files, or wrapped for another key."""


def regrant(sealed: BinaryIO, private_key: bytes, provider_worker_key: str) -> Stanza:
    """As the submitter: the content key of the sealed file `sealed` (its header is enough),
    unwrapped with the submitter's `private_key` and wrapped for the provider with this
    Ed25519 worker key. SealingError when the file is not sealed to this key."""
    key = read_header(sealed).key_for(private_key)
    return wrap_key(key, worker_recipient(provider_worker_key))


def check_resume_grant(
    files: Sequence[str], provider_worker_key: str, grants: Mapping[str, object]
) -> dict[str, Stanza]:
    """A grant for exactly `files`, each stanza wrapped for the provider with this worker key.
    (Whether the wrapped key is right only that provider can see.)"""
    if not isinstance(grants, Mapping) or set(grants) != set(files):
        raise ResumeGrantError("a resume grant wraps a key for exactly the checkpoint's files")
    to = worker_recipient(provider_worker_key)
    checked: dict[str, Stanza] = {}
    for name in files:
        try:
            stanza = Stanza.from_json(grants[name])
        except SealingError as e:
            raise ResumeGrantError(f"the grant for {name!r} is malformed: {e}") from e
        if stanza.to != to:
            raise ResumeGrantError(
                f"the grant for {name!r} is wrapped for another key than the resuming provider's"
            )
        checked[name] = stanza
    return checked
