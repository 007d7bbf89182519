"""`proofnet approvals ...`: submitter approval from the command line, signing with a key file.

    proofnet approvals list --key-file K [--api-url U] [--json]      (senior members)
    proofnet approvals endorse ID --key-file K [--api-url U]         (senior members)
    proofnet approvals apply --key-file K [--statement TEXT]         (applicants)
    proofnet approvals status --key-file K                           (applicants)

It talks to the API over HTTP only, signed in as `proofnet job` is (api.client_cli). An
endorsement is a CIP-8 signature by the key file's payment key over the application's
endorsement message; the message is built here from the application's id and applicant and
the network (proofnet.messages.endorsement) and compared with what the API sent, so the API
can never get anything else signed with the key. Expected failures print one line and exit 2.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from api.client_cli import JobClient, JobCliError, open_client
from proofnet.messages.endorsement import endorsement_message

app = typer.Typer(
    help="Submitter approval: list applications and endorse them (senior members), apply "
    "and follow your own application.",
    no_args_is_help=True,
)

KeyFile = Annotated[
    Path, typer.Option("--key-file", help="your wallet's payment .skey file", exists=True)
]
ApiUrl = Annotated[str | None, typer.Option("--api-url", help="API base URL")]
_T = TypeVar("_T")


class ApprovalError(Exception):
    """An approval step cannot go on; the message says why."""


def progress(application: dict[str, Any]) -> str:
    """'2 of 5 endorsements, by addr_a, addr_b' (or 'approved ...')."""
    endorsers = [str(e["address"]) for e in application.get("endorsers", [])]
    count = f"{application['endorsements']} of {application['endorsements_required']}"
    by = f", by {', '.join(endorsers)}" if endorsers else ""
    if application.get("approved"):
        return f"approved ({count} endorsements{by})"
    return f"{count} endorsements{by}"


def _key_hash(client: JobClient) -> str:
    return str(client.key.to_verification_key().hash().payload.hex())


def endorse(client: JobClient, application_id: int, network: str) -> dict[str, Any]:
    """Sign and send this key's endorsement of application `application_id`."""
    application = client.call("GET", f"/approvals/{application_id}")
    expected = endorsement_message(
        network=network,
        applicant_address=str(application["applicant"]),
        application_id=application_id,
    )
    if application.get("id") != application_id or application.get("endorsement_message") != (
        expected
    ):
        raise ApprovalError(
            f"the API asked to sign something other than the endorsement of application "
            f"{application_id} on {network}; refusing to sign (is --api-url the network's API, "
            "and PROOFNET_NETWORK its network?)"
        )
    mine = _key_hash(client)
    if application.get("applicant_key_hash") == mine:
        raise ApprovalError(
            f"application {application_id} is filed under an address of your own key"
        )
    if any(e.get("key_hash") == mine for e in application.get("endorsers", [])):
        raise ApprovalError(f"your key has already endorsed application {application_id}")
    signed = client.sign_message(expected)
    return dict(client.call("POST", f"/approvals/{application_id}/endorsements", json=signed))


def _run(fn: Callable[[], _T]) -> _T:
    try:
        return fn()
    except (JobCliError, ApprovalError) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from e


def _open(key_file: Path, api_url: str | None) -> tuple[JobClient, str]:
    from proofnet.settings import build_settings

    settings = build_settings()
    return _run(lambda: open_client(key_file, api_url, settings)), settings.network


def _line(application: dict[str, Any], mine: str) -> str:
    notes = []
    if application.get("applicant_key_hash") == mine:
        notes.append("yours")
    if any(e.get("key_hash") == mine for e in application.get("endorsers", [])):
        notes.append("you endorsed it")
    note = f" [{'; '.join(notes)}]" if notes else ""
    statement = str(application.get("statement") or "").replace("\n", " ")
    said = f'\n    "{statement[:200]}"' if statement else ""
    return f"#{application['id']} {application['applicant']}: {progress(application)}{note}{said}"


@app.command("list")
def list_applications(
    key_file: KeyFile,
    api_url: ApiUrl = None,
    json_out: Annotated[bool, typer.Option("--json", help="print the API's JSON")] = False,
) -> None:
    """Applications waiting for endorsements, oldest first, with who endorsed each."""
    client, _network = _open(key_file, api_url)
    listed = _run(lambda: client.call("GET", "/approvals/pending"))
    if json_out:
        typer.echo(json.dumps(listed, indent=2))
        return
    if not listed["data"]:
        typer.echo("no applications are waiting for endorsements")
        return
    mine = _key_hash(client)
    for application in listed["data"]:
        typer.echo(_line(application, mine))


@app.command("endorse")
def endorse_command(
    application_id: Annotated[int, typer.Argument(min=1, help="the application's number")],
    key_file: KeyFile,
    api_url: ApiUrl = None,
) -> None:
    """Endorse an application with your key (a CIP-8 signature over its message)."""
    client, network = _open(key_file, api_url)
    answer = _run(lambda: endorse(client, application_id, network))
    typer.echo(f"endorsed #{answer['id']} {answer['applicant']}: {progress(answer)}")


@app.command("apply")
def apply_command(
    key_file: KeyFile,
    api_url: ApiUrl = None,
    statement: Annotated[
        str, typer.Option("--statement", help="why you want to submit jobs (seniors read it)")
    ] = "",
) -> None:
    """Apply to become a submitter; senior members then endorse your application."""
    client, _network = _open(key_file, api_url)
    answer = _run(lambda: client.call("POST", "/approvals", json={"statement": statement}))
    typer.echo(f"applied as #{answer['id']} {answer['applicant']}: {progress(answer)}")


@app.command("status")
def status_command(key_file: KeyFile, api_url: ApiUrl = None) -> None:
    """Your application's progress: how many endorsements of how many, and by whom."""
    client, _network = _open(key_file, api_url)
    answer = _run(lambda: client.call("GET", "/approvals/me"))
    typer.echo(f"#{answer['id']} {answer['applicant']}: {progress(answer)}")
