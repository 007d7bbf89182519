"""Hand-written UPLC cores of the two scripts every settlement runs (issue 14.6).

A batch of N escrows runs the escrow's Settle spend N times and the batch script's
per-escrow loop N times; compiled from OpShin these cost about 71,000 and 270,000 memory
units per escrow, which made memory, not size, the limit of a batch. The CEK machine
charges 100 memory units per step (each variable, lambda, application, force, delay,
builtin), so the cores below are written step by step:
- polymorphic builtins are forced once, up front, and bound to variables;
- data is walked with the list and pair builtins directly (no record is decoded: a field
  is read where it is used, and compared as Data with `equalsData`, so no unBData/bData
  round trip), and loops are self-applied lambdas whose state is their arguments;
- each per-escrow closure captures what it needs instead of being passed it.

They wrap the OpShin programs rather than replace them: `wrap_escrow(program)` answers
Settle itself and hands every other redeemer (Refund, Cancel) to OpShin's escrow program;
`wrap_batch(program)` answers the withdrawal (`RewardingScript`) itself and hands every
other purpose (certificates) to OpShin's batch program. The OpShin validators
(`escrow.py`, `batch_settle.py`) remain the readable definition: these cores make exactly
their checks, in the same order, with the same trace messages (kept in the trace build,
stripped in the production build as OpShin strips its own), and
tests/chain/contracts/test_settle_core.py runs both on the same contexts and requires the
same verdict. Differences, all stricter: a negative `config_ref_index` fails (OpShin would
count from the end), and Data compared with `equalsData` must be the very constructor the
ledger writes (OpShin would have failed on anything else while decoding it).

Compiled by `chain.offchain.compile` into the committed build; this module only builds
UPLC terms (`uplc.ast`), it runs nothing.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import TypeAlias

import uplc.ast as U

BF = U.BuiltInFun
Term: TypeAlias = U.AST

# Polymorphic builtins, forced once: the number of forces each needs.
_FORCED = {
    "headList": (BF.HeadList, 1),
    "tailList": (BF.TailList, 1),
    "chooseList": (BF.ChooseList, 2),
    "fstPair": (BF.FstPair, 2),
    "sndPair": (BF.SndPair, 2),
    "ite": (BF.IfThenElse, 1),
    "trace": (BF.Trace, 1),
    "mkCons": (BF.MkCons, 1),
}
# Monomorphic builtins are used as they are (no force to save).
_PLAIN = {
    "unConstrData": BF.UnConstrData,
    "unListData": BF.UnListData,
    "unMapData": BF.UnMapData,
    "unIData": BF.UnIData,
    "unBData": BF.UnBData,
    "bData": BF.BData,
    "constrData": BF.ConstrData,
    "equalsData": BF.EqualsData,
    "equalsInteger": BF.EqualsInteger,
    "lessThanEqualsInteger": BF.LessThanEqualsInteger,
    "lessThanInteger": BF.LessThanInteger,
    "addInteger": BF.AddInteger,
    "subtractInteger": BF.SubtractInteger,
    "lengthOfByteString": BF.LengthOfByteString,
    "appendByteString": BF.AppendByteString,
    "integerToByteString": BF.IntegerToByteString,
    "blake2b_256": BF.Blake2b_256,
}


class _Builder:
    """Term constructors with fresh names; `traces` keeps assertion messages."""

    def __init__(self, traces: bool) -> None:
        self.traces = traces
        self._ids = itertools.count()

    # --- core syntax ------------------------------------------------------------------

    def fresh(self, hint: str) -> str:
        return f"{hint}_{next(self._ids)}"

    @staticmethod
    def v(name: str) -> Term:
        return U.Variable(name)

    @staticmethod
    def app(f: Term, *args: Term) -> Term:
        for a in args:
            f = U.Apply(f, a)
        return f

    @staticmethod
    def lam(names: list[str], body: Term) -> Term:
        for n in reversed(names):
            body = U.Lambda(n, body)
        return body

    def let(self, name: str, value: Term, body: Term) -> Term:
        return U.Apply(U.Lambda(name, body), value)

    def b(self, name: str, *args: Term) -> Term:
        """A builtin applied to `args` (forced ones through their bound variable)."""
        fn: Term = U.Variable(f"b_{name}") if name in _FORCED else U.BuiltIn(_PLAIN[name])
        return self.app(fn, *args)

    @staticmethod
    def int_(n: int) -> Term:
        return U.BuiltinInteger(n)

    @staticmethod
    def unit() -> Term:
        return U.BuiltinUnit()

    def if_(self, cond: Term, then: Term, other: Term) -> Term:
        return U.Force(self.b("ite", cond, U.Delay(then), U.Delay(other)))

    def if_null(self, xs: Term, empty: Term, other: Term) -> Term:
        """`chooseList`: one builtin instead of nullList and ifThenElse."""
        return U.Force(self.b("chooseList", xs, U.Delay(empty), U.Delay(other)))

    def fail(self, message: str) -> Term:
        if not self.traces:
            return U.Error()
        return U.Force(self.b("trace", U.BuiltinString(message), U.Delay(U.Error())))

    def check(self, cond: Term, message: str, rest: Term) -> Term:
        """`assert cond, message` followed by `rest`."""
        return self.if_(cond, rest, self.fail(message))

    # --- data access ------------------------------------------------------------------

    def fields(self, d: Term) -> Term:
        return self.b("sndPair", self.b("unConstrData", d))

    def tag(self, d: Term) -> Term:
        return self.b("fstPair", self.b("unConstrData", d))

    def head(self, xs: Term) -> Term:
        return self.b("headList", xs)

    def tail(self, xs: Term, n: int = 1) -> Term:
        for _ in range(n):
            xs = self.b("tailList", xs)
        return xs

    def nth(self, xs: Term, n: int) -> Term:
        return self.head(self.tail(xs, n))

    def ada(self, value_pairs: Term) -> Term:
        """Lovelace of a ledger value (its first entry, as the ledger writes it)."""
        return self.b(
            "unIData",
            self.b(
                "sndPair", self.head(self.b("unMapData", self.b("sndPair", self.head(value_pairs))))
            ),
        )

    def script_credential(self, hash_data: Term) -> Term:
        """`ScriptCredential(h)` as Data, from `h` as Data (B)."""
        empty = U.BuiltinList([], U.PlutusData())
        return self.b("constrData", self.int_(1), self.b("mkCons", hash_data, empty))

    def rec(
        self, name: str, params: list[str], body: Callable[[Callable[..., Term]], Term]
    ) -> Term:
        """A self-applied recursive function bound to `name`: `body(call)` builds its body,
        where `call(*args)` is the recursive call, and the function is also in scope as
        `name` (its self argument), so nested closures can call it the same way. Bind the
        result to `name` with `let` and call it as `[name name args...]`."""
        self_name = name

        def call(*args: Term) -> Term:
            return self.app(self.v(self_name), self.v(self_name), *args)

        return self.lam([self_name, *params], body(call))

    def with_builtins(self, body: Term) -> Term:
        for name, (fn, forces) in _FORCED.items():
            t: Term = U.BuiltIn(fn)
            for _ in range(forces):
                t = U.Force(t)
            body = self.let(f"b_{name}", t, body)
        return body


def _drop(m: _Builder, name: str) -> Term:
    """`name self xs n`: `xs` without its first `n` elements (n >= 0; a negative `n` walks
    off the end of the list and fails)."""
    return m.rec(
        name,
        ["xs", "n"],
        lambda call: m.if_(
            m.b("equalsInteger", m.v("n"), m.int_(0)),
            m.v("xs"),
            call(m.tail(m.v("xs")), m.b("subtractInteger", m.v("n"), m.int_(1))),
        ),
    )


def _is_key_input(m: _Builder, txininfo: Term) -> Term:
    """Whether a `TxInInfo`'s address has a key payment credential (constructor 0)."""
    resolved = m.nth(m.fields(txininfo), 1)
    payment = m.head(m.fields(m.head(m.fields(resolved))))
    return m.b("equalsInteger", m.tag(payment), m.int_(0))


def escrow_core(opshin: Term, *, traces: bool) -> Term:
    """The escrow script: Settle here, anything else in OpShin's `escrow.validator`.

    Settle (`escrow.py`): the purpose is a spend; the datum is present and its first field
    is the batch script hash; the withdrawals hold that script credential with an amount
    >= 0 (`withdrawals.get(key, -1) >= 0`)."""
    m = _Builder(traces)
    ctx = "ctx"

    find = m.rec(
        "find",
        ["ws"],
        lambda call: m.if_null(
            m.v("ws"),
            m.fail("batch not invoked"),
            m.let(
                "w",
                m.head(m.v("ws")),
                m.if_(
                    m.b("equalsData", m.b("fstPair", m.v("w")), m.v("key")),
                    m.check(
                        m.b(
                            "lessThanEqualsInteger",
                            m.int_(0),
                            m.b("unIData", m.b("sndPair", m.v("w"))),
                        ),
                        "batch not invoked",
                        m.unit(),
                    ),
                    call(m.tail(m.v("ws"))),
                ),
            ),
        ),
    )
    settle = m.let(
        "pp",
        m.b("unConstrData", m.nth(m.v("cf"), 2)),
        m.check(
            m.b("equalsInteger", m.b("fstPair", m.v("pp")), m.int_(1)),
            "escrow only validates spending",
            m.let(
                # SomeDatum(datum).datum: a NoDatum has no field and fails here.
                "inline",
                m.head(m.fields(m.nth(m.b("sndPair", m.v("pp")), 1))),
                m.let(
                    "key",
                    m.script_credential(m.head(m.fields(m.v("inline")))),
                    m.let(
                        "find",
                        find,
                        m.app(
                            m.v("find"),
                            m.v("find"),
                            m.b("unMapData", m.nth(m.fields(m.head(m.v("cf"))), 6)),
                        ),
                    ),
                ),
            ),
        ),
    )
    body = m.let(
        "cf",
        m.fields(m.v(ctx)),
        m.if_(
            m.b("equalsInteger", m.tag(m.nth(m.v("cf"), 1)), m.int_(0)),
            settle,
            m.app(opshin, m.v(ctx)),
        ),
    )
    return m.lam([ctx], m.with_builtins(body))


def batch_core(opshin: Term, *, traces: bool) -> Term:
    """The batch script: the withdrawal here, certificates in OpShin's
    `batch_settle.validator` (see that module for the rules, checked here in its order)."""
    m = _Builder(traces)
    params = ["p_escrow", "p_policy", "p_config", "ctx"]
    V = m.v

    # --- per escrow: payouts, then the refund output; then the next entry ---------------

    def payouts(call: Callable[..., Term]) -> Term:
        # args: pays outs op bl nl al (budget, NTX and ADA left)
        refund = m.check(
            m.b("lessThanEqualsInteger", m.int_(0), V("bl")),
            "payouts exceed the budget",
            m.check(
                m.b("lessThanEqualsInteger", V("op"), V("ridx")),
                "output indices must strictly increase",
                m.let(
                    "routs",
                    m.app(
                        V("drop"), V("drop"), V("outs"), m.b("subtractInteger", V("ridx"), V("op"))
                    ),
                    m.let(
                        "rf",
                        m.fields(m.head(V("routs"))),
                        m.check(
                            m.b("equalsData", m.head(V("rf")), V("submitter")),
                            "remainder must go to the submitter's full address",
                            m.let(
                                "rv",
                                m.b("unMapData", m.nth(V("rf"), 1)),
                                m.let(
                                    "after_ntx",
                                    U.Delay(
                                        m.check(
                                            m.b("lessThanEqualsInteger", V("al"), m.ada(V("rv"))),
                                            "ADA remainder",
                                            m.app(
                                                V("entries"),
                                                V("entries"),
                                                m.tail(V("es")),
                                                m.tail(V("here")),
                                                m.b("addInteger", V("idx"), m.int_(1)),
                                                m.tail(V("routs")),
                                                m.b("addInteger", V("ridx"), m.int_(1)),
                                            ),
                                        )
                                    ),
                                    m.if_(
                                        m.b("lessThanInteger", m.int_(0), V("nl")),
                                        m.let(
                                            "rn",
                                            m.nth(V("rv"), 1),
                                            m.let(
                                                "rt",
                                                m.head(m.b("unMapData", m.b("sndPair", V("rn")))),
                                                m.check(
                                                    _and(
                                                        m,
                                                        m.b(
                                                            "equalsData",
                                                            m.b("fstPair", V("rn")),
                                                            V("policy"),
                                                        ),
                                                        m.b(
                                                            "equalsData",
                                                            m.b("fstPair", V("rt")),
                                                            V("name"),
                                                        ),
                                                        m.b(
                                                            "lessThanEqualsInteger",
                                                            V("nl"),
                                                            m.b("unIData", m.b("sndPair", V("rt"))),
                                                        ),
                                                    ),
                                                    "NTX remainder",
                                                    U.Force(V("after_ntx")),
                                                ),
                                            ),
                                        ),
                                        U.Force(V("after_ntx")),
                                    ),
                                ),
                            ),
                        ),
                    ),
                ),
            ),
        )
        pay = m.let(
            "oi",
            m.b("unIData", m.head(V("pays"))),
            m.check(
                m.b("lessThanEqualsInteger", V("op"), V("oi")),
                "output indices must strictly increase",
                m.let(
                    "ho",
                    m.app(
                        V("drop"), V("drop"), V("outs"), m.b("subtractInteger", V("oi"), V("op"))
                    ),
                    m.let(
                        "ov",
                        m.b("unMapData", m.nth(m.fields(m.head(V("ho"))), 1)),
                        m.let(
                            "np",
                            m.nth(V("ov"), 1),
                            m.let(
                                "tk",
                                m.head(m.b("unMapData", m.b("sndPair", V("np")))),
                                m.let(
                                    "amt",
                                    m.b("unIData", m.b("sndPair", V("tk"))),
                                    m.check(
                                        _and(
                                            m,
                                            m.b("equalsData", m.b("fstPair", V("np")), V("policy")),
                                            m.b("equalsData", m.b("fstPair", V("tk")), V("name")),
                                            m.b("lessThanInteger", m.int_(0), V("amt")),
                                        ),
                                        "payout must pay NTX",
                                        call(
                                            m.tail(V("pays")),
                                            m.tail(V("ho")),
                                            m.b("addInteger", V("oi"), m.int_(1)),
                                            m.b("subtractInteger", V("bl"), V("amt")),
                                            m.b("subtractInteger", V("nl"), V("amt")),
                                            m.b("subtractInteger", V("al"), m.ada(V("ov"))),
                                        ),
                                    ),
                                ),
                            ),
                        ),
                    ),
                ),
            ),
        )
        return m.if_null(V("pays"), refund, pay)

    def skip_keys(call: Callable[..., Term]) -> Term:
        # args: xs n -> unit when the first n elements of xs are key inputs
        return m.if_(
            m.b("equalsInteger", V("n"), m.int_(0)),
            m.unit(),
            m.check(
                _is_key_input(m, m.head(V("xs"))),
                "script input skipped: every script input must be an escrow this batch "
                "settles, escrow input indices must strictly increase",
                call(m.tail(V("xs")), m.b("subtractInteger", V("n"), m.int_(1))),
            ),
        )

    def no_script_left(call: Callable[..., Term]) -> Term:
        return m.if_null(
            V("xs"),
            m.unit(),
            m.check(
                _is_key_input(m, m.head(V("xs"))),
                "every script input must be an escrow this batch settles",
                call(m.tail(V("xs"))),
            ),
        )

    def entries(call: Callable[..., Term]) -> Term:
        # args: es ins ip outs op (entries left, inputs and outputs from positions ip, op)
        del call  # the recursive call is made from the payouts' end, through `entries`
        settle_one = m.let(
            "ef",
            m.fields(m.head(V("es"))),
            m.let(
                "idx",
                m.b("unIData", m.head(V("ef"))),
                m.check(
                    m.b("lessThanEqualsInteger", V("ip"), V("idx")),
                    "escrow input indices must strictly increase",
                    m.let(
                        # OpShin's order: the named input is an escrow, then the inputs
                        # stepped over are key inputs (`batch_settle.settle_entries`).
                        "here",
                        m.app(
                            V("drop"),
                            V("drop"),
                            V("ins"),
                            m.b("subtractInteger", V("idx"), V("ip")),
                        ),
                        m.let(
                            "eo",
                            m.fields(m.nth(m.fields(m.head(V("here"))), 1)),
                            m.check(
                                m.b(
                                    "equalsData",
                                    m.head(m.fields(m.head(V("eo")))),
                                    V("escrow_cred"),
                                ),
                                "entry is not an escrow input",
                                m.app(
                                    U.Lambda("_skipped_are_keys", _escrow_checks(m, V)),
                                    m.app(
                                        V("skip"),
                                        V("skip"),
                                        V("ins"),
                                        m.b("subtractInteger", V("idx"), V("ip")),
                                    ),
                                ),
                            ),
                        ),
                    ),
                ),
            ),
        )
        return m.if_null(
            V("es"), m.app(V("no_script_left"), V("no_script_left"), V("ins")), settle_one
        )

    def _escrow_checks(m: _Builder, V: Callable[[str], Term]) -> Term:
        # eo: the escrow TxOut's fields; the datum is SomeOutputDatum(EscrowDatum) (a
        # NoOutputDatum has no field, a hash is no record: both fail when read).
        return m.let(
            "df",
            m.fields(m.head(m.fields(m.nth(V("eo"), 2)))),
            m.check(
                m.b("equalsData", m.head(V("df")), V("own_hash")),
                "escrow does not trust this batch script",
                m.let(
                    "d2",
                    m.tail(V("df"), 2),
                    m.let(
                        "d4",
                        m.tail(V("d2"), 2),
                        m.let(
                            "d7",
                            m.tail(V("d4"), 3),
                            m.check(
                                m.b("equalsData", m.nth(V("d7"), 5), V("oracle_set")),
                                "escrow pinned to another oracle set",
                                m.check(
                                    m.b(
                                        "lessThanEqualsInteger",
                                        V("upper"),
                                        m.b("unIData", m.head(V("d7"))),
                                    ),
                                    "escrow deadline passed",
                                    _escrow_value(m, V),
                                ),
                            ),
                        ),
                    ),
                ),
            ),
        )

    def _escrow_value(m: _Builder, V: Callable[[str], Term]) -> Term:
        return m.let(
            "policy",
            m.nth(V("d4"), 1),
            m.let(
                "name",
                m.nth(V("d4"), 2),
                m.let(
                    "ev",
                    m.b("unMapData", m.nth(V("eo"), 1)),
                    m.let(
                        "ev1",
                        m.tail(V("ev")),
                        m.let(
                            "en",
                            m.head(V("ev1")),
                            m.let(
                                "etoks",
                                m.b("unMapData", m.b("sndPair", V("en"))),
                                m.let(
                                    "etk",
                                    m.head(V("etoks")),
                                    m.check(
                                        _and(
                                            m,
                                            m.b("equalsData", m.b("fstPair", V("en")), V("policy")),
                                            m.b("equalsData", m.b("fstPair", V("etk")), V("name")),
                                            m.if_null(
                                                m.tail(V("ev1")),
                                                U.BuiltinBool(True),
                                                U.BuiltinBool(False),
                                            ),
                                            m.if_null(
                                                m.tail(V("etoks")),
                                                U.BuiltinBool(True),
                                                U.BuiltinBool(False),
                                            ),
                                        ),
                                        "escrow holds other tokens",
                                        m.let(
                                            "ridx",
                                            m.b("unIData", m.nth(V("ef"), 2)),
                                            m.let(
                                                "submitter",
                                                m.head(V("d2")),
                                                m.let(
                                                    "payouts",
                                                    m.rec(
                                                        "payouts",
                                                        ["pays", "outs", "op", "bl", "nl", "al"],
                                                        payouts,
                                                    ),
                                                    m.app(
                                                        V("payouts"),
                                                        V("payouts"),
                                                        m.b("unListData", m.nth(V("ef"), 1)),
                                                        V("outs"),
                                                        V("op"),
                                                        m.b("unIData", m.head(V("d4"))),
                                                        m.b("unIData", m.b("sndPair", V("etk"))),
                                                        m.ada(V("ev")),
                                                    ),
                                                ),
                                            ),
                                        ),
                                    ),
                                ),
                            ),
                        ),
                    ),
                ),
            ),
        )

    # --- once per transaction: redeemer, config, quorum, oracle set, validity ----------

    def count(call: Callable[..., Term]) -> Term:
        # args: ks n -> n + how many of ks signed (keys are distinct: config invariant)
        return m.if_null(
            V("ks"),
            V("n"),
            call(
                m.tail(V("ks")),
                m.if_(
                    m.app(V("signed"), V("signed"), V("sigs"), m.head(V("ks"))),
                    m.b("addInteger", V("n"), m.int_(1)),
                    V("n"),
                ),
            ),
        )

    def signed(call: Callable[..., Term]) -> Term:
        # args: ss k -> whether k is among ss
        return m.if_null(
            V("ss"),
            U.BuiltinBool(False),
            m.if_(
                m.b("equalsData", m.head(V("ss")), V("k")),
                U.BuiltinBool(True),
                call(m.tail(V("ss")), V("k")),
            ),
        )

    def concat_keys(call: Callable[..., Term]) -> Term:
        # args: ks acc -> acc ++ the key hashes of ks, in order
        return m.if_null(
            V("ks"),
            V("acc"),
            call(
                m.tail(V("ks")), m.b("appendByteString", V("acc"), m.b("unBData", m.head(V("ks"))))
            ),
        )

    reward = m.let(
        "cc",
        m.b("unConstrData", m.head(m.b("sndPair", V("pp")))),
        m.check(
            m.b("equalsInteger", m.b("fstPair", V("cc")), m.int_(1)),
            "not a script credential",
            m.let(
                "own_hash",
                m.head(m.b("sndPair", V("cc"))),
                m.let(
                    "rr",
                    m.b("unConstrData", m.nth(V("cf"), 1)),
                    m.check(
                        m.b("equalsInteger", m.b("fstPair", V("rr")), m.int_(0)),
                        "withdrawal needs a BatchSettle redeemer",
                        _config_and_settle(
                            m, V, signed, count, concat_keys, skip_keys, no_script_left, entries
                        ),
                    ),
                ),
            ),
        ),
    )
    body = m.let(
        "cf",
        m.fields(V("ctx")),
        m.let(
            "pp",
            m.b("unConstrData", m.nth(V("cf"), 2)),
            m.if_(
                m.b("equalsInteger", m.b("fstPair", V("pp")), m.int_(2)),
                reward,
                m.app(opshin, *(V(p) for p in params)),
            ),
        ),
    )
    return m.lam(params, m.with_builtins(body))


def _and(m: _Builder, *conds: Term) -> Term:
    """Short-circuit conjunction (a later condition is not evaluated after a false one)."""
    acc = conds[-1]
    for c in reversed(conds[:-1]):
        acc = m.if_(c, acc, U.BuiltinBool(False))
    return acc


def _config_and_settle(m, V, signed, count, concat_keys, skip_keys, no_script_left, entries):  # type: ignore[no-untyped-def]
    """From the redeemer's fields on: the config reference input, the quorum, the oracle
    set, the validity range, then the entries."""
    drop = _drop(m, "drop")
    settle = m.let(
        "escrow_cred",
        m.script_credential(V("p_escrow")),
        m.let(
            "skip",
            m.rec("skip", ["xs", "n"], skip_keys),
            m.let(
                "no_script_left",
                m.rec("no_script_left", ["xs"], no_script_left),
                m.let(
                    "entries",
                    m.rec("entries", ["es", "ins", "ip", "outs", "op"], entries),
                    m.app(
                        V("entries"),
                        V("entries"),
                        m.b("unListData", m.head(m.tail(V("rf")))),
                        m.b("unListData", m.head(V("tx"))),
                        m.int_(0),
                        m.b("unListData", m.nth(V("tx"), 2)),
                        m.int_(0),
                    ),
                ),
            ),
        ),
    )
    with_upper = m.let(
        "ub",
        m.b("unConstrData", m.head(m.fields(m.nth(m.fields(m.head(V("t7"))), 1)))),
        m.check(
            m.b("equalsInteger", m.b("fstPair", V("ub")), m.int_(1)),
            "validity range needs a finite upper bound",
            m.let("upper", m.b("unIData", m.head(m.b("sndPair", V("ub")))), settle),
        ),
    )
    oracle_set = m.let(
        "concat",
        m.rec("concat", ["ks", "acc"], concat_keys),
        m.let(
            "oracle_set",
            m.b(
                "bData",
                m.b(
                    "blake2b_256",
                    m.app(
                        V("concat"),
                        V("concat"),
                        V("oracles"),
                        m.b("integerToByteString", U.BuiltinBool(True), m.int_(8), V("threshold")),
                    ),
                ),
            ),
            # `batch_settle.settle`: the Merkle root, then the validity range.
            m.check(
                m.b(
                    "equalsInteger",
                    m.b("lengthOfByteString", m.b("unBData", m.nth(V("rf"), 2))),
                    m.int_(32),
                ),
                "merkle root must be 32 bytes",
                with_upper,
            ),
        ),
    )
    quorum = m.let(
        "signed",
        m.rec("signed", ["ss", "k"], signed),
        m.let(
            "count",
            m.rec("count", ["ks", "n"], count),
            m.check(
                m.b(
                    "lessThanEqualsInteger",
                    V("threshold"),
                    m.app(V("count"), V("count"), V("oracles"), m.int_(0)),
                ),
                "no oracle quorum",
                oracle_set,
            ),
        ),
    )
    config = m.let(
        "cfgf",
        m.fields(V("cfg")),
        m.let(
            "oracles",
            m.b("unListData", m.head(V("cfgf"))),
            m.let("threshold", m.b("unIData", m.nth(V("cfgf"), 1)), quorum),
        ),
    )
    # The reference input `config_ref_index`, at the oracle-config script, with the NFT.
    read_config = m.let(
        "ro",
        m.fields(m.nth(m.fields(V("ref")), 1)),
        m.let(
            "rpay",
            m.head(m.fields(m.head(V("ro")))),
            m.check(
                m.b("equalsData", V("rpay"), m.script_credential(V("p_config"))),
                "config not at script",
                m.check(
                    m.b("equalsData", V("rpay"), m.script_credential(V("p_policy"))),
                    "config not at the config script",
                    m.check(
                        _nft_is_one(m, V),
                        "reference input lacks config NFT",
                        m.let(
                            "od",
                            m.b("unConstrData", m.nth(V("ro"), 2)),
                            m.check(
                                m.b("equalsInteger", m.b("fstPair", V("od")), m.int_(2)),
                                "config datum must be inline",
                                m.let("cfg", m.head(m.b("sndPair", V("od"))), config),
                            ),
                        ),
                    ),
                ),
            ),
        ),
    )
    return m.let(
        "rf",
        m.b("sndPair", V("rr")),
        m.let(
            "tx",
            m.fields(m.head(V("cf"))),
            m.let(
                "t7",
                m.tail(V("tx"), 7),
                m.let(
                    "sigs",
                    m.b("unListData", m.nth(V("t7"), 1)),
                    m.let(
                        "drop",
                        drop,
                        m.let(
                            "ref",
                            m.head(
                                m.app(
                                    V("drop"),
                                    V("drop"),
                                    m.b("unListData", m.nth(V("tx"), 1)),
                                    m.b("unIData", m.head(V("rf"))),
                                )
                            ),
                            read_config,
                        ),
                    ),
                ),
            ),
        ),
    )


def _nft_is_one(m: _Builder, V: Callable[[str], Term]) -> Term:
    """`value.get(policy, {b"": 0}).get(CONFIG_NFT_NAME, 0) == 1` for the config output's
    value (`ro` fields), the policy being `p_policy`: a missing policy or name counts 0."""

    # Two searches: policy in the value, then the name in that policy's tokens.
    def search(call: Callable[..., Term]) -> Term:
        # args: ps k -> Data under key k, or the constant I 0 when absent
        return m.if_null(
            V("ps"),
            U.PlutusInteger(0),
            m.if_(
                m.b("equalsData", m.b("fstPair", m.head(V("ps"))), V("k")),
                m.b("sndPair", m.head(V("ps"))),
                call(m.tail(V("ps")), V("k")),
            ),
        )

    name = U.PlutusByteString(b"proofnet-config")
    return m.let(
        "search",
        m.rec("search", ["ps", "k"], search),
        m.let(
            "toks",
            m.app(V("search"), V("search"), m.b("unMapData", m.nth(V("ro"), 1)), V("p_policy")),
            # An absent policy (I 0, no map) has no tokens: OpShin's {b"": 0} default.
            m.b(
                "equalsData",
                U.PlutusInteger(1),
                m.if_(
                    m.b("equalsData", V("toks"), U.PlutusInteger(0)),
                    U.PlutusInteger(0),
                    m.app(V("search"), V("search"), m.b("unMapData", V("toks")), name),
                ),
            ),
        ),
    )
