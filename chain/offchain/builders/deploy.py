"""Deploy the protocol: config NFT + oracle configuration, reference scripts, batch stake
registration. Three transactions, or four when the escrow and batch scripts together
exceed the 16 KB size limit (the trace-keeping build does):

1. spend the seed UTxO, mint the one config NFT (policy carried in the witness set), lock
   it with the `OracleConfigDatum` at the oracle-config script, and publish the
   oracle-config script as a reference script;
2. publish the escrow and batch scripts as reference scripts (one transaction each if
   they do not fit one);
3. register the batch script's stake credential (Conway certificate with deposit; the
   batch script allows registration, its script by reference).

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
# Room for a transaction's body, witness and fee input beside its reference scripts.
_TX_OVERHEAD_BYTES = 1_500


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
    `release` an earlier protocol version's scripts (`scripts.release_blueprint`)."""
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
        mints=[A.ScriptMint(scripts.config_nft, {S.CONFIG_NFT_NAME: 1}, t.MintConfigNft(0))],
        scripts=[scripts.config_nft],
    )
    tx1 = _run(context, plan, deployer, keys)
    config_ref, config_script_ref = f"{tx1}#0", f"{tx1}#1"

    # 2. escrow and batch reference scripts.
    script_outputs = [
        A.output_with_min_ada(context, scripts.config_address, script=scripts.escrow),
        A.output_with_min_ada(context, scripts.config_address, script=scripts.batch_settle),
    ]
    script_bytes = len(bytes(scripts.escrow)) + len(bytes(scripts.batch_settle))
    if script_bytes <= int(context.protocol_param.max_tx_size) - _TX_OVERHEAD_BYTES:
        plan = A.TxPlan(change_address=deployer.address, outputs=script_outputs)
        tx2 = _run(context, plan, deployer, keys)
        escrow_ref_utxo, batch_ref_utxo = _outputs(context, scripts.config_address, tx2, 2)
        published: tuple[str, ...] = (tx2,)
    else:
        refs = []
        for out in script_outputs:
            tx = _run(
                context, A.TxPlan(change_address=deployer.address, outputs=[out]), deployer, keys
            )
            refs.append((tx, _outputs(context, scripts.config_address, tx, 1)[0]))
        (tx2a, escrow_ref_utxo), (tx2b, batch_ref_utxo) = refs
        published = (tx2a, tx2b)

    # 3. register the batch stake credential (script by reference).
    deposit = int(context.protocol_param.key_deposit)
    cert = StakeRegistrationConway(StakeCredential(scripts.batch_hash), deposit)
    plan = A.TxPlan(
        change_address=deployer.address,
        reference_inputs=[batch_ref_utxo],
        certificates=[(cert, t.BatchAdmin(0))],
        deposits=deposit,
    )
    tx3 = _run(context, plan, deployer, keys)

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
        tx_ids=(tx1, *published, tx3),
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
