"""How to reach an Ollama server and what to ask it: host, model, timeouts, retries, and the documents a prompt shows.

Credentials never show: a hosted server's API key travels as a bearer token and user:password in a host URL
(`https://user:pw@host`) as basic authentication, both held in `Secret`s that print as a mask; the config keeps
the host without them (and refuses a query string, where tokens travel), and `scrub` redacts them (`secrets.redact`:
the credentials in any form, credential headers a server echoed back) from any message before it is raised.
"""

import base64
import os
from dataclasses import dataclass

from prisma_core.config_docs import CheckedConfig, setting
from prisma_core.errors import SettingsError
from prisma_core.interpret.secrets import (
    Secret,
    host_problem,
    redact,
    redact_secrets,
    server_text,
    split_host_credentials,
)

DEFAULT_HOST = "http://localhost:11434"
API_KEY_ENV = "OLLAMA_API_KEY"


def default_ollama_host() -> str:
    """The OLLAMA_HOST environment variable when set, else the local default, read when a config is made."""
    return os.environ.get("OLLAMA_HOST") or DEFAULT_HOST


def default_api_key() -> "Secret | None":
    """The OLLAMA_API_KEY environment variable (a hosted Ollama's key), read when a config is made."""
    key = os.environ.get(API_KEY_ENV, "").strip()
    return Secret(key) if key else None


@dataclass(frozen=True)
class OllamaConfig(CheckedConfig):
    settings_name = "Ollama"

    host: str = setting(
        default_factory=default_ollama_host,
        doc="Ollama server URL: $OLLAMA_HOST when set, else http://localhost:11434 (this machine).",
    )
    model: str = setting("llama3.2", doc="Any chat model pulled on that server (llama3.2 is 3B: quick on a laptop).")
    timeout_s: float = setting(
        60.0, above=0, maximum=3_600, doc="Bound on connecting and on waiting for each reply, in seconds."
    )
    max_retries: int = setting(
        2, minimum=0, maximum=20, doc="Extra attempts after an invalid answer (bad JSON, wrong schema, unusable label)."
    )
    temperature: float = setting(0.0, minimum=0, maximum=2, doc="Sampling temperature; 0 makes labels reproducible.")
    max_doc_tokens: int = setting(
        256, minimum=16, maximum=32_768, doc="Each document is cut to about this many tokens (chars / 4) in prompts."
    )
    n_evidence: int = setting(8, minimum=1, maximum=100, doc="Top-activating documents shown when labelling a feature.")
    n_contrast: int = setting(8, minimum=0, maximum=100, doc="Non-activating documents shown as contrast.")
    api_key: Secret | None = setting(
        default_factory=default_api_key,
        secret=True,
        doc="A hosted Ollama's API key, sent as a bearer token; OLLAMA_API_KEY by default; never shown or stored.",
    )
    host_credentials: Secret | None = setting(
        None, secret=True, doc='"user:password" taken out of the host URL, sent as basic authentication.'
    )

    def __post_init__(self) -> None:
        if not self.host.strip():
            raise SettingsError("host must not be empty")
        host, credentials = split_host_credentials(self.host)
        if problem := host_problem(host):
            raise SettingsError(problem)
        object.__setattr__(self, "host", host)
        if credentials is not None:
            object.__setattr__(self, "host_credentials", credentials)
        if isinstance(self.api_key, str):
            object.__setattr__(self, "api_key", Secret(self.api_key.strip()) if self.api_key.strip() else None)
        if not self.model.strip():
            raise SettingsError("model must not be empty")
        super().__post_init__()

    def auth_headers(self) -> dict[str, str]:
        """The Authorization header: the API key as a bearer token, else the host URL's user:password."""
        if self.api_key:
            return {"Authorization": f"Bearer {self.api_key.reveal()}"}
        if self.host_credentials:
            token = base64.b64encode(self.host_credentials.reveal().encode()).decode()
            return {"Authorization": f"Basic {token}"}
        return {}

    def scrub(self, text: str) -> str:
        """`text` without any credential, of this config or in a URL or header a server echoed back (`redact`)."""
        return redact(text, self._secrets())

    def reply_text(self, text: str) -> str:
        """What the model answered (a label, a description) or the server listed (model names), without any form
        of this config's credentials, before it is shown or stored: a server knows them and may send them back."""
        return redact_secrets(text, self._secrets())

    def server_text(self, text: str) -> str:
        """What the server said (an error body), redacted and shortened, for a message that is shown and stored."""
        return server_text(text, self._secrets())

    def _secrets(self) -> tuple[Secret | None, ...]:
        return (self.api_key, self.host_credentials)
