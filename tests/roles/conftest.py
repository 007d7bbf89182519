"""The roles' shared paid loop (role_loop.py), one devnet for the provider's and the
auditor's modules."""

from role_loop import paid_loop

__all__ = ["paid_loop"]
