"""`proofnet audit --tx | --job | --provider` on a devnet with real settlements.

One engine-made settlement (two attested escrows, paid as attested) and one hand-built
settlement that the validators accept but the attestations do not: its metadata root is not
its redeemer's root, it pays less than attested, and it spends an escrow that no attestation
names (paying its NTX to a stranger). The audit must pass the first and name every
discrepancy of the second.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Response
from pycardano import Address
from typer.testing import CliRunner

from auditor import audit as au
from chain.devnet.node_bridge import node_bridge
from chain.devnet.testing import running_devnet, serve_app
from chain.offchain.builders import assembly as A
from chain.offchain.builders import settle as S
from chain.offchain.builders.deployment import Deployment
from chain.offchain.builders.onchain import out_ref_text
from chain.offchain.explorers import explorer_links
from oracle.models import metadata as oracle_metadata
from oracle.settlement import scenario as sc
from oracle.settlement.builder_port import CardanoSettlementBuilder
from oracle.settlement.bundle import audit_metadata, make_bundle
from oracle.settlement.chain_view import BlockfrostChainView
from oracle.settlement.engine import BatchPolicy, SettlementEngine
from oracle.settlement.intents import IntentLog
from oracle.settlement.ports import Claim
from oracle.settlement.queue import AttestationQueue
from oracle.settlement.watcher import WatchConfig
from oracle.storage.db import make_engine
from proofnet.messages.deployment import DEPLOYMENT_PATH

BUDGET = 1_000
ATTESTED = 300


@dataclass
class World:
    devnet: sc.Devnet
    scenario: sc.Scenario
    oracle: str  # serves both bundles honestly
    liar: str  # serves other bytes under each bundle's hash
    deployment_file: Path
    good_tx: str
    good_jobs: tuple[str, ...]
    good_providers: tuple[str, ...]
    bad_tx: str
    bad_job: str
    stranger: str
    other_deployment_file: Path  # a second, real deployment on the same devnet
    service: str  # serves the deployment at GET /api/v1/deployment, as the API and oracles do
    lock_tx: str  # locks escrows: no settlement


def _bundle_app(bodies: dict[str, bytes]) -> FastAPI:
    app = FastAPI()

    @app.get("/api/v1/bundles/{sha256}")
    def bundle(sha256: str) -> Response:
        if sha256 not in bodies:
            return Response(status_code=404)
        return Response(bodies[sha256], media_type="application/json")

    return app


def _deployment_app(body: str) -> FastAPI:
    """Stands in for the API or an oracle (their route: tests/api/test_deployment_route.py)."""
    app = FastAPI()

    @app.get(DEPLOYMENT_PATH)
    def deployment() -> Response:
        return Response(body, media_type="application/json")

    return app


def _settle_with_engine(
    tmp: Path, scenario: sc.Scenario, escrows: list[tuple[sc.OutRef, bytes]]
) -> tuple[str, bytes, dict[str, tuple[int, str, int]]]:
    db = make_engine(f"sqlite:///{tmp / 'oracle.db'}")
    import oracle.settlement.models  # noqa: F401  (registers the settlement tables)

    oracle_metadata.create_all(db)
    builder = CardanoSettlementBuilder(
        scenario.devnet.context(), scenario.deployment, scenario.oracle_keys[0]
    )
    engine = SettlementEngine(
        IntentLog(db, AttestationQueue()),
        BlockfrostChainView(scenario.devnet.url),
        builder,
        policy=BatchPolicy(batch_size=8, max_wait_s=0),
        watch=WatchConfig(confirmation_depth=1),
        proposer="audit-test",
    )
    rows = sc.attested_escrows(scenario, db, escrows, amount=ATTESTED)
    deadline = time.monotonic() + 90
    batch = None
    while batch is None:
        assert time.monotonic() < deadline, "the engine built no batch"
        batch = engine.tick()
        time.sleep(0.1)
    intent = engine.intents.get(batch)
    assert intent is not None
    while (
        intent.tx_id is None
        or httpx.get(f"{scenario.devnet.url}/txs/{intent.tx_id}").status_code != 200
    ):
        assert time.monotonic() < deadline, "the settlement was not confirmed"
        engine.tick()
        time.sleep(0.1)
        intent = engine.intents.get(batch)
        assert intent is not None
    stored = engine.intents.bundle(intent.bundle_sha256)
    assert stored is not None
    return intent.tx_id, bytes(stored.body), rows


def _settle_by_hand(
    scenario: sc.Scenario, escrows: list[tuple[sc.OutRef, bytes]], stranger: Address
) -> tuple[str, bytes]:
    """Escrow 0 attested at ATTESTED but paid ATTESTED - 50; escrow 1 paid to `stranger`
    with no attestation; the redeemer's root is not the metadata's."""
    context = scenario.devnet.context()
    (ref0, job0), (ref1, _) = escrows
    signed = sc.attestation(scenario, ref0, job0, ATTESTED, sc.worker_key(5))
    claim = Claim(1, ref0, signed.attestation.leaf_hash(), signed.cose, ATTESTED, "")
    bundle = make_bundle([claim])
    utxos = {out_ref_text(u.input): u for u in context.utxos(scenario.deployment.escrow_address)}
    provider = Address.from_primitive(signed.attestation.payout_address)
    settlements = [
        S.Settlement(utxos[str(ref0)], ((provider, ATTESTED - 50),)),
        S.Settlement(utxos[str(ref1)], ((stranger, 400),)),
    ]
    key = scenario.oracle_keys[0]
    payer = sc.enterprise(key)
    batch_id = b"\x42" * 32
    built = S.build_settle_batch(
        context,
        scenario.deployment,
        settlements,
        b"\x11" * 32,  # not the bundle's root
        batch_id,
        [key.to_verification_key().hash()],
        payer,
        metadata=audit_metadata(batch_id, bundle, 2),
    )
    tx = A.sign(built.built, [key])
    context.submit_tx(tx)
    scenario.devnet.wait_for_tx(built.tx_id)
    return built.tx_id, bundle.body


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    tmp = tmp_path_factory.mktemp("audit")
    with running_devnet(tmp, block_time=0.2) as running:
        devnet = sc.Devnet(running.url)
        scenario = sc.setup(devnet, oracles=1, threshold=1, tag="audit-modes")
        escrows = sc.lock(scenario, 4, budget=BUDGET, nonce_base=700)
        good_tx, good_body, rows = _settle_with_engine(tmp, scenario, escrows[:2])
        stranger = sc.enterprise(sc.seeded_key("audit-modes/stranger"))
        bad_tx, bad_body = _settle_by_hand(scenario, escrows[2:], stranger)
        deployment_file = tmp / "deployment.json"
        deployment_file.write_text(scenario.deployment.to_json())
        other = sc.setup(devnet, oracles=1, threshold=1, tag="audit-modes-other")
        other_deployment_file = tmp / "other-deployment.json"
        other_deployment_file.write_text(other.deployment.to_json())
        bodies = {au.hashlib.sha256(b).hexdigest(): b for b in (good_body, bad_body)}
        lies = {h: b.replace(b"1", b"2", 1) for h, b in bodies.items()}
        with (
            serve_app(_bundle_app(bodies)) as oracle,
            serve_app(_bundle_app(lies)) as liar,
            serve_app(_deployment_app(scenario.deployment.to_json())) as service,
        ):
            yield World(
                devnet=devnet,
                scenario=scenario,
                oracle=oracle,
                liar=liar,
                deployment_file=deployment_file,
                good_tx=good_tx,
                good_jobs=tuple(j.hex() for _, j in escrows[:2]),
                good_providers=tuple(addr for _, addr, _ in rows.values()),
                bad_tx=bad_tx,
                bad_job=escrows[2][1].hex(),
                stranger=str(stranger),
                other_deployment_file=other_deployment_file,
                service=service,
                lock_tx=escrows[0][0].tx_id,
            )


def _cli(
    world: World,
    *args: str,
    oracle: str | None = None,
    deployment: str | None = None,
    chain: tuple[str, ...] | None = None,
    env: dict[str, str] | None = None,
) -> tuple[int, str, str]:
    runner = CliRunner()
    result = runner.invoke(
        au.app,
        [
            *args,
            "--deployment",
            deployment or str(world.deployment_file),
            *(("--chain-url", world.devnet.url) if chain is None else chain),
            "--oracle-url",
            oracle or world.oracle,
        ],
        env={"PROOFNET_NETWORK": "devnet", "COLUMNS": "250", **(env or {})},
    )
    return result.exit_code, result.stdout, result.stderr


def _audit(world: World, tx: str, script: str | None = None) -> au.AuditReport:
    d = world.scenario.deployment
    return au.audit_settlement(
        world.devnet.url,
        tx,
        [world.oracle],
        network="devnet",
        escrow_script_hash=script or d.escrow_hash,
        ntx_policy=d.ntx_policy,
        ntx_name=d.ntx_name,
    )


def test_the_engine_settlement_passes(world: World) -> None:
    report = _audit(world, world.good_tx)
    assert report.ok, report.problems
    assert report.redeemer_root == report.merkle_root
    assert report.signatures_checked == 2
    assert sorted(e.attested for e in report.escrows) == [ATTESTED, ATTESTED + 1]
    assert {e.job_id for e in report.escrows} == set(world.good_jobs)
    for e in report.escrows:
        assert e.refunded >= e.refund_expected == BUDGET - e.attested


def test_job_mode_finds_and_audits_the_settlement(world: World) -> None:
    code, out, err = _cli(world, "--job", world.good_jobs[1], "--json")
    assert code == 0, out + err
    result = json.loads(out)
    assert result["ok"] is True
    (settlement,) = result["settlements"]
    assert settlement["tx_id"] == world.good_tx
    assert settlement["explorer"].endswith(f"/explorer/tx/{world.good_tx}")
    assert "/api/v0" not in settlement["explorer"]

    code, out, _ = _cli(world, "--job", world.good_jobs[0])
    assert code == 0 and out.splitlines()[-1].startswith("audit: OK")
    assert f"settlement {world.good_tx}" in out

    # The hand-built settlement is found for its job too, and fails.
    code, out, _ = _cli(world, "--job", world.bad_job)
    assert code == 1 and au.REDEEMER_ROOT_MISMATCH in out

    code, _, err = _cli(world, "--job", "ab" * 32)
    assert code == 1 and "no settlement found" in err
    code, _, err = _cli(world, "--job", "not-a-job")
    assert code == 2 and "64 hex digits" in err


def test_provider_mode_lists_payouts_with_amounts(world: World) -> None:
    provider = world.good_providers[1]
    code, out, err = _cli(world, "--provider", provider, "--json")
    assert code == 0, out + err
    result = json.loads(out)
    (settlement,) = result["settlements"]
    assert settlement["tx_id"] == world.good_tx
    assert settlement["paid_to_provider"] == ATTESTED + 1

    code, out, _ = _cli(world, "--provider", provider)
    assert code == 0 and f"paid to {provider}: {ATTESTED + 1} NTX" in out

    # The stranger was paid only by the bad settlement: found, and it fails.
    code, out, _ = _cli(world, "--provider", world.stranger)
    assert code == 1 and au.NTX_ELSEWHERE in out
    # `--since` above the chain's tip finds nothing.
    code, _, err = _cli(world, "--provider", provider, "--since", "100000")
    assert code == 1 and "no settlement found" in err


def test_a_hand_built_settlement_fails_with_named_discrepancies(world: World) -> None:
    report = _audit(world, world.bad_tx)
    kinds = {d.kind for d in report.discrepancies}
    assert kinds == {
        au.REDEEMER_ROOT_MISMATCH,
        au.PAYOUT_MISMATCH,
        au.REFUND_MISMATCH,
        au.UNATTESTED_ESCROW,
        au.NTX_ELSEWHERE,
    }, report.problems
    by_kind = {d.kind: d for d in report.discrepancies}
    root = by_kind[au.REDEEMER_ROOT_MISMATCH]
    assert root.expected == "11" * 32 and root.actual == report.merkle_root
    payout = by_kind[au.PAYOUT_MISMATCH]
    assert (payout.expected, payout.actual) == (ATTESTED, ATTESTED - 50)
    assert payout.output is not None and payout.tx_id == world.bad_tx
    elsewhere = by_kind[au.NTX_ELSEWHERE]
    assert elsewhere.actual == 400 and world.stranger in elsewhere.detail
    assert f"{world.bad_tx}#{elsewhere.output}" in str(elsewhere)

    code, out, _ = _cli(world, "--tx", world.bad_tx)
    assert code == 1 and out.splitlines()[-1].startswith("audit: FAILED")
    assert au.PAYOUT_MISMATCH in out and au.UNATTESTED_ESCROW in out


def test_wrong_script_and_tampered_bundle_are_named(world: World) -> None:
    wrong = _audit(world, world.good_tx, script="00" * 28)
    bad = [d for d in wrong.discrepancies if d.kind == au.BAD_SIGNATURE]
    assert len(bad) == 2 and all("WrongScript" in d.detail or "script" in d.detail for d in bad)
    # No escrow of that script is spent, so the payouts are unexplained NTX too.
    assert not wrong.ok and wrong.signatures_checked == 0

    code, _, err = _cli(world, "--tx", world.good_tx, oracle=world.liar)
    assert code == 2 and au.BUNDLE_HASH_MISMATCH in err
    code, _, err = _cli(world, "--job", world.good_jobs[0], oracle=world.liar)
    assert code == 1 and au.BUNDLE_HASH_MISMATCH in (err + _)
    code, _, err = _cli(world, "--tx", world.good_tx, "--job", world.good_jobs[0])
    assert code == 2 and "exactly one" in err


def test_blockfrost_pagination_and_project_id(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The chain is read through blockfrost-python (`chain.offchain.backends`): its pages,
    and the project id on every chain request, never on an oracle's."""
    import requests

    from chain.offchain.backends import blockfrost_at, history_api

    monkeypatch.setattr(au, "PAGE_SIZE", 1)
    chain_requests: list[tuple[str, dict[str, object], dict[str, str]]] = []
    real_get = requests.get

    def recording_get(url: str, **kwargs: object) -> requests.Response:
        params = dict(kwargs.get("params") or {})  # type: ignore[call-overload]
        chain_requests.append((url, params, dict(kwargs.get("headers") or {})))  # type: ignore[call-overload]
        return real_get(url, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(requests, "get", recording_get)
    oracle_requests: list[httpx.Request] = []
    with httpx.Client(timeout=30, event_hooks={"request": [oracle_requests.append]}) as client:
        api = history_api(blockfrost_at(world.devnet.url, "preprodTESTKEY"))
        chain = au.ChainReader(api, client)
        scan = au.settlements_for_job(chain, [world.oracle], world.good_jobs[0])
        assert scan.tx_ids == (world.good_tx,)
        scan_all = au.settlements_for_job(chain, [world.oracle], world.bad_job, limit=1)
    label_pages = [p for u, p, _ in chain_requests if u.endswith(f"/labels/{au.MEMO_LABEL}")]
    assert [p["page"] for p in label_pages][:2] == [1, 2]
    assert all(p["count"] == 1 and p["order"] == "desc" for p in label_pages)
    assert chain_requests and all(
        h.get("project_id") == "preprodTESTKEY" for *_, h in chain_requests
    )
    # Oracles get no Blockfrost key.
    assert oracle_requests and all("project_id" not in r.headers for r in oracle_requests)
    # `limit` bounds the scan: the newest settlement (the hand-built one) only.
    assert scan_all.scanned == 1 and scan_all.tx_ids == (world.bad_tx,)


def test_the_chain_backend_setting_picks_blockfrost_with_its_project_and_network() -> None:
    """No request is made: the reader is built from the settings as every role builds its
    chain (`chain.offchain.backends`), hosted Blockfrost for the configured network."""
    from proofnet.settings import build_settings

    settings = build_settings(
        chain_backend="blockfrost", network="preprod", blockfrost_project_id="preprodKEY"
    )
    with httpx.Client() as client:
        chosen = au.choose_chain(settings, client)
        assert chosen.network == "preprod"
        assert chosen.reader.api.url == "https://cardano-preprod.blockfrost.io/api/v0"
        assert chosen.reader.api.project_id == "preprodKEY"
        assert set(chosen.links("ab" * 32)) == {"cardanoscan", "cexplorer"}
        # A project id given on the command line on a devnet-configured machine: its network.
        devnet = build_settings(chain_backend="devnet", network="devnet")
        chosen = au.choose_chain(devnet, client, project_id="mainnetKEY")
        assert chosen.network == "mainnet"
        assert chosen.reader.api.url == "https://cardano-mainnet.blockfrost.io/api/v0"
        # Missing project id: one line naming the setting.
        bare = build_settings(
            chain_backend="blockfrost", network="preprod", blockfrost_project_id=""
        )
        with pytest.raises(au.AuditError, match="PROOFNET_BLOCKFROST_PROJECT_ID"):
            au.choose_chain(bare, client)


def test_the_network_follows_the_project_id_and_links_follow_the_network() -> None:
    assert au.network_of_project("preprodABC") == "preprod"
    assert au.network_of_project("mainnetABC") == "mainnet"
    with pytest.raises(au.AuditError, match="PROOFNET_NETWORK"):
        au.network_of_project("nonsense")
    h = "ab" * 32
    assert explorer_links("devnet", "http://127.0.0.1:3030/api/v0/", h) == {
        "devnet": f"http://127.0.0.1:3030/explorer/tx/{h}"
    }
    assert explorer_links("preprod", "", h) == {
        "cardanoscan": f"https://preprod.cardanoscan.io/transaction/{h}",
        "cexplorer": f"https://preprod.cexplorer.io/tx/{h}",
    }
    assert explorer_links("mainnet", "", h)["cexplorer"] == f"https://cexplorer.io/tx/{h}"


def test_the_wrong_deployment_is_named_not_taken_for_fraud(world: World) -> None:
    """Audited against another (real) deployment, the engine's correct settlement is said to
    belong to its own deployment, with its own exit code, and no discrepancy is printed."""
    other = Deployment.load(world.other_deployment_file)
    mine = world.scenario.deployment
    code, out, err = _cli(world, "--tx", world.good_tx, deployment=str(world.other_deployment_file))
    assert code == au.EXIT_WRONG_DEPLOYMENT == 3, out + err
    actual = au.deployment_label(mine.config_policy, mine.config_name)
    given = au.deployment_label(other.config_policy, other.config_name)
    assert f"settlement {world.good_tx} belongs to deployment {actual}, not {given}" in err
    assert "FAILED" not in out + err and au.REFUND_MISMATCH not in out + err
    # Found by job, the same verdict.
    code, _, err = _cli(
        world, "--job", world.good_jobs[0], deployment=str(world.other_deployment_file)
    )
    assert code == au.EXIT_WRONG_DEPLOYMENT and "belongs to deployment" in err
    # Against its own deployment it is OK; the real fraud is still fraud (exit 1).
    assert _cli(world, "--tx", world.good_tx)[0] == au.EXIT_OK
    code, out, _ = _cli(world, "--tx", world.bad_tx)
    assert code == au.EXIT_DISCREPANCY and au.PAYOUT_MISMATCH in out


def test_the_deployment_comes_from_a_service_and_the_chain_from_the_settings(
    world: World,
) -> None:
    """`--deployment URL` reads GET /api/v1/deployment; with no --chain-url the audit reads
    the chain the settings select (PROOFNET_CHAIN_BACKEND), like every other role."""
    settings = {"PROOFNET_CHAIN_BACKEND": "devnet", "PROOFNET_DEVNET_URL": world.devnet.url}
    code, out, err = _cli(
        world, "--tx", world.good_tx, deployment=world.service, chain=(), env=settings
    )
    assert code == au.EXIT_OK, out + err
    assert f"(from {world.service}{DEPLOYMENT_PATH})" in out
    assert (
        f"explorer (devnet): {explorer_links('devnet', world.devnet.url, world.good_tx)['devnet']}"
        in out
    )
    assert out.splitlines()[-1].startswith("audit: OK")
    # A node backend whose Kupo is down: said in one line, not a traceback.
    ogmios = {
        **settings,
        "PROOFNET_CHAIN_BACKEND": "ogmios",
        "PROOFNET_KUPO_URL": "http://127.0.0.1:9",
    }
    code, _, err = _cli(world, "--tx", world.good_tx, chain=(), env=ogmios)
    assert code == au.EXIT_CANNOT_AUDIT and "PROOFNET_KUPO_URL" in err
    assert len(err.strip().splitlines()) == 1, err
    # A service without a deployment, or none at all, is a usage error naming the option.
    code, _, err = _cli(world, "--tx", world.good_tx, deployment=world.oracle)
    assert code == au.EXIT_CANNOT_AUDIT and "--deployment" in err and "404" in err


def test_the_deployment_read_from_chain(world: World) -> None:
    """`--deployment chain`: the settlement's escrows name the config NFT, a reference input
    holds it (with a config naming the same batch script), another carries the escrow
    script; the audit names that deployment and checks against it. A fraud stays a fraud."""
    mine = world.scenario.deployment
    label = au.deployment_label(mine.config_policy, mine.config_name)
    code, out, err = _cli(world, "--tx", world.good_tx, deployment="chain")
    assert code == au.EXIT_OK, out + err
    assert f"deployment {label} (read from chain: config NFT at {mine.config_ref}" in out
    assert f"escrow script {mine.escrow_hash}, batch script {mine.batch_hash}" in out
    code, out, _ = _cli(world, "--tx", world.bad_tx, deployment="chain")
    assert code == au.EXIT_DISCREPANCY and au.PAYOUT_MISMATCH in out
    code, _, err = _cli(world, "--tx", world.lock_tx, deployment="chain")
    assert code == au.EXIT_CANNOT_AUDIT and "spends no escrow" in err


def _without_links(report: dict[str, Any]) -> dict[str, Any]:
    return {
        **report,
        "settlements": [
            {k: v for k, v in s.items() if k not in ("explorer", "explorers")}
            for s in report["settlements"]
        ],
    }


def test_the_audit_through_a_self_hosted_node_gives_the_same_verdicts(world: World) -> None:
    """PROOFNET_CHAIN_BACKEND=ogmios: the settlement is found through Kupo, read by Ogmios
    chain-sync (its CBOR), its inputs resolved the same way; the verdict is the one the
    Blockfrost path gives: the honest settlement passes, the tampered one fails with the
    same discrepancies, and the deployment reads the same from chain."""
    with node_bridge(world.devnet.url) as node:
        by_node = {
            "PROOFNET_CHAIN_BACKEND": "ogmios",
            "PROOFNET_OGMIOS_URL": node.ogmios_url,
            "PROOFNET_KUPO_URL": node.kupo_url,
        }
        for tx, verdict in ((world.good_tx, au.EXIT_OK), (world.bad_tx, au.EXIT_DISCREPANCY)):
            rest_code, rest_out, _ = _cli(world, "--tx", tx, "--json")
            node_code, node_out, node_err = _cli(world, "--tx", tx, "--json", chain=(), env=by_node)
            assert rest_code == node_code == verdict, node_out + node_err
            assert _without_links(json.loads(node_out)) == _without_links(json.loads(rest_out))
        bad = json.loads(_cli(world, "--tx", world.bad_tx, "--json", chain=(), env=by_node)[1])
        (settlement,) = bad["settlements"]
        kinds = {d["kind"] for d in settlement["discrepancies"]}
        assert {au.PAYOUT_MISMATCH, au.UNATTESTED_ESCROW, au.NTX_ELSEWHERE} <= kinds

        code, out, err = _cli(
            world, "--tx", world.good_tx, deployment="chain", chain=(), env=by_node
        )
        assert code == au.EXIT_OK, out + err
        mine = world.scenario.deployment
        assert f"read from chain: config NFT at {mine.config_ref}" in out
        # Another deployment's file: named as such, not taken for fraud.
        code, _, err = _cli(
            world,
            "--tx",
            world.good_tx,
            deployment=str(world.other_deployment_file),
            chain=(),
            env=by_node,
        )
        assert code == au.EXIT_WRONG_DEPLOYMENT, err
        # Searches need an index a node does not keep: one line, the fix named.
        code, _, err = _cli(world, "--job", world.good_jobs[0], chain=(), env=by_node)
        assert code == au.EXIT_CANNOT_AUDIT and "audit a settlement by its transaction id" in err
        assert len(err.strip().splitlines()) == 1, err
        # A transaction the chain does not hold.
        code, _, err = _cli(world, "--tx", "ab" * 32, chain=(), env=by_node)
        assert code == au.EXIT_CANNOT_AUDIT and "not on chain" in err


def test_the_explorer_shows_the_settlement(world: World) -> None:
    root = world.devnet.url.removesuffix("/api/v0")
    page = httpx.get(explorer_links("devnet", world.devnet.url, world.good_tx)["devnet"])
    assert page.status_code == 200 and page.url.path == f"/explorer/tx/{world.good_tx}"
    assert root in str(page.url)
    assert (
        "proofnet settlement" in page.text and '<td data-label="purpose">reward</td>' in page.text
    )
    assert page.text.count('<td data-label="purpose">spend</td>') == 2
