"""A stdio MCP server whose tool runs only as a task (2025-11-25 `taskSupport: "required"`),
for the upstream-task tests: `slow` is called with `params.task`, answers a CreateTaskResult,
and its task ends after `seconds`, unless it is cancelled (`tasks/cancel`) first;
`tasks/result` answers once the task has ended. `heard` (a plain tool) lists the
`tasks/cancel` requests it received. Requests are served on threads of their own, so one
is read while another waits. Standard library only (runs on the system's Python)."""
import json
import sys
import threading
import time

LOCK = threading.Lock()
TASKS = {}  # task id -> {"status", "until", "seconds"}
HEARD = []


def send(message):
    with LOCK:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()


def status(task_id):
    with LOCK:
        task = TASKS[task_id]
        if task["status"] == "working" and time.monotonic() >= task["until"]:
            task["status"] = "completed"
        return task["status"]


def serve(message):
    method, id_ = message.get("method"), message["id"]
    params = message.get("params") or {}
    if method == "initialize":
        result = {
            "protocolVersion": params["protocolVersion"],
            "capabilities": {"tools": {}, "tasks": {"cancel": {}, "requests": {"tools": {"call": {}}}}},
            "serverInfo": {"name": "tasker", "version": "1.0.0"},
        }
    elif method == "tools/list":
        result = {"tools": [
            {"name": "slow", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True},
             "execution": {"taskSupport": "required"}},
            {"name": "heard", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}},
        ]}
    elif method == "tools/call" and params["name"] == "slow":
        if "task" not in params:
            send({"jsonrpc": "2.0", "id": id_, "error": {"code": -32601, "message": "slow runs only as a task"}})
            return
        seconds = float((params.get("arguments") or {}).get("seconds", 1))
        with LOCK:
            task_id = "task-%d" % (len(TASKS) + 1)
            TASKS[task_id] = {"status": "working", "until": time.monotonic() + seconds, "seconds": seconds}
        result = {"task": {"taskId": task_id, "status": "working", "ttl": 60000,
                           "createdAt": "2026-11-29T00:00:00Z", "lastUpdatedAt": "2026-11-29T00:00:00Z"}}
    elif method == "tasks/result":
        task_id = params["taskId"]
        while status(task_id) == "working":
            time.sleep(0.05)
        if status(task_id) == "cancelled":
            send({"jsonrpc": "2.0", "id": id_, "error": {"code": -32603, "message": "the task was cancelled"}})
            return
        result = {"content": [{"type": "text", "text": "done after %s s" % TASKS[task_id]["seconds"]}]}
    elif method == "tasks/cancel":
        task_id = params["taskId"]
        with LOCK:
            HEARD.append({"method": method, "taskId": task_id})
            TASKS[task_id]["status"] = "cancelled"
        result = {"taskId": task_id, "status": "cancelled", "ttl": 60000,
                  "createdAt": "2026-11-29T00:00:00Z", "lastUpdatedAt": "2026-11-29T00:00:00Z"}
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
        if "id" not in message or "method" not in message:
            continue
        threading.Thread(target=serve, args=(message,), daemon=True).start()


if __name__ == "__main__":
    main()
