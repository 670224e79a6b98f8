"""A loopback stand-in for an Ollama server, speaking enough of its REST API for the real `ollama` client.

Endpoints: GET /api/tags (the installed models), POST /api/chat (one JSON reply when `stream` is false,
NDJSON chunks otherwise; 404 with Ollama's error body for a model that is not installed) and POST /api/embed (one
vector per input, computed by the bundled model at fp32: real vectors; a test may script the reply's JSON with
`embed_reply`, and every embed request body is recorded in `embed_requests`). Unless a test
scripts its replies, answers are derived from the prompt so tests can predict them:
- labelling (a `format` schema with a "label" property): the most frequent capitalised word of the
  <evidence> block, or "<parent label> family" for a group prompt (a keyword label's first six words, without
  its separators);
- detection (a schema with "matches"): the numbers of the documents whose text contains the concept label.
Every chat request body is recorded in `requests`, and the Authorization header of every request in
`authorizations`; with `required_authorization` set, a request without that exact header gets Ollama's 401. With
`raw_chat` set, a test writes each chat reply itself (a server echoing headers, dribbling bytes, sending too much).
"""

import contextlib
import json
import re
import socket
import threading
from collections import Counter, deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_EVIDENCE_BLOCK = re.compile(r"<evidence>(.*?)</evidence>", re.DOTALL)
_PARENT_LABEL = re.compile(r"<parent>\s*<label>(.*?)</label>", re.DOTALL)
_CONCEPT_LABEL = re.compile(r"<concept>\s*<label>(.*?)</label>", re.DOTALL)
_DOCUMENT = re.compile(r'<document id="(\d+)">\n(.*?)\n</document>', re.DOTALL)
_CAPITALISED_WORD = re.compile(r"\b[A-Z][a-z]{2,}\b")

Responder = Callable[[dict[str, Any]], str]
RawReply = Callable[[BaseHTTPRequestHandler], None]
"""Writes a whole chat reply (status line, headers, body) to the handler's connection, as it likes."""


class FakeOllama:
    """Scriptable state of the fake server; tests change the attributes between requests."""

    def __init__(self, models: list[str] | None = None):
        self.models = models if models is not None else ["llama3.2:latest", "qwen2.5:0.5b"]
        self.scripted: deque[str] = deque()  # message contents sent, in order, before derived answers
        self.responder: Responder = derived_answer  # content for a request once `scripted` is empty
        self.delay_s = 0.0  # wait before each chat reply (headers included)
        self.requests: list[dict[str, Any]] = []  # every /api/chat request body received
        self.authorizations: list[str | None] = []  # the Authorization header of every request, in order
        self.required_authorization: str | None = None  # when set, other requests get 401 unauthorized
        self.raw_chat: RawReply | None = None  # when set, writes each chat reply itself (a hostile server)
        self.embed_requests: list[dict[str, Any]] = []  # every /api/embed request body received
        self.embed_reply: Callable[[dict[str, Any]], dict[str, Any]] | None = None  # a scripted /api/embed reply
        self.url = ""
        self.stopping = threading.Event()

    def user_prompts(self) -> list[str]:
        """The last user message of each recorded chat request."""
        return [request["messages"][-1]["content"] for request in self.requests]

    def knows(self, model: str) -> bool:
        def full(name: str) -> str:
            return name if ":" in name else f"{name}:latest"

        return full(model) in {full(name) for name in self.models}

    def content_for(self, request: dict[str, Any]) -> str:
        return self.scripted.popleft() if self.scripted else self.responder(request)


def derived_answer(request: dict[str, Any]) -> str:
    """A well-formed answer computed from the prompt (see the module docstring)."""
    prompt = next(message["content"] for message in request["messages"] if message["role"] == "user")
    properties = (request.get("format") or {}).get("properties", {})
    if "matches" in properties:
        concept = _CONCEPT_LABEL.search(prompt).group(1).lower()
        matches = [int(number) for number, text in _DOCUMENT.findall(prompt) if concept in text.lower()]
        return json.dumps({"matches": matches})
    if parent := _PARENT_LABEL.search(prompt):  # a keyword label's words, cut as a model would to stay short
        label = " ".join([*parent.group(1).replace(" · ", " ").split()[:6], "family"])
    else:
        evidence = _EVIDENCE_BLOCK.search(prompt).group(1)
        label = Counter(_CAPITALISED_WORD.findall(evidence)).most_common(1)[0][0]
    return json.dumps({"label": label, "description": f"Documents about {label}."})


def _chat_reply(model: str, content: str, done: bool) -> dict[str, Any]:
    reply: dict[str, Any] = {
        "model": model,
        "created_at": "2025-01-01T00:00:00.000000Z",
        "message": {"role": "assistant", "content": content},
        "done": done,
    }
    if done:
        reply |= {
            "done_reason": "stop",
            "total_duration": 1_000_000,
            "load_duration": 1_000,
            "prompt_eval_count": 10,
            "prompt_eval_duration": 1_000,
            "eval_count": 10,
            "eval_duration": 1_000,
        }
    return reply


def embedded(request: dict[str, Any]) -> dict[str, Any]:
    """/api/embed's reply to `request`: its inputs embedded by the bundled model at fp32 (torch), as Ollama's own
    all-minilm would embed them."""
    from prisma_core.embed import EmbedConfig, embed_texts

    texts = request["input"] if isinstance(request["input"], list) else [request["input"]]
    vectors = embed_texts(texts, EmbedConfig(precision="fp32", backend="torch"))
    return {"model": request["model"], "embeddings": vectors.tolist(), "total_duration": 1_000, "prompt_eval_count": 1}


def _tags(models: list[str]) -> dict[str, Any]:
    details = {"format": "gguf", "family": "llama", "families": ["llama"], "parameter_size": "3.2B"}
    return {
        "models": [
            {
                "name": name,
                "model": name,
                "modified_at": "2025-01-01T00:00:00.000000000Z",
                "size": 2_019_393_189,
                "digest": f"{index:064x}",
                "details": details | {"quantization_level": "Q4_K_M"},
            }
            for index, name in enumerate(models)
        ]
    }


def _handler_for(fake: FakeOllama) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # as Ollama's own server: headers and body are two writes, and with Nagle's
        # algorithm on a kept-alive connection the body waits for the client's delayed ACK (~40 ms a reply)

        def log_message(self, format: str, *args: Any) -> None:
            """Keep test output quiet."""

        def _refused(self) -> bool:
            """Record the Authorization header; answer 401 (as ollama.com does) when it is not the required one."""
            given = self.headers.get("Authorization")
            fake.authorizations.append(given)
            if fake.required_authorization is None or given == fake.required_authorization:
                return False
            if self.command == "POST":
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self._send_json(401, {"error": "unauthorized"})
            return True

        def do_GET(self) -> None:
            if self._refused():
                return
            if self.path == "/api/tags":
                self._send_json(200, _tags(fake.models))
            elif self.path == "/":
                self._send(200, "text/plain", b"Ollama is running")
            else:
                self._send(404, "text/plain", b"404 page not found")

        def do_POST(self) -> None:
            if self._refused():
                return
            length = int(self.headers.get("Content-Length", 0))
            request = json.loads(self.rfile.read(length))
            if self.path == "/api/embed":
                self._embed(request)
                return
            if self.path != "/api/chat":
                self._send(404, "text/plain", b"404 page not found")
                return
            fake.requests.append(request)
            if fake.delay_s and fake.stopping.wait(fake.delay_s):
                return
            if fake.raw_chat is not None:
                with contextlib.suppress(ConnectionError):  # the client stopped reading
                    fake.raw_chat(self)
                return
            model = request.get("model", "")
            if not fake.knows(model):
                self._send_json(404, {"error": f"model '{model}' not found"})
                return
            try:
                content = fake.content_for(request)
            except Exception as error:  # a broken test script: report it like Ollama reports a failure
                self._send_json(500, {"error": f"fake Ollama failed: {error!r}"})
                return
            if request.get("stream", True):
                chunks = [_chat_reply(model, content, done=False), _chat_reply(model, "", done=True)]
                body = "".join(json.dumps(chunk) + "\n" for chunk in chunks).encode()
                self._send(200, "application/x-ndjson", body)
            else:
                self._send_json(200, _chat_reply(model, content, done=True))

        def _embed(self, request: dict[str, Any]) -> None:
            fake.embed_requests.append(request)
            if fake.delay_s and fake.stopping.wait(fake.delay_s):
                return
            if not fake.knows(request.get("model", "")):
                self._send_json(404, {"error": f'model "{request.get("model")}" not found, try pulling it first'})
                return
            self._send_json(200, (fake.embed_reply or embedded)(request))

        def _send_json(self, status: int, payload: dict[str, Any]) -> None:
            self._send(status, "application/json; charset=utf-8", json.dumps(payload).encode())

        def _send(self, status: int, content_type: str, body: bytes) -> None:
            try:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except ConnectionError:
                pass  # the client gave up (a timeout test); nothing left to tell it

    return Handler


@contextmanager
def running_fake_ollama(models: list[str] | None = None) -> Iterator[FakeOllama]:
    """Serve a FakeOllama on 127.0.0.1 (a free port) in a background thread for the duration of the block."""
    fake = FakeOllama(models)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(fake))
    server.daemon_threads = True
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), name="fake-ollama", daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        fake.stopping.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def closed_port_url() -> str:
    """The address of a loopback port that was free a moment ago: nothing answers there."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"
