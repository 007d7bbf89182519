"""The API's own SQLModel base: its own metadata, so other roles' tables never mix in."""

from __future__ import annotations

from sqlalchemy import MetaData
from sqlalchemy.orm import registry
from sqlmodel import SQLModel

# Deterministic constraint names keep Alembic migrations identical on SQLite and PostgreSQL.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

api_registry = registry(metadata=MetaData(naming_convention=NAMING_CONVENTION))


class TableBase(SQLModel, registry=api_registry):
    """Base class of every API table."""
