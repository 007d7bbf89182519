from __future__ import annotations

from datetime import datetime

from pydantic import Field

from api.schemas.common import PublicBody, RequestBody

HEX = r"^[0-9a-fA-F]+$"


class ChallengeCreate(RequestBody):
    address: str = Field(min_length=20, max_length=128)


class ChallengePublic(PublicBody):
    nonce: str
    message: str
    expires_at: datetime


class SignedData(RequestBody):
    """A CIP-30 `signData` result as the wallet returns it."""

    signature: str = Field(min_length=2, max_length=4096, pattern=HEX)
    key: str = Field(min_length=2, max_length=512, pattern=HEX)


class SignInVerify(SignedData):
    address: str = Field(min_length=20, max_length=128)
    nonce: str = Field(min_length=32, max_length=64, pattern=r"^[0-9a-f]+$")


class TokenPublic(PublicBody):
    access_token: str
    token_type: str = "bearer"
    expires_at: datetime
