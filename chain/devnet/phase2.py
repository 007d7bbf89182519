"""Phase-2 validation: run each redeemer's Plutus script with the uplc CEK machine.

A Plutus V3 script receives one argument, the ScriptContext, and succeeds iff evaluation
does not fail, stays within its budget and returns the unit constant. Consumed units are
counted as the ledger counts them, including the machine's startup cost. Plutus V1/V2
scripts are not supported by the devnet and are reported as failed evaluations with a
clear message.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from typing import Any

from uplc.ast import BuiltinUnit, Program
from uplc.cost_model import Budget
from uplc.machine import Machine
from uplc.tools import apply, unflatten

from chain.deep_stack import run_deep
from chain.devnet.cost_models import (
    UNSUPPORTED_BUILTINS,
    CostModelError,
    evaluator_cost_models,
)
from chain.devnet.plutus_tx import Script, Tx, decode_tx, iter_scripts, resolve_utxos
from chain.devnet.purposes import TAGS, NeededScript, needed_scripts_of
from chain.devnet.records import RedeemerEvaluation
from chain.devnet.script_context import ContextBuilder, ScriptContextError, SlotConfig

__all__ = ["SlotConfig", "evaluate_redeemers", "evaluate_script", "ScriptResult"]

_LANGUAGE_NAMES = {1: "PlutusV1", 2: "PlutusV2", 3: "PlutusV3"}


def evaluate_redeemers(
    tx_cbor: bytes | Tx,
    resolved: Mapping[Any, Any],
    *,
    slot_config: SlotConfig,
    cost_models: Mapping[str, Sequence[int]],
    budget: tuple[int, int] | None = None,
) -> list[RedeemerEvaluation]:
    """Evaluate every redeemer of the transaction, ordered by (tag, index).

    `budget=None`: each redeemer runs under its declared ex-units (submission);
    `budget=(mem, steps)`: each runs under that budget (`/utils/txs/evaluate`).
    `resolved` maps every spent and reference input to its output; `tx_cbor` may be the
    transaction already decoded (the ledger's phase 1 decoded it).
    """
    return run_deep(_evaluate_redeemers, tx_cbor, resolved, slot_config, cost_models, budget)


def _evaluate_redeemers(
    tx_cbor: bytes | Tx,
    resolved: Mapping[Any, Any],
    slot_config: SlotConfig,
    cost_models: Mapping[str, Sequence[int]],
    budget: tuple[int, int] | None,
) -> list[RedeemerEvaluation]:
    tx = tx_cbor if isinstance(tx_cbor, Tx) else decode_tx(tx_cbor)
    utxos = resolve_utxos(resolved)
    builder = ContextBuilder(tx, utxos, slot_config)
    needed = {(TAGS.index(n.tag), n.index): n for n in needed_scripts_of(tx.body, utxos)}
    scripts = {s.hash: s for s in reversed(list(iter_scripts(tx, utxos)))}
    latest = {(r.tag, r.index): r for r in tx.witnesses.redeemers}
    results = []
    for (tag, index), redeemer in sorted(latest.items()):
        limit = (redeemer.mem, redeemer.steps) if budget is None else budget
        results.append(
            _evaluate_one(
                builder, needed.get((tag, index)), tag, index, scripts, limit, cost_models
            )
        )
    return results


def _evaluate_one(
    builder: ContextBuilder,
    purpose: NeededScript | None,
    tag: int,
    index: int,
    scripts: Mapping[bytes, Script],
    limit: tuple[int, int],
    cost_models: Mapping[str, Sequence[int]],
) -> RedeemerEvaluation:
    name = TAGS[tag]

    def failed(error: str) -> RedeemerEvaluation:
        return RedeemerEvaluation(name, index, 0, 0, False, error)

    if purpose is None:
        return failed(f"redeemer ({name}, {index}) points at nothing locked by a script")
    script = scripts.get(bytes.fromhex(purpose.script_hash))
    if script is None:
        return failed(f"script {purpose.script_hash} is neither witnessed nor referenced")
    if script.language == 0:
        return failed(f"script {purpose.script_hash} is a native script and takes no redeemer")
    language = _LANGUAGE_NAMES[script.language]
    if language != "PlutusV3":
        return failed(f"{language} scripts are not supported by the devnet evaluator")
    if language not in cost_models:
        return failed(f"no {language} cost model in the protocol parameters")
    try:
        context = builder.script_context(tag, index)
    except ScriptContextError as err:
        return failed(f"cannot build the script context: {err}")
    try:
        result = evaluate_script(script.body, [context], language, cost_models[language], limit)
    except (CostModelError, ValueError) as err:
        return failed(str(err))
    return RedeemerEvaluation(
        name, index, result.mem, result.steps, result.ok, result.error, tuple(result.logs)
    )


class ScriptResult:
    """Outcome of one script run (units consumed, including startup)."""

    __slots__ = ("ok", "mem", "steps", "error", "logs")

    def __init__(self, ok: bool, mem: int, steps: int, error: str | None, logs: list[str]):
        self.ok = ok
        self.mem = mem
        self.steps = steps
        self.error = error
        self.logs = logs


def evaluate_script(
    script_body: bytes,
    args: Sequence[Any],
    language: str,
    cost_model: Sequence[int],
    budget: tuple[int, int],
) -> ScriptResult:
    """Apply a CBOR-wrapped flat script to `args` and run it under `budget` (mem, steps)."""
    models = evaluator_cost_models(language, cost_model)
    program = _decode_program(script_body, language)
    machine = Machine(Budget(cpu=budget[1], memory=budget[0]), models.machine, models.builtin)
    try:
        outcome = machine.eval(apply(program, *args))
    except RuntimeError as err:
        # uplc charges the machine's startup cost outside its own error handling, so a
        # budget below that cost escapes as an exception rather than a failed result.
        return ScriptResult(
            False,
            budget[0],
            budget[1],
            f"out of budget: needs more than {budget[0]} memory / {budget[1]} steps ({err})",
            [],
        )
    used = outcome.cost
    logs = [str(log) for log in outcome.logs]
    result = outcome.result
    if isinstance(result, Exception):
        message = str(result) or type(result).__name__
        if used.cpu > budget[1] or used.memory > budget[0]:
            message = (
                f"out of budget: needs more than {budget[0]} memory / {budget[1]} steps ({message})"
            )
        return ScriptResult(False, used.memory, used.cpu, message, logs)
    if language == "PlutusV3" and not isinstance(result, BuiltinUnit):
        return ScriptResult(
            False, used.memory, used.cpu, "a Plutus V3 script must return the unit value", logs
        )
    return ScriptResult(True, used.memory, used.cpu, None, logs)


@functools.lru_cache(maxsize=256)
def _decode_program(script_body: bytes, language: str) -> Program:
    try:
        program = unflatten(script_body)
    except Exception as err:  # the flat decoder raises assorted errors on bad input
        unsupported = _unsupported_builtin(err)
        if unsupported is not None:
            raise ValueError(unsupported) from err
        raise ValueError(f"script is not a valid flat-encoded program: {err}") from err
    allowed = {(1, 0, 0), (1, 1, 0)} if language == "PlutusV3" else {(1, 0, 0)}
    if tuple(program.version) not in allowed:
        raise ValueError(f"program version {program.version} is not allowed in {language}")
    return program


_UNKNOWN_BUILTIN = re.compile(r"^(\d+) is not a valid BuiltInFun$")


def _unsupported_builtin(err: Exception) -> str | None:
    """The refusal for a protocol-11 builtin uplc cannot decode, None for other errors."""
    found = _UNKNOWN_BUILTIN.match(str(err))
    if found is None:
        return None
    tag = int(found.group(1))
    name = UNSUPPORTED_BUILTINS.get(tag)
    if name is None:
        return f"script uses builtin tag {tag}, which no protocol version defines"
    return (
        f"script uses the builtin {name} (flat tag {tag}), which protocol 11 enables but the "
        "devnet's evaluator (uplc 1.3.3) does not implement; the devnet refuses the script "
        "rather than guess its result or its cost"
    )


def tx_scripts(tx: Tx, resolved: Mapping[Any, Any]) -> dict[str, Script]:
    """All scripts a transaction can run, keyed by hex hash (witnessed ones win)."""
    utxos = resolve_utxos(resolved)
    found: dict[str, Script] = {}
    for script in iter_scripts(tx, utxos):
        found.setdefault(script.hash.hex(), script)
    return found
