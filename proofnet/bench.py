"""`proofnet bench ...`: each benchmark lives beside the code it measures."""

from __future__ import annotations

import typer

app = typer.Typer(no_args_is_help=True, help="Benchmarks; figures go in docs/benchmarks.md.")


@app.command("devnet")
def bench_devnet(
    payments: int = typer.Option(300, help="simple payments to validate"),
    plutus: int = typer.Option(60, help="Plutus spends to validate"),
    utxos: int = typer.Option(100_000, help="UTxOs for the memory measurement"),
    json_out: bool = typer.Option(False, "--json", help="print one JSON line"),
) -> None:
    """Transactions/s validated (payments, Plutus spends) and memory per 100k UTxOs."""
    from chain.devnet.bench import run_devnet_bench

    run_devnet_bench(payments=payments, plutus=plutus, utxos=utxos, json_out=json_out)
