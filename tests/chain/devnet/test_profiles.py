"""Parameter profiles: cited values, today's networks, and the Blockfrost parameters answer."""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path

import pytest
from blockfrost_contract import validate
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from chain.devnet import profiles
from chain.devnet.cli import app as devnet_cli
from chain.devnet.ledger import Ledger
from chain.devnet.params import ProtocolParams
from chain.devnet.server import create_app
from proofnet import settings as proofnet_settings

FIELDS = [f.name for f in dataclasses.fields(ProtocolParams)]


@pytest.mark.parametrize("name", profiles.PROFILE_NAMES)
def test_every_value_of_every_profile_cites_a_source(name: str) -> None:
    chosen = profiles.profile(name)
    assert set(chosen.sources) == set(FIELDS)
    assert all(len(source) > 10 for source in chosen.sources.values())


def test_only_the_preprod_changes_without_a_public_record_are_marked_unverified() -> None:
    assert profiles.profile("mainnet").unverified == ()
    assert profiles.profile("pv10").unverified == ()
    assert set(profiles.profile("preprod").unverified) == {
        "max_tx_ex_mem",
        "max_block_ex_mem",
        "min_pool_cost",
        "gov_action_deposit",
    }


def test_default_is_todays_mainnet() -> None:
    p = ProtocolParams()
    assert profiles.DEFAULT_PROFILE == "mainnet"
    assert (p.protocol_major_ver, p.protocol_minor_ver) == (11, 0)
    assert (p.max_tx_ex_mem, p.max_block_ex_mem) == (16_500_000, 72_000_000)
    mainnet = profiles.profile_params("mainnet")
    assert dataclasses.replace(mainnet, cost_models={}) == p
    assert [len(mainnet.cost_models[k]) for k in ("PlutusV1", "PlutusV2", "PlutusV3")] == [
        332,
        332,
        350,
    ]


def test_preprod_and_pv10_differ_from_mainnet_where_their_networks_do() -> None:
    mainnet, preprod, pv10 = (profiles.profile_params(n) for n in ("mainnet", "preprod", "pv10"))
    changed = {f for f in FIELDS if getattr(mainnet, f) != getattr(preprod, f)}
    assert changed == {"max_tx_ex_mem", "max_block_ex_mem", "min_pool_cost", "gov_action_deposit"}
    assert (preprod.max_tx_ex_mem, preprod.max_block_ex_mem) == (17_500_000, 77_500_000)
    assert (preprod.min_pool_cost, preprod.gov_action_deposit) == (75_000_000, 1_000_000_000)
    assert preprod.cost_models == mainnet.cost_models
    assert pv10.protocol_major_ver == 10
    assert (pv10.max_tx_ex_mem, pv10.max_block_ex_mem) == (14_000_000, 62_000_000)
    assert [len(v) for v in pv10.cost_models.values()] == [166, 175, 297]


def test_unknown_profile_is_refused_by_name_and_settings_agree() -> None:
    with pytest.raises(profiles.UnknownProfile, match="'mainnet', 'preprod', 'pv10'"):
        profiles.profile("preview")
    assert typing.get_args(proofnet_settings.DevnetProfile) == profiles.PROFILE_NAMES
    result = CliRunner().invoke(devnet_cli, ["up", "--profile", "preview"])
    assert result.exit_code == 2 and "unknown parameter profile 'preview'" in result.output


@pytest.mark.parametrize("name", profiles.PROFILE_NAMES)
def test_parameters_endpoint_reports_every_parameter(tmp_path: Path, name: str) -> None:
    params = profiles.profile_params(name)
    with Ledger.open(tmp_path / name, params=params) as ledger:
        client = TestClient(create_app(ledger, enable_faults=False, admin_token=None))
        body = client.get("/api/v0/epochs/latest/parameters").json()
    validate("/epochs/latest/parameters", 200, body)
    # Every field the spec lists is present; only the extra entropy (gone since Babbage) is
    # null, the governance fields included.
    assert [k for k, v in body.items() if v is None] == ["extra_entropy"]
    assert body["protocol_major_ver"] == params.protocol_major_ver
    assert body["max_tx_ex_mem"] == str(params.max_tx_ex_mem)
    assert body["max_block_ex_mem"] == str(params.max_block_ex_mem)
    assert body["min_pool_cost"] == str(params.min_pool_cost)
    assert body["gov_action_deposit"] == str(params.gov_action_deposit)
    assert body["drep_deposit"] == "500000000" and body["drep_activity"] == "20"
    assert body["committee_min_size"] == "7" and body["gov_action_lifetime"] == "6"
    assert body["dvt_p_p_gov_group"] == 0.75 and body["pvt_motion_no_confidence"] == 0.51
    assert body["pvtpp_security_group"] == body["pvt_p_p_security_group"] == 0.51
    for language, values in params.cost_models.items():
        assert body["cost_models_raw"][language] == values
        assert list(body["cost_models"][language].values()) == values


def test_profile_given_for_an_existing_devnet_switches_it(tmp_path: Path) -> None:
    with Ledger.open(tmp_path, params=profiles.profile_params("pv10")) as ledger:
        assert ledger.protocol_params().protocol_major_ver == 10
    with Ledger.open(tmp_path) as ledger:  # no profile: keeps what it runs
        assert ledger.protocol_params().max_tx_ex_mem == 14_000_000
    with Ledger.open(tmp_path, params=profiles.profile_params("preprod")) as ledger:
        assert ledger.protocol_params().max_tx_ex_mem == 17_500_000
        assert len(ledger.protocol_params().cost_models["PlutusV3"]) == 350
