"""Cross-check of the devnet evaluator against Aiken's (test-only; needs Node).

`scripts/uplc_eval.mjs` runs `eval_phase_two_raw` from `@lucid-evolution/uplc` (Aiken's
uplc crate in WebAssembly), which builds its own script contexts from the raw
transaction. Identical execution units from both evaluators mean identical contexts and
identical costing.

Known difference, where the ledger wins: for Conway stake (de)registration certificates
with an explicit deposit (certificate types 7 and 8) Aiken writes the deposit as absent in
the V3 `TxCert`, while the Haskell ledger (protocol version 10 and later), and so the devnet,
writes it as present. Scripts that read that field see different data under the two.
Likewise, this Aiken build accepts a V3 script whose result is not the unit value; the
ledger (plutus-ledger-api, V3) rejects it, and so does the devnet.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chain.devnet.cost_models import cost_models_cbor
from chain.devnet.params import ProtocolParams
from chain.devnet.script_context import SlotConfig

REPO_ROOT = Path(__file__).resolve().parents[2]
EVAL_SCRIPT = REPO_ROOT / "scripts" / "uplc_eval.mjs"


class AikenUnavailable(RuntimeError):
    """Node or the `@lucid-evolution/uplc` package is not installed (run `make node`)."""


class AikenEvaluationError(RuntimeError):
    """Aiken's evaluator rejected the transaction (a script failed); `args[0]` is its trace."""


@dataclass(frozen=True)
class AikenRedeemer:
    tag: str
    index: int
    mem: int
    steps: int


def aiken_evaluate(
    tx_cbor: bytes,
    resolved: Sequence[tuple[bytes, bytes]],
    *,
    cost_models: Mapping[str, Sequence[int]],
    slot_config: SlotConfig,
    budget: tuple[int, int] = (ProtocolParams().max_tx_ex_mem, ProtocolParams().max_tx_ex_steps),
    timeout_s: float = 60.0,
) -> list[AikenRedeemer]:
    """Evaluate every redeemer of `tx_cbor` with Aiken.

    `resolved` holds (input CBOR, output CBOR) pairs for every spent and reference input;
    `budget` is (mem, steps). Raises `AikenEvaluationError` when a script fails.
    """
    node = shutil.which("node")
    if node is None:
        raise AikenUnavailable("node is not on PATH; install Node.js and run `make node`")
    if not (REPO_ROOT / "node_modules" / "@lucid-evolution" / "uplc").is_dir():
        raise AikenUnavailable(
            "@lucid-evolution/uplc is not installed; run `npm ci` at the repo root"
        )
    request = {
        "tx": tx_cbor.hex(),
        "inputs": [i.hex() for i, _ in resolved],
        "outputs": [o.hex() for _, o in resolved],
        "cost_models": cost_models_cbor(cost_models).hex(),
        "budget": {"mem": budget[0], "steps": budget[1]},
        "slot_config": {
            "zero_time_ms": slot_config.zero_time_ms,
            "zero_slot": slot_config.zero_slot,
            "slot_length_ms": slot_config.slot_length_ms,
        },
    }
    proc = subprocess.run(
        [node, str(EVAL_SCRIPT)],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        cwd=REPO_ROOT,
        check=False,
    )
    try:
        answer: dict[str, Any] = json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise RuntimeError(
            f"uplc_eval.mjs exited {proc.returncode} without JSON: {proc.stderr.strip()[:2000]}"
        ) from None
    if answer.get("missing"):
        raise AikenUnavailable(f"cannot load @lucid-evolution/uplc: {answer.get('error')}")
    if not answer.get("ok"):
        raise AikenEvaluationError(str(answer.get("error")))
    return [
        AikenRedeemer(r["tag"], int(r["index"]), int(r["mem"]), int(r["steps"]))
        for r in answer["redeemers"]
    ]
