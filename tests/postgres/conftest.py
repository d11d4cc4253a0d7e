"""The postgres tier: a real PostgreSQL server for the session (skipped, with the install command, where the server
binaries or the psycopg driver are missing); each test gets a new, empty database on it."""

from __future__ import annotations

import itertools

import pytest

from tests.postgres.server import INSTALL, PostgresServer, find_binaries

_numbers = itertools.count()


@pytest.fixture(scope="session")
def postgres_server():
    """Started once; always stopped (pg_ctl stop -m fast) at the end of the session, failed tests or not."""
    binaries = find_binaries()
    if binaries is None:
        pytest.skip(f"PostgreSQL server binaries (initdb, pg_ctl) not found: {INSTALL}")
    pytest.importorskip("psycopg", reason='the psycopg driver is missing: pip install -e ".[postgres]"')
    server = PostgresServer.create(binaries)
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> str:
    """A postgresql+psycopg:// URL of a new, empty database (no schema yet)."""
    return postgres_server.create_database(f"test_{next(_numbers)}")
