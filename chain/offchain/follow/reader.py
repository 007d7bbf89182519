"""The follower port: "the transactions spending these scripts' UTxOs since this cursor",
with rollbacks, whatever the chain backend; and the factory that picks one for a backend.

A caller keeps a few recent points (its cursor first) and hands them in newest first; the
follower answers from the newest one still on chain (`FollowStep.common`), so a rollback is
seen as "everything you recorded above `common` is gone", and the rescan that follows
brings back whatever the new chain holds. When none is on chain any more, it starts over
at `start`, and the caller drops everything it had recorded.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from chain.offchain.errors import BackendConfigError
from chain.offchain.follow.model import BlockPoint, FollowStep


class DeploymentFollower(Protocol):
    def tip(self) -> BlockPoint: ...

    def block_at(self, height: int) -> BlockPoint | None:
        """The block at `height` on the current chain, None above the tip."""
        ...

    def tx_block(self, tx_hash: str) -> BlockPoint | None:
        """The block holding `tx_hash`, None when it is not on chain."""
        ...

    def point_before(self, tx_hash: str) -> BlockPoint | None:
        """A block before the one holding `tx_hash` (following from it sees that
        transaction), None when the transaction is not on chain."""
        ...

    def follow(
        self, known: Sequence[BlockPoint], scripts: Sequence[str], start: BlockPoint
    ) -> FollowStep:
        """Transactions spending UTxOs of `scripts` (hashes, hex) after the newest of
        `known` still on chain (or after `start` when none is), up to the tip or a
        bounded number of transactions."""
        ...


def follower_for(context: Any, **options: Any) -> DeploymentFollower:
    """The follower for a chain context from `chain.offchain.backends.chain_context`.

    Blockfrost-shaped backends (hosted Blockfrost, the devnet) answer by script: the spends
    of each watched script are listed (`/scripts/{hash}/redeemers`) and each new one read.
    A self-hosted node (Ogmios + Kupo) has no such index: every block after the cursor is
    read by chain-sync, and the outputs its transactions spent come from Kupo."""
    from chain.offchain.follow.blockfrost import BlockfrostFollower

    api = getattr(context, "api", None)
    if api is not None and hasattr(api, "script_redeemers"):
        return BlockfrostFollower(api, **options)
    ogmios_url, kupo_url = getattr(context, "ogmios_url", None), getattr(context, "kupo_url", "")
    if ogmios_url is not None and kupo_url:
        from chain.offchain.follow.kupo import Kupo
        from chain.offchain.follow.ogmios import OgmiosFollower

        return OgmiosFollower(ogmios_url, Kupo(kupo_url), **options)
    if type(context).__name__ == "OgmiosV6ChainContext":
        raise BackendConfigError(
            "following the chain through Ogmios needs Kupo for the spent outputs: set "
            "PROOFNET_KUPO_URL"
        )
    raise BackendConfigError(
        f"cannot follow the chain through a {type(context).__name__}: use "
        "PROOFNET_CHAIN_BACKEND=devnet, blockfrost or ogmios"
    )
