"""The dashboard in a real headless Chromium: `recommender dashboard` on a free loopback port, the Ranking table and
a Curves chart rendered, a screenshot kept under tmp_path, and the server stopped with nothing left behind."""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[2]
SEED = ROOT / "tests" / "data" / "dashboard_seed.db"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]
START_TIMEOUT_S = 90
UI_TIMEOUT_MS = 60_000

pytestmark = [
    pytest.mark.integration,
    pytest.mark.shares_host,
    pytest.mark.skipif(
        not CHROMIUM.is_file(), reason="no /usr/bin/chromium here; scripts/install_system_packages.sh installs it"
    ),
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_healthy(base: str, process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"recommender dashboard exited with {process.returncode}:\n{log.read_text()}")
        try:
            with urllib.request.urlopen(f"{base}/_stcore/health", timeout=2) as answer:
                if answer.read().strip() == b"ok":
                    return
        except OSError:
            time.sleep(0.5)
    pytest.fail(f"dashboard not healthy after {START_TIMEOUT_S} s:\n{log.read_text()}")


@pytest.fixture
def dashboard(tmp_path):
    """`recommender dashboard` on a copy of the fixture DB; yields (base URL, process); stopped with Ctrl-C (SIGINT)."""
    db = tmp_path / "seed.db"
    shutil.copy(SEED, db)
    port, log = free_port(), tmp_path / "dashboard.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "recommender", "dashboard", "--db", f"sqlite:///{db}", "--port", str(port)],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(base, process, log)
        children = psutil.Process(process.pid).children(recursive=True)
        yield base, process, children, log
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def test_ranking_table_and_a_chart_render_in_chromium(dashboard, tmp_path):
    from playwright.sync_api import sync_playwright

    base, process, children, log = dashboard
    assert any("streamlit" in " ".join(c.cmdline()) for c in children)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1600, "height": 1100})
            page.goto(f"{base}/ranking")
            page.get_by_text("Recommended: onnx-").wait_for(timeout=UI_TIMEOUT_MS)  # newest experiment: micro-rerun
            table = page.locator('[data-testid="stDataFrame"]').first
            table.wait_for(timeout=UI_TIMEOUT_MS)
            assert table.bounding_box()["height"] > 100
            page.wait_for_function(
                "document.querySelector('[data-testid=\"stDataFrame\"]').textContent.includes('onnx-db-ig1-mbs4')",
                timeout=UI_TIMEOUT_MS,
            )
            page.screenshot(path=str(tmp_path / "ranking.png"), full_page=True)
            page.goto(f"{base}/curves")
            chart = page.locator('[data-testid="stVegaLiteChart"] canvas, [data-testid="stVegaLiteChart"] svg').first
            chart.wait_for(timeout=UI_TIMEOUT_MS)
            assert chart.bounding_box()["width"] > 200
            page.screenshot(path=str(tmp_path / "curves.png"), full_page=True)
            for title in ("Experiments", "Compare", "Cost", "History", "Search", "Report"):
                page.get_by_test_id("stSidebarNav").get_by_text(title, exact=True).click()
                page.get_by_role("heading", name=title, exact=True).wait_for(timeout=UI_TIMEOUT_MS)
                page.wait_for_load_state("networkidle")
                assert page.get_by_test_id("stException").count() == 0, title
        finally:
            browser.close()
    assert (tmp_path / "ranking.png").stat().st_size > 10_000

    process.send_signal(signal.SIGINT)  # what Ctrl-C sends
    assert process.wait(timeout=30) == 0
    time.sleep(0.5)
    assert not [c.pid for c in children if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]
    assert "Traceback" not in log.read_text(), log.read_text()
