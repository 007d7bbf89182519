"""Mint test NTX (the devnet/preprod test policy of one admin key) to an address."""

from __future__ import annotations

from dataclasses import dataclass

from pycardano import Address, ChainContext, MultiAsset

from chain.contracts import types as t
from chain.offchain import scripts as S
from chain.offchain.builders import assembly as A
from chain.offchain.builders.errors import BuilderError
from chain.offchain.builders.wallet import KeyWallet


@dataclass(frozen=True)
class MintResult:
    built: A.BuiltTx
    policy_id: bytes
    asset_name: bytes
    amount: int
    to: Address

    @property
    def unit(self) -> str:
        return self.policy_id.hex() + self.asset_name.hex()


def test_ntx_policy_id(admin: KeyWallet) -> bytes:
    return S.script_hash(S.ntx_test_policy(admin.pkh)).payload


def build_mint_test_ntx(
    context: ChainContext, admin: KeyWallet, to: Address, amount: int, name: bytes = b"NTX"
) -> MintResult:
    """An unsigned mint of `amount` test NTX under `admin`'s policy, paid to `to` (with
    min-ADA from the admin's wallet, who also signs as the policy requires)."""
    if amount <= 0:
        raise BuilderError(f"mint amount must be positive, got {amount}")
    if len(name) > 32:
        raise BuilderError("asset name is at most 32 bytes")
    policy = S.ntx_test_policy(admin.pkh)
    policy_id = S.script_hash(policy)
    assets = MultiAsset.from_primitive({policy_id.payload: {name: amount}})
    plan = A.TxPlan(
        change_address=admin.address,
        outputs=[A.output_with_min_ada(context, to, assets)],
        mints=[A.ScriptMint(policy, {name: amount}, t.MintTestNtx())],
        scripts=[policy],
        required_signers=[admin.pkh],
    )
    built = A.finalize(context, plan, admin.utxos(context))
    return MintResult(built, policy_id.payload, name, amount, to)


def mint_test_ntx(
    context: ChainContext, admin: KeyWallet, to: Address, amount: int, name: bytes = b"NTX"
) -> tuple[str, MintResult]:
    """Build, sign with the admin key and submit; returns (tx id, result)."""
    result = build_mint_test_ntx(context, admin, to, amount, name)
    return A.submit(context, A.sign(result.built, [admin.signing_key])), result
