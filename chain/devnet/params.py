"""Protocol parameters and genesis of the devnet.

`ProtocolParams()` is today's mainnet (protocol 11.0); `chain.devnet.profiles` builds the
`mainnet`, `preprod` and `pv10` profiles and cites the public source of every value.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction


@dataclass(frozen=True)
class ProtocolParams:
    min_fee_a: int = 44  # lovelace per byte
    min_fee_b: int = 155_381  # constant lovelace
    max_block_size: int = 90_112
    max_tx_size: int = 16_384
    max_block_header_size: int = 1_100
    key_deposit: int = 2_000_000
    pool_deposit: int = 500_000_000
    e_max: int = 18
    n_opt: int = 500
    a0: Fraction = Fraction(3, 10)
    rho: Fraction = Fraction(3, 1000)
    tau: Fraction = Fraction(1, 5)
    protocol_major_ver: int = 11
    protocol_minor_ver: int = 0
    min_pool_cost: int = 170_000_000
    coins_per_utxo_size: int = 4_310
    price_mem: Fraction = Fraction(577, 10_000)
    price_step: Fraction = Fraction(721, 10_000_000)
    max_tx_ex_mem: int = 16_500_000
    max_tx_ex_steps: int = 10_000_000_000
    max_block_ex_mem: int = 72_000_000
    max_block_ex_steps: int = 20_000_000_000
    max_val_size: int = 5_000
    collateral_percent: int = 150
    max_collateral_inputs: int = 3
    # Conway reference-script fee: 15 lovelace/byte, x1.2 every 25,600 bytes (the stride,
    # multiplier and 200 KiB cap are ledger constants, not protocol parameters).
    min_fee_ref_script_cost_per_byte: Fraction = Fraction(15)
    ref_script_fee_range: int = 25_600
    ref_script_fee_multiplier: Fraction = Fraction(6, 5)
    max_ref_script_size_per_tx: int = 204_800
    drep_deposit: int = 500_000_000
    gov_action_deposit: int = 100_000_000_000
    # Conway governance parameters (Blockfrost's pvt_* / dvt_* / committee_* fields).
    pvt_motion_no_confidence: Fraction = Fraction(51, 100)
    pvt_committee_normal: Fraction = Fraction(51, 100)
    pvt_committee_no_confidence: Fraction = Fraction(51, 100)
    pvt_hard_fork_initiation: Fraction = Fraction(51, 100)
    pvt_pp_security_group: Fraction = Fraction(51, 100)
    dvt_motion_no_confidence: Fraction = Fraction(67, 100)
    dvt_committee_normal: Fraction = Fraction(67, 100)
    dvt_committee_no_confidence: Fraction = Fraction(3, 5)
    dvt_update_to_constitution: Fraction = Fraction(3, 4)
    dvt_hard_fork_initiation: Fraction = Fraction(3, 5)
    dvt_pp_network_group: Fraction = Fraction(67, 100)
    dvt_pp_economic_group: Fraction = Fraction(67, 100)
    dvt_pp_technical_group: Fraction = Fraction(67, 100)
    dvt_pp_gov_group: Fraction = Fraction(3, 4)
    dvt_treasury_withdrawal: Fraction = Fraction(67, 100)
    committee_min_size: int = 7
    committee_max_term_length: int = 146  # epochs
    gov_action_lifetime: int = 6  # epochs
    drep_activity: int = 20  # epochs
    # Cost model parameter lists (ledger order) keyed "PlutusV1" | "PlutusV2" | "PlutusV3".
    cost_models: dict[str, list[int]] = field(default_factory=dict)


@dataclass(frozen=True)
class GenesisConfig:
    network_magic: int = 42
    network_id: int = 0  # testnet addresses
    system_start: int = 0  # POSIX seconds of slot 0, fixed when the data dir is created
    slot_length: int = 1  # seconds
    epoch_length: int = 432_000  # slots
    active_slots_coefficient: float = 1.0
    security_param: int = 2160
    slots_per_kes_period: int = 129_600
    max_kes_evolutions: int = 62
    update_quorum: int = 5
    max_lovelace_supply: int = 45_000_000_000_000_000
    faucet_lovelace: int = 30_000_000_000_000_000

    def slot_at(self, posix_seconds: float) -> int:
        return max(0, int((posix_seconds - self.system_start) // self.slot_length))

    def posix_ms_of_slot(self, slot: int) -> int:
        return (self.system_start + slot * self.slot_length) * 1000
