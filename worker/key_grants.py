"""Keys of sealed proof files, both ways (proofnet/messages/key_grant.py).

As the provider: `answer_key_requests` reads the oracle-signed requests for keys of this
worker's sealed uploads, checks each against the oracle keys the provider trusts, derives
the files' content keys from the lease's secret (worker.seal_keys) and grants them wrapped
for the drawn verifier. A request signed by no trusted oracle, or naming this worker itself,
is never answered: the API host relays requests and must not be able to make one up; nor
is one naming another provider's lease. A lease lost or expired is no reason to stop: the
lost attempt of a resumed job is paid only once a drawn verifier replays its segments, so
its worker answers for as long as it keeps the lease's secret.
`GrantResponder` does this in the background, every `interval_s`, whatever job runs.

As the drawn verifier: `open_granted` downloads the granted files' ciphertexts (checked
against the hashes the API recorded) and opens them with the keys granted to this worker.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from nacl.signing import SigningKey

from proofnet.messages.envelope import (
    OpenedFile,
    SealingError,
    Stanza,
    content_key,
    open_file,
    worker_private_key,
    wrap_key,
)
from proofnet.messages.key_grant import KeyGrantError, KeyRequest
from proofnet.messages.result_paths import check_result_name
from worker.api_client import ApiClient, ApiRefused, ApiUnavailable
from worker.seal_keys import SealKeyError, SealKeys

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GrantReport:
    granted: int
    ignored: tuple[str, ...]  # why each unanswered request was left alone


def grants_for(request: KeyRequest, secret: bytes) -> dict[str, Stanza]:
    """Each requested file's content key, wrapped for the request's verifier."""
    to = request.recipient_x25519
    return {name: wrap_key(content_key(secret, name), to) for name in request.files}


def answer_key_requests(
    api: ApiClient, keys: SealKeys, trusted_oracle_keys: Collection[str], me: str
) -> GrantReport:
    granted, ignored = 0, []
    for raw in api.key_requests():
        try:
            request = KeyRequest.from_json(raw.get("request"))
            request.verify(trusted_oracle_keys)
            if request.recipient == me:
                raise KeyGrantError("the request names this worker as its own verifier")
            if request.provider is not None and request.provider != me:
                # Another provider's lease (a resumed job's attempts share a nonce): its
                # files were sealed under that provider's secret, not this one's.
                raise KeyGrantError("the request is for another provider's lease")
            secret = keys.get(request.job_id, request.nonce)
            if secret is None:
                raise KeyGrantError(
                    f"no sealing secret kept for job {request.job_id} (nonce {request.nonce})"
                )
            grants = grants_for(request, secret)
            api.grant_keys(int(raw["id"]), {n: s.to_json() for n, s in grants.items()})
            granted += 1
        except (KeyGrantError, SealKeyError, SealingError, ApiRefused, KeyError, ValueError) as e:
            ignored.append(f"key request {raw.get('id')}: {e}")
            log.warning("not answering key request %s: %s", raw.get("id"), e)
    return GrantReport(granted, tuple(ignored))


class GrantResponder:
    """Answers key requests from a background thread until stopped; never dies of an error."""

    def __init__(
        self,
        api: ApiClient,
        keys: SealKeys,
        trusted_oracle_keys: Collection[str],
        me: str,
        *,
        interval_s: float = 30.0,
    ) -> None:
        self.api, self.keys, self.trusted, self.me = api, keys, tuple(trusted_oracle_keys), me
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.rounds = 0

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="key-grants", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                answer_key_requests(self.api, self.keys, self.trusted, self.me)
            except ApiUnavailable as e:
                log.info("cannot read key requests now: %s", e)
            except Exception:  # keep answering: one bad round must not end the thread
                log.exception("answering key requests failed")
            self.rounds += 1
            self._stop.wait(self.interval_s)


def open_granted(
    api: ApiClient, request_id: int, dest_dir: Path, signing_key: SigningKey
) -> list[OpenedFile]:
    """As the drawn verifier: download and open every file of a granted request into
    `dest_dir/<name>`. SealingError when a file does not open with the granted key (the
    provider withheld its proof)."""
    grant = api.key_grant(request_id)
    private_key = worker_private_key(signing_key)
    opened = []
    for ref in grant["files"]:
        name = str(ref["name"])
        check_result_name(name)
        stanza = Stanza.from_json(grant["grants"].get(name))
        dest = Path(dest_dir) / name
        sealed = dest.with_name(dest.name + ".sealed")
        try:
            api.download_granted(request_id, name, sealed, str(ref["sha256"]))
            opened.append(
                open_file(sealed, dest, private_key=private_key, name=name, grants=[stanza])
            )
        finally:
            with contextlib.suppress(FileNotFoundError):
                sealed.unlink()
    return opened
