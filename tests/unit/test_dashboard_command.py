"""`recommender dashboard`: the streamlit command line and environment it builds (the process itself: browser test)."""

from __future__ import annotations

import os

from typer.testing import CliRunner

from recommender.cli import build_app
from recommender.cli.dashboard import APP, REPO_ROOT, dashboard_env, find_app, streamlit_command
from recommender.errors import InputError


def test_the_app_script_is_in_the_checkout():
    assert APP.is_file()
    assert find_app() == REPO_ROOT / "dashboard" / "app.py"


def test_an_installed_package_finds_the_app_in_the_working_directory(tmp_path, monkeypatch):
    (tmp_path / "dashboard").mkdir()
    (tmp_path / "dashboard" / "app.py").write_text("")
    monkeypatch.setattr("recommender.cli.dashboard.APP", tmp_path / "site-packages" / "dashboard" / "app.py")
    monkeypatch.chdir(tmp_path)
    app = find_app()
    assert app == tmp_path / "dashboard" / "app.py"
    assert dashboard_env(None, app)["PYTHONPATH"].split(os.pathsep)[0] == str(tmp_path)


def test_streamlit_runs_headless_on_the_given_loopback_port_without_usage_stats():
    command = streamlit_command(APP, "127.0.0.1", 8765)
    assert command[1:5] == ["-m", "streamlit", "run", str(APP)]
    assert {
        "--server.headless=true",
        "--server.address=127.0.0.1",
        "--server.port=8765",
        "--browser.gatherUsageStats=false",
    } <= set(command)


def test_env_carries_an_absolute_sqlite_url_and_the_repository_on_pythonpath(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env = dashboard_env("sqlite:///results.db")
    assert env["RECOMMENDER_DB_URL"] == f"sqlite:///{tmp_path / 'results.db'}"
    assert str(REPO_ROOT) in env["PYTHONPATH"].split(os.pathsep)


def test_env_keeps_other_urls_and_falls_back_to_the_environment(monkeypatch):
    monkeypatch.setenv("RECOMMENDER_DB_URL", "postgresql+psycopg://u:p@db/recommender")
    assert dashboard_env(None)["RECOMMENDER_DB_URL"] == "postgresql+psycopg://u:p@db/recommender"
    assert dashboard_env("sqlite:////abs/x.db")["RECOMMENDER_DB_URL"] == "sqlite:////abs/x.db"


def test_help_lists_the_options():
    result = CliRunner().invoke(build_app(), ["dashboard", "--help"])
    assert result.exit_code == 0
    for option in ("--db", "--port", "--host"):
        assert option in result.output


def test_a_missing_database_file_exits_2_before_streamlit_starts(tmp_path, monkeypatch):
    started = []
    monkeypatch.setattr("recommender.cli.dashboard.subprocess.Popen", lambda *a, **k: started.append(a))
    missing = tmp_path / "results.db"
    result = CliRunner().invoke(build_app(), ["dashboard", "--db", f"sqlite:///{missing}"])
    assert isinstance(result.exception, InputError) and result.exception.exit_code == 2
    assert result.exception.message == f"no results database at {missing}"
    assert started == [] and not missing.exists()
