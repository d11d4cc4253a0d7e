"""infra/compose.yaml: the team setup's structure (no Docker engine needed)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

COMPOSE = Path(__file__).resolve().parents[2] / "infra" / "compose.yaml"


@pytest.fixture(scope="module")
def services() -> dict:
    return yaml.safe_load(COMPOSE.read_text())["services"]


def test_postgres_16_keeps_data_in_a_volume_and_has_a_healthcheck(services: dict) -> None:
    postgres = services["postgres"]
    assert postgres["image"] == "postgres:16"
    assert "postgres-data:/var/lib/postgresql/data" in postgres["volumes"]
    assert "pg_isready" in " ".join(postgres["healthcheck"]["test"])
    assert all(port.startswith("127.0.0.1:") for port in postgres["ports"])


def test_dashboard_uses_postgres_and_binds_loopback(services: dict) -> None:
    dashboard = services["dashboard"]
    assert dashboard["command"][:3] == ["recommender", "dashboard", "--db"]
    assert dashboard["command"][3].startswith("postgresql+psycopg://recommender:")
    assert dashboard["ports"] == ["127.0.0.1:8501:8501"]
    assert dashboard["depends_on"] == {"postgres": {"condition": "service_healthy"}}


def test_locust_master_and_workers_are_wired(services: dict) -> None:
    master, worker = services["locust-master"], services["locust-worker"]
    assert "--master" in master["command"] and "--expect-workers" in master["command"]
    assert "--worker" in worker["command"] and "--master-host locust-master" in worker["command"]
    assert master["profiles"] == worker["profiles"] == ["load"]
    assert all(port.startswith("127.0.0.1:") for port in master["ports"])


def compose_database_url(services: dict, password: str = "pw") -> str:
    """The URL the dashboard service is given, with infra/.env's POSTGRES_PASSWORD filled in."""
    return services["dashboard"]["command"][3].replace("${POSTGRES_PASSWORD}", password)


def test_the_dashboard_url_names_the_postgres_service_user_database_and_driver(services: dict) -> None:
    from sqlalchemy.engine import make_url

    url, postgres = make_url(compose_database_url(services)), services["postgres"]
    assert url.drivername == "postgresql+psycopg"  # the driver infra/Dockerfile installs (psycopg[binary])
    assert (url.username, url.password, url.database) == (
        postgres["environment"]["POSTGRES_USER"],
        "pw",
        postgres["environment"]["POSTGRES_DB"],
    )
    assert (url.host, url.port) == ("postgres", int(postgres["ports"][0].rsplit(":", 1)[1]))
    assert "psycopg" in (COMPOSE.parent / "Dockerfile").read_text()


def test_the_url_the_compose_file_passes_is_the_one_the_store_and_dashboard_read(services: dict, monkeypatch) -> None:
    """`recommender dashboard --db URL` hands URL to Streamlit as RECOMMENDER_DB_URL, which the store reads."""
    from dashboard import source
    from recommender.cli.dashboard import dashboard_env
    from recommender.store.database import resolve_url

    url = compose_database_url(services)
    assert dashboard_env(url)[source.DB_ENV] == url
    monkeypatch.setenv(source.DB_ENV, url)
    assert resolve_url(None) == source.database_url() == url
    documented = (
        f"export {source.DB_ENV}=postgresql+psycopg://recommender:$POSTGRES_PASSWORD@127.0.0.1:5432/recommender"
    )
    assert documented in COMPOSE.read_text()
