"""A stdio MCP server whose tool runs only as a task (2025-11-25 `taskSupport: "required"`),
for the upstream-task tests: `slow` is called with `params.task`, answers a CreateTaskResult,
and its task ends after `seconds`, unless it is cancelled (`tasks/cancel`) first;
`tasks/result` answers once the task has ended. `heard` (a plain tool) lists the
`tasks/cancel` requests it received ([`serving`](serving.py) serves it). Standard library only
(runs on the system's Python)."""
import time

from serving import LOCK, Error, heard, serve_forever

TASKS = {}  # task id -> {"status", "until", "seconds"}
# What a task's envelope says besides its id and status.
TIMES = {"ttl": 60000, "createdAt": "2026-11-29T00:00:00Z", "lastUpdatedAt": "2026-11-29T00:00:00Z"}


def status(task_id):
    with LOCK:
        task = TASKS[task_id]
        if task["status"] == "working" and time.monotonic() >= task["until"]:
            task["status"] = "completed"
        return task["status"]


def serve(method, params, _id):
    if method == "initialize":
        return {
            "protocolVersion": params["protocolVersion"],
            "capabilities": {"tools": {}, "tasks": {"cancel": {}, "requests": {"tools": {"call": {}}}}},
            "serverInfo": {"name": "tasker", "version": "1.0.0"},
        }
    if method == "tools/list":
        return {"tools": [
            {"name": "slow", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True},
             "execution": {"taskSupport": "required"}},
            {"name": "heard", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}},
        ]}
    if method == "tools/call" and params["name"] == "slow":
        if "task" not in params:
            raise Error(-32601, "slow runs only as a task")
        seconds = float((params.get("arguments") or {}).get("seconds", 1))
        with LOCK:
            task_id = "task-%d" % (len(TASKS) + 1)
            TASKS[task_id] = {"status": "working", "until": time.monotonic() + seconds, "seconds": seconds}
        return {"task": {"taskId": task_id, "status": "working", **TIMES}}
    if method == "tasks/result":
        task_id = params["taskId"]
        while status(task_id) == "working":
            time.sleep(0.05)
        if status(task_id) == "cancelled":
            raise Error(-32603, "the task was cancelled")
        return {"content": [{"type": "text", "text": "done after %s s" % TASKS[task_id]["seconds"]}]}
    if method == "tasks/cancel":
        task_id = params["taskId"]
        heard({"method": method, "taskId": task_id})
        with LOCK:
            TASKS[task_id]["status"] = "cancelled"
        return {"taskId": task_id, "status": "cancelled", **TIMES}
    raise Error(-32601, "no such method")


if __name__ == "__main__":
    serve_forever(serve)
