"""Submitters' sealing keys: registered with a wallet signature, handed to workers at claim.

A submitter with a sealing key has every result of every job sealed to it (the profile asks
for sealing); deleting the key stops sealing for jobs claimed afterwards.
"""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Session

from api.errors import BadRequest, NotFound, Unauthorized
from api.models import Job, SealingKey, User
from api.wallet import verify_sign_data
from proofnet.messages.sealing import SealingError, public_key_of_message


def register_sealing_key(
    session: Session, user: User, *, signature: str, key: str, now: datetime
) -> SealingKey:
    """Keep the key the user's wallet signed (CIP-8 over `sealing_key_message`)."""
    signed = verify_sign_data(signature, key)
    if signed.key_hash != user.payment_key_hash:
        raise Unauthorized("the sealing key was signed by another wallet than this account's")
    try:
        public_key = public_key_of_message(signed.message)
    except SealingError as e:
        raise BadRequest(str(e)) from e
    assert user.id is not None
    row = session.get(SealingKey, user.id)
    if row is None:
        row = SealingKey(
            user_id=user.id,
            public_key=public_key,
            signature=signature,
            cose_key=key,
            registered_at=now,
        )
    else:
        row.public_key, row.signature, row.cose_key = public_key, signature, key
        row.registered_at = now
    session.add(row)
    session.commit()
    session.refresh(row)
    return row


def sealing_key_of(session: Session, user: User) -> SealingKey:
    row = session.get(SealingKey, user.id)
    if row is None:
        raise NotFound("this account has no sealing key")
    return row


def delete_sealing_key(session: Session, user: User) -> None:
    row = sealing_key_of(session, user)
    session.delete(row)
    session.commit()


def sealing_key_for_job(session: Session, job: Job) -> SealingKey | None:
    """The key a worker must seal `job`'s results to, or None (results in the clear)."""
    return session.get(SealingKey, job.owner_id)
