"""Build Plutus V3 ScriptContexts in the ledger's shape and run compiled scripts on them.

The contexts come from `chain.contracts.ledger`, whose constructor indices the ledger
conformance vectors pin (see test_ledger_shapes.py). Inputs are sorted as the ledger sorts
them (tx id, then index); outputs keep their order.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import uplc
import uplc.ast
from pycardano import PlutusData, PlutusV3Script, plutus_script_hash
from uplc.cost_model import Budget

from chain.contracts import ledger as L
from chain.contracts import types as T
from chain.deep_stack import deep_recursion
from chain.offchain.oracle_set import oracle_set_hash

NTX_POLICY = bytes.fromhex("88b60b51a3dcd3a6134bb1c0fdd2837d8cc87abd27dbd0c3a494869f")
NTX_NAME = b"NTX"
ADA = b""


def h28(tag: str) -> bytes:
    return hashlib.blake2b(tag.encode(), digest_size=28).digest()


def h32(tag: str) -> bytes:
    return hashlib.blake2b(tag.encode(), digest_size=32).digest()


def key_address(pkh: bytes, stake: bytes | None = None) -> L.Address:
    staking: L.SomeStakingCredential | L.NoStakingCredential = (
        L.SomeStakingCredential(L.StakingHash(L.PubKeyCredential(stake)))
        if stake is not None
        else L.NoStakingCredential()
    )
    return L.Address(L.PubKeyCredential(pkh), staking)


def script_address(script_hash: bytes) -> L.Address:
    return L.Address(L.ScriptCredential(script_hash), L.NoStakingCredential())


def value(lovelace: int) -> dict[bytes, dict[bytes, int]]:
    return {ADA: {ADA: lovelace}}


def with_tokens(
    lovelace: int, tokens: dict[bytes, dict[bytes, int]]
) -> dict[bytes, dict[bytes, int]]:
    v: dict[bytes, dict[bytes, int]] = {ADA: {ADA: lovelace}}
    for policy in sorted(tokens):
        v[policy] = dict(sorted(tokens[policy].items()))
    return v


def ntx_value(lovelace: int, ntx: int) -> dict[bytes, dict[bytes, int]]:
    return with_tokens(lovelace, {NTX_POLICY: {NTX_NAME: ntx}})


def out(
    address: L.Address,
    val: dict[bytes, dict[bytes, int]],
    datum: PlutusData | None = None,
) -> L.TxOut:
    d: L.OutputDatum = L.SomeOutputDatum(datum) if datum is not None else L.NoOutputDatum()
    return L.TxOut(address, val, d, L.NoScriptHash())


def txin(ref: L.TxOutRef, o: L.TxOut) -> L.TxInInfo:
    return L.TxInInfo(ref, o)


def ref(tag: str, idx: int = 0) -> L.TxOutRef:
    return L.TxOutRef(h32(tag), idx)


def finite_range(lower: int | None, upper: int | None) -> L.TimeRange:
    lo: L.ExtendedTime = L.Finite(lower) if lower is not None else L.NegInf()
    hi: L.ExtendedTime = L.Finite(upper) if upper is not None else L.PosInf()
    # The ledger closes the lower bound and opens a finite upper bound (slot semantics).
    return L.TimeRange(
        L.LowerBound(lo, _true()),
        L.UpperBound(hi, _false() if upper is not None else _true()),
    )


@dataclass()
class _Bool(PlutusData):
    CONSTR_ID = 0


@dataclass()
class _True(PlutusData):
    CONSTR_ID = 1


def _true() -> PlutusData:
    return _True()


def _false() -> PlutusData:
    return _Bool()


@dataclass
class Tx:
    """A transaction as the scripts see it; `context()` builds one ScriptContext."""

    inputs: list[L.TxInInfo] = field(default_factory=list)
    reference_inputs: list[L.TxInInfo] = field(default_factory=list)
    outputs: list[L.TxOut] = field(default_factory=list)
    mint: dict[bytes, dict[bytes, int]] = field(default_factory=dict)
    certificates: list[PlutusData] = field(default_factory=list)
    withdrawals: dict[PlutusData, int] = field(default_factory=dict)
    lower: int | None = None
    upper: int | None = None
    signatories: list[bytes] = field(default_factory=list)

    def info(self) -> L.TxInfo:
        inputs = sorted(self.inputs, key=lambda i: (i.out_ref.id, i.out_ref.idx))
        refs = sorted(self.reference_inputs, key=lambda i: (i.out_ref.id, i.out_ref.idx))
        return L.TxInfo(
            inputs=inputs,
            reference_inputs=refs,
            outputs=list(self.outputs),
            fee=200_000,
            mint=self.mint,
            certificates=list(self.certificates),
            withdrawals=self.withdrawals,
            validity_range=finite_range(self.lower, self.upper),
            signatories=sorted(self.signatories),
            redeemers={},
            datums={},
            id=h32("tx-id"),
            votes={},
            proposal_procedures=[],
            current_treasury_amount=L.NoDatum(),
            treasury_donation=L.NoDatum(),
        )

    def input_index(self, r: L.TxOutRef) -> int:
        inputs = sorted(self.inputs, key=lambda i: (i.out_ref.id, i.out_ref.idx))
        return [i.out_ref for i in inputs].index(r)

    def ref_index(self, r: L.TxOutRef) -> int:
        refs = sorted(self.reference_inputs, key=lambda i: (i.out_ref.id, i.out_ref.idx))
        return [i.out_ref for i in refs].index(r)

    def spend(self, r: L.TxOutRef, redeemer: PlutusData) -> L.ScriptContext:
        own = next(i for i in self.inputs if i.out_ref == r)
        d = own.resolved.datum
        maybe: L.SomeDatum | L.NoDatum = (
            L.SomeDatum(d.datum) if isinstance(d, L.SomeOutputDatum) else L.NoDatum()
        )
        return L.ScriptContext(self.info(), redeemer, L.SpendingScript(r, maybe))

    def withdraw(self, script_hash: bytes, redeemer: PlutusData) -> L.ScriptContext:
        return L.ScriptContext(
            self.info(), redeemer, L.RewardingScript(L.ScriptCredential(script_hash))
        )

    def certify(self, index: int, redeemer: PlutusData) -> L.ScriptContext:
        return L.ScriptContext(
            self.info(), redeemer, L.CertifyingScript(index, self.certificates[index])
        )

    def mint_with(self, policy: bytes, redeemer: PlutusData) -> L.ScriptContext:
        return L.ScriptContext(self.info(), redeemer, L.MintingScript(policy))


@dataclass(frozen=True)
class EvalResult:
    ok: bool
    cpu: int
    mem: int
    logs: tuple[str, ...]
    error: str


def evaluate(script: PlutusV3Script, context: PlutusData) -> EvalResult:
    with deep_recursion():
        program = uplc.unflatten(bytes(script))
        arg = uplc.ast.data_from_cbor(context.to_cbor())
        res = uplc.eval(program, arg, budget=Budget(100_000_000_000, 140_000_000))
    ok = isinstance(res.result, uplc.ast.BuiltinUnit)
    error = "" if ok else f"{res.result!r}"
    return EvalResult(ok, res.cost.cpu, res.cost.memory, tuple(res.logs), error)


def script_hash_bytes(script: PlutusV3Script) -> bytes:
    return plutus_script_hash(script).payload


def default_oracles() -> list[bytes]:
    """The oracle set of the `oracles` fixture (2 of these 3), which escrows pin by default."""
    return sorted(h28(f"oracle{i}") for i in range(3))


def escrow_datum(
    *,
    submitter: L.Address,
    submitter_pkh: bytes,
    budget: int,
    deadline: int,
    config_policy: bytes,
    batch_credential: bytes,
    job: str = "job",
    cancel_until: int | None = None,
    nonce: int = 0,
    oracle_set: bytes | None = None,
) -> T.EscrowDatum:
    until: T.SomePosixTime | T.NoPosixTime = (
        T.SomePosixTime(cancel_until) if cancel_until is not None else T.NoPosixTime()
    )
    return T.EscrowDatum(
        job_id=h32(job),
        submitter=submitter,
        submitter_pkh=submitter_pkh,
        budget=budget,
        ntx_policy=NTX_POLICY,
        ntx_name=NTX_NAME,
        deadline=deadline,
        config_policy=config_policy,
        config_name=T.CONFIG_NFT_NAME,
        batch_credential=batch_credential,
        cancel_allowed_until=until,
        nonce=nonce,
        oracle_set=oracle_set if oracle_set is not None else oracle_set_hash(default_oracles(), 2),
    )


DEADLINE = 10_000_000
CONFIG_REF = L.TxOutRef(h32("config-utxo"), 0)


def config_input(
    deployment: object,
    cfg: T.OracleConfigDatum,
    *,
    policy: bytes | None = None,
    at: L.Address | None = None,
) -> L.TxInInfo:
    """The reference input holding the config NFT at the oracle-config script (or `at`)."""
    ps = deployment
    pol = policy if policy is not None else ps.config_policy.payload  # type: ignore[attr-defined]
    return txin(
        CONFIG_REF,
        out(
            at or script_address(ps.oracle_config_hash.payload),  # type: ignore[attr-defined]
            with_tokens(2_000_000, {pol: {T.CONFIG_NFT_NAME: 1}}),
            cfg,
        ),
    )


@dataclass
class Batch:
    """A settlement transaction of `n` escrows: escrow i pays provider i `pay` NTX out of
    `budget` and returns the rest to its submitter."""

    tx: Tx
    escrows: list[tuple[L.TxOutRef, T.EscrowDatum]]
    entries: list[T.SettleEntry]
    batch_hash: bytes

    def redeemer(self, entries: list[T.SettleEntry] | None = None) -> T.BatchSettle:
        return T.BatchSettle(
            self.tx.ref_index(CONFIG_REF),
            self.entries if entries is None else entries,
            h32("merkle-root"),
            h32("batch-1"),
        )

    def context(self, entries: list[T.SettleEntry] | None = None) -> L.ScriptContext:
        return self.tx.withdraw(self.batch_hash, self.redeemer(entries))


def make_batch(
    deployment: object,
    oracles: list[bytes],
    admins: list[bytes],
    n: int,
    *,
    budget: int = 100,
    pay: int = 60,
    escrow_lovelace: int = 3_000_000,
) -> Batch:
    ps = deployment
    eh = ps.escrow_hash.payload  # type: ignore[attr-defined]
    bh = ps.batch_hash.payload  # type: ignore[attr-defined]
    cp = ps.config_policy.payload  # type: ignore[attr-defined]
    cfg = T.OracleConfigDatum(oracles, 2, admins, 2, bh)
    tx = Tx(
        reference_inputs=[config_input(ps, cfg)],
        withdrawals={L.ScriptCredential(bh): 0},
        lower=DEADLINE - 100_000,
        upper=DEADLINE - 1_000,
        signatories=oracles[:2],
    )
    escrows = []
    for i in range(n):
        sub = key_address(h28(f"sub{i}"), h28(f"stake{i}"))
        d = escrow_datum(
            submitter=sub,
            submitter_pkh=h28(f"sub{i}"),
            budget=budget,
            deadline=DEADLINE,
            config_policy=cp,
            batch_credential=bh,
            job=f"job{i}",
            oracle_set=oracle_set_hash(oracles, 2),
        )
        r = ref(f"escrow{i}")
        escrows.append((r, d))
        tx.inputs.append(txin(r, out(script_address(eh), ntx_value(escrow_lovelace, budget), d)))
    entries = []
    for r, d in sorted(escrows, key=lambda x: (x[0].id, x[0].idx)):
        prov = key_address(h28(f"prov-{r.id.hex()}"))
        tx.outputs.append(out(prov, ntx_value(1_200_000, pay)))
        tx.outputs.append(out(d.submitter, ntx_value(escrow_lovelace - 1_200_000, budget - pay)))
        n_out = len(tx.outputs)
        entries.append(T.SettleEntry(tx.input_index(r), [n_out - 2], n_out - 1))
    return Batch(tx, escrows, entries, bh)
