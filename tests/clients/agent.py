#!/usr/bin/env python3
"""An agent host on the official MCP Python SDK (`mcp` 2.3.0, pinned in requirements.txt): the e2e
tests drive gatehouse with it the way an agent host calls a tool, with a name and arguments.

usage: agent.py URL VERSION TOOL [JSON_ARGS] [options]

  VERSION  2025-11-25 (an `initialize` handshake) or 2026-07-28 (no handshake: every request
           carries its own `_meta`).

It prints one JSON object per line, for the test to read:
  {"event": "elicitation", "params": {...}}      the elicitation handler was called
  {"event": "notification", "message": {...}}    a server notification
  {"event": "state", "state": "..."}             --print-state: the requestState received
  {"event": "task", "task": {...}}               a task as created or polled
  {"event": "result", "result": {...}}           the tool's result
  {"event": "error", "code": N, "message": ...}  the call ended in a JSON-RPC error

options:
  --token T            send `Authorization: Bearer T`
  --action A           the elicitation handler's answer: accept (default), decline or cancel
  --approve BOOL       what an accepted consent form answers (default true)
  --print-state        2026-07-28: make one round by hand and print the requestState
  --use-state S        2026-07-28: call once with requestState S (and its inputResponses)
  --tamper             with --print-state: retry with the state altered in one byte
  --task               2026-07-28: declare the tasks extension, and poll the task to its end
  --task-ttl MS        2025-11-25: a task-augmented call (`params.task`), polled to its end
  --task-create        with --task or --task-ttl: print the new task and stop
  --task-get ID        poll task ID to its end (tasks/get, then tasks/result on 2025-11-25)
  --task-cancel ID     cancel task ID
  --meta JSON          extra `_meta` on the tool call (e.g. an approval id or a key)
  --timeout S          read timeout of each request (default 120)
  --then TOOL JSON     after the call, call TOOL with JSON in the same session (repeatable);
                       each result is printed as {"event": "result", "tool": TOOL, ...}
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any, Literal

import anyio
import httpx2
from pydantic import ConfigDict
from pydantic.alias_generators import to_camel

import mcp_types as types
from mcp import Client, MCPError
from mcp.client import ClaimContext, ClientExtension, ClientRequestContext, ResultClaim
from mcp.client.streamable_http import streamable_http_client


def emit(event: str, **fields: Any) -> None:
    def plain(value: Any) -> Any:
        if hasattr(value, "model_dump"):
            return value.model_dump(by_alias=True, mode="json", exclude_none=True)
        return value

    print(json.dumps({"event": event, **{k: plain(v) for k, v in fields.items()}}, default=str), flush=True)


def handler(action: str, approve: bool):
    async def on_elicit(ctx: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
        emit("elicitation", key=str(ctx.request_id), params=params)
        if isinstance(params, types.ElicitRequestURLParams) or action != "accept":
            return types.ElicitResult(action=action)
        return types.ElicitResult(action=action, content={"approve": approve})

    return on_elicit


# The 2026-07-28 tasks extension: the SDK gives the hook (ClientExtension), not the extension.
class _Model(types.Result):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow")


class TaskHandle(_Model):
    result_type: Literal["task"] = "task"
    task_id: str
    status: str
    status_message: str | None = None
    poll_interval_ms: int | None = None


class DetailedTask(_Model):
    task_id: str
    status: str
    status_message: str | None = None
    poll_interval_ms: int | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


class TaskIdParams(types.RequestParams):
    task_id: str


class TasksGet(types.Request[TaskIdParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: TaskIdParams
    name_param = "taskId"


class TasksCancel(types.Request[TaskIdParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: TaskIdParams
    name_param = "taskId"


async def poll_2026(session: Any, task_id: str, interval_ms: int | None) -> types.CallToolResult:
    delay = (interval_ms or 1000) / 1000
    while True:
        await anyio.sleep(delay)
        task = await session.send_request(TasksGet(params=TaskIdParams(task_id=task_id)), DetailedTask)
        emit("task", task=task)
        delay = (task.poll_interval_ms or 1000) / 1000
        if task.status == "completed":
            return types.CallToolResult.model_validate(task.result or {}, by_name=False)
        if task.status in ("failed", "cancelled"):
            error = task.error or {}
            raise MCPError(error.get("code", -32603), error.get("message", f"task {task.status}"), error.get("data"))


class TasksExtension(ClientExtension):
    identifier = "io.modelcontextprotocol/tasks"

    def __init__(self, create_only: bool) -> None:
        self.create_only = create_only

    def claims(self):
        async def resolve(handle: TaskHandle, ctx: ClaimContext) -> types.CallToolResult:
            emit("task", task=handle)
            if self.create_only:
                # Created is all this run wanted: another run polls it (after a restart, say).
                return types.CallToolResult(content=[])
            return await poll_2026(ctx.session, handle.task_id, handle.poll_interval_ms)

        return [ResultClaim(result_type="task", model=TaskHandle, resolve=resolve)]


async def poll_2025(session: Any, task_id: str, interval_ms: int | None) -> types.CallToolResult:
    delay = (interval_ms or 1000) / 1000
    while True:
        await anyio.sleep(delay)
        task = await session.send_request(
            types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=task_id)), types.GetTaskResult
        )
        emit("task", task=task)
        delay = (task.poll_interval or 1000) / 1000
        if task.status in ("completed", "failed", "cancelled", "input_required"):
            return await session.send_request(
                types.GetTaskPayloadRequest(params=types.GetTaskPayloadRequestParams(task_id=task_id)),
                types.CallToolResult,
            )


async def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("version", choices=["2025-11-25", "2026-07-28"])
    ap.add_argument("tool")
    ap.add_argument("args", nargs="?", default="{}")
    ap.add_argument("--token")
    ap.add_argument("--action", default="accept", choices=["accept", "decline", "cancel"])
    ap.add_argument("--approve", default="true", choices=["true", "false"])
    ap.add_argument("--print-state", action="store_true")
    ap.add_argument("--use-state")
    ap.add_argument("--tamper", action="store_true")
    ap.add_argument("--task", action="store_true")
    ap.add_argument("--task-ttl", type=int)
    ap.add_argument("--task-create", action="store_true")
    ap.add_argument("--task-get")
    ap.add_argument("--task-cancel")
    ap.add_argument("--meta")
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--then", nargs=2, action="append", default=[], metavar=("TOOL", "JSON"))
    a = ap.parse_args()
    args = json.loads(a.args)
    meta = json.loads(a.meta) if a.meta else None
    headers = {"Authorization": f"Bearer {a.token}"} if a.token else {}
    http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=a.timeout))

    async def on_message(message: Any) -> None:
        emit("notification", message=message if not isinstance(message, Exception) else repr(message))

    client = Client(
        streamable_http_client(a.url, http_client=http),
        mode="legacy" if a.version == "2025-11-25" else "2026-07-28",
        read_timeout_seconds=a.timeout,
        elicitation_callback=handler(a.action, a.approve == "true"),
        message_handler=on_message,
        client_info=types.Implementation(name="gatehouse-e2e-python", version="1"),
        extensions=[TasksExtension(a.task_create)] if a.task or a.task_get or a.task_cancel else None,
        cache=None,
    )
    async with client:
        session = client.session
        try:
            if a.task_get:
                poll = poll_2025 if a.version == "2025-11-25" else poll_2026
                result = await poll(session, a.task_get, None)
            elif a.task_cancel:
                if a.version == "2025-11-25":
                    cancelled = await session.send_request(
                        types.CancelTaskRequest(params=types.CancelTaskRequestParams(task_id=a.task_cancel)),
                        types.CancelTaskResult,
                    )
                else:
                    cancelled = await session.send_request(
                        TasksCancel(params=TaskIdParams(task_id=a.task_cancel)), types.EmptyResult
                    )
                emit("cancelled", answer=cancelled)
                return 0
            elif a.task_ttl is not None:
                # 2025-11-25 tasks: the SDK has the types, not the call (its CallToolResult check
                # refuses a CreateTaskResult), so the task-augmented request goes out raw.
                params = {"name": a.tool, "arguments": args, "task": {"ttl": a.task_ttl}}
                if meta:
                    params["_meta"] = meta
                raw = await session._dispatcher.send_raw_request("tools/call", params, {})  # noqa: SLF001
                created = types.CreateTaskResult.model_validate(raw, by_name=False)
                emit("task", task=created.task)
                if a.task_create:
                    return 0
                result = await poll_2025(session, created.task.task_id, created.task.poll_interval)
            elif a.print_state or a.use_state:
                # One MRTR round by hand, as a client that keeps the state between runs does.
                if a.use_state:
                    responses = {"gatehouse_approval": {"action": "accept"}}
                    answer = await session.call_tool(
                        a.tool,
                        args,
                        input_responses=responses,
                        request_state=a.use_state,
                        meta=meta,
                        allow_input_required=True,
                    )
                else:
                    answer = await session.call_tool(a.tool, args, meta=meta, allow_input_required=True)
                if isinstance(answer, types.InputRequiredResult):
                    emit("state", state=answer.request_state, inputs=answer.input_requests)
                    if not a.tamper:
                        return 0
                    state = answer.request_state
                    middle = len(state) // 2
                    altered = state[:middle] + ("A" if state[middle] != "A" else "B") + state[middle + 1 :]
                    answer = await session.call_tool(
                        a.tool, args, request_state=altered, meta=meta, allow_input_required=True
                    )
                result = answer
            else:
                result = await client.call_tool(a.tool, args, meta=meta)
            emit("result", tool=a.tool, result=result)
            for tool, more in a.then:
                emit("result", tool=tool, result=await client.call_tool(tool, json.loads(more), meta=meta))
            return 0
        except MCPError as e:
            emit("error", code=e.code, message=e.message, data=e.data)
            return 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
