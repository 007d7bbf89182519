"""Accounts: created on first sign-in; senior members seeded by an operator."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select

from api.config import ApiConfig
from api.models import User
from api.wallet import WalletAddress, parse_wallet_address


def get_user_by_address(session: Session, address: str) -> User | None:
    return session.exec(select(User).where(User.address == address)).first()


def get_or_create_user(session: Session, wallet: WalletAddress, now: datetime) -> User:
    """The user of this address, created on first sign-in. Two first sign-ins of one
    address at once both succeed: the one whose insert loses the race reads the winner's."""
    user = get_user_by_address(session, wallet.bech32)
    if user is not None:
        return user
    user = User(address=wallet.bech32, payment_key_hash=wallet.payment_key_hash, created_at=now)
    try:
        with session.begin_nested():  # a savepoint: the race's loser keeps its transaction
            session.add(user)
    except IntegrityError:
        existing = get_user_by_address(session, wallet.bech32)
        if existing is None:
            raise
        return existing
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
