"""The slash co-signer's input check (oracle.settlement.slash.check_one_bond_slashed) on
transactions a hostile proposer writes by hand: a second script input beside the bond (whose
own validator could count the slash's outputs for an obligation of its own), a script input
that is not this deployment's bond, a bond spent with something other than Slash."""

from __future__ import annotations

from typing import Any

import pytest
from pycardano import (
    Address,
    Network,
    ScriptHash,
    Transaction,
    TransactionBody,
    TransactionOutput,
    TransactionWitnessSet,
    VerificationKeyHash,
)

from chain.contracts import bond_types as bt
from oracle.settlement.ports import OutRef
from oracle.settlement.quorum import QuorumRefusal
from oracle.settlement.reviewed_tx import ReviewedTx
from oracle.settlement.slash import ReviewedSlash, SlashContext, check_one_bond_slashed

BOND = ScriptHash(b"\x01" * 28)
OTHER = ScriptHash(b"\x02" * 28)
KEY = VerificationKeyHash(b"\x03" * 28)


def at(part: Any) -> TransactionOutput:
    return TransactionOutput(Address(part, network=Network.TESTNET), 2_000_000)


def reviewed(*inputs: TransactionOutput, redeemers: dict[int, Any] | None = None) -> ReviewedSlash:
    tx = Transaction(TransactionBody(inputs=[], outputs=[], fee=0), TransactionWitnessSet())
    refs = tuple((OutRef("ab" * 32, i), out) for i, out in enumerate(inputs))
    return ReviewedSlash(ReviewedTx(tx, refs, (), redeemers or {}))


CTX = SlashContext(None, KEY, BOND, None, None)  # type: ignore[arg-type]


def withdraw() -> Any:
    return bt.Withdraw()


def test_a_second_script_input_beside_the_bond_is_refused() -> None:
    with pytest.raises(QuorumRefusal, match="exactly one script input; this one spends 2"):
        check_one_bond_slashed(reviewed(at(BOND), at(OTHER), at(KEY)), CTX)


def test_a_script_input_that_is_not_this_deployments_bond_is_refused() -> None:
    with pytest.raises(QuorumRefusal, match="not a bond of this deployment"):
        check_one_bond_slashed(reviewed(at(KEY), at(OTHER)), CTX)


def test_a_bond_spent_with_anything_but_slash_is_refused() -> None:
    with pytest.raises(QuorumRefusal, match="has no redeemer"):
        check_one_bond_slashed(reviewed(at(BOND)), CTX)
    with pytest.raises(QuorumRefusal, match="not spent with Slash"):
        check_one_bond_slashed(reviewed(at(BOND), redeemers={0: withdraw()}), CTX)


def test_no_script_input_at_all_is_refused() -> None:
    with pytest.raises(QuorumRefusal, match="this one spends 0"):
        check_one_bond_slashed(reviewed(at(KEY)), CTX)
