"""Real local HTTP(S) servers for the egress tests, and resolvers tests control.

`LocalServer` serves routes from a thread on 127.0.0.1 (a real socket), optionally over TLS
with a certificate for a chosen name signed by a throwaway CA (`tls.ca_context()` is the
client side that trusts it). It records every request (path, Host header, TLS server name),
so a test can prove where a connection landed. A route is bytes, a redirect, a status, or
an endless body. `ScriptedResolver` answers what the test says, in order, and counts the
lookups: the DNS rebinding attack is a resolver that answers public, then loopback.
"""

from __future__ import annotations

import contextlib
import datetime
import ssl
import tempfile
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclass(frozen=True)
class Redirect:
    location: str
    status: int = 302


@dataclass(frozen=True)
class Status:
    code: int
    body: bytes = b""


@dataclass(frozen=True)
class Endless:
    """A body that never ends (a /dev/zero over HTTP); no Content-Length."""

    chunk: bytes = b"\0" * 65536


@dataclass(frozen=True)
class Stored:
    """A PUT target (a pre-signed S3 URL): answers 200 with this ETag (None: no ETag)."""

    etag: str | None = '"0123456789abcdef"'


Route = bytes | Redirect | Status | Endless | Stored


@dataclass(frozen=True)
class Seen:
    path: str
    host: str
    sni: str | None
    method: str
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)


class ServerTls:
    """A CA and a certificate for `names`, as files and as contexts."""

    def __init__(self, names: Sequence[str], directory: Path) -> None:
        now = datetime.datetime.now(datetime.UTC)
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "proofnet test CA")])
        ca = (
            x509.CertificateBuilder()
            .subject_name(ca_name)
            .issuer_name(ca_name)
            .public_key(ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(ca_key, hashes.SHA256())
        )
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
            .issuer_name(ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(
                x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), critical=False
            )
            .sign(ca_key, hashes.SHA256())
        )
        self.ca_file = directory / "ca.pem"
        self.ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
        self.cert_file = directory / "server.pem"
        self.cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        self.key_file = directory / "server.key"
        self.key_file.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )

    def ca_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca_file))


@dataclass
class LocalServer:
    routes: dict[str, Route]
    tls: ServerTls | None = None
    seen: list[Seen] = field(default_factory=list)
    # The TLS server name of every handshake, finished or not (a client that refuses the
    # certificate still shows where it connected and for which name).
    handshakes: list[str | None] = field(default_factory=list)
    port: int = 0

    @property
    def scheme(self) -> str:
        return "https" if self.tls is not None else "http"

    def url(self, host: str, path: str) -> str:
        return f"{self.scheme}://{host}:{self.port}{path}"


def _handler(server: LocalServer, sni: threading.local) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            server.seen.append(
                Seen(
                    self.path,
                    self.headers.get("Host", ""),
                    getattr(self.connection, "proofnet_sni", None),
                    self.command,
                    body,
                    dict(self.headers.items()),
                )
            )
            route = server.routes.get(self.path.split("?", 1)[0], Status(404))
            if isinstance(route, bytes):
                self._answer(200, route)
            elif isinstance(route, Redirect):
                self.send_response(route.status)
                self.send_header("Location", route.location)
                self.send_header("Content-Length", "0")
                self.end_headers()
            elif isinstance(route, Status):
                self._answer(route.code, route.body)
            elif isinstance(route, Stored):
                self.send_response(200)
                if route.etag is not None:
                    self.send_header("ETag", route.etag)
                self.send_header("Content-Length", "0")
                self.end_headers()
            else:
                self.send_response(200)
                self.send_header("Connection", "close")
                self.end_headers()
                try:
                    while True:
                        self.wfile.write(route.chunk)
                except OSError:
                    return  # the client hung up: what the test wants

        def _answer(self, code: int, body: bytes) -> None:
            self.send_response(code)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = _serve  # noqa: N815
        do_POST = _serve  # noqa: N815
        do_PUT = _serve  # noqa: N815

    return Handler


@contextlib.contextmanager
def serve(
    routes: dict[str, Route],
    *,
    tls: ServerTls | None = None,
    host: str = "127.0.0.1",
    port: int = 0,
) -> Iterator[LocalServer]:
    """Run a LocalServer on `host`:`port` (0: any free port) for the life of a `with`."""
    server = LocalServer(routes, tls)
    httpd = ThreadingHTTPServer((host, port), _handler(server, threading.local()))
    httpd.daemon_threads = True
    if tls is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(tls.cert_file, tls.key_file)

        def remember(sock: Any, name: str | None, _ctx: ssl.SSLContext) -> None:
            sock.proofnet_sni = name  # type: ignore[attr-defined]
            server.handshakes.append(name)

        context.sni_callback = remember
        httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    server.port = httpd.server_address[1]
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        httpd.shutdown()
        httpd.server_close()


def tls_for(*names: str) -> ServerTls:
    return ServerTls(names, Path(tempfile.mkdtemp(prefix="proofnet-tls-")))


@dataclass
class ScriptedResolver:
    """Answers each lookup with the next scripted list (the last one repeats)."""

    answers: list[list[str]]
    lookups: list[tuple[str, int]] = field(default_factory=list)

    def __call__(self, host: str, port: int) -> list[str]:
        self.lookups.append((host, port))
        index = min(len(self.lookups) - 1, len(self.answers) - 1)
        return self.answers[index]


def names(mapping: dict[str, list[str]]) -> ScriptedResolver:
    """A resolver that answers by name (every lookup the same); unknown names: none."""

    class ByName(ScriptedResolver):
        def __call__(self, host: str, port: int) -> list[str]:
            self.lookups.append((host, port))
            return mapping.get(host, [])

    return ByName([])
