"""Structured JSON logs: one object per line, naming the job, escrow and transaction.

Call sites pass the identifiers as `extra={"job_id": ..., "escrow": ..., "tx_id": ...}`;
the formatter writes every such field it finds next to the message.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any

FIELDS = (
    "job_id",
    "escrow",
    "tx_id",
    "attestation_id",
    "worker_key",
    "status",
    "reason",
    "duration_ms",
    "batch_id",
)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for name in FIELDS:
            value = record.__dict__.get(name)
            if value is not None:
                entry[name] = value
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str, sort_keys=True)


def configure(level: int = logging.INFO, stream: Any = None) -> logging.Handler:
    """Send the `oracle` loggers to `stream` (stderr) as JSON lines; returns the handler."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("oracle")
    logger.addHandler(handler)
    logger.setLevel(level)
    return handler
