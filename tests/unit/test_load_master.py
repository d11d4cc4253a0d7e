"""The distributed-mode settings a run and a remote worker agree on: the master's address, its port, the worker's
--master."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from recommender.cli.worker import parse_master
from recommender.errors import InputError, LoadError, UsageError
from recommender.load.config import ChildConfig
from recommender.load.generators import LOCUST_MASTER_PORT, MasterSettings, master_arguments
from recommender.load.shapes import PlanLevel, TrafficPlan
from recommender.spec.traffic import TrafficSpec


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("127.0.0.1:6000", ("127.0.0.1", 6000)),
        ("localhost", ("localhost", LOCUST_MASTER_PORT)),
        ("[::1]:7001", ("::1", 7001)),
    ],
)
def test_parse_master_reads_host_and_port(text: str, expected: tuple[str, int]) -> None:
    assert parse_master(text) == expected


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("127.0.0.1:70000", "is not HOST:PORT"),
        (":5557", "is not HOST:PORT"),
        ("no-such-host.invalid:5557", "does not resolve"),
    ],
)
def test_parse_master_rejects_bad_input_with_exit_code_2(text: str, says: str) -> None:
    with pytest.raises(UsageError) as raised:
        parse_master(text)
    assert says in raised.value.message and raised.value.exit_code == 2


def test_master_settings_come_from_the_traffic_spec_and_defaults_keep_old_keys() -> None:
    traffic = TrafficSpec(remote_workers=3, master_bind="0.0.0.0", master_port=6001, worker_wait_seconds=90)
    settings = MasterSettings.from_traffic(traffic)
    assert settings == MasterSettings("0.0.0.0", 6001, 3, 90)
    assert settings.local_host == "127.0.0.1"  # this host's workers reach an any-address bind on loopback
    assert not {"remote_workers", "master_bind", "master_port", "worker_wait_seconds"} & set(TrafficSpec().model_dump())


def test_master_bind_must_be_an_address() -> None:
    with pytest.raises(ValueError, match="is not an IP address"):
        TrafficSpec(master_bind="everywhere")


def test_a_busy_fixed_port_is_refused_naming_the_setting() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(LoadError) as raised:
            MasterSettings(port=port).choose_port()
    assert f"127.0.0.1:{port}" in raised.value.message and "traffic.master_port" in raised.value.hint


def test_master_waits_for_local_and_remote_workers() -> None:
    arguments = master_arguments(MasterSettings(bind="0.0.0.0", remote_workers=2, wait_s=12.5), 6002, 3)
    assert arguments[arguments.index("--expect-workers") + 1] == "3"
    assert arguments[arguments.index("--expect-workers-max-wait") + 1] == "13"
    assert arguments[arguments.index("--master-bind-host") + 1] == "0.0.0.0"


def test_a_worker_rebuilds_the_run_settings_from_the_masters_message(tmp_path: Path, monkeypatch) -> None:
    payload = tmp_path / "payload.json"
    payload.write_text(json.dumps([{"inputs": []}]))
    monkeypatch.setenv("RECOMMENDER_TEST_KEY", "sk-master-host-key")
    config = ChildConfig(
        "bert",
        payload,
        TrafficPlan((PlanLevel(4, 0, 10),)),
        tmp_path / "r.npz",
        tmp_path / "p.json",
        api_key_env="RECOMMENDER_TEST_KEY",
    )
    assert config.request_headers()["Authorization"] == "Bearer sk-master-host-key"  # the master's own requests
    message = json.loads(json.dumps(config.to_message()))  # what crosses the wire is plain JSON-able data
    assert "sk-master-host-key" not in json.dumps(message) and "sk-master-host-key" not in json.dumps(config.to_env())
    rebuilt = ChildConfig.from_message(message)
    assert (rebuilt.model_name, rebuilt.plan, rebuilt.api_key_env) == ("bert", config.plan, "RECOMMENDER_TEST_KEY")
    assert json.loads(message["bodies"]) == [{"inputs": []}]
    # the worker's key is the one in its own environment; none there is one line naming the variable and the fix
    worker_env = {"RECOMMENDER_TEST_KEY": "sk-worker-host-key"}
    assert rebuilt.request_headers(worker_env)["Authorization"] == "Bearer sk-worker-host-key"
    with pytest.raises(InputError) as missing:
        rebuilt.request_headers({})
    assert "RECOMMENDER_TEST_KEY" in missing.value.message and "recommender worker" in (missing.value.hint or "")
    keyless = ChildConfig("bert", payload, config.plan, tmp_path / "r.npz", tmp_path / "p.json")
    assert ChildConfig.from_message(keyless.to_message()).request_headers({}) == {"Content-Type": "application/json"}


@pytest.mark.parametrize(
    ("bind", "warned"), [("127.0.0.1", False), ("::1", False), ("0.0.0.0", True), ("10.1.2.3", True), ("::", True)]
)
def test_a_master_bound_beyond_loopback_is_warned_of_in_one_line(bind: str, warned: bool) -> None:
    warning = MasterSettings(bind=bind).channel_warning
    assert (warning is not None) == warned
    if warning:
        assert "\n" not in warning and "unauthenticated" in warning and bind in warning


def test_the_worker_command_exits_2_with_the_fix_on_a_bad_master(capsys: pytest.CaptureFixture[str]) -> None:
    from recommender.cli import main

    with pytest.raises(SystemExit) as done:
        main(["worker", "--master", "127.0.0.1:99999"])
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert "--master '127.0.0.1:99999' is not HOST:PORT" in err and "hint:" in err


def test_run_warns_in_one_line_of_a_master_bound_beyond_loopback(tmp_path: Path, capsys) -> None:
    from recommender.cli import main

    spec = tmp_path / "open.yaml"
    spec.write_text(
        "name: open\ntarget: {kind: remote, url: 'http://127.0.0.1:9'}\n"
        "traffic: {remote_workers: 1, master_bind: 0.0.0.0, phases: [{initial_users: 1, duration_seconds: 1}]}\n"
    )
    with pytest.raises(SystemExit) as done:
        main(["run", str(spec), "--dry-run"])
    assert done.value.code in (0, None)
    warning = [line for line in capsys.readouterr().out.splitlines() if line.startswith("warning:")]
    assert len(warning) == 1 and "0.0.0.0 is not loopback" in warning[0] and "unauthenticated" in warning[0]
