"""The committed build artifacts are exactly what a fresh compile produces."""

from __future__ import annotations

import json

from chain.offchain import compile as C
from chain.offchain import scripts as S


def test_fresh_compile_equals_committed_artifacts() -> None:
    rendered = C.render(C.compile_all())
    for fname, content in rendered.items():
        path = C.BUILD_DIR / fname
        assert path.exists(), f"missing build artifact {path}"
        assert path.read_text(encoding="utf-8") == content, f"{fname} is stale: run compile"
    assert sorted(p.name for p in C.BUILD_DIR.iterdir()) == sorted(rendered)


def test_blueprint_describes_every_validator() -> None:
    bp = json.loads((C.BUILD_DIR / C.BLUEPRINT_NAME).read_text())
    assert bp["preamble"]["plutusVersion"] == "v3"
    titles = [v["title"].split(".")[0] for v in bp["validators"]]
    assert titles == list(S.SCRIPT_NAMES)
    escrow = bp["validators"][0]
    assert escrow["datum"]["schema"]["title"] == "EscrowDatum"
    redeemers = {s["title"] for s in escrow["redeemer"]["schema"]["anyOf"]}
    assert redeemers == {"Settle", "Refund", "Cancel"}
    batch = bp["validators"][1]
    assert [p["title"] for p in batch["parameters"]] == [
        "escrow_hash",
        "config_policy",
        "config_script_hash",
    ]


def test_text_envelope_wraps_the_script_once_more() -> None:
    env = json.loads((C.BUILD_DIR / "escrow.plutus").read_text())
    assert env["type"] == "PlutusScriptV3"
    import cbor2

    assert cbor2.loads(bytes.fromhex(env["cborHex"])) == bytes(S.unapplied("escrow"))


def test_apply_params_checks_the_arity() -> None:
    import pytest

    with pytest.raises(S.ScriptLoadError):
        S.apply_params("batch_settle", b"x")
    with pytest.raises(S.ScriptLoadError):
        S.unapplied("nope")


def test_released_versions_stay_loadable_and_differ_from_this_build() -> None:
    """An upgrade keeps the old version's blueprint (docs/protocol.md, Upgrades): its
    escrow script still loads, under another hash than this build's."""
    from chain.offchain.builders.deployment import CURRENT_PROTOCOL

    assert C.PROTOCOL_VERSION == CURRENT_PROTOCOL == S.current_version()
    old = S.release_blueprint("1.0.0")
    assert json.loads(old.read_text())["preamble"]["version"] == "1.0.0"
    assert S.unapplied("escrow", old) != S.unapplied("escrow")
