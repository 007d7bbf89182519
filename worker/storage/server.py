"""`proofnet storage serve`: an S3-compatible endpoint on this machine.

It is moto's S3 server (the `storage` extra): a real S3 REST server (buckets, PUT, ranged
GET, HEAD, multipart) in one process. It keeps objects in memory, so it is for the devnet,
demos and tests; a provider that stores data for a term runs MinIO (or any S3 server) and
offers that endpoint with `proofnet storage onboard --endpoint` instead.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from proofnet.storage_objects import (
    ObjectStoreError,
    allow_public_reads,
    ensure_bucket,
    s3_client,
)

READY_LINE = "storage: serving S3 at {endpoint} (bucket {bucket})"


class ServeError(Exception):
    """The S3 server could not start; the message says why."""


@dataclass
class S3Server:
    host: str
    port: int
    _server: Any = None

    def start(self) -> str:
        try:
            from moto.server import ThreadedMotoServer
        except ImportError as exc:
            raise ServeError(
                "proofnet storage serve needs moto's S3 server: pip install 'proofnet[storage]'"
            ) from exc
        server = ThreadedMotoServer(ip_address=self.host, port=self.port, verbose=False)
        try:
            server.start()
        except OSError as exc:
            raise ServeError(f"cannot listen on {self.host}:{self.port}: {exc}") from exc
        self._server = server
        host, port = server.get_host_and_port()
        self.port = port
        return f"http://{self.host}:{port}"

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None


def serve(
    host: str, port: int, bucket: str, *, announce: Callable[[str], None], stop: threading.Event
) -> None:
    """Serve until `stop` is set; the bucket exists before the ready line is announced."""
    server = S3Server(host, port)
    endpoint = server.start()
    try:
        try:
            client = s3_client(endpoint, access_key="proofnet", secret_key="proofnet")
            ensure_bucket(client, bucket)
            allow_public_reads(client, bucket)
        except ObjectStoreError as exc:
            raise ServeError(str(exc)) from exc
        announce(READY_LINE.format(endpoint=endpoint, bucket=bucket))
        stop.wait()
    finally:
        server.stop()
