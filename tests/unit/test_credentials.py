"""Credentials stay secret: every message is redacted (redaction.redact, applied to every RecommenderError), and an
`Authorization` header never follows a redirect to another origin (credentials.open_url). The redirects are real:
two loopback HTTP servers on different ports (the `scripted` server), the first sending the client to the second."""

from __future__ import annotations

import base64
import json

import pytest

from recommender.errors import InputError, TargetError, TrackingError
from recommender.load.generators import free_port
from recommender.redaction import redact
from recommender.spec import ExperimentSpec
from recommender.store.results import ResultStore
from recommender.targets.openai_endpoint import OpenAIEndpoint
from recommender.tracking.mlflow import MlflowClient


@pytest.mark.parametrize(
    ("text", "hidden", "kept"),
    [
        ("MLflow at http://user:s3cret@10.0.0.5:5000 cannot be reached", "s3cret", "http://user:***@10.0.0.5:5000"),
        ("postgresql+psycopg://ghp_tokenOnly99@db.internal/results", "ghp_tokenOnly99", "://***@db.internal/results"),
        ("sent Authorization: Bearer sk-live.abc_DEF-123", "sk-live.abc_DEF-123", "Bearer ***"),
        ("header Basic dXNlcjpzM2NyZXQ=", "dXNlcjpzM2NyZXQ=", "Basic ***"),
        ("https://h/x?X-Amz-Signature=f00ba4&part=1&api_key=k-9", "f00ba4", "?X-Amz-Signature=***&part=1&api_key=***"),
        ("mail a@b.com at http://host:80/a@b", "", "mail a@b.com at http://host:80/a@b"),  # no user part: unchanged
        ("set a token (basic authentication) or a Bearer token", "", "(basic authentication) or a Bearer token"),
    ],
)
def test_redact_hides_the_credential_and_keeps_the_rest(text: str, hidden: str, kept: str) -> None:
    said = redact(text)
    assert kept in said
    if hidden:
        assert hidden not in said


def test_redact_hides_secret_environment_values_and_given_secrets(monkeypatch) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", "tok-planted-123456")
    monkeypatch.setenv("SOME_FLAG_KEY", "true")  # too short to be a credential: left alone
    assert redact("server said: bad token tok-planted-123456") == "server said: bad token ***"
    assert redact("flag true") == "flag true"
    assert redact("key k-named-by-api-key-env here", secrets=["k-named-by-api-key-env"]) == "key *** here"


def test_every_error_message_and_hint_is_redacted() -> None:
    error = TargetError("http://u:p4ss-word@h does not answer", hint="try http://u:p4ss-word@h again")
    assert "p4ss-word" not in error.message and "p4ss-word" not in (error.hint or "")
    assert "p4ss-word" not in str(error)


def test_the_mlflow_cannot_be_reached_message_holds_no_password() -> None:
    uri = f"http://alice:s3cret-pw@127.0.0.1:{free_port()}"  # nothing listens there
    with pytest.raises(TrackingError) as caught:
        MlflowClient(uri, timeout_s=2).call("GET", "experiments/search")
    assert "cannot be reached" in caught.value.message
    assert "s3cret-pw" not in caught.value.message and "http://127.0.0.1:" in caught.value.message


def recording(seen: list[str | None], answer: bytes) -> object:
    def route(headers):
        seen.append(headers.get("Authorization"))
        return 200, answer

    return route


def test_authorization_does_not_follow_a_redirect_to_another_port(scripted) -> None:
    seen_there: list[str | None] = []
    models = json.dumps({"data": [{"id": "m"}]}).encode()
    there = scripted({"/v1/models": recording(seen_there, models)})
    here = scripted({"/v1/models": (302, b"", {"Location": f"{there}/v1/models"})})
    endpoint = OpenAIEndpoint(f"{here}/v1", "m", "/v1", headers={"Authorization": "Bearer sk-stay-home"})
    assert endpoint.served_models() == ["m"]  # the redirect was followed
    assert seen_there == [None]  # without the key


def test_authorization_follows_a_redirect_within_its_origin(scripted) -> None:
    seen: list[str | None] = []
    models = json.dumps({"data": [{"id": "m"}]}).encode()
    routes: dict = {"/v1/models": (307, b"", {"Location": "/v1/models-moved"})}
    routes["/v1/models-moved"] = recording(seen, models)
    here = scripted(routes)
    endpoint = OpenAIEndpoint(f"{here}/v1", "m", "/v1", headers={"Authorization": "Bearer sk-stay-home"})
    assert endpoint.served_models() == ["m"]
    assert seen == ["Bearer sk-stay-home"]


def test_mlflow_credentials_do_not_follow_a_redirect_to_another_port(scripted, monkeypatch) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", "mlflow-token-stay-home")
    seen_there: list[str | None] = []
    there = scripted({"/api/2.0/mlflow/experiments/search": recording(seen_there, b"{}")})
    here = scripted(
        {"/api/2.0/mlflow/experiments/search": (302, b"", {"Location": f"{there}/api/2.0/mlflow/experiments/search"})}
    )
    assert MlflowClient(here).call("GET", "experiments/search") == {}
    assert seen_there == [None]


@pytest.mark.parametrize(
    ("env", "uri_user", "sent"),
    [
        ({"MLFLOW_TRACKING_TOKEN": "tok-123456789"}, "", "Bearer tok-123456789"),
        (
            {"MLFLOW_TRACKING_USERNAME": "u", "MLFLOW_TRACKING_PASSWORD": "p", "MLFLOW_TRACKING_TOKEN": "t"},
            "",
            "Basic dTpw",
        ),
        ({}, "uri-user:uri-pw@", "Basic " + base64.b64encode(b"uri-user:uri-pw").decode()),
        ({}, "", None),
    ],
)
def test_mlflow_sends_the_credentials_mlflows_own_client_would(scripted, monkeypatch, env, uri_user, sent) -> None:
    for name in ("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD", "MLFLOW_TRACKING_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    seen: list[str | None] = []
    url = scripted({"/api/2.0/mlflow/experiments/search": recording(seen, b"{}")})
    MlflowClient(url.replace("http://", f"http://{uri_user}")).call("GET", "experiments/search")
    assert seen == [sent]


def test_an_mlflow_username_without_its_password_is_one_line_naming_both(monkeypatch) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "u")
    monkeypatch.delenv("MLFLOW_TRACKING_PASSWORD", raising=False)
    with pytest.raises(InputError) as caught:
        MlflowClient("http://127.0.0.1:9")
    assert "MLFLOW_TRACKING_PASSWORD" in caught.value.message and caught.value.exit_code == 2


def test_a_key_the_server_echoes_in_its_refusal_is_not_repeated(scripted) -> None:
    echo = (401, json.dumps({"error": "invalid api key sk-echoed-back-42"}).encode())
    url = scripted({"/v1/embeddings": echo})
    endpoint = OpenAIEndpoint(f"{url}/v1", "m", "/v1", headers={"Authorization": "Bearer sk-echoed-back-42"})
    with pytest.raises(TargetError) as caught:
        endpoint.probe({"model": "m", "input": ["a"]})
    assert "HTTP 401" in caught.value.message and "sk-echoed-back-42" not in caught.value.message


def test_the_stored_experiment_keeps_no_password_of_its_urls(tmp_path) -> None:
    spec = ExperimentSpec.model_validate(
        {
            "name": "stored",
            "target": {"kind": "remote", "endpoint": "http://ops:pw-endpoint-77@127.0.0.1:8000"},
            "tracking": {"mlflow": "http://ops:pw-tracking-88@127.0.0.1:5000"},
        }
    )
    store = ResultStore.open(f"sqlite:///{tmp_path / 'results.db'}")
    store.save_experiment(spec)
    stored = json.dumps(store.experiment("stored").spec)
    assert "http://ops:***@127.0.0.1:5000" in stored and "http://ops:***@127.0.0.1:8000" in stored
    store.engine.dispose()
    for path in tmp_path.iterdir():
        assert b"pw-endpoint-77" not in path.read_bytes() and b"pw-tracking-88" not in path.read_bytes()
