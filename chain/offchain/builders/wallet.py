"""A key-held wallet: a payment signing key and its (optionally staked) address."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pycardano import (
    Address,
    ChainContext,
    Network,
    PaymentSigningKey,
    StakeSigningKey,
    UTxO,
    VerificationKeyHash,
)
from tenacity import RetryCallState, Retrying, retry_if_result, stop_after_delay, wait_fixed

from chain.offchain.builders.errors import BuilderError


@dataclass(frozen=True)
class KeyWallet:
    signing_key: PaymentSigningKey
    network: Network = Network.TESTNET
    stake_key: StakeSigningKey | None = None

    @classmethod
    def from_file(
        cls, path: Path, network: Network = Network.TESTNET, stake_path: Path | None = None
    ) -> KeyWallet:
        """A wallet from cardano-cli text envelopes (`payment.skey`, optional `stake.skey`)."""
        try:
            key = PaymentSigningKey.load(str(path))
            stake = StakeSigningKey.load(str(stake_path)) if stake_path else None
        except Exception as exc:  # pycardano raises assorted errors on a bad key file
            raise BuilderError(f"cannot load signing key {path}: {exc}") from exc
        return cls(key, network, stake)

    @property
    def pkh(self) -> VerificationKeyHash:
        return self.signing_key.to_verification_key().hash()

    @property
    def address(self) -> Address:
        stake = self.stake_key.to_verification_key().hash() if self.stake_key else None
        return Address(self.pkh, stake, network=self.network)

    def utxos(self, context: ChainContext) -> list[UTxO]:
        return list(context.utxos(self.address))


def await_output(
    context: ChainContext, address: Address, tx_id: str, timeout: float = 120.0
) -> list[UTxO]:
    """Wait until an output of `tx_id` is visible at `address` (confirmation through any
    backend that lists UTxOs); returns that address's UTxOs from the transaction."""

    def outputs() -> list[UTxO]:
        return [u for u in context.utxos(address) if str(u.input.transaction_id) == tx_id]

    def timed_out(_state: RetryCallState) -> list[UTxO]:
        raise BuilderError(f"transaction {tx_id} did not reach {address} in {timeout}s")

    found: list[UTxO] = Retrying(
        stop=stop_after_delay(timeout),
        wait=wait_fixed(0.1),
        retry=retry_if_result(lambda found: not found),
        retry_error_callback=timed_out,
    )(outputs)
    return found
