"""Opening the results database: SQLite file by default, any SQLAlchemy URL (PostgreSQL) by --db / RECOMMENDER_DB_URL."""

from __future__ import annotations

import os
from pathlib import Path

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.exc import SQLAlchemyError

from recommender.errors import StoreError

DEFAULT_DB_PATH = Path(".recommender") / "results.db"
MIGRATIONS = Path(__file__).parent / "migrations"


def resolve_url(url: str | None) -> str:
    """--db beats RECOMMENDER_DB_URL beats the default SQLite file in the working directory."""
    url = url or os.environ.get("RECOMMENDER_DB_URL")
    if url:
        return url
    DEFAULT_DB_PATH.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{DEFAULT_DB_PATH}"


def open_engine(url: str | None = None, migrate: bool = True) -> Engine:
    """An engine on the database, migrated to the newest schema."""
    url = resolve_url(url)
    try:
        engine = create_engine(url, future=True)
        if engine.dialect.name == "sqlite":
            event.listen(engine, "connect", _sqlite_pragmas)
        if migrate:
            upgrade(engine)
    except (SQLAlchemyError, ImportError) as exc:
        raise StoreError(f"cannot open results database {_redact(url)}: {exc}",
                         hint="Check --db / RECOMMENDER_DB_URL (e.g. postgresql+psycopg://user:pass@host/db) "
                              "and that the driver is installed.") from exc
    return engine


def _sqlite_pragmas(dbapi_connection, _record) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.close()


def upgrade(engine: Engine) -> None:
    """Apply every Alembic migration not yet applied."""
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "head")


def _redact(url: str) -> str:
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return "<unparseable URL>"
