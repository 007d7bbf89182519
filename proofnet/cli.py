"""The `proofnet` console command: one sub-command per role.

Each role's commands live beside the role (`chain/devnet/cli.py`, `worker/cli.py`, ...); this
module only mounts them, so a provider's machine running `proofnet worker` never imports the
oracle or the API. Mounting also makes every path option absolute (against the directory the
command was started in) before a role sees it: roles hand paths to git, child processes and
containers that run elsewhere, where a relative path names something else.
"""

from __future__ import annotations

import functools
import importlib
from enum import StrEnum
from pathlib import PurePath
from typing import Any

import click
import typer

# (command name, module, attribute holding its Typer app, help)
ROLES: list[tuple[str, str, str, str]] = [
    ("devnet", "chain.devnet.cli", "app", "Run and administer the local Cardano devnet."),
    ("chain", "chain.offchain.cli", "app", "Deploy and operate the on-chain protocol."),
    ("bond", "chain.offchain.bond_cli", "app", "Lock, unbond and withdraw a provider bond."),
    ("worker", "worker.cli", "app", "Onboard this machine's GPUs and run jobs as a provider."),
    ("api", "api.cli", "app", "Serve the API and administer its database."),
    ("storage", "worker.storage.cli", "app", "Offer storage (an S3 endpoint) as a provider."),
    ("job", "api.client_cli", "app", "Submit and follow jobs with a key file (submitters)."),
    ("oracle", "oracle.cli", "app", "Verify attestations and settle payouts in batches."),
    ("chaos", "oracle.settlement.chaos", "app", "Fault-injection runs against local roles."),
    ("bench", "proofnet.bench", "app", "Benchmarks whose figures go in docs/benchmarks.md."),
    ("audit", "auditor.audit", "app", "Audit a settlement transaction from the chain."),
    (
        "approvals",
        "api.approvals_cli",
        "app",
        "List submitter applications and endorse them (senior members).",
    ),
]


class _LazyGroup(typer.core.TyperGroup):
    """Imports a role's module only when that role's command is invoked: `proofnet --help`
    lists the roles from ROLES without importing any (pycardano, FastAPI, SQLAlchemy,
    Docker and OpShin each take a second or more to import)."""

    _listing = False

    def list_commands(self, ctx):  # type: ignore[no-untyped-def]
        return sorted({*super().list_commands(ctx), *(r[0] for r in ROLES)})

    def format_help(self, ctx, formatter):  # type: ignore[no-untyped-def]
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False

    def get_command(self, ctx, cmd_name):  # type: ignore[no-untyped-def]
        for name, module, attr, help_text in ROLES:
            if name == cmd_name and self._listing:
                return click.Group(name, help=help_text)  # a listing entry, not the role
            if name == cmd_name:
                try:
                    sub = getattr(importlib.import_module(module), attr)
                except ImportError as exc:
                    # A role whose optional parts are not installed must not break `--help`
                    # for the others; invoking it reports why.
                    return _unavailable(name, help_text, exc)
                command = typer.main.get_command(sub)
                command.name = name
                command.help = command.help or help_text
                absolute_path_options(command)
                one_line_errors(command)
                return command
        own = super().get_command(ctx, cmd_name)
        if own is not None:
            one_line_errors(own)
        return own

    def invoke(self, ctx):  # type: ignore[no-untyped-def]
        """Expected failures end in one line on stderr and exit code 2 (proofnet.cli_errors);
        `--debug` (or PROOFNET_DEBUG=1) shows the traceback instead."""
        from proofnet.cli_errors import EXIT_CODE, usage_line

        try:
            return super().invoke(ctx)
        except _USAGE_ERROR as exc:
            if _debugging():
                raise
            where = getattr(exc, "ctx", None) or ctx
            line = usage_line(exc.format_message(), where.command_path)  # type: ignore[attr-defined]
            typer.secho(f"error: {line}", fg=typer.colors.RED, err=True)
            raise typer.Exit(EXIT_CODE) from exc
        except CommandFailed as exc:
            typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
            raise typer.Exit(EXIT_CODE) from exc


# Typer carries its own copy of click: its usage errors (a missing option, a bad value) are
# the base of typer.BadParameter, not click.UsageError.
_USAGE_ERROR: type[Exception] = next(
    c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError"
)
_DEBUG = {"on": False}


class CommandFailed(Exception):
    """An expected failure of a command, already told in one line."""


def _debugging() -> bool:
    import os

    return _DEBUG["on"] or os.environ.get("PROOFNET_DEBUG", "") not in ("", "0")


def one_line_errors(command: Any) -> None:
    """Turn what `command`'s function (and its sub-commands') raise for an expected failure
    into CommandFailed, in the words of proofnet.cli_errors.explain; leave bugs alone."""
    callback = getattr(command, "callback", None)
    if callback is not None and not getattr(callback, "_one_line_errors", False):

        @functools.wraps(callback)
        def with_one_line_errors(*args: Any, **kwargs: Any) -> Any:
            try:
                return callback(*args, **kwargs)
            except (typer.TyperException, typer.Exit, typer.Abort, CommandFailed):
                raise
            except Exception as exc:
                from proofnet.cli_errors import explain

                if _debugging():
                    raise
                line = explain(exc, params=kwargs)
                if line is None:
                    raise
                raise CommandFailed(line) from exc

        with_one_line_errors._one_line_errors = True  # type: ignore[attr-defined]
        command.callback = with_one_line_errors
    for sub in (getattr(command, "commands", None) or {}).values():
        one_line_errors(sub)


def _absolute_value(value: Any) -> Any:
    from proofnet.settings import absolute

    if isinstance(value, PurePath):
        return absolute(value)
    if isinstance(value, list | tuple) and any(isinstance(v, PurePath) for v in value):
        return type(value)(absolute(v) if isinstance(v, PurePath) else v for v in value)
    return value


def absolute_path_options(command: Any) -> None:
    """Hand `command`'s function (and its sub-commands') every path option and argument
    absolute, made so against the directory the command was started in."""
    callback = getattr(command, "callback", None)
    if callback is not None and not getattr(callback, "_absolute_paths", False):

        @functools.wraps(callback)
        def with_absolute_paths(*args: Any, **kwargs: Any) -> Any:
            return callback(*args, **{k: _absolute_value(v) for k, v in kwargs.items()})

        with_absolute_paths._absolute_paths = True  # type: ignore[attr-defined]
        command.callback = with_absolute_paths
    for sub in (getattr(command, "commands", None) or {}).values():
        absolute_path_options(sub)


def _unavailable(name: str, help_text: str, exc: ImportError) -> click.Command:
    def fail() -> None:
        raise click.ClickException(f"`proofnet {name}` cannot load: {exc}")

    return click.Command(name, callback=fail, help=f"{help_text} (unavailable: {exc})")


app = typer.Typer(
    cls=_LazyGroup,
    no_args_is_help=True,
    help="proofnet: verified GPU training paid in NTX on Cardano.",
    pretty_exceptions_show_locals=False,
)


@app.callback()
def _root(
    debug: bool = typer.Option(
        False, "--debug", help="show the traceback of a failure instead of its one-line error"
    ),
) -> None:
    """proofnet: verified GPU training paid in NTX on Cardano."""
    _DEBUG["on"] = debug


@app.command()
def version() -> None:
    """Print the installed proofnet version."""
    from proofnet import __version__

    typer.echo(__version__)


class DemoShape(StrEnum):
    """What `proofnet demo` posts (demos.demo.SHAPES)."""

    single = "single"
    relay = "relay"
    stopped = "stopped"


@app.command()
def demo(
    data_dir: str = typer.Option(
        "", help="keep the demo's chain and logs here (default: a temp dir)"
    ),
    shape: DemoShape = typer.Option(
        DemoShape.single,
        help="single: one training job. relay: a 3-stage relay pipeline over 3 data shards "
        "with evaluations, run by 3 workers handing the checkpoint on, settled once with one "
        "payout per unit. stopped: a relay whose evaluation fails, so the pipeline stops and "
        "the rest is refunded.",
    ),
) -> None:
    """Run the loop on this machine against a fresh local devnet."""
    from pathlib import Path

    from demos.demo import DemoError, DemoOptions, run_demo

    try:
        run_demo(Path(data_dir) if data_dir else None, options=DemoOptions(shape=shape.value))
    except DemoError:
        raise typer.Exit(1) from None  # the demo printed which role failed and its log


def main() -> None:
    app()


if __name__ == "__main__":
    main()
