"""What a killed job left: real processes found through the pid file, stopped only when pid and start time match;
children tied to their parent's life."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil
import pytest

from recommender.targets.leftovers import PID_FILE, ServerRecord, remove_shared_memory, stop_leftovers


@pytest.fixture
def server():
    """A stand-in server (sleep) in its own session, with a stand-in stub (sleep) in that session."""
    leader = subprocess.Popen(["sh", "-c", "sleep 60 & exec sleep 60"], start_new_session=True)
    time.sleep(0.3)
    yield leader
    if leader.poll() is None:
        for proc in psutil.Process(leader.pid).children():
            proc.kill()
        leader.kill()
    leader.wait()


def alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_the_recorded_server_and_its_stubs_are_stopped_and_its_shm_regions_removed(tmp_path, server, monkeypatch):
    stub = psutil.Process(server.pid).children()[0]
    ServerRecord.of(server.pid, "nonexistent_prefix_").write(tmp_path)
    killed = stop_leftovers(tmp_path, frozenset({"sleep"}))
    assert sorted(killed) == sorted([server.pid, stub.pid])
    assert server.poll() is not None and not alive(stub)  # (psutil reaped it: its return code is lost)
    assert not (tmp_path / PID_FILE).exists()


def test_a_pid_with_another_start_time_is_never_touched(tmp_path, server):
    ServerRecord(server.pid, psutil.Process(server.pid).create_time() - 100, "p_").write(tmp_path)
    assert stop_leftovers(tmp_path, frozenset({"tritonserver"})) == []
    assert server.poll() is None


def test_no_or_garbled_pid_file_is_nothing_to_stop(tmp_path):
    assert stop_leftovers(tmp_path, frozenset({"sleep"})) == []
    (tmp_path / PID_FILE).write_text("{not json")
    assert stop_leftovers(tmp_path, frozenset({"sleep"})) == []


def test_remove_shared_memory_only_takes_the_prefix(tmp_path):
    for name in ("recommender_1_ab_region", "recommender_2_cd_region"):
        (tmp_path / name).write_bytes(b"x")
    remove_shared_memory("recommender_1_ab_", shm=tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["recommender_2_cd_region"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux only")
def test_a_child_dies_with_its_parent_even_by_kill_9():
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import subprocess, sys, time; from recommender.targets.lifeline import die_with_parent\n"
                "child = subprocess.Popen(['sleep', '60'], preexec_fn=die_with_parent()); "
                "print(child.pid, flush=True); time.sleep(60)"
            ),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    child = psutil.Process(int(parent.stdout.readline()))
    parent.kill()
    parent.wait()
    psutil.wait_procs([child], timeout=5)
    assert not alive(child)
