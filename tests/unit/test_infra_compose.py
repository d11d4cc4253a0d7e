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
