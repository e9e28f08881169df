"""A peer agent for the end-to-end tests, built with the official A2A SDK (`a2a-sdk`, A2A 1.0,
the JSON-RPC binding): "Room desk", which books meeting rooms. The tests put it behind
gatehouse's generic A2A adapter and read what reached it from its log.

    python a2a_peer.py --port PORT --log FILE [--sign-key B64SEED] [--extended-token TOKEN]
                       [--gateway URL --gateway-key KEY] [--tls CERT KEY] [--no-streaming]

It listens on 127.0.0.1:PORT (PORT 0: a free port) and, once listening, prints one JSON line,
{"url": "http://127.0.0.1:PORT"}. It serves:
    GET  /.well-known/agent-card.json  the agent card; its one interface is JSON-RPC at /
    POST /                             the A2A JSON-RPC endpoint (`A2A-Version: 1.0`)
    GET  /.well-known/jwks.json        with --sign-key: the key the card is signed with
    POST /test/drift                   answered 204; from then on the `echo` skill's
                                       description is "Echoes, louder." (the card changes, and
                                       is signed anew)

Options:
    --log FILE              append a JSON line for each POST (but /test/drift) as it arrives,
                            before the SDK handles it: {"method", "id", "messageId", "taskId",
                            "contextId", "skill", "parts", "traceparent", "delegation", "authorization",
                            "a2a_version"}; a line {"effect": "book", "messageId", "text"} each
                            time a booking is made; {"cancelled": TASK_ID} when a task is
                            cancelled
    --sign-key B64SEED      sign the card (A2A 1.0 §8.4: a JWS over the RFC 8785 form of the
                            card without `signatures`) with this base64 Ed25519 seed, as key
                            `room-desk-1`, EdDSA, with `jku` naming the JWKS above
    --extended-token TOKEN  offer GetExtendedAgentCard: with `Authorization: Bearer TOKEN`, the
                            card and one more skill, `audit`; without it, the SDK's
                            UnsupportedOperationError (-32004), as for a peer not offering it
    --gateway URL, --gateway-key KEY
                            the MCP endpoint (Streamable HTTP) and key the `callback` skill uses
    --tls CERT KEY          serve https with this certificate (for `localhost`) and key (PEM):
                            its URL is then https://localhost:PORT
    --no-streaming          the card says `capabilities.streaming` false (the SDK still
                            serves streams to whoever asks)

A message names its skill in `metadata["gatehouse/skill"]`; a message continuing a task
(`taskId` set) goes to that task's skill. An unknown skill: the task is TASK_STATE_REJECTED.
The skills:
    echo      completes with an artifact: the text part `echo: TEXT`, and the message's data
              parts as they came
    book      books (the effect line), and completes with the text artifact `booked TEXT`
    ask       asks: the task is TASK_STATE_INPUT_REQUIRED, its status message `Which room?`;
              the message continuing it, with text T, books (the effect line), and the task
              completes with the text artifact `booked room T`
    count     three TASK_STATE_WORKING updates, `step N of 3`, 0.2 s apart, then the text
              artifact `counted to 3`, and completes
    hang      TASK_STATE_WORKING until cancelled (then TASK_STATE_CANCELED)
    fail      TASK_STATE_FAILED, its status message `the room is gone`
    callback  calls a tool of the gateway: the message's data part is {"tool": NAME,
              "arguments": {...}}; the call goes to --gateway with the official MCP SDK,
              with `Authorization: Bearer KEY`, and the `traceparent` and `gatehouse-delegation`
              headers the A2A request came with (it calls on that call's behalf).
              It completes with a text artifact: the result's text content, joined; a tool
              error (or an MCP error) is TASK_STATE_FAILED with its text.
"""

import argparse
import asyncio
import base64
import contextlib
import json
import socket
import sys

import httpx2
import uvicorn
from a2a.helpers import new_task
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Part,
    TaskState,
)
from a2a.utils.errors import UnsupportedOperationError
from a2a.utils.signing import create_agent_card_signer
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from google.protobuf.json_format import MessageToDict
from jwt import PyJWK
from mcp import ClientSession, MCPError
from mcp.client.streamable_http import streamable_http_client
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

# The message metadata key naming the skill.
SKILL_KEY = "gatehouse/skill"
KEY_ID = "room-desk-1"
JWKS_PATH = "/.well-known/jwks.json"
DRIFT_PATH = "/test/drift"
MODES = ["text/plain", "application/json"]

# id: (name, description, tags)
SKILLS = {
    "echo": ("Echo", "Echoes the message.", ["read-only"]),
    "book": ("Book", "Books a room.", ["write"]),
    "ask": ("Ask", "Books a room, asking which.", ["write"]),
    "count": ("Count", "Counts to three, slowly.", ["read-only"]),
    "hang": ("Hang", "Never finishes.", ["read-only"]),
    "fail": ("Fail", "Always fails.", ["write"]),
    "callback": ("Callback", "Asks the gateway for a tool.", ["read-only"]),
}
EXTENDED_SKILLS = {"audit": ("Audit", "Reads the desk's audit log.", ["read-only"])}
DRIFTED_ECHO = "Echoes, louder."


def b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


class Log:
    """The log file: a JSON line for each entry, flushed at once."""

    def __init__(self, path: str):
        self._file = open(path, "a", encoding="utf-8")  # noqa: SIM115 - open while the peer runs

    def write(self, entry: dict) -> None:
        self._file.write(json.dumps(entry) + "\n")
        self._file.flush()


def request_entry(headers: Headers, body: bytes) -> dict:
    """The log line for a POST: what its JSON-RPC request and headers say (null for what they
    do not)."""

    def mapping(value) -> dict:
        return value if isinstance(value, dict) else {}

    try:
        request = mapping(json.loads(body))
    except ValueError:
        request = {}
    params = mapping(request.get("params"))
    message = mapping(params.get("message"))
    return {
        "method": request.get("method"),
        "id": request.get("id"),
        "messageId": message.get("messageId"),
        "taskId": message.get("taskId") or params.get("id"),
        "contextId": message.get("contextId"),
        "skill": mapping(message.get("metadata")).get(SKILL_KEY),
        "parts": message.get("parts"),
        "traceparent": headers.get("traceparent"),
        "delegation": headers.get("gatehouse-delegation"),
        "authorization": headers.get("authorization"),
        "a2a_version": headers.get("a2a-version"),
    }


class RequestLog:
    """ASGI middleware: logs each POST (but /test/drift) before the app sees it, then hands the
    app the body it read."""

    def __init__(self, app, log: Log):
        self.app = app
        self.log = log

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] == DRIFT_PATH:
            await self.app(scope, receive, send)
            return
        received = []
        body = b""
        while True:
            message = await receive()
            received.append(message)
            if message["type"] != "http.request":
                break
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        self.log.write(request_entry(Headers(scope=scope), body))

        async def replay():
            if received:
                return received.pop(0)
            return await receive()

        await self.app(scope, replay, send)


class Desk:
    """The agent cards, public and extended, kept up to date: both objects are the ones the
    SDK serves, changed in place when the card drifts, and signed anew each time."""

    def __init__(self, url: str, seed: bytes | None, extended: bool, streaming: bool = True):
        self.url = url
        self.streaming = streaming
        self.extended_offered = extended
        self.drifted = False
        self.card = AgentCard()
        self.extended = AgentCard()
        self.jwks = None
        self._signer = None
        if seed is not None:
            private = Ed25519PrivateKey.from_private_bytes(seed)
            public = private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
            jwk = {"kty": "OKP", "crv": "Ed25519", "x": b64url(public)}
            self.jwks = {"keys": [{**jwk, "kid": KEY_ID, "alg": "EdDSA", "use": "sig"}]}
            header = {"alg": "EdDSA", "typ": "JOSE", "kid": KEY_ID, "jku": url + JWKS_PATH}
            key = PyJWK({**jwk, "d": b64url(seed)})
            self._signer = create_agent_card_signer(key, header)
        self.refresh()

    def drift(self) -> None:
        self.drifted = True
        self.refresh()

    def refresh(self) -> None:
        self.card.CopyFrom(self._signed(self._card(SKILLS)))
        self.extended.CopyFrom(self._signed(self._card({**SKILLS, **EXTENDED_SKILLS})))

    def _card(self, skills: dict) -> AgentCard:
        card = AgentCard(
            name="Room desk",
            description="Books meeting rooms.",
            version="1.0.0",
            supported_interfaces=[
                AgentInterface(url=self.url + "/", protocol_binding="JSONRPC", protocol_version="1.0")
            ],
            capabilities=AgentCapabilities(
                streaming=self.streaming,
                push_notifications=False,
                extended_agent_card=self.extended_offered,
            ),
            default_input_modes=MODES,
            default_output_modes=MODES,
        )
        for skill_id, (name, description, tags) in skills.items():
            if skill_id == "echo" and self.drifted:
                description = DRIFTED_ECHO
            card.skills.append(
                AgentSkill(
                    id=skill_id,
                    name=name,
                    description=description,
                    tags=tags,
                    input_modes=MODES,
                    output_modes=MODES,
                )
            )
        return card

    def _signed(self, card: AgentCard) -> AgentCard:
        return self._signer(card) if self._signer else card


def text(*texts: str) -> list[Part]:
    return [Part(text=t) for t in texts]


def plain(value):
    """JSON from a protobuf `Value`, whose numbers are all doubles: whole ones back to ints."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


class RoomDesk(AgentExecutor):
    """The skills. Each call runs one: the first message of a task names it, and the SDK keeps
    the task; a message continuing the task runs the skill again with the task in hand."""

    def __init__(self, log: Log, gateway: str | None, gateway_key: str | None):
        self.log = log
        self.gateway = gateway
        self.gateway_key = gateway_key
        self.skills: dict[str, str] = {}  # task id -> its skill
        self.handlers = {
            "echo": self.echo,
            "book": self.book,
            "ask": self.ask,
            "count": self.count,
            "hang": self.hang,
            "fail": self.fail,
            "callback": self.callback,
        }

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        if context.current_task is None:
            skill = MessageToDict(context.message.metadata).get(SKILL_KEY)
            self.skills[context.task_id] = skill
            task = new_task(
                context.task_id,
                context.context_id,
                TaskState.TASK_STATE_SUBMITTED,
                history=[context.message],
            )
            await event_queue.enqueue_event(task)
        else:
            skill = self.skills.get(context.task_id)
        handler = self.handlers.get(skill)
        if handler is None:
            named = f"no skill {skill!r}" if skill else f"no skill named (metadata {SKILL_KEY!r})"
            await updater.reject(updater.new_agent_message(text(f"Room desk has {named}")))
            return
        await handler(context, updater)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        self.log.write({"cancelled": context.task_id})
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()

    def booked(self, context: RequestContext, what: str) -> None:
        self.log.write({"effect": "book", "messageId": context.message.message_id, "text": what})

    async def echo(self, context: RequestContext, updater: TaskUpdater) -> None:
        parts = text(f"echo: {context.get_user_input()}")
        parts += [Part(data=part.data) for part in context.message.parts if part.HasField("data")]
        await updater.add_artifact(parts)
        await updater.complete()

    async def book(self, context: RequestContext, updater: TaskUpdater) -> None:
        what = context.get_user_input()
        self.booked(context, what)
        await updater.add_artifact(text(f"booked {what}"))
        await updater.complete()

    async def ask(self, context: RequestContext, updater: TaskUpdater) -> None:
        if context.current_task is None:
            await updater.requires_input(updater.new_agent_message(text("Which room?")))
            return
        room = context.get_user_input()
        self.booked(context, room)
        await updater.add_artifact(text(f"booked room {room}"))
        await updater.complete()

    async def count(self, context: RequestContext, updater: TaskUpdater) -> None:
        for step in (1, 2, 3):
            if step > 1:
                await asyncio.sleep(0.2)
            await updater.start_work(updater.new_agent_message(text(f"step {step} of 3")))
        await updater.add_artifact(text("counted to 3"))
        await updater.complete()

    async def hang(self, context: RequestContext, updater: TaskUpdater) -> None:
        await updater.start_work()
        await asyncio.Event().wait()  # until the SDK cancels it, after `cancel` ended the task

    async def fail(self, context: RequestContext, updater: TaskUpdater) -> None:
        await updater.failed(updater.new_agent_message(text("the room is gone")))

    async def callback(self, context: RequestContext, updater: TaskUpdater) -> None:
        calls = [MessageToDict(p.data) for p in context.message.parts if p.HasField("data")]
        call = calls[0] if calls and isinstance(calls[0], dict) else {}
        if not self.gateway or not isinstance(call.get("tool"), str):
            why = "needs --gateway" if not self.gateway else 'needs a data part {"tool", "arguments"}'
            await updater.failed(updater.new_agent_message(text(f"callback {why}")))
            return
        headers = {"Authorization": f"Bearer {self.gateway_key}"}
        for name in ("traceparent", "gatehouse-delegation"):
            value = context.call_context.state["headers"].get(name)
            if value:
                headers[name] = value
        try:
            result = await self.call_tool(headers, call["tool"], plain(call.get("arguments") or {}))
        except MCPError as error:
            await updater.failed(updater.new_agent_message(text(error.message)))
            return
        answer = "\n".join(block.text for block in result.content if block.type == "text")
        if result.is_error:
            await updater.failed(updater.new_agent_message(text(answer)))
            return
        await updater.add_artifact(text(answer))
        await updater.complete()

    async def call_tool(self, headers: dict, tool: str, arguments: dict):
        timeout = httpx2.Timeout(30.0, read=120.0)
        async with (
            httpx2.AsyncClient(headers=headers, timeout=timeout) as http,
            streamable_http_client(self.gateway, http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            return await session.call_tool(tool, arguments)


def app(args, url: str) -> Starlette:
    log = Log(args.log)
    seed = base64.b64decode(args.sign_key) if args.sign_key else None
    desk = Desk(url, seed, extended=args.extended_token is not None, streaming=not args.no_streaming)

    async def extended_card(card: AgentCard, context: ServerCallContext) -> AgentCard:
        """The extended card, for the bearer of the token only."""
        if context.state["headers"].get("authorization") != f"Bearer {args.extended_token}":
            raise UnsupportedOperationError(
                message="Authentication required: GetExtendedAgentCard needs the desk's token"
            )
        return card

    handler = DefaultRequestHandler(
        agent_executor=RoomDesk(log, args.gateway, args.gateway_key),
        task_store=InMemoryTaskStore(),
        agent_card=desk.card,
        extended_agent_card=desk.extended if args.extended_token is not None else None,
        extended_card_modifier=extended_card if args.extended_token is not None else None,
    )

    async def drift(request) -> Response:
        desk.drift()
        return Response(status_code=204)

    async def jwks(request) -> Response:
        return JSONResponse(desk.jwks)

    routes = [
        *create_agent_card_routes(desk.card),
        *create_jsonrpc_routes(handler, "/"),
        Route(DRIFT_PATH, drift, methods=["POST"]),
    ]
    if desk.jwks is not None:
        routes.append(Route(JWKS_PATH, jwks, methods=["GET"]))

    @contextlib.asynccontextmanager
    async def lifespan(_app):
        yield
        await handler.aclose()

    starlette = Starlette(routes=routes, lifespan=lifespan)
    starlette.add_middleware(RequestLog, log=log)
    return starlette


class Server(uvicorn.Server):
    """uvicorn's server, printing the peer's URL once it listens."""

    def __init__(self, config: uvicorn.Config, url: str):
        super().__init__(config)
        self.url = url

    async def startup(self, sockets=None) -> None:
        await super().startup(sockets=sockets)
        if self.started:
            print(json.dumps({"url": self.url}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--sign-key")
    parser.add_argument("--extended-token")
    parser.add_argument("--gateway")
    parser.add_argument("--gateway-key")
    parser.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"))
    parser.add_argument("--no-streaming", action="store_true")
    args = parser.parse_args()
    if bool(args.gateway) != bool(args.gateway_key):
        sys.exit("--gateway and --gateway-key go together")

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", args.port))
    port = sock.getsockname()[1]
    url = f"https://localhost:{port}" if args.tls else f"http://127.0.0.1:{port}"
    tls = {"ssl_certfile": args.tls[0], "ssl_keyfile": args.tls[1]} if args.tls else {}
    config = uvicorn.Config(
        app(args, url), log_level="warning", timeout_graceful_shutdown=1, **tls
    )
    Server(config, url).run(sockets=[sock])


if __name__ == "__main__":
    main()
