"""A local OpenAI-compatible chat-completions server for the tests: loopback only, canned answers.

It answers `POST /v1/chat/completions` with the canned text whose marker (e.g. `Task:
level1/23_Softmax`) appears in the request's messages, and before that plays a script of faults,
one per request in order: `"429"` (rate limited, with Retry-After: 0), `"500"`, `"stall"` (sleep
past the client's timeout, then answer), `"malformed"` (200 with a body that is not JSON),
`"refuse"`, `"empty"`, `"notools"` (400 with vLLM's words for a server started without tool
calling), `"unauthorized"` (401), `"toolong"` (400 with vLLM's words for a conversation longer
than the model's context). Every request's body and headers are kept, to count what was sent and to look for a
key. It binds 127.0.0.1 and nothing else.

For tool calling, `agent` (a function of the request body) gives the assistant message to answer
with instead of a canned text: `{"content": ..., "tool_calls": [{"name", "arguments"}]}`, each
call given an id and the OpenAI shape here.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeOpenAI:
    def __init__(
        self,
        answers: dict[str, str] | None = None,
        default: str = "I cannot help with that.",
        stall_s: float = 3.0,
        agent=None,
    ):
        self.answers = answers or {}
        self.agent = agent
        self.default = default
        self.stall_s = stall_s
        self.script: list[str] = []
        self.requests: list[dict] = []
        self.delay_after: int | None = None  # from this many requests on, stall each answer
        self._lock = threading.Lock()
        self._closed = threading.Event()  # ends a stall early: no handler outlives the server
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = False  # server_close joins every handler
        # serve_forever looks for shutdown() between polls: each `with FakeOpenAI()` ends up to
        # one poll after its block, so a short one (tens of tests start a server).
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.005,), daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._closed.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def answer_for(self, body: dict) -> str:
        text = "\n".join(m.get("content") or "" for m in body.get("messages", []))
        return next((answer for marker, answer in self.answers.items() if marker in text), self.default)

    def agent_message(self, body: dict, count: int) -> dict:
        wanted = self.agent(body)
        calls = [
            {
                "id": f"call_{count}_{i}",
                "type": "function",
                "function": {"name": c["name"], "arguments": c["arguments"]},
            }
            for i, c in enumerate(wanted.get("tool_calls") or [])
        ]
        message = {"role": "assistant", "content": wanted.get("content")}
        if calls:
            message["tool_calls"] = calls
        return message

    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):
                length = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                with fake._lock:
                    fake.requests.append({"path": self.path, "body": body, "headers": dict(self.headers)})
                    fault = fake.script.pop(0) if fake.script else "ok"
                    count = len(fake.requests)
                if self.path != "/v1/chat/completions":
                    return self._send(404, b'{"error": "not found"}')
                if fault == "429":
                    return self._send(429, b'{"error": "rate limited"}', {"Retry-After": "0"})
                if fault == "500":
                    return self._send(500, b'{"error": "overloaded"}')
                if fault == "notools":
                    words = '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
                    return self._send(400, json.dumps({"object": "error", "message": words, "code": 400}).encode())
                if fault == "unauthorized":
                    return self._send(401, b'{"error": {"message": "Incorrect API key provided"}}')
                if fault == "toolong":
                    words = "This model's maximum context length is 32768 tokens. However, you requested 40000 tokens"
                    return self._send(400, json.dumps({"object": "error", "message": words, "code": 400}).encode())
                if fault == "malformed":
                    return self._send(200, b'{"choices": [ this is not json')
                if fault == "stall" or (fake.delay_after is not None and count > fake.delay_after):
                    fake._closed.wait(fake.stall_s)
                if fake.agent is not None:
                    message, finish = fake.agent_message(body, count), "tool_calls"
                else:
                    message, finish = {"role": "assistant", "content": fake.answer_for(body)}, "stop"
                if fault == "refuse":
                    message = {"role": "assistant", "content": None, "refusal": "I will not write that."}
                elif fault == "empty":
                    message["content"] = ""
                reply = {
                    "id": f"cmpl-{count}",
                    "object": "chat.completion",
                    "model": body.get("model"),
                    "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                    "usage": {"prompt_tokens": 100, "completion_tokens": 50, "total_tokens": 150},
                }
                self._send(200, json.dumps(reply).encode())

            def _send(self, code: int, payload: bytes, headers: dict | None = None):
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    for name, value in (headers or {}).items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a stall past its timeout)

        return Handler
