"""What the test stdio MCP servers here share (patient.py, tasker.py): one JSON-RPC message a
line on stdin and stdout; each request served on a thread of its own, so a message is read
while a request waits; `ping`; and the `heard` tool, which lists what the server noted it
heard (`heard(entry)`). Standard library only (runs on the system's Python)."""
import json
import sys
import threading

LOCK = threading.Lock()
HEARD = []


class Error(Exception):
    """A request's JSON-RPC error."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.message = message


def send(message):
    with LOCK:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()


def heard(entry):
    """Notes `entry` for the `heard` tool."""
    with LOCK:
        HEARD.append(entry)


def _answer(serve, message):
    method, id_ = message["method"], message["id"]
    params = message.get("params") or {}
    try:
        if method == "ping":
            result = {}
        elif method == "tools/call" and params.get("name") == "heard":
            with LOCK:
                text = json.dumps(HEARD)
            result = {"content": [{"type": "text", "text": text}]}
        else:
            result = serve(method, params, id_)
    except Error as error:
        send({"jsonrpc": "2.0", "id": id_, "error": {"code": error.code, "message": error.message}})
        return
    if result is not None:  # None: left unanswered
        send({"jsonrpc": "2.0", "id": id_, "result": result})


def serve_forever(serve, notified=lambda method, params: None):
    """Reads messages until stdin ends: a request goes to `serve(method, params, id)` on a
    thread of its own, which returns its result (None: no answer) or raises `Error`; a
    notification to `notified(method, params)`."""
    for line in sys.stdin:
        message = json.loads(line)
        if "method" not in message:
            continue
        if "id" not in message:
            notified(message["method"], message.get("params") or {})
            continue
        threading.Thread(target=_answer, args=(serve, message), daemon=True).start()
