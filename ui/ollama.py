"""The Ollama connection of a session: host, API key and model, for the Labels page.

The key comes from the app's secrets (`OLLAMA_API_KEY`), the environment, or is typed for this session only. A typed
key lives in this session's state as a `Secret` and nowhere else: the field is cleared once submitted, and nothing
on the page shows it. User and password written into the host URL are taken out of the field the same way.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import streamlit as st

from prisma_core.pipeline import LabellingError, SettingsError
from prisma_core.pipeline.labelling import (
    API_KEY_ENV,
    DEFAULT_HOST,
    OllamaClient,
    OllamaConfig,
    Secret,
    split_host_credentials,
)
from ui.state import secret
from ui.text import md

HOST_KEY = "ollama_host"
MODEL_KEY = "ollama_model"
TIMEOUT_KEY = "ollama_timeout"
SESSION_KEY = "ollama_session_key"
"""The key typed for this session (a Secret)."""
KEY_INPUT_KEY = "ollama_key_input"
HOST_CREDENTIALS_KEY = "ollama_host_credentials"
MODELS_KEY = "ollama_models"
CHECK_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class ServerCheck:
    """What the server answered when its models were listed."""

    host: str
    with_key: bool
    models: list[str]
    error: str = ""


def _configured_host() -> str:
    host, _ = split_host_credentials(str(secret("OLLAMA_HOST") or os.environ.get("OLLAMA_HOST") or DEFAULT_HOST))
    return host


def _configured_credentials() -> Secret | None:
    _, credentials = split_host_credentials(str(secret("OLLAMA_HOST") or os.environ.get("OLLAMA_HOST") or ""))
    return credentials


def _take_credentials_out_of_the_host() -> None:
    """on_change of the host field: user:password move to the session state, the field keeps the bare host."""
    host, credentials = split_host_credentials(st.session_state.get(HOST_KEY, ""))
    if credentials is not None:
        st.session_state[HOST_CREDENTIALS_KEY] = credentials
        st.session_state[HOST_KEY] = host


def api_key() -> tuple[Secret | None, str]:
    """(the key to send, where it comes from): typed for this session, else the app's secrets, else the environment."""
    typed = st.session_state.get(SESSION_KEY)
    if typed:
        return typed, "typed for this session"
    configured = secret(API_KEY_ENV)
    if configured:
        return Secret(str(configured)), "from the app's secrets"
    if os.environ.get(API_KEY_ENV, "").strip():
        return Secret(os.environ[API_KEY_ENV].strip()), f"from the {API_KEY_ENV} environment variable"
    return None, ""


def current_config(model: str = "llama3.2", timeout_s: float = 60.0) -> OllamaConfig:
    host = st.session_state.get(HOST_KEY) or _configured_host()
    credentials = st.session_state.get(HOST_CREDENTIALS_KEY) or _configured_credentials()
    key, _ = api_key()
    return OllamaConfig(host=host, model=model, timeout_s=timeout_s, api_key=key, host_credentials=credentials)


def check_server(config: OllamaConfig) -> ServerCheck:
    """List the server's models (a short timeout), or say in plain words why that failed."""
    quick = OllamaConfig(
        host=config.host,
        timeout_s=min(config.timeout_s, CHECK_TIMEOUT_S),
        api_key=config.api_key,
        host_credentials=config.host_credentials,
    )
    try:
        with OllamaClient(quick) as client:
            models = sorted(client.list_models())
    except LabellingError as error:
        return ServerCheck(config.host, bool(config.api_key), [], str(error))
    return ServerCheck(config.host, bool(config.api_key), models)


def _use_typed_key() -> None:
    """on_click of the key form: the typed key becomes this session's Secret and the field is emptied."""
    typed = str(st.session_state.get(KEY_INPUT_KEY) or "").strip()
    st.session_state[KEY_INPUT_KEY] = ""
    if typed:
        st.session_state[SESSION_KEY] = Secret(typed)
        st.session_state.pop(MODELS_KEY, None)


def key_settings() -> None:
    """Where the key comes from, a form to type one for this session, and a button to forget it."""
    key, source = api_key()
    if key:
        st.caption(f"An API key is used ({source}). It is sent to the server only and never shown or stored.")
    else:
        st.caption("No API key: fine for a local Ollama. A hosted Ollama (such as ollama.com) needs one.")
    with st.form("ollama_key_form"):
        st.text_input(
            "API key for this session",
            type="password",
            key=KEY_INPUT_KEY,
            help="Kept in this browser session's memory only, until you forget it or close the tab.",
        )
        st.form_submit_button("Use this key", on_click=_use_typed_key)
    if st.session_state.get(SESSION_KEY) and st.button("Forget the typed key", key="ollama_forget_key"):
        st.session_state.pop(SESSION_KEY, None)
        st.session_state.pop(MODELS_KEY, None)
        st.rerun()


def connection_settings() -> OllamaConfig | None:
    """Host, key and model; returns the config once the server answered and a model is chosen, else None."""
    if HOST_KEY not in st.session_state:
        st.session_state[HOST_KEY] = _configured_host()
    st.text_input(
        "Ollama server",
        key=HOST_KEY,
        on_change=_take_credentials_out_of_the_host,
        help="A local Ollama listens on http://localhost:11434. For a hosted one, give its https address.",
    )
    if st.session_state.get(HOST_CREDENTIALS_KEY):
        st.caption("The user and password written in the address are used for this session and not shown.")
    key_settings()
    try:
        config = current_config()
    except SettingsError as error:  # a host with a query string, a bad port...: said, never echoed
        st.error(md(str(error)), icon=":material/cloud_off:")
        return None
    check: ServerCheck | None = st.session_state.get(MODELS_KEY)
    stale = check is None or check.host != config.host or check.with_key != bool(config.api_key)
    if st.button("Check the server", key="ollama_check", icon=":material/refresh:") or stale:
        check = st.session_state[MODELS_KEY] = check_server(config)
    if check.error:
        st.error(f"{md(check.error)}", icon=":material/cloud_off:")
        st.caption("Labels already stored are safe. Keyword labels stay available without Ollama.")
        return None
    if not check.models:
        st.warning(
            f"Ollama at {md(check.host)} answers but has no model. Pull one on the server, e.g. "
            "`ollama pull llama3.2`, then check again.",
            icon=":material/warning:",
        )
        return None
    if st.session_state.get(MODEL_KEY) not in check.models:
        st.session_state[MODEL_KEY] = "llama3.2:latest" if "llama3.2:latest" in check.models else check.models[0]
    model = st.selectbox(
        "Model", check.models, key=MODEL_KEY, help="Models installed on this server. Larger ones name better."
    )
    timeout_s = st.number_input(
        "Timeout per request (seconds)",
        1.0,
        3600.0,
        60.0,
        step=10.0,
        key=TIMEOUT_KEY,
        help="A reply slower than this counts as a failure. Raise it for a large model on a CPU.",
    )
    return current_config(model, float(timeout_s))
