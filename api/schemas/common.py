"""Bases shared by every schema: request bodies refuse fields they do not know."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class RequestBody(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=False)


class PublicBody(BaseModel):
    model_config = ConfigDict(from_attributes=True)


class Message(PublicBody):
    detail: str
