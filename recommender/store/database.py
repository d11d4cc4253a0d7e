"""Opening the results database: SQLite file by default, any SQLAlchemy URL (PostgreSQL) by --db /
RECOMMENDER_DB_URL."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.exc import SQLAlchemyError

from recommender.errors import InputError, StoreError
from recommender.files import paths
from recommender.files.document import read_text

DEFAULT_DB_PATH = paths.RESULTS_DB
MIGRATIONS = Path(__file__).parent / "migrations"
URL_FILE_VARIABLE = "RECOMMENDER_DB_URL_FILE"
MIGRATION_LOCK_KEY = 0x7265636F  # "reco": the PostgreSQL advisory lock taken while migrating


def resolve_url(url: str | None) -> str:
    """--db beats RECOMMENDER_DB_URL beats RECOMMENDER_DB_URL_FILE (a file holding the URL, so that a password is
    never on a command line nor in the environment) beats the default SQLite file in the working directory."""
    url = url or os.environ.get("RECOMMENDER_DB_URL") or _url_from_file(os.environ.get(URL_FILE_VARIABLE))
    if url:
        return url
    DEFAULT_DB_PATH.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{DEFAULT_DB_PATH}"


def _url_from_file(path: str | None) -> str | None:
    if not path:
        return None
    url = read_text(path, f"database URL file ({URL_FILE_VARIABLE})").strip()
    if not url or "\n" in url:
        raise InputError(
            f"{path}: a database URL file ({URL_FILE_VARIABLE}) holds exactly one line, the URL",
            hint="e.g. postgresql+psycopg://user:password@host:5432/recommender; keep the file mode 600.",
        )
    return url


def open_engine(url: str | None = None, migrate: bool = True, existing: bool = False) -> Engine:
    """An engine on the database, migrated to the newest schema. With `existing` (a command that only reads results),
    a SQLite file that is not there is an InputError: it is not made empty."""
    url = resolve_url(url)
    try:
        engine = create_engine(url, future=True)
        if engine.dialect.name == "sqlite":
            _folder_exists(engine, url)
            if existing:
                _file_exists(engine)
            event.listen(engine, "connect", _sqlite_pragmas)
        if migrate:
            upgrade(engine)
    except (SQLAlchemyError, ImportError, OSError) as exc:
        raise StoreError(
            f"cannot open results database {_redact(url)}: {exc}",
            hint="Check --db / RECOMMENDER_DB_URL (e.g. postgresql+psycopg://user:pass@host/db) "
            "and that the driver is installed.",
        ) from exc
    return engine


def _folder_exists(engine: Engine, url: str) -> None:
    """A SQLite file's folder must exist (SQLite makes the file, never its folder): said so, rather than as the
    migration lock's or SQLite's own "unable to open database file"."""
    database = _sqlite_file(engine)
    folder = Path(database).parent if database else None
    if folder is not None and not folder.is_dir():
        raise StoreError(
            f"cannot open results database {_redact(url)}: the folder {folder} does not exist",
            hint=f"Create it (mkdir -p {folder}) or give --db a file in an existing folder.",
        )


def _file_exists(engine: Engine) -> None:
    database = _sqlite_file(engine)
    if database is not None and not Path(database).exists():
        raise InputError(
            f"no results database at {database}",
            hint="`recommender run FILE` writes one (by default .recommender/results.db, from the folder it runs in); "
            "pass --db the database a run wrote (e.g. --db sqlite:///path/results.db), or set RECOMMENDER_DB_URL.",
        )


def _sqlite_file(engine: Engine) -> str | None:
    """The path of a SQLite database file (None: in memory, or not SQLite)."""
    database = engine.url.database if engine.dialect.name == "sqlite" else None
    if not database or database == ":memory:":
        return None
    if engine.url.query.get("uri") == "true":  # sqlite:///file:/path/results.db?mode=ro&uri=true
        return database.removeprefix("file:")
    return database


def _sqlite_pragmas(dbapi_connection, _record) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.close()


def upgrade(engine: Engine) -> None:
    """Apply every Alembic migration not yet applied, one process at a time.

    Two processes opening a new database at once (a run and the dashboard, say) would both try to create
    the schema; a lock serialises them: a file lock beside a SQLite file, an advisory lock on PostgreSQL.
    """
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with _migration_lock(engine), engine.begin() as connection:
        if connection.dialect.name == "postgresql":
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY})
        config.attributes["connection"] = connection
        command.upgrade(config, "head")


@contextmanager
def _migration_lock(engine: Engine) -> Iterator[None]:
    """An exclusive file lock next to a SQLite database file; nothing for other databases."""
    database = _sqlite_file(engine)
    if database is None:
        yield
        return
    with open(f"{database}.migrate.lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


_FAILURES = (  # (text in SQLite's / the driver's message, one-line reason, hint)
    (
        "database is locked",
        "the database is locked: another connection held a write lock beyond the busy timeout",
        "Close what holds the SQLite file open for writing (a DB browser, a stuck process), or use PostgreSQL (--db) "
        "for concurrent writers; then run again: the job resumes where it stopped.",
    ),
    (
        "readonly database",
        "the database is read-only",
        "Make the database file, its folder and its -wal/-shm files writable, or pass another --db.",
    ),
    (
        "database or disk is full",
        "the disk holding the database is full",
        "Free space there, or move the database (--db); then run again: the job resumes where it stopped.",
    ),
)


def explain(exc: Exception) -> tuple[str, str]:
    """(one-line reason, hint) for a failed database call: the known SQLite faults by name, else the driver's
    first line (never the SQL statement, the parameters or the URL with its password)."""
    text = str(getattr(exc, "orig", None) or exc)
    for needle, reason, hint in _FAILURES:
        if needle in text:
            return reason, hint
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    return first, "Is the database reachable and writable?"


def _redact(url: str) -> str:
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return "<unparseable URL>"
