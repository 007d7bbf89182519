from __future__ import annotations

from fastapi import APIRouter, Request

from api.deps import ConfigDep, CurrentUser, NowDep, SessionDep
from api.schemas.auth import ChallengeCreate, ChallengePublic, SignInVerify, TokenPublic
from api.schemas.common import Message
from api.services import auth as service

router = APIRouter(prefix="/auth", tags=["auth"])


@router.post("/challenge")
def challenge(
    body: ChallengeCreate, session: SessionDep, config: ConfigDep, now: NowDep
) -> ChallengePublic:
    """A nonce and the exact message to sign with the wallet (CIP-30 `signData`)."""
    issued = service.issue_sign_in_challenge(session, config, body.address, now)
    return ChallengePublic(nonce=issued.nonce, message=issued.message, expires_at=issued.expires_at)


@router.post("/verify")
def verify(body: SignInVerify, session: SessionDep, config: ConfigDep, now: NowDep) -> TokenPublic:
    """Exchange the wallet's `signData` result over the challenge for a bearer token."""
    issued = service.verify_sign_in(
        session,
        config,
        address=body.address,
        nonce=body.nonce,
        signature=body.signature.lower(),
        key=body.key.lower(),
        now=now,
    )
    return TokenPublic(access_token=issued.token, expires_at=issued.expires_at)


@router.post("/logout")
def logout(request: Request, user: CurrentUser, session: SessionDep, now: NowDep) -> Message:
    token = request.headers["authorization"].split(" ", 1)[1].strip()
    service.revoke_token(session, token, now)
    return Message(detail="signed out")
