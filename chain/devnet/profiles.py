"""Parameter profiles of the devnet: today's mainnet, today's preprod, and protocol 10.

Every value a profile sets is taken from a public source, cited in `Profile.sources` (one
entry per `ProtocolParams` field, a test keeps it so). Where no public record of a value was
found, the citation starts with `UNVERIFIED:` and says what the value rests on; `Profile`
lists those in `unverified`. Sources, by short name:

- GENESIS_<net>: the network's genesis files, input-output-hk/cardano-configurations,
  network/<net>/genesis/{shelley,alonzo,conway}.json at commit a913d87 (2024-12-14).
- GA_MEM1_MAINNET: parameter change gov_action1cgdsp7g0rr7wgqp7maptpvx525fxuqwfgm5qe3f5r20e
  w5x2772sq0m5y83 (IntersectMBO/governance-actions, mainnet/2026-01-12-ppu-part1, action
  file): maxTxExecutionUnits {16,500,000 mem, 10e9 steps}, maxBlockExecutionUnits
  {72,000,000 mem, 20e9 steps}.
- GA_MEM1_PREPROD: preprod tx 158ef6b2...f3c6 (preprod/2025-10-30-ppu-part1): the same
  change on preprod; its metadata announces part 2 (17,500,000 / 77,500,000).
- GA_COST_MODELS: the protocol-11 cost models (see `cost_model_tables`).
- GA_HF11_MAINNET: hard-fork initiation to 11.0, gov_action1lh2x3kjucjkggvwu6l3txggkvmrnhs3
  flpv8j35lvlcan4gax3xsq3cxfjc (mainnet/2026-06-12-hf-van-rossem); GA_HF11_PREPROD: preprod
  tx 79fb4bac...2554 (preprod/2026-05-07-hf11).
- GA_GOVDEP_PREPROD: "Reduce govActionDeposit" (preprod/2026-06-12-ppu-reduce-deposit):
  100,000 tADA -> 1,000 tADA.
- PC_2026_03_19: Intersect Parameter Committee notes, 2026-03-19 (forum.cardano.org/t/
  mar-19-2026-parameter-committee-triweekly-meeting-notes/154364): MinPoolCost target
  75 ADA, down from 170 ADA (so 170 ADA was in force on mainnet then).
- CLI_MAINNET: `cardano-cli query protocol-parameters --mainnet` output in the Cardano
  course handbook (cardano-course.gitbook.io, "Protocol parameters"): maxBlockBodySize 90112,
  stakePoolTargetNum 500, utxoCostPerByte 4310.
- LEDGER_CONWAY: IntersectMBO/cardano-ledger at bbf7722 (2026-08-21), Conway era constants.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field

from chain.devnet.cost_models import pv10_cost_models, van_rossem_cost_models
from chain.devnet.params import ProtocolParams

DEFAULT_PROFILE = "mainnet"
UNVERIFIED = "UNVERIFIED:"


class UnknownProfile(ValueError):
    """A profile name the devnet does not define."""


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    params: ProtocolParams
    sources: Mapping[str, str] = field(default_factory=dict)

    @property
    def unverified(self) -> tuple[str, ...]:
        """Fields whose value no public record confirms (see their citation)."""
        return tuple(k for k, v in self.sources.items() if v.startswith(UNVERIFIED))


def _genesis(net: str) -> dict[str, str]:
    shelley = f"GENESIS_{net} shelley.json protocolParams"
    alonzo = f"GENESIS_{net} alonzo.json"
    conway = f"GENESIS_{net} conway.json"
    return {
        "min_fee_a": f"{shelley}.minFeeA",
        "min_fee_b": f"{shelley}.minFeeB",
        "max_tx_size": f"{shelley}.maxTxSize",
        "max_block_header_size": f"{shelley}.maxBlockHeaderSize",
        "key_deposit": f"{shelley}.keyDeposit",
        "pool_deposit": f"{shelley}.poolDeposit",
        "e_max": f"{shelley}.eMax",
        "a0": f"{shelley}.a0",
        "rho": f"{shelley}.rho",
        "tau": f"{shelley}.tau",
        "price_mem": f"{alonzo} executionPrices.prMem (577/10000)",
        "price_step": f"{alonzo} executionPrices.prSteps (721/10000000)",
        "max_val_size": f"{alonzo} maxValueSize",
        "collateral_percent": f"{alonzo} collateralPercentage",
        "max_collateral_inputs": f"{alonzo} maxCollateralInputs",
        "min_fee_ref_script_cost_per_byte": f"{conway} minFeeRefScriptCostPerByte",
        "drep_deposit": f"{conway} dRepDeposit",
        "gov_action_deposit": f"{conway} govActionDeposit",
        "pvt_motion_no_confidence": f"{conway} poolVotingThresholds.motionNoConfidence",
        "pvt_committee_normal": f"{conway} poolVotingThresholds.committeeNormal",
        "pvt_committee_no_confidence": f"{conway} poolVotingThresholds.committeeNoConfidence",
        "pvt_hard_fork_initiation": f"{conway} poolVotingThresholds.hardForkInitiation",
        "pvt_pp_security_group": f"{conway} poolVotingThresholds.ppSecurityGroup",
        "dvt_motion_no_confidence": f"{conway} dRepVotingThresholds.motionNoConfidence",
        "dvt_committee_normal": f"{conway} dRepVotingThresholds.committeeNormal",
        "dvt_committee_no_confidence": f"{conway} dRepVotingThresholds.committeeNoConfidence",
        "dvt_update_to_constitution": f"{conway} dRepVotingThresholds.updateToConstitution",
        "dvt_hard_fork_initiation": f"{conway} dRepVotingThresholds.hardForkInitiation",
        "dvt_pp_network_group": f"{conway} dRepVotingThresholds.ppNetworkGroup",
        "dvt_pp_economic_group": f"{conway} dRepVotingThresholds.ppEconomicGroup",
        "dvt_pp_technical_group": f"{conway} dRepVotingThresholds.ppTechnicalGroup",
        "dvt_pp_gov_group": f"{conway} dRepVotingThresholds.ppGovGroup",
        "dvt_treasury_withdrawal": f"{conway} dRepVotingThresholds.treasuryWithdrawal",
        "committee_min_size": f"{conway} committeeMinSize",
        "committee_max_term_length": f"{conway} committeeMaxTermLength",
        "gov_action_lifetime": f"{conway} govActionLifetime",
        "drep_activity": f"{conway} dRepActivity",
    }


_LEDGER_CONSTANTS = {
    "ref_script_fee_range": "LEDGER_CONWAY: tierRefScriptFee stride 25,600 bytes (constant)",
    "ref_script_fee_multiplier": "LEDGER_CONWAY: tierRefScriptFee multiplier 1.2 (constant)",
    "max_ref_script_size_per_tx": "LEDGER_CONWAY: ppMaxRefScriptSizePerTxG 200 KiB (constant)",
}

_CONWAY_ERA = {
    "max_block_size": "CLI_MAINNET maxBlockBodySize",
    "n_opt": "CLI_MAINNET stakePoolTargetNum",
    "coins_per_utxo_size": "CLI_MAINNET utxoCostPerByte",
    "min_pool_cost": "PC_2026_03_19 (170 ADA in force on mainnet)",
    "max_tx_ex_steps": "GA_MEM1_MAINNET maxTxExecutionUnits.steps",
    "max_block_ex_steps": "GA_MEM1_MAINNET maxBlockExecutionUnits.steps",
}


def _mainnet() -> Profile:
    params = ProtocolParams(cost_models=van_rossem_cost_models())
    sources = {
        **_genesis("mainnet"),
        **_LEDGER_CONSTANTS,
        **_CONWAY_ERA,
        "protocol_major_ver": "GA_HF11_MAINNET (11)",
        "protocol_minor_ver": "GA_HF11_MAINNET (0)",
        "max_tx_ex_mem": "GA_MEM1_MAINNET maxTxExecutionUnits.memory",
        "max_block_ex_mem": "GA_MEM1_MAINNET maxBlockExecutionUnits.memory",
        "cost_models": "GA_COST_MODELS gov_action1eqhnsdyf3exh... (332/332/350)",
        "committee_min_size": (
            "GENESIS_mainnet conway.json committeeMinSize (7); a change to 5 was submitted "
            "in June 2026 (mainnet/2026-06-05-ppu-minSizeCommittee) but no record of its "
            "enactment was found, so the genesis value stays"
        ),
    }
    return Profile("mainnet", "today's mainnet: protocol 11.0 (van Rossem)", params, sources)


def _preprod() -> Profile:
    base = _mainnet()
    params = dataclasses.replace(
        base.params,
        max_tx_ex_mem=17_500_000,
        max_block_ex_mem=77_500_000,
        min_pool_cost=75_000_000,
        gov_action_deposit=1_000_000_000,
    )
    sources = {
        **base.sources,
        **_genesis("preprod"),
        "protocol_major_ver": "GA_HF11_PREPROD (11)",
        "protocol_minor_ver": "GA_HF11_PREPROD (0)",
        "cost_models": "GA_COST_MODELS gov_action18cd564yw8j... (identical to mainnet's)",
        "max_tx_ex_mem": (
            f"{UNVERIFIED} 17,500,000 is part 2 of the two-step increase announced in "
            "GA_MEM1_PREPROD's metadata; no public record of part 2's enactment on preprod "
            "was found (the value the issue and the project's notes report)"
        ),
        "max_block_ex_mem": (
            f"{UNVERIFIED} 77,500,000, part 2 announced in GA_MEM1_PREPROD's metadata; "
            "enactment on preprod not found in a public record"
        ),
        "min_pool_cost": (
            f"{UNVERIFIED} 75 tADA, the target in PC_2026_03_19; no public record of the "
            "preprod parameter change was found"
        ),
        "gov_action_deposit": (
            f"{UNVERIFIED} 1,000 tADA proposed in GA_GOVDEP_PREPROD; its enactment was not "
            "found in a public record"
        ),
    }
    return Profile(
        "preprod", "today's preprod: protocol 11.0, higher memory limits", params, sources
    )


def _pv10() -> Profile:
    base = _mainnet()
    params = dataclasses.replace(
        base.params,
        protocol_major_ver=10,
        max_tx_ex_mem=14_000_000,
        max_block_ex_mem=62_000_000,
        cost_models=pv10_cost_models(),
    )
    sources = {
        **base.sources,
        "protocol_major_ver": "mainnet/2024-10-30-hf10 hard-fork action to 10.0 (Plomin)",
        "max_tx_ex_mem": "CLI_MAINNET maxTxExecutionUnits.memory (14,000,000)",
        "max_block_ex_mem": "CLI_MAINNET maxBlockExecutionUnits.memory (62,000,000)",
        "cost_models": "protocol-10 lists (166/175/297), as shipped by uplc 1.3.3",
    }
    return Profile("pv10", "mainnet before protocol 11: protocol 10.0 (Plomin)", params, sources)


_BUILDERS = {"mainnet": _mainnet, "preprod": _preprod, "pv10": _pv10}
PROFILE_NAMES: tuple[str, ...] = tuple(_BUILDERS)


def profile(name: str) -> Profile:
    """The profile called `name` ("mainnet" | "preprod" | "pv10")."""
    builder = _BUILDERS.get(name)
    if builder is None:
        raise UnknownProfile(f"unknown parameter profile {name!r}; expected one of {PROFILE_NAMES}")
    return builder()


def profile_params(name: str) -> ProtocolParams:
    return profile(name).params
