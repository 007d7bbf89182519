"""Where a job's results go: the destinations a job spec names, and what each acknowledged.

A spec without `destinations` sends its results to the API's store only (as before the field
existed). A spec that names them gets each of:

- `api`: the API's store (the results are uploaded there as always; naming it or not only
  decides whether the submitter also wants them there);
- `webhook`: an https URL that receives each JSON or CSV result inline, one POST per result,
  at most `WEBHOOK_MAX_BYTES` each (what is sent: a sealed job's results are sealed);
- `s3_presigned`: one pre-signed PUT URL per result name chosen by the submitter (an S3
  bucket of theirs, or any server that answers a PUT with 2xx and an ETag).

A sealed job's results go to every destination sealed, exactly as the API's store receives
them. A `DeliveryReport` is what the worker reports for one destination: every result it
sent and how the far end answered; the API counts a job complete only when every destination
acknowledged. Pure models: nothing here opens a connection.
"""

from __future__ import annotations

import re
from typing import Annotated, Final, Literal

from pydantic import AfterValidator, Field, model_validator

from proofnet.messages.fields import Frozen, Hex64, NonNegInt, TupleOf
from proofnet.messages.result_paths import ResultNameError, check_result_name

# What a webhook receives inline per result: small JSON and CSV, not models.
WEBHOOK_MAX_BYTES: Final = 256 * 1024
WEBHOOK_KINDS: Final = ("json", "csv")
MAX_DESTINATIONS: Final = 16
MAX_URL_CHARS: Final = 4096
_HTTPS_URL = re.compile(r"https://[^\s/?#@]+(?:[/?#]\S*)?")


def _https_url(value: str) -> str:
    if len(value) > MAX_URL_CHARS or not _HTTPS_URL.fullmatch(value):
        raise ValueError(
            f"a destination URL must be https://host/... without spaces or credentials "
            f"(at most {MAX_URL_CHARS} characters), got {value[:120]!r}"
        )
    return value


def _result_name(value: str) -> str:
    try:
        return check_result_name(value)
    except ResultNameError as exc:
        raise ValueError(str(exc)) from None


HttpsUrl = Annotated[str, AfterValidator(_https_url)]
ResultName = Annotated[str, AfterValidator(_result_name)]


class ApiDestination(Frozen):
    """The API's store (the default)."""

    kind: Literal["api"] = "api"


class WebhookDestination(Frozen):
    """An https endpoint receiving each JSON/CSV result inline (POST, body = the file)."""

    kind: Literal["webhook"] = "webhook"
    url: HttpsUrl


class PresignedPut(Frozen):
    """One result file and the pre-signed PUT URL it is uploaded to."""

    name: ResultName
    url: HttpsUrl


class S3PresignedDestination(Frozen):
    """The submitter's bucket: a pre-signed PUT URL per result name (the names must be result
    files the spec declares; results not named here are not sent to this destination)."""

    kind: Literal["s3_presigned"] = "s3_presigned"
    puts: Annotated[TupleOf[PresignedPut], Field(min_length=1, max_length=256)]

    @model_validator(mode="after")
    def _names_unique(self) -> S3PresignedDestination:
        names = [p.name for p in self.puts]
        if len(set(names)) != len(names):
            raise ValueError("s3_presigned.puts names a result twice")
        return self


Destination = Annotated[
    ApiDestination | WebhookDestination | S3PresignedDestination, Field(discriminator="kind")
]
DestinationKind = Literal["api", "webhook", "s3_presigned"]
Destinations = Annotated[TupleOf[Destination], Field(max_length=MAX_DESTINATIONS)]


class ResultAck(Frozen):
    """How one destination answered one result: the HTTP status, and for S3 the ETag."""

    name: ResultName
    sha256: Hex64  # of the bytes sent (sealed: the envelope)
    status: Annotated[int, Field(ge=0, le=999)]  # 0: never sent (refused before sending)
    etag: Annotated[str, Field(max_length=256)] | None = None


class DeliveryReport(Frozen):
    """One destination's outcome, as the worker reports it to the API: `acknowledged` only
    when every result meant for it was answered with 2xx (and, for S3, an ETag)."""

    index: NonNegInt  # the destination's position in the spec's `destinations`
    kind: DestinationKind
    acknowledged: bool
    results: Annotated[TupleOf[ResultAck], Field(max_length=256)] = ()
    reason: Annotated[str, Field(max_length=1000)] = ""
