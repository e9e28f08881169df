"""A patient stdio MCP server for the cancellation tests: `wait` waits up to `seconds`, unless
its client cancels the request (`notifications/cancelled`) first; `heard` lists the
cancellations it received ([`serving`](serving.py) serves it). Standard library only (runs on
the system's Python)."""
import time

from serving import LOCK, Error, heard, serve_forever

CANCELLED = {}  # request id -> reason


def wait(id_, seconds):
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        with LOCK:
            if id_ in CANCELLED:
                # A cancelled request is not answered (MCP: the receiver SHOULD NOT respond).
                return None
        time.sleep(0.05)
    return "waited %s s" % seconds


def serve(method, params, id_):
    if method == "initialize":
        return {
            "protocolVersion": params["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "patient", "version": "1.0.0"},
        }
    if method == "tools/list":
        return {"tools": [
            {"name": "wait", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}},
            {"name": "heard", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}},
        ]}
    if method == "tools/call" and params["name"] == "wait":
        text = wait(id_, float((params.get("arguments") or {}).get("seconds", 1)))
        return None if text is None else {"content": [{"type": "text", "text": text}]}
    raise Error(-32601, "no such method")


def notified(method, params):
    if method == "notifications/cancelled":
        with LOCK:
            CANCELLED[params.get("requestId")] = params.get("reason")
        heard({"requestId": params.get("requestId"), "reason": params.get("reason")})


if __name__ == "__main__":
    serve_forever(serve, notified)
