#!/usr/bin/env python3
"""What an MCP server offers besides its tools, as the official MCP Python SDK (`mcp` 2.3.0,
pinned in requirements.txt) sees it: the e2e tests run it against a server directly and through
gatehouse, and compare.

usage: survey.py PLAN [--prefix P] [--answer-after MS] (--url URL --version VERSION [--token T] |
                 --stdio COMMAND...)

PLAN is a JSON object: `reads` (URIs to read), `gets` (prompts to fill in: `name`, `arguments`),
`completions` (`ref`, `argument`), `calls` (tools to call: `name`, `arguments`, and `key`: the
call takes an idempotency key through the gateway, a fresh one sent as `idempotency_key`).
`--prefix` is what a prompt's or tool's name carries through the gateway (`<adapter id>.`):
added to the names asked for, stripped from those printed. The client answers what a server
asks it as an agent host's handlers would: a sampling request with `sampled: <its messages'
text>`, an elicitation by accepting a filled-in form (after `--answer-after` ms: a person takes
their time). It prints one JSON object:
`resources` (URIs, sorted), `templates` (URI templates, sorted), `prompts` (names, sorted),
`reads` (URI -> contents), `gets` (name -> messages), `completions` (values, in order),
`calls` (name -> `content`, `isError`, `progress` (each `[progress, total]`) and `asked` (the
methods the server asked the client, in order)).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import uuid
from typing import Any

import httpx2

import mcp_types as types
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client


def plain(value: Any) -> Any:
    return value.model_dump(by_alias=True, mode="json", exclude_none=True)


ASKED: list[str] = []
ANSWER_AFTER_MS = 0


async def on_sampling(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    ASKED.append("sampling/createMessage")
    texts = []
    for message in params.messages:
        contents = message.content if isinstance(message.content, list) else [message.content]
        texts.extend(getattr(c, "text", "") for c in contents)
    return types.CreateMessageResult(
        role="assistant",
        content=types.TextContent(type="text", text="sampled: " + " ".join(texts)),
        model="e2e-model",
        stop_reason="endTurn",
    )


async def on_elicitation(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    ASKED.append("elicitation/create")
    await asyncio.sleep(ANSWER_AFTER_MS / 1000)
    return types.ElicitResult(
        action="accept",
        content={"name": "Ada Lovelace", "check": True, "email": "ada@example.com"},
    )


async def survey(client: Client, plan: dict[str, Any], prefix: str) -> dict[str, Any]:
    resources = (await client.list_resources(cache_mode="refresh")).resources
    templates = (await client.list_resource_templates(cache_mode="refresh")).resource_templates
    prompts = (await client.list_prompts(cache_mode="refresh")).prompts
    out: dict[str, Any] = {
        "resources": sorted(r.uri for r in resources),
        "templates": sorted(t.uri_template for t in templates),
        "prompts": sorted(p.name.removeprefix(prefix) for p in prompts),
        "reads": {},
        "gets": {},
        "completions": [],
    }
    for uri in plan.get("reads", []):
        result = await client.read_resource(uri, cache_mode="refresh")
        out["reads"][uri] = [plain(c) for c in result.contents]
    for get in plan.get("gets", []):
        result = await client.get_prompt(prefix + get["name"], get.get("arguments"))
        out["gets"][get["name"]] = [plain(m) for m in result.messages]
    for completion in plan.get("completions", []):
        ref = completion["ref"]
        if ref["type"] == "ref/prompt":
            reference: Any = types.PromptReference(type="ref/prompt", name=prefix + ref["name"])
        else:
            reference = types.ResourceTemplateReference(type="ref/resource", uri=ref["uri"])
        result = await client.complete(reference, completion["argument"])
        out["completions"].append(result.completion.values)
    out["calls"] = {}
    for call in plan.get("calls", []):
        arguments = dict(call.get("arguments", {}))
        if prefix and call.get("key"):
            arguments["idempotency_key"] = str(uuid.uuid4())
        progress: list[list[float | None]] = []

        async def on_progress(done: float, total: float | None, message: str | None) -> None:
            progress.append([done, total])

        ASKED.clear()
        result = await client.call_tool(prefix + call["name"], arguments, progress_callback=on_progress)
        out["calls"][call["name"]] = {
            "content": [plain(c) for c in result.content],
            "isError": bool(result.is_error),
            "progress": progress,
            "asked": list(ASKED),
        }
    return out


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("plan")
    ap.add_argument("--prefix", default="")
    ap.add_argument("--url")
    ap.add_argument("--version", choices=["2025-11-25", "2026-07-28"], default="2025-11-25")
    ap.add_argument("--token")
    ap.add_argument("--answer-after", type=int, default=0)
    ap.add_argument("--stdio", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    plan = json.loads(a.plan)
    global ANSWER_AFTER_MS
    ANSWER_AFTER_MS = a.answer_after
    if a.stdio:
        transport: Any = stdio_client(StdioServerParameters(command=a.stdio[0], args=a.stdio[1:]))
        mode = "legacy"
    else:
        headers = {"Authorization": f"Bearer {a.token}"} if a.token else {}
        http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(60.0))
        transport = streamable_http_client(a.url, http_client=http)
        mode = "legacy" if a.version == "2025-11-25" else "2026-07-28"
    client = Client(
        transport,
        mode=mode,
        client_info=types.Implementation(name="gatehouse-e2e-survey", version="1"),
        cache=None,
        sampling_callback=on_sampling,
        elicitation_callback=on_elicitation,
    )
    async with client:
        print(json.dumps(await survey(client, plan, a.prefix), sort_keys=True), flush=True)


asyncio.run(main())
