"""`proofnet job ...`: a submitter's command line, signing with a Cardano key file.

    proofnet job init DIR --framework numpy|pytorch|tensorflow   (a job repository)
    proofnet job validate SPEC | try SPEC                        (before posting)
    proofnet job submit SPEC --key-file K [--api-url U] [--lock] [--seal-with S]
    proofnet job status JOB_ID | logs JOB_ID [--follow]
    proofnet job results JOB_ID [--out DIR] [--decrypt-with S]
    proofnet job lock JOB_ID        lock the escrow of a job submitted without --lock
    proofnet job escrow JOB_ID      where the escrow stands; what can be done, and when
    proofnet job cancel JOB_ID      cancel; the escrow comes back at once if no work started
    proofnet job refund JOB_ID      take the escrow back after its deadline

Times are shown in UTC and from now ("2026-12-03 14:00 UTC (in 3 h 10 min)"), never as
slots; amounts in NTX and in base units.

SPEC is a JSON file, or YAML (`.yaml`, `.yml`) that people can comment.

Signing in is a CIP-8 signature by the key file's payment key (what a browser wallet's
`signData` makes); the session token is cached per API URL and address in a 0600 file under
`sessions/` in the per-user data dir (`~/.local/share/proofnet`, `PROOFNET_DATA_DIR`). Transactions (escrow lock, refund) are built by the API and signed
here with the key file: the key never leaves this machine.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import httpx
import typer
from pycardano import (
    Address,
    Network,
    PaymentSigningKey,
    Transaction,
    TransactionWitnessSet,
    VerificationKeyWitness,
)
from pycardano.cip import cip8
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from proofnet.job_authoring.spec_file import SpecFileError, read_spec_file
from proofnet.messages.envelope import MAGIC_BYTES, open_file, open_sealed, sealed_version
from proofnet.messages.result_paths import ResultNameError, check_result_name
from proofnet.messages.resume_grant import regrant
from proofnet.messages.sealing import (
    SealingError,
    generate_sealing_key,
    load_sealing_key,
    public_key_hex,
    sealing_key_message,
)
from proofnet.redaction import redact_credentials

SHA256_HEADER = "X-Content-SHA256"
TERMINAL = ("completed", "stopped", "failed", "cancelled")


class JobCliError(Exception):
    """A request failed or its answer does not check out; the message says why."""


class _SignedInAgain(Exception):
    """The API refused the session mid-download; signed in again, the download is retried."""


@dataclass(frozen=True)
class SavedResult:
    name: str
    path: Path
    sha256: str  # of the bytes stored (the ciphertext of a sealed result)
    sealed: bool


def load_payment_key(path: Path) -> PaymentSigningKey:
    try:
        key = PaymentSigningKey.load(str(path))
    except Exception as e:  # pycardano raises assorted errors for bad files
        raise JobCliError(f"{path} is not a payment signing key file: {e}") from e
    return key


class JobClient:
    """The API calls of a submitter holding `key`; `http` may be any httpx.Client."""

    def __init__(
        self,
        api_url: str,
        key: PaymentSigningKey,
        *,
        network: Network = Network.TESTNET,
        http: httpx.Client | None = None,
        token_cache: Path | None = None,
        retry_base_s: float = 0.5,
        retry_max_s: float = 10.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.api_url = api_url.rstrip("/")
        # A broken-off download resumes after 0.5 s, 1 s, 2 s, ... (at most `retry_max_s`).
        self.retry_base_s = retry_base_s
        self.retry_max_s = retry_max_s
        self.sleep = sleep
        self.key = key
        self.network = network
        self.http = http or httpx.Client(timeout=60)
        self.address = str(Address(key.to_verification_key().hash(), network=network))
        self.token_cache = token_cache
        self._token: str | None = None

    # --- session ----------------------------------------------------------------------

    def _url(self, path: str) -> str:
        return f"{self.api_url}/api/v1{path}"

    def _sign(self, message: str) -> dict[str, str]:
        signed = cip8.sign(message, self.key, attach_cose_key=True, network=self.network)
        assert isinstance(signed, dict)
        return {"signature": signed["signature"], "key": signed["key"]}

    def sign_message(self, message: str) -> dict[str, str]:
        """What CIP-30 `signData` answers for `message`: COSE_Sign1 and COSE_Key, hex."""
        return self._sign(message)

    def _cached(self) -> str | None:
        if self.token_cache is None or not self.token_cache.exists():
            return None
        try:
            saved = json.loads(self.token_cache.read_text())
        except (OSError, ValueError):
            return None
        if saved.get("address") != self.address or saved.get("api_url") != self.api_url:
            return None
        return str(saved["token"]) if saved.get("token") else None

    def _save(self, token: str) -> None:
        if self.token_cache is None:
            return
        self.token_cache.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = self.token_cache.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump({"api_url": self.api_url, "address": self.address, "token": token}, f)
        os.replace(tmp, self.token_cache)

    def sign_in(self) -> str:
        challenge = self._call(
            "POST", "/auth/challenge", json={"address": self.address}, auth=False
        )
        verified = self._call(
            "POST",
            "/auth/verify",
            json={
                "address": self.address,
                "nonce": challenge["nonce"],
                **self._sign(challenge["message"]),
            },
            auth=False,
        )
        self._token = str(verified["access_token"])
        self._save(self._token)
        return self._token

    def _headers(self) -> dict[str, str]:
        token = self._token or self._cached() or self.sign_in()
        self._token = token
        return {"Authorization": f"Bearer {token}"}

    def _request(self, method: str, path: str, *, auth: bool = True, **kw: Any) -> httpx.Response:
        for attempt in (0, 1):
            headers = self._headers() if auth else {}
            try:
                response = self.http.request(method, self._url(path), headers=headers, **kw)
            except httpx.HTTPError as e:
                raise JobCliError(
                    redact_credentials(f"cannot reach the API at {self.api_url}: {e}")
                ) from e
            if response.status_code == 401 and auth and attempt == 0:
                self._token = None  # expired or revoked: sign in again once
                self.sign_in()
                continue
            return response
        return response

    def _call(self, method: str, path: str, *, auth: bool = True, **kw: Any) -> Any:
        response = self._request(method, path, auth=auth, **kw)
        if response.status_code >= 400:
            try:
                detail = response.json().get("detail", response.text)
            except ValueError:
                detail = response.text
            raise JobCliError(f"{method} {path}: HTTP {response.status_code}: {detail}")
        return None if response.status_code == 204 else response.json()

    def call(self, method: str, path: str, **kw: Any) -> Any:
        """A signed-in call to `/api/v1{path}` (other clients: `proofnet approvals`); an
        answer >= 400 raises JobCliError with the API's detail."""
        return self._call(method, path, **kw)

    # --- jobs -------------------------------------------------------------------------

    def submit(self, spec: dict[str, Any]) -> dict[str, Any]:
        return dict(self._call("POST", "/jobs", json={"spec": spec}))

    def status(self, job_id: str) -> dict[str, Any]:
        return dict(self._call("GET", f"/jobs/{job_id}"))

    def cancel_job(self, job_id: str) -> dict[str, Any]:
        return dict(self._call("POST", f"/jobs/{job_id}/cancel"))

    def escrow(self, job_id: str) -> dict[str, Any]:
        return dict(self._call("GET", f"/jobs/{job_id}/escrow"))

    def deliveries(self, job_id: str) -> dict[str, Any]:
        return dict(self._call("GET", f"/jobs/{job_id}/deliveries"))

    def cancel(self, job_id: str) -> dict[str, Any]:
        """Cancel the job, and return its escrow at once through the quorum-signed cancel
        while no provider has leased it; otherwise say when a refund is possible."""
        job = self.status(job_id)
        if job["status"] not in TERMINAL:
            job = self.cancel_job(job_id)
        out: dict[str, Any] = {"job_id": job_id, "status": job["status"]}
        escrow = self.escrow(job_id)
        out["escrow"] = escrow
        if escrow["state"] != "locked":
            return out
        if not escrow["cancel"]["possible"]:
            out["returned"] = None
            out["message"] = f"the escrow stays locked: {escrow['cancel']['message']}"
            return out
        built = self._call("POST", f"/jobs/{job_id}/escrow/cancel/build", json={})
        witness = self._sign_tx(built["tx_cbor"])
        done = self._call(
            "POST",
            f"/jobs/{job_id}/escrow/cancel/submit",
            json={"tx_cbor": built["tx_cbor"], "witness_set": witness},
        )
        out["returned"] = {
            "tx_id": done["tx_id"],
            "to": built["returned_to"],
            "oracles": built["oracles"],
        }
        out["message"] = (
            f"the whole escrow ({escrow['budget']} NTX base units) goes back to "
            f"{built['returned_to']} in transaction {done['tx_id']}"
        )
        return out

    def logs(self, job_id: str, after: int = 0) -> dict[str, Any]:
        return dict(self._call("GET", f"/jobs/{job_id}/logs", params={"after": after}))

    def register_sealing_key(self, private_key: bytes) -> dict[str, Any]:
        public = public_key_hex(private_key)
        body = self._sign(sealing_key_message(public))
        return dict(self._call("PUT", "/users/me/sealing-key", json=body))

    def grant_resume(self, job_id: str, private_key: bytes) -> dict[str, Any]:
        """Let the provider resuming a sealed job open its checkpoint: unwrap each sealed
        file's content key from its header with the sealing key, wrap it for that provider's
        key, post the stanzas (the API relays them and can open none)."""
        pending = self._call("GET", f"/jobs/{job_id}/resume-grant")
        grants = {}
        for ref in pending["files"]:
            name = str(ref["name"])
            try:
                header = io.BytesIO(bytes.fromhex(str(pending["headers"][name])))
                stanza = regrant(header, private_key, str(pending["provider_worker_key"]))
            except (KeyError, ValueError) as e:  # SealingError is a ValueError
                raise JobCliError(f"cannot grant {name}: {e}") from e
            grants[name] = stanza.to_json()
        return dict(self._call("POST", f"/jobs/{job_id}/resume-grant", json={"grants": grants}))

    def results(
        self, job_id: str, out_dir: Path, *, decrypt_with: bytes | None = None
    ) -> list[SavedResult]:
        """Download every result (streamed to disk, resumed after a dropped connection),
        check its SHA-256, and open sealed ones with the key."""
        saved = []
        for row in self._call("GET", f"/jobs/{job_id}/results"):
            name = str(row["name"])
            try:
                check_result_name(name)  # never write outside out_dir
            except ResultNameError as e:
                raise JobCliError(f"the API named a result {name!r}: {e}") from e
            path = out_dir / name
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=".download-")
            os.close(fd)
            tmp = Path(tmp_name)
            try:
                digest = self._download(f"/jobs/{job_id}/results/{name}", tmp, name)
                if digest != row["sha256"]:
                    raise JobCliError(
                        f"{name}: downloaded bytes hash to {digest}, not {row['sha256']}"
                    )
                with tmp.open("rb") as f:
                    version = sealed_version(f.read(MAGIC_BYTES))
                if version is not None and decrypt_with is None:
                    raise JobCliError(f"{name} is sealed: pass --decrypt-with SEALING_KEY")
                try:
                    if version == 2:
                        assert decrypt_with is not None
                        open_file(tmp, path, private_key=decrypt_with, name=name)
                    elif version == 1:
                        assert decrypt_with is not None
                        opened = open_sealed(tmp.read_bytes(), private_key=decrypt_with, name=name)
                        path.write_bytes(opened.data)
                    else:
                        os.replace(tmp, path)
                except SealingError as e:
                    raise JobCliError(f"{name}: {e}") from e
            finally:
                tmp.unlink(missing_ok=True)
            saved.append(SavedResult(name=name, path=path, sha256=digest, sealed=bool(version)))
        return saved

    def _download(self, path: str, dest: Path, name: str, attempts: int = 5) -> str:
        """Stream `path` into `dest`, asking for the rest (`Range`) after a broken-off
        transfer (up to `attempts` tries, backing off between them); the SHA-256 of all of
        it. A 401 signs in again, once."""
        digest, have = hashlib.sha256(), 0
        signed_in_again = False

        def once(out: Any) -> str:
            nonlocal have, signed_in_again
            headers = self._headers()
            if have:
                headers["Range"] = f"bytes={have}-"
            with self.http.stream("GET", self._url(path), headers=headers, timeout=60) as response:
                if response.status_code == 401 and not signed_in_again:
                    signed_in_again = True
                    self._token = None
                    self.sign_in()
                    raise _SignedInAgain
                if response.status_code not in (200, 206) or (have and response.status_code != 206):
                    response.read()
                    raise JobCliError(f"cannot download {name}: HTTP {response.status_code}")
                # Blocks as they arrive: a break-off loses none of what was received.
                for block in response.iter_bytes():
                    out.write(block)
                    digest.update(block)
                    have += len(block)
            return digest.hexdigest()

        retrying = Retrying(
            stop=stop_after_attempt(attempts),
            wait=wait_exponential(multiplier=self.retry_base_s, max=self.retry_max_s),
            retry=retry_if_exception_type((httpx.TransportError, _SignedInAgain)),
            sleep=self.sleep,
            reraise=True,
        )
        with dest.open("wb") as out:
            try:
                return str(retrying(once, out))
            except _SignedInAgain:
                raise JobCliError(
                    f"cannot download {name}: the API keeps refusing the session"
                ) from None
            except httpx.TransportError as e:
                raise JobCliError(f"the download of {name} kept breaking off: {e}") from e
            except httpx.HTTPError as e:
                raise JobCliError(
                    redact_credentials(f"cannot reach the API at {self.api_url}: {e}")
                ) from e

    # --- transactions -------------------------------------------------------------------

    def _sign_tx(self, tx_cbor: str) -> str:
        tx = Transaction.from_cbor(bytes.fromhex(tx_cbor))
        body_hash = tx.transaction_body.hash()
        witness = VerificationKeyWitness(self.key.to_verification_key(), self.key.sign(body_hash))
        return str(TransactionWitnessSet(vkey_witnesses=[witness]).to_cbor_hex())

    def lock(self, job_id: str) -> dict[str, Any]:
        built = self._call("POST", f"/jobs/{job_id}/escrow/build", json={})
        witness = self._sign_tx(built["tx_cbor"])
        return dict(
            self._call(
                "POST",
                f"/jobs/{job_id}/escrow/submit",
                json={"tx_cbor": built["tx_cbor"], "witness_set": witness},
            )
        )

    def refund(self, job_id: str) -> dict[str, Any]:
        built = self._call("POST", f"/jobs/{job_id}/escrow/refund/build", json={})
        witness = self._sign_tx(built["tx_cbor"])
        return dict(
            self._call(
                "POST",
                f"/jobs/{job_id}/escrow/refund/submit",
                json={"tx_cbor": built["tx_cbor"], "witness_set": witness},
            )
        )


# --- the Typer app ------------------------------------------------------------------------

app = typer.Typer(help="Submit and follow jobs with a Cardano key file.", no_args_is_help=True)

KeyFile = Annotated[Path, typer.Option("--key-file", help="payment .skey file", exists=True)]
ApiUrl = Annotated[str | None, typer.Option("--api-url", help="API base URL")]


def open_client(key_file: Path, api_url: str | None, settings: Any = None) -> JobClient:
    """A client signing with `key_file`'s payment key, its session cached per user."""
    from proofnet.settings import absolute, build_settings

    settings = settings or build_settings()
    url = api_url or settings.api_url
    network = Network.MAINNET if settings.network == "mainnet" else Network.TESTNET
    key = load_payment_key(absolute(key_file))
    tag = hashlib.sha256(f"{url}|{key.to_verification_key().hash()}".encode()).hexdigest()[:16]
    cache = settings.data_dir / "sessions" / f"{tag}.json"
    return JobClient(url, key, network=network, token_cache=cache)


def _client(key_file: Path, api_url: str | None) -> JobClient:
    return _run(lambda: open_client(key_file, api_url))


def _print(obj: Any) -> None:
    typer.echo(json.dumps(obj, indent=2, default=str))


def _run(fn: Any) -> Any:
    try:
        return fn()
    except (JobCliError, SealingError) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from e  # an expected failure: one line, exit 2 (proofnet.cli)


@app.command()
def submit(
    spec_file: Path,
    key_file: KeyFile,
    api_url: ApiUrl = None,
    lock: Annotated[bool, typer.Option("--lock", help="lock the escrow now")] = False,
    seal_with: Annotated[
        Path | None, typer.Option("--seal-with", help="X25519 key file; created if missing")
    ] = None,
) -> None:
    """Post SPEC (optionally sealing results to a key, and locking the escrow)."""
    client = _client(key_file, api_url)

    def go() -> dict[str, Any]:
        try:
            spec = read_spec_file(spec_file)
        except SpecFileError as e:
            raise JobCliError(str(e)) from e
        if seal_with is not None:
            key = load_sealing_key(seal_with) if seal_with.exists() else None
            client.register_sealing_key(key or generate_sealing_key(seal_with))
        out = {"job": client.submit(spec)}
        if lock:
            out["escrow"] = client.lock(str(out["job"]["job_id"]))
        return out

    done = _run(go)
    _print(done)
    if lock:
        job_id = str(done["job"]["job_id"])
        typer.echo(escrow_summary(_run(lambda: client.escrow(job_id))), err=True)


@app.command()
def store(
    job_id: str,
    file: Annotated[Path, typer.Argument(help="the file to keep", exists=True, dir_okay=False)],
    key_file: KeyFile,
    kind: Annotated[str, typer.Option("--kind", help="data, results or checkpoints")],
    object_key: Annotated[
        str | None, typer.Option("--object-key", help="default: jobs/<job id>/<kind>/<name>")
    ] = None,
    provider: Annotated[
        list[str], typer.Option("--provider", help="a provider key to place with (repeat)")
    ] = [],  # noqa: B006 - typer reads the default, never mutates it
    api_url: ApiUrl = None,
) -> None:
    """Place FILE with storage providers until the spec's replicas hold it (cheapest offers
    that fit, or those named); prints the placements recorded."""
    from api.job_storage import StoreError, s3_writer, store_file
    from proofnet.settings import build_settings

    client = _client(key_file, api_url)
    settings = build_settings()
    key = object_key or f"jobs/{job_id}/{kind}/{file.name}"

    def go() -> list[dict[str, Any]]:
        try:
            return store_file(
                client.call,
                s3_writer(settings.storage_access_key, settings.storage_secret_key),
                job_id=job_id,
                kind=kind,
                object_key=key,
                data=file.read_bytes(),
                providers=provider,
            )
        except StoreError as e:
            raise JobCliError(str(e)) from e

    _print(_run(go))


@app.command()
def status(job_id: str, key_file: KeyFile, api_url: ApiUrl = None) -> None:
    """The job as JSON; on stderr, for a job that resumed after a lost provider, its history
    per provider (the segments each proved, what each claims), and where its results went
    (each destination the spec names and whether it acknowledged)."""
    client = _client(key_file, api_url)
    job = _run(lambda: client.status(job_id))
    _print(job)
    message = str(job.get("progress_message") or "")
    if message.startswith("stopped: "):
        # The oracle quorum stopped the job early (its code is at fault): say why plainly.
        typer.echo(message, err=True)
    summary = history_summary(job.get("history") or [])
    if summary:
        typer.echo(summary, err=True)
    if (job.get("spec") or {}).get("destinations"):
        typer.echo(deliveries_summary(_run(lambda: client.deliveries(job_id))), err=True)


def deliveries_summary(view: dict[str, Any]) -> str:
    """One line per destination: its kind and whether it acknowledged (the reason if not);
    the job completes only when every one did."""
    lines = []
    for d in view.get("data") or []:
        line = f"destination {d['index']} ({d['kind']}): {d['state']}"
        if d.get("reason"):
            line += f" ({d['reason']})"
        lines.append(line)
    done = "every destination acknowledged" if view.get("complete") else "not all acknowledged"
    return "\n".join([*lines, done])


def history_summary(history: list[dict[str, Any]]) -> str:
    """A resumed job's attempts, one line each: provider, outcome, the segments it proved
    (empty when no attempt resumed another: the JSON says it all)."""
    if not any(h.get("resumed_from_attempt") is not None for h in history):
        return ""
    lines = []
    for h in history:
        last = "end" if h["last_segment"] is None else str(h["last_segment"])
        proved = f"segments {h['first_segment']}..{last}" if h["proved"] else "no segments"
        where = ""
        if h["resumed_from_attempt"] is not None:
            where = f", resumed attempt {h['resumed_from_attempt']} at checkpoint {h['resumed_at']}"
        paid = ""
        if h.get("claimed") is not None:
            paid = f", claims {h['claimed']} NTX base units"
        elif h["proved"] and h["outcome"] not in (None, "completed"):
            paid = ", not paid"
        lines.append(
            f"attempt {h['attempt']} (provider {h['provider']}, {h['outcome'] or 'running'}"
            f"{where}): {proved}{paid}"
        )
    return "\n".join(lines)


@app.command()
def logs(
    job_id: str,
    key_file: KeyFile,
    api_url: ApiUrl = None,
    follow: Annotated[bool, typer.Option("--follow", "-f")] = False,
) -> None:
    client = _client(key_file, api_url)
    after = 0
    while True:
        page = _run(lambda start=after: client.logs(job_id, start))
        for line in page["lines"]:
            typer.echo(f"{line['at']} [{line['stream']}] {line['text']}")
        after = int(page["next_after"])
        if not follow:
            return
        if not page["lines"]:
            if _run(lambda: client.status(job_id)).get("status") in {
                "completed",
                "failed",
                "cancelled",
            }:
                return
            time.sleep(2)


@app.command()
def results(
    job_id: str,
    key_file: KeyFile,
    api_url: ApiUrl = None,
    out: Annotated[Path, typer.Option("--out")] = Path("."),
    decrypt_with: Annotated[Path | None, typer.Option("--decrypt-with")] = None,
) -> None:
    """Download the results, verify their SHA-256, and open sealed ones."""
    client = _client(key_file, api_url)

    def go() -> list[SavedResult]:
        key = None if decrypt_with is None else load_sealing_key(decrypt_with)
        return client.results(job_id, out, decrypt_with=key)

    for r in _run(go):
        typer.echo(f"{r.path}  sha256 {r.sha256}{'  (sealed, opened)' if r.sealed else ''}")


@app.command(name="grant-resume")
def grant_resume(
    job_id: str,
    key_file: KeyFile,
    sealing_key: Annotated[Path, typer.Option("--sealing-key")],
    api_url: ApiUrl = None,
) -> None:
    """Grant the provider resuming a sealed job the keys of the checkpoint it resumes."""
    client = _client(key_file, api_url)
    _print(_run(lambda: client.grant_resume(job_id, load_sealing_key(sealing_key))))


@app.command()
def lock(job_id: str, key_file: KeyFile, api_url: ApiUrl = None) -> None:
    """Lock the escrow of a job submitted without --lock (the key file pays and signs)."""
    client = _client(key_file, api_url)
    done = _run(lambda: client.lock(job_id))
    _print(done)
    if done.get("escrow"):
        escrow = _run(lambda: client.escrow(job_id))
        typer.echo(escrow_summary(escrow), err=True)
    else:
        typer.echo(
            f"submitted in {done['tx_id']}; not on chain yet: `proofnet job escrow {job_id}` "
            "shows when it is recorded",
            err=True,
        )


@app.command()
def escrow(job_id: str, key_file: KeyFile, api_url: ApiUrl = None) -> None:
    """Where the job's escrow stands, and what can be done next (and from when)."""
    found = _run(lambda: _client(key_file, api_url).escrow(job_id))
    _print(found)
    typer.echo(escrow_summary(found), err=True)


@app.command()
def cancel(job_id: str, key_file: KeyFile, api_url: ApiUrl = None) -> None:
    """Cancel the job. While no provider has leased it, its escrow comes back at once (the
    oracles co-sign, the key file signs and pays the fee); otherwise says when a refund is
    possible."""
    done = _run(lambda: _client(key_file, api_url).cancel(job_id))
    _print(done)
    if done.get("message"):
        typer.echo(done["message"], err=True)


@app.command()
def refund(job_id: str, key_file: KeyFile, api_url: ApiUrl = None) -> None:
    """Take the escrow back after its deadline (the key file pays the fee)."""
    _print(_run(lambda: _client(key_file, api_url).refund(job_id)))


# --- writing a job ----------------------------------------------------------------------------


@app.command()
def init(
    directory: Path,
    framework: Annotated[
        str, typer.Option("--framework", help="numpy | pytorch | tensorflow")
    ] = "numpy",
    repo_url: Annotated[
        str | None, typer.Option("--repo-url", help="where you will push it (spec model.repo_url)")
    ] = None,
) -> None:
    """Write a job repository to DIR: a trainer on the proof-of-training harness, job.yaml
    (every field commented), a Dockerfile and a README."""
    from proofnet.job_authoring.templates import TemplateError, write_template

    try:
        written = write_template(directory, framework, repo_url=repo_url)
    except TemplateError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from e
    for path in written:
        typer.echo(f"wrote {path}")
    typer.echo(
        f"next: cd {directory} && proofnet job try job.yaml && proofnet job validate job.yaml"
    )


@app.command()
def validate(spec_file: Path) -> None:
    """Check SPEC: one line per problem, naming its field (exit 2 when there is one)."""
    from proofnet.job_authoring.validation import explain, summary

    try:
        doc = read_spec_file(spec_file)
    except SpecFileError as e:
        typer.echo(f"file: {e}", err=True)
        raise typer.Exit(2) from e
    spec, problems = explain(doc)
    for problem in problems:
        typer.echo(problem.line(), err=True)
    if problems:
        raise typer.Exit(2)
    assert spec is not None
    for line in summary(spec):
        typer.echo(line)
    typer.echo(f"{spec_file}: valid")


@app.command(name="try")
def try_(
    spec_file: Path,
    repo: Annotated[
        Path | None, typer.Option("--repo", help="the job's repository (default: SPEC's folder)")
    ] = None,
    work_dir: Annotated[
        Path | None, typer.Option("--work-dir", help="where runs go (default: <repo>/runs)")
    ] = None,
) -> None:
    """Train SPEC's trainer here with the proof-of-training harness, as a provider would, and
    replay its first and last segments, as a verifier would."""
    from proofnet.job_authoring.trial import TrialError, try_job
    from proofnet.job_authoring.validation import parse_problems

    try:
        doc = read_spec_file(spec_file)
    except SpecFileError as e:
        typer.echo(f"file: {e}", err=True)
        raise typer.Exit(2) from e
    spec, problems = parse_problems(doc)
    if spec is None:
        for problem in problems:
            typer.echo(problem.line(), err=True)
        raise typer.Exit(2)
    repo_dir = repo or spec_file.resolve().parent
    try:
        report = try_job(spec, repo_dir, work_dir or repo_dir / "runs")
    except TrialError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(1) from e
    typer.echo(
        f"trained {report.steps} steps in {report.train_seconds:.1f}s: {report.segments} "
        f"segments, root {report.pot_root} ({report.job_dir})"
    )
    typer.echo(f"results: {json.dumps(report.results)}")
    replayed = ", ".join(map(str, report.replayed))
    if report.ok:
        typer.echo(f"segments {replayed} replay bit for bit; checkpoint 0 is the seed's: OK")
        return
    if not report.replay_passed:
        typer.echo(
            f"segments {replayed} do not replay: the training is not deterministic", err=True
        )
    if not report.from_seed:
        typer.echo(
            "checkpoint 0 is not what the trainer builds from the job seed: initialise from "
            "ctx.job_seed only",
            err=True,
        )
    raise typer.Exit(1)


def escrow_summary(escrow: dict[str, Any]) -> str:
    """One paragraph a person reads: times in UTC and from now, never slots."""
    state = escrow["state"]
    if state == "none":
        return "no escrow is recorded for this job (lock it: proofnet job lock JOB_ID)"
    ref = f"{escrow['tx_id']}#{escrow['index']}"
    lines = [f"escrow {ref}: {state}; budget {escrow['budget']} NTX base units"]
    closing = escrow.get("closing")
    if closing:
        depth = closing.get("confirmations")
        lines.append(
            f"{closing['action']} in {closing['tx_hash']} (block {closing['block_height']}"
            + (f", {depth} confirmations" if depth is not None else "")
            + f"): paid {closing['paid_ntx']}, returned {closing['returned_ntx']}"
        )
        lines += [f"  {name}: {url}" for name, url in closing.get("explorer", {}).items()]
    else:
        lines.append(f"deadline {escrow['deadline']}")
        for what in ("cancel", "refund"):
            action = escrow[what]
            lines.append(
                f"{what}: {'possible now' if action['possible'] else 'not now'}: {action['message']}"
            )
    if escrow.get("note"):
        lines.append(escrow["note"])
    return "\n".join(lines)
