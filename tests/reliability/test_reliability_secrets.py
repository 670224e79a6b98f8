"""No credential is printed, stored or exported, whatever a server echoes back (issue 31, round 3's first
finding); host addresses that carry tokens are refused before anything is sent.
"""

import base64
import json
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pandas as pd
from ollama_server import FakeOllama
from reliability_helpers import cli_main, error_lines, snapshot

from prisma_core.interpret.ollama_config import OllamaConfig
from prisma_core.interpret.secrets import redact
from prisma_core.store import Workspace
from prisma_core.store.stages import LABELLING

PASSWORD = "s3cret-Passw0rd"
BASIC = base64.b64encode(f"alice:{PASSWORD}".encode()).decode()
TOKEN = "tok-9f8e7d6c5b4a"


def stored_text(workspace: Workspace) -> str:
    """Every row of every table of the workspace, as text."""
    return "\n".join(workspace.db.open_table(name).to_pandas().to_json() for name in workspace.db.list_tables().tables)


# -- secrets a server echoes back -------------------------------------------------------------------------------------


def echo_request_headers(handler: BaseHTTPRequestHandler) -> None:
    """A 500 whose body repeats the request's headers, as some proxies and debug servers do."""
    headers = {name.lower(): value for name, value in handler.headers.items()}
    body = json.dumps({"error": f"upstream failed for {handler.path}; request headers: {json.dumps(headers)}"})
    send(handler, 500, body.encode())


def send(handler: BaseHTTPRequestHandler, status: int, body: bytes) -> None:
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def test_a_password_echoed_back_in_a_server_error_is_never_printed_stored_or_exported(
    workspace: Workspace, fake_ollama: FakeOllama, tmp_path: Path, capsys
) -> None:
    fake_ollama.raw_chat = echo_request_headers
    host = fake_ollama.url.replace("http://", f"http://alice:{PASSWORD}@")

    assert cli_main("label", "--ollama-host", host, "--max-retries", "0", workspace=workspace) == 2
    printed = capsys.readouterr()
    assert fake_ollama.authorizations[-1] == f"Basic {BASIC}"  # the server did see it, and echoed it
    assert '"authorization": "***"' in printed.out  # the failures are reported, the credential masked
    assert cli_main("export", "--out", str(tmp_path / "export"), workspace=workspace) == 0
    exported = (tmp_path / "export" / "config.json").read_text()
    labelling = [stage for stage in json.loads(exported)["stages"] if stage["stage"] == LABELLING]
    assert labelling and labelling[0]["summary"]["n_failed"] == 3
    for where in (printed.out + printed.err, stored_text(workspace), exported):
        assert PASSWORD not in where and BASIC not in where and BASIC[:8] not in where


def test_a_token_in_the_hosts_query_string_is_refused_before_anything_is_sent_or_stored(
    workspace: Workspace, fake_ollama: FakeOllama, capsys
) -> None:
    before = snapshot(workspace)
    for host in (f"{fake_ollama.url}/?token={TOKEN}", f"{fake_ollama.url}?api_key={TOKEN}#x"):
        assert cli_main("label", "--ollama-host", host, workspace=workspace) == 2
        stderr = capsys.readouterr().err
        (message,) = error_lines(stderr)
        assert "must not hold a query string" in message and TOKEN not in stderr
    assert fake_ollama.authorizations == [] and snapshot(workspace) == before


def test_redaction_covers_echoed_headers_url_queries_and_base64_credentials() -> None:
    config = OllamaConfig(host=f"http://alice:{PASSWORD}@127.0.0.1:9")
    echoed = (
        f'{{"authorization": "Basic {BASIC}", "X-Api-Key": "{TOKEN}"}} at https://h/api?token={TOKEN}&a=1 '
        f"password={PASSWORD} Cookie: session={TOKEN}"
    )
    redacted = config.scrub(echoed)
    assert PASSWORD not in redacted and BASIC not in redacted and TOKEN not in redacted
    assert '"authorization": "***"' in redacted and "https://h/api?***" in redacted
    assert redact("a token limit of 256 and http://host:11434/api/chat") == (
        "a token limit of 256 and http://host:11434/api/chat"
    )  # ordinary words and addresses are left alone


# -- round 4: secrets in what a model answers ------------------------------------------------------------------------

SHORT_PASSWORD = "PW"
SHORT_BASIC = base64.b64encode(f"alice:{SHORT_PASSWORD}".encode()).decode()


def test_a_model_answering_with_the_credentials_never_gets_them_stored_printed_or_exported(
    workspace: Workspace, fake_ollama: FakeOllama, tmp_path: Path, capsys, monkeypatch
) -> None:
    monkeypatch.setenv("OLLAMA_API_KEY", TOKEN)
    escaped_password = "".join(f"\\u{ord(char):04x}" for char in SHORT_PASSWORD)  # JSON escapes hide it from a scan
    fake_ollama.responder = lambda request: (
        f'{{"label": "key {SHORT_PASSWORD} {SHORT_BASIC} and {escaped_password}", '
        f'"description": "Basic {SHORT_BASIC.rstrip("=")}, Bearer {TOKEN}, http://alice:{SHORT_PASSWORD}@host, '
        f'{TOKEN.upper()} stays: it is not the key"}}'
    )
    host = fake_ollama.url.replace("http://", f"http://alice:{SHORT_PASSWORD}@")

    assert cli_main("label", "--ollama-host", host, "--families", "--themes", workspace=workspace) == 0
    printed = capsys.readouterr()
    assert fake_ollama.authorizations[-1] == f"Bearer {TOKEN}"
    assert cli_main("export", "--out", str(tmp_path / "export"), workspace=workspace) == 0
    exported = "\n".join(path.read_text(errors="replace") for path in (tmp_path / "export").glob("*.json"))
    exported += pd.read_parquet(tmp_path / "export" / "features.parquet").to_json()
    stored = workspace.labels.of(workspace.run_or_latest().run_id)
    labels = set(stored.loc[stored["source"] == "llama3.2", "label"])
    assert labels == {"key and ***"}  # the credentials are gone, what the model said around them is kept
    for where in (printed.out + printed.err, stored_text(workspace), exported):
        for form in (f"key {SHORT_PASSWORD}", SHORT_BASIC, SHORT_BASIC.rstrip("="), TOKEN, f":{SHORT_PASSWORD}@"):
            assert form not in where
    assert TOKEN.upper() in stored_text(workspace)  # only the secrets themselves are masked
