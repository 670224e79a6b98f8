"""Credentials that never show: a `Secret` prints as a mask, a host URL gives up its user and password, and text a
server sent back (an error body that may echo the request's headers) is redacted before anyone sees or stores it."""

import base64
import re
from typing import Any
from urllib.parse import quote, unquote, urlsplit

MASK = "***"
MAX_SERVER_TEXT_CHARS = 300
"""A server's own words (an error body) are cut to this many characters: they are shown and stored with the batch."""

_URL_CREDENTIALS = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/@\s]+@")
_URL_QUERY = re.compile(r"(?i)(\b[a-z][a-z0-9+.-]*://[^\s?#\"'<>]*)[?#][^\s\"'<>]*")
_SECRET_FIELD = re.compile(
    r"(?i)\b((?:proxy-)?authori[sz]ation|cookie|set-cookie|x-api-key|api[-_]?key|(?:access[-_]|refresh[-_]|id[-_])?"
    r"token|password|passwd|secret|credentials?)\b([\"']?\s*[:=]\s*[\"']?)(?:(?:basic|bearer|token)\s+)?[^\s\"',;}&]+"
)
"""A header or field that carries a credential ("authorization": "Basic ...", token=..., api_key: ...)."""


class Secret:
    """A credential that never shows itself: repr, str and formatting give a mask, `reveal()` the value.

    Copies are the same object and pickling is refused, so a secret cannot slip into a record or a cache.
    """

    __slots__ = ("_value",)

    def __init__(self, value: str):
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return f"Secret('{MASK}')"

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        return repr(self)

    def __bool__(self) -> bool:
        return bool(self._value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(("Secret", self._value))

    def __copy__(self) -> "Secret":
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> "Secret":
        return self

    def __reduce__(self) -> Any:
        raise TypeError("a Secret is never pickled")


def redact_url(text: str) -> str:
    """`text` with the user:password part of every URL in it replaced by a mask (http://***@host)."""
    return _URL_CREDENTIALS.sub(rf"\1{MASK}@", text)


def redact(text: str, secrets: tuple["Secret | None", ...] = ()) -> str:
    """`text` without credentials: those of URLs (user:password, query strings and fragments, where tokens travel),
    the values of credential headers and fields ("authorization": "Basic ...", token=...), and every form of the
    given secrets (`redact_secrets`)."""
    return redact_secrets(_SECRET_FIELD.sub(rf"\1\2{MASK}", _URL_QUERY.sub(rf"\1?{MASK}", text)), secrets)


def redact_secrets(text: str, secrets: tuple["Secret | None", ...]) -> str:
    """`text` without the user:password of any URL and without any form of the given secrets (the value, a
    user:password's password, their base64 as basic authentication sends it, their URL encoding): what a model's
    reply (a label, a description, a model's name) goes through before it is shown or stored. A form shorter than
    SHORT_SECRET_CHARS is masked only where it stands as a word of its own, so that a short password does not
    blank out the words it is part of."""
    text = redact_url(text)
    forms = {form for secret in secrets if secret for form in _forms(secret.reveal())}
    for form in sorted(forms, key=len, reverse=True):
        if len(form) >= SHORT_SECRET_CHARS:
            text = text.replace(form, MASK)
        else:
            text = re.sub(rf"(?<![0-9A-Za-z]){re.escape(form)}(?![0-9A-Za-z])", MASK, text)
    return text


SHORT_SECRET_CHARS = 8


def _forms(value: str) -> set[str]:
    """The ways a credential can appear in text a server echoes: as is, its password part, the base64 of either
    (padded or not, standard or URL-safe) and their URL encoding."""
    plain = {value, *value.split(":", 1)[1:]}
    encoded = set()
    for form in plain:
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            token = encode(form.encode()).decode()
            encoded |= {token, token.rstrip("=")}
        encoded.add(quote(form, safe=""))
    return {form for form in plain | encoded if form}


def server_text(text: str, secrets: tuple["Secret | None", ...] = ()) -> str:
    """What a server said (an error body), redacted and cut to MAX_SERVER_TEXT_CHARS characters, on one line."""
    flat = " ".join(redact(str(text), secrets).split())
    return flat if len(flat) <= MAX_SERVER_TEXT_CHARS else flat[: MAX_SERVER_TEXT_CHARS - 1] + "…"


def split_host_credentials(host: str) -> tuple[str, Secret | None]:
    """(the host URL without credentials, the "user:password" it carried, if any)."""
    host = host.strip()
    scheme, separator, rest = host.partition("://")
    if not separator:
        scheme, rest = "", host
    authority, slash, path = rest.partition("/")
    userinfo, at, hostport = authority.rpartition("@")
    if not at:
        return host, None
    clean = (f"{scheme}://" if separator else "") + hostport + slash + path
    return clean, Secret(unquote(userinfo)) if userinfo else None


def host_problem(host: str) -> str:
    """Why a host URL (without credentials) cannot be used, or "". A query string or fragment is refused, never
    shown: the client would drop it, and tokens travel there (a key goes in OLLAMA_API_KEY)."""
    try:
        url = urlsplit(host if "://" in host else f"http://{host}")
        url.port  # noqa: B018 (reading it checks the port)
    except ValueError as error:
        shown = redact(host)
        return f"host {shown!r} is not a valid URL ({error}); write it like http://host:11434"
    if url.query or url.fragment:
        return (
            "host must not hold a query string or fragment (the part from '?' or '#'): put an API key in "
            "OLLAMA_API_KEY, never in the address"
        )
    if not url.hostname:
        return f"host {host!r} names no server; write it like http://host:11434"
    return ""
