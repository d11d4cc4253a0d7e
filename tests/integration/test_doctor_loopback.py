"""`recommender doctor --loopback`: real Locust against the real null endpoint, the rate printed as information."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from recommender.doctor.loopback import NAME, loopback_check

pytestmark = pytest.mark.integration


def test_the_loopback_rate_is_measured_and_never_blocks() -> None:
    check = loopback_check(seconds=2.0, users=4)
    assert check.passed and not check.needed and check.name == NAME
    rate, p50 = re.match(r"([\d,]+) requests/s at p50 ([\d.]+) ms", check.found).groups()  # type: ignore[union-attr]
    assert int(rate.replace(",", "")) > 100 and 0 < float(p50) < 100, check.found
    assert "(4 users, 2." in check.found  # the duration measured, not the one asked for


def test_doctor_prints_it_only_when_asked(tmp_path) -> None:
    command = [sys.executable, "-m", "recommender", "doctor"]
    plain = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True)
    asked = subprocess.run([*command, "--loopback"], cwd=tmp_path, capture_output=True, text=True)
    assert plain.returncode == asked.returncode == 0, asked.stdout + asked.stderr
    assert NAME not in plain.stdout and f"{NAME}: " in asked.stdout
