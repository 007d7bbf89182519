"""Accounts: created on first sign-in; senior members seeded by an operator."""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Session, select

from api.config import ApiConfig
from api.models import User
from api.wallet import WalletAddress, parse_wallet_address


def get_user_by_address(session: Session, address: str) -> User | None:
    return session.exec(select(User).where(User.address == address)).first()


def get_or_create_user(session: Session, wallet: WalletAddress, now: datetime) -> User:
    user = get_user_by_address(session, wallet.bech32)
    if user is None:
        user = User(address=wallet.bech32, payment_key_hash=wallet.payment_key_hash, created_at=now)
        session.add(user)
        session.flush()
    return user


def add_senior(session: Session, config: ApiConfig, address: str, now: datetime) -> User:
    """Make `address` a senior member (an endorser); seniors may also post jobs."""
    user = get_or_create_user(session, parse_wallet_address(address, config.network), now)
    user.is_senior = True
    if not user.is_approved:
        user.is_approved = True
        user.approved_at = now
    session.add(user)
    session.commit()
    return user
