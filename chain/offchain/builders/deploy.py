"""Deploy the protocol: config NFT + oracle configuration, reference scripts, batch stake
registration. Three transactions (one would exceed the 16 KB size limit):

1. spend the seed UTxO, mint the one config NFT (the oracle-config script is its policy,
   carried in the witness set), lock it with the `OracleConfigDatum` at that same script,
   the only place the policy lets it land, and publish the script as a reference script;
2. publish the batch script as a reference script;
3. publish the escrow script as a reference script and register the batch script's stake
   credential (Conway certificate with deposit; the batch script allows registration, its
   script by reference). The two scripts of the trace-keeping build together pass the
   16 KB transaction limit, hence apart.

Reference scripts are parked at the oracle-config script address: no wallet sweeps them
by accident, and the admin quorum can still reclaim them (stray UTxOs there are spendable
next to the config NFT).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pycardano import (
    ChainContext,
    MultiAsset,
    PaymentSigningKey,
    StakeCredential,
    StakeRegistrationConway,
    UTxO,
    VerificationKeyHash,
)

from chain.contracts import types as t
from chain.offchain import scripts as S
from chain.offchain.builders import assembly as A
from chain.offchain.builders.deployment import Deployment
from chain.offchain.builders.errors import BuilderError
from chain.offchain.builders.onchain import out_ref_text
from chain.offchain.builders.wallet import KeyWallet, await_output

Waiter = Callable[[ChainContext, str], None]


@dataclass(frozen=True)
class OracleSetup:
    """Who approves settlements (oracles) and who may change the configuration (admins)."""

    oracles: tuple[VerificationKeyHash, ...]
    threshold: int
    admins: tuple[VerificationKeyHash, ...]
    admin_threshold: int

    def datum(self, batch_hash: bytes) -> t.OracleConfigDatum:
        oracles = sorted(k.payload for k in self.oracles)
        admins = sorted(k.payload for k in self.admins)
        for name, keys, threshold in (
            ("oracles", oracles, self.threshold),
            ("admins", admins, self.admin_threshold),
        ):
            if len(set(keys)) != len(keys):
                raise BuilderError(f"{name} contain a repeated key")
            if any(len(k) != 28 for k in keys):
                raise BuilderError(f"{name} must be 28-byte key hashes")
            if not 1 <= threshold <= len(keys):
                raise BuilderError(f"{name} threshold {threshold} not in 1..{len(keys)}")
        return t.OracleConfigDatum(
            oracles, self.threshold, admins, self.admin_threshold, batch_hash
        )


def deploy(
    context: ChainContext,
    deployer: KeyWallet,
    setup: OracleSetup,
    ntx_policy: bytes,
    ntx_name: bytes,
    *,
    traces: bool = False,
    release: str | None = None,
) -> Deployment:
    """Deploy from `deployer`'s funds (about 50 ADA: reference-script min-ADA, the stake
    deposit and fees). `traces=True` deploys the trace-keeping build where available;
    `release` an earlier protocol version's scripts (`scripts.release_blueprint`; 1.0.0
    mints the config NFT under its separate config_nft policy)."""
    if len(ntx_policy) != 28 or len(ntx_name) > 32:
        raise BuilderError("NTX policy must be 28 bytes and its name at most 32 bytes")
    utxos = deployer.utxos(context)
    seeds = [u for u in utxos if A._is_ada_only(u)]
    if not seeds:
        raise BuilderError(f"{deployer.address} has no ADA-only UTxO to seed the config NFT")
    seed = max(seeds, key=lambda u: u.output.amount.coin)
    if release is not None and release != S.current_version():
        scripts = S.protocol_scripts(seed.input, deployer.network, release=release)
    else:
        scripts = protocol_scripts_for(seed, deployer.network, traces)
    nft_policy = scripts.config_nft if scripts.config_nft is not None else scripts.oracle_config
    datum = setup.datum(scripts.batch_hash.payload)
    keys = [deployer.signing_key]

    # 1. config NFT + config datum + oracle-config reference script.
    nft = MultiAsset.from_primitive({scripts.config_policy.payload: {S.CONFIG_NFT_NAME: 1}})
    config_out = A.output_with_min_ada(context, scripts.config_address, nft, datum=datum)
    config_script_out = A.output_with_min_ada(
        context, scripts.config_address, script=scripts.oracle_config
    )
    plan = A.TxPlan(
        change_address=deployer.address,
        key_inputs=[seed],
        outputs=[config_out, config_script_out],
        mints=[A.ScriptMint(nft_policy, {S.CONFIG_NFT_NAME: 1}, t.MintConfigNft(0))],
        scripts=[nft_policy],
    )
    tx1 = _run(context, plan, deployer, keys)
    config_ref, config_script_ref = f"{tx1}#0", f"{tx1}#1"

    # 2. batch reference script.
    plan = A.TxPlan(
        change_address=deployer.address,
        outputs=[
            A.output_with_min_ada(context, scripts.config_address, script=scripts.batch_settle),
        ],
    )
    tx2 = _run(context, plan, deployer, keys)
    (batch_ref_utxo,) = _outputs(context, scripts.config_address, tx2, 1)

    # 3. escrow reference script; register the batch stake credential (script by reference).
    deposit = int(context.protocol_param.key_deposit)
    cert = StakeRegistrationConway(StakeCredential(scripts.batch_hash), deposit)
    plan = A.TxPlan(
        change_address=deployer.address,
        outputs=[A.output_with_min_ada(context, scripts.config_address, script=scripts.escrow)],
        reference_inputs=[batch_ref_utxo],
        certificates=[(cert, t.BatchAdmin(0))],
        deposits=deposit,
    )
    tx3 = _run(context, plan, deployer, keys)
    (escrow_ref_utxo,) = _outputs(context, scripts.config_address, tx3, 1)

    return Deployment(
        network="mainnet" if deployer.network.value == 1 else "testnet",
        seed=out_ref_text(seed.input),
        config_policy=scripts.config_policy.payload.hex(),
        config_name=S.CONFIG_NFT_NAME.hex(),
        oracle_config_hash=scripts.oracle_config_hash.payload.hex(),
        escrow_hash=scripts.escrow_hash.payload.hex(),
        batch_hash=scripts.batch_hash.payload.hex(),
        config_ref=config_ref,
        escrow_script_ref=out_ref_text(escrow_ref_utxo.input),
        batch_script_ref=out_ref_text(batch_ref_utxo.input),
        config_script_ref=config_script_ref,
        ntx_policy=ntx_policy.hex(),
        ntx_name=ntx_name.hex(),
        tx_ids=(tx1, tx2, tx3),
        protocol_version=release or S.current_version(),
    )


def protocol_scripts_for(seed: UTxO, network: object, traces: bool) -> S.ProtocolScripts:
    """The protocol scripts of this seed; the trace-keeping build when asked and offered."""
    import inspect

    if traces and "traces" in inspect.signature(S.protocol_scripts).parameters:
        return S.protocol_scripts(seed.input, network, traces=True)  # type: ignore[call-arg,arg-type]
    return S.protocol_scripts(seed.input, network)  # type: ignore[arg-type]


def _run(
    context: ChainContext, plan: A.TxPlan, wallet: KeyWallet, keys: Sequence[PaymentSigningKey]
) -> str:
    built = A.finalize(context, plan, wallet.utxos(context))
    tx_id = A.submit(context, A.sign(built, keys))
    await_output(context, wallet.address, tx_id)
    return tx_id


def _outputs(context: ChainContext, address: object, tx_id: str, count: int) -> list[UTxO]:
    found = [u for u in context.utxos(address) if str(u.input.transaction_id) == tx_id]  # type: ignore[arg-type]
    found.sort(key=lambda u: u.input.index)
    if len(found) < count:
        raise BuilderError(f"expected {count} outputs of {tx_id}, found {len(found)}")
    return found[:count]
