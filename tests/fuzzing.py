"""Schemathesis over a served app's own OpenAPI schema, shared by the API, oracle and devnet
fuzz tests: every operation gets its own time-bounded Hypothesis run (`examples` cases,
derandomized, so a failure reproduces), and every answer must be no 5xx and, where the
schema documents its status, a body that conforms to it.

Driven by hand rather than through schemathesis' pytest plugin, which does not load under
this pytest version.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error, response_schema_conformance

CHECKS = [not_a_server_error, response_schema_conformance]


@dataclass
class FuzzReport:
    operations: int = 0
    statuses: list[int] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


def _describe(error: BaseException) -> str:
    """The failed checks' titles and the reproducing request, one line each."""
    lines = [ln.strip() for ln in str(error).splitlines()]
    for sub in getattr(error, "exceptions", ()):
        lines += [ln.strip() for ln in str(sub).splitlines()]
    keep = [ln for ln in lines if ln.startswith(("- ", "curl ", "[", "Value", '"'))][:12]
    return f"{type(error).__name__}: " + " | ".join(keep or lines[:6])


def fuzz_app(
    app: Any,
    schema_path: str,
    *,
    examples: int,
    prepare: Callable[[Any], None] | None = None,
    skip: Callable[[Any], bool] | None = None,
) -> FuzzReport:
    """Fuzz every operation of the ASGI `app` whose schema is at `schema_path`; `prepare`
    may add headers to a case (a signed-in token); `skip` leaves operations out."""
    schema = schemathesis.openapi.from_asgi(schema_path, app)
    report = FuzzReport()
    for result in schema.get_all_operations():
        operation = result.ok()
        if skip is not None and skip(operation):
            continue
        report.operations += 1

        @given(case=operation.as_strategy())
        @settings(
            max_examples=examples,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            derandomize=True,
            database=None,
        )
        def conforms(case: Any) -> None:
            if prepare is not None:
                prepare(case)
            response = case.call()
            report.statuses.append(response.status_code)
            case.validate_response(response, checks=CHECKS)

        try:
            conforms()
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as e:  # failed checks arrive as a BaseExceptionGroup
            report.failures.append(f"{operation.label}: {_describe(e)}")
    return report
