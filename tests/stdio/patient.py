"""A patient stdio MCP server for the cancellation tests: `wait` waits up to `seconds`, unless
its client cancels the request (`notifications/cancelled`) first; `heard` lists the
cancellations it received. Requests are served on threads of their own, so a notification is
read while a tool waits. Standard library only (runs on the system's Python)."""
import json
import sys
import threading
import time

LOCK = threading.Lock()
CANCELLED = {}  # request id -> reason
HEARD = []


def send(message):
    with LOCK:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()


def wait(id_, seconds):
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        with LOCK:
            if id_ in CANCELLED:
                # A cancelled request is not answered (MCP: the receiver SHOULD NOT respond).
                return None
        time.sleep(0.05)
    return "waited %s s" % seconds


def serve(message):
    method, id_ = message.get("method"), message["id"]
    params = message.get("params") or {}
    if method == "initialize":
        result = {
            "protocolVersion": params["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "patient", "version": "1.0.0"},
        }
    elif method == "tools/list":
        result = {"tools": [
            {"name": "wait", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}},
            {"name": "heard", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}},
        ]}
    elif method == "tools/call" and params["name"] == "wait":
        text = wait(id_, float((params.get("arguments") or {}).get("seconds", 1)))
        if text is None:
            return
        result = {"content": [{"type": "text", "text": text}]}
    elif method == "tools/call" and params["name"] == "heard":
        with LOCK:
            text = json.dumps(HEARD)
        result = {"content": [{"type": "text", "text": text}]}
    elif method == "ping":
        result = {}
    else:
        send({"jsonrpc": "2.0", "id": id_, "error": {"code": -32601, "message": "no such method"}})
        return
    send({"jsonrpc": "2.0", "id": id_, "result": result})


def main():
    for line in sys.stdin:
        message = json.loads(line)
        if message.get("method") == "notifications/cancelled":
            params = message.get("params") or {}
            with LOCK:
                CANCELLED[params.get("requestId")] = params.get("reason")
                HEARD.append({"requestId": params.get("requestId"), "reason": params.get("reason")})
            continue
        if "id" not in message or "method" not in message:
            continue
        threading.Thread(target=serve, args=(message,), daemon=True).start()


if __name__ == "__main__":
    main()
