"""A deployed protocol on a running devnet, for builder tests, attack tests and the bench.

    with protocol_world(tmp_path) as world:        # devnet + deployment + funded wallets
        escrows = world.lock([world.job(budget=1_000)])
        ...

`protocol_world` is a context manager (module-scoped fixtures wrap it); everything it
deploys uses the project's own builders, so the fixtures exercise them too.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pycardano import Address, Network, PaymentSigningKey, StakeSigningKey, UTxO

from chain.devnet.testing import RunningDevnet, running_devnet
from chain.offchain.builders import assembly as A
from chain.offchain.builders.chain_time import tip_posix_ms
from chain.offchain.builders.deploy import OracleSetup, deploy
from chain.offchain.builders.deployment import Deployment
from chain.offchain.builders.lock import EscrowJob, lock_escrows
from chain.offchain.builders.mint import mint_test_ntx
from chain.offchain.builders.protocol_utxos import resolve
from chain.offchain.builders.wallet import KeyWallet, await_output
from chain.offchain.oracle_set import of_config

NTX_NAME = b"NTX"
# Chain time on the devnet runs ahead of the wall clock (a slot per 0.2 s block); an hour
# of chain time is about twelve minutes of wall time, more than any test needs.
FAR_DEADLINE_MS = 3_600_000


def wallet(seed: int, staked: bool = False) -> KeyWallet:
    key = PaymentSigningKey.from_primitive(
        hashlib.blake2b(b"pay%d" % seed, digest_size=32).digest()
    )
    stake = (
        StakeSigningKey.from_primitive(hashlib.blake2b(b"stake%d" % seed, digest_size=32).digest())
        if staked
        else None
    )
    return KeyWallet(key, Network.TESTNET, stake)


@dataclass
class ProtocolWorld:
    devnet: RunningDevnet
    context: Any
    deployment: Deployment
    admin: KeyWallet
    oracles: list[KeyWallet]
    threshold: int
    submitter: KeyWallet
    providers: list[KeyWallet]
    _nonce: int = field(default=0)

    @property
    def oracle_set(self) -> bytes:
        """The oracle set the configuration holds now (what new escrows pin)."""
        return of_config(resolve(self.context, self.deployment).config_datum)

    @property
    def oracle_quorum(self) -> list[KeyWallet]:
        return self.oracles[: self.threshold]

    def fund(self, w: KeyWallet | Address, lovelace: int = 200_000_000) -> None:
        address = w.address if isinstance(w, KeyWallet) else w
        self.devnet.wait_for_tx(self.devnet.fund(str(address), lovelace=lovelace))

    def mint_ntx(self, to: Address, amount: int) -> None:
        tx_id, _ = mint_test_ntx(self.context, self.admin, to, amount, NTX_NAME)
        self.devnet.wait_for_tx(tx_id)

    def now_ms(self) -> int:
        return tip_posix_ms(self.context)

    def job(
        self,
        budget: int = 1_000,
        *,
        deadline_in_ms: int = FAR_DEADLINE_MS,
        submitter: KeyWallet | None = None,
        cancel_until_in_ms: int | None = None,
    ) -> EscrowJob:
        self._nonce += 1
        now = self.now_ms()
        return EscrowJob(
            job_id=hashlib.blake2b(b"job%d" % self._nonce, digest_size=32).digest(),
            budget=budget,
            deadline=now + deadline_in_ms,
            submitter=(submitter or self.submitter).address,
            cancel_allowed_until=None if cancel_until_in_ms is None else now + cancel_until_in_ms,
            nonce=self._nonce,
        )

    def lock(self, jobs: Sequence[EscrowJob], by: KeyWallet | None = None, **kw: Any) -> list[UTxO]:
        """Lock `jobs` (one transaction), wait for it and return the escrow UTxOs in order."""
        w = by or self.submitter
        result = lock_escrows(self.context, self.deployment, jobs, w, **kw)
        self.devnet.wait_for_tx(result.tx_id)
        return self.utxos_of(result.tx_id, self.deployment.escrow_address, len(jobs))

    def utxos_of(self, tx_id: str, address: Address, count: int | None = None) -> list[UTxO]:
        found = sorted(
            (u for u in self.context.utxos(address) if str(u.input.transaction_id) == tx_id),
            key=lambda u: u.input.index,
        )
        if count is not None:
            assert len(found) == count, (tx_id, len(found), count)
        return found

    def submit(self, tx: Any) -> str:
        tx_id = A.submit(self.context, tx)
        self.devnet.wait_for_tx(tx_id)
        return tx_id

    def wait_until_chain_ms(self, posix_ms: int, timeout: float = 60.0) -> None:
        import time

        deadline = time.monotonic() + timeout
        while self.now_ms() <= posix_ms:
            if time.monotonic() > deadline:
                raise TimeoutError(f"chain time did not pass {posix_ms}")
            time.sleep(0.1)


@contextlib.contextmanager
def protocol_world(
    tmp_path: Path,
    *,
    traces: bool = False,
    oracles: int = 3,
    threshold: int = 2,
    submitter_ntx: int = 10_000_000,
    providers: int = 4,
) -> Iterator[ProtocolWorld]:
    """A devnet with the protocol deployed: admin (NTX minter and config admin), oracles,
    a submitter funded with ADA and test NTX, and provider wallets."""
    with running_devnet(tmp_path, block_time=0.2) as devnet:
        context = devnet.chain_context()
        admin = wallet(1)
        oracle_wallets = sorted(
            (wallet(10 + i) for i in range(oracles)), key=lambda w: w.pkh.payload
        )
        submitter = wallet(2, staked=True)
        provider_wallets = [wallet(100 + i, staked=bool(i % 2)) for i in range(providers)]
        for w in (admin, submitter, *oracle_wallets):
            devnet.wait_for_tx(devnet.fund(str(w.address), lovelace=2_000_000_000))
        tx_id, minted = mint_test_ntx(context, admin, submitter.address, submitter_ntx, NTX_NAME)
        await_output(context, submitter.address, tx_id)
        setup = OracleSetup(tuple(o.pkh for o in oracle_wallets), threshold, (admin.pkh,), 1)
        deployment = deploy(context, admin, setup, minted.policy_id, NTX_NAME, traces=traces)
        yield ProtocolWorld(
            devnet=devnet,
            context=context,
            deployment=deployment,
            admin=admin,
            oracles=oracle_wallets,
            threshold=threshold,
            submitter=submitter,
            providers=provider_wallets,
        )
