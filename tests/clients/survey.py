#!/usr/bin/env python3
"""What an MCP server offers besides its tools, as the official MCP Python SDK (`mcp` 2.3.0,
pinned in requirements.txt) sees it: the e2e tests run it against a server directly and through
gatehouse, and compare.

usage: survey.py PLAN [--prefix P] (--url URL --version VERSION [--token T] | --stdio COMMAND...)

PLAN is a JSON object: `reads` (URIs to read), `gets` (prompts to fill in: `name`, `arguments`),
`completions` (`ref`, `argument`). `--prefix` is what a prompt's name carries through the
gateway (`<adapter id>.`): added to the names asked for, stripped from those printed. It
prints one JSON object:
`resources` (URIs, sorted), `templates` (URI templates, sorted), `prompts` (names, sorted),
`reads` (URI -> contents), `gets` (name -> messages), `completions` (values, in order).
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

import httpx2

import mcp_types as types
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client


def plain(value: Any) -> Any:
    return value.model_dump(by_alias=True, mode="json", exclude_none=True)


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
    return out


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("plan")
    ap.add_argument("--prefix", default="")
    ap.add_argument("--url")
    ap.add_argument("--version", choices=["2025-11-25", "2026-07-28"], default="2025-11-25")
    ap.add_argument("--token")
    ap.add_argument("--stdio", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    plan = json.loads(a.plan)
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
    )
    async with client:
        print(json.dumps(await survey(client, plan, a.prefix), sort_keys=True), flush=True)


asyncio.run(main())
