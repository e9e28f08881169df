"""A peer agent that calls gatehouse over A2A with the official A2A SDK (`a2a-sdk`), as an
agent would: it resolves the agent card, makes a client from it, and sends one request.

    python a2a_agent.py BASE_URL [--key KEY] ACTION [...]

ACTION is one of:
    card [PUBLIC_KEY]                      the agent card; with the base64 Ed25519 public key
                                           of its signer, checked with the SDK's verifier,
                                           as served and with its name changed
    send TOOL ARGUMENTS_JSON MESSAGE_ID [CONTEXT_ID]
                                           SendMessage: the task it answers
    stream TOOL ARGUMENTS_JSON MESSAGE_ID  SendStreamingMessage: each event, a line each
    subscribe TASK_ID                      SubscribeToTask: each event, a line each
    extended                               GetExtendedAgentCard
    get TASK_ID                            GetTask
    list [REQUEST_JSON]                    ListTasks, with the request's fields as JSON
                                           (`contextId`, `status`, `pageSize`, ...)
    cancel TASK_ID                         CancelTask
    push TASK_ID URL [TOKEN]               CreateTaskPushNotificationConfig

It prints one JSON line: the answer (protobuf's JSON, as the wire has it), or
{"error": {"type": ..., "message": ...}} for an error the SDK raised.
"""

import argparse
import asyncio
import base64
import json
import sys

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    GetExtendedAgentCardRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
)
from a2a.utils.signing import create_signature_verifier
from google.protobuf.json_format import MessageToDict, ParseDict
from jwt import PyJWK
from google.protobuf.struct_pb2 import Value


def wire(message) -> dict:
    return MessageToDict(message)


def verified(card, public_key: str):
    """True if the SDK's verifier accepts the card's signature with `public_key` (base64
    Ed25519), else the error it raised."""
    raw = base64.b64decode(public_key)
    x = base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
    key = PyJWK({"kty": "OKP", "crv": "Ed25519", "x": x})
    try:
        create_signature_verifier(lambda kid, jku: key, ["EdDSA"])(card)
        return True
    except Exception as error:  # noqa: BLE001 - the test reads what the verifier raised
        return f"{type(error).__name__}: {error}"


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("base")
    parser.add_argument("--key")
    parser.add_argument("action")
    parser.add_argument("rest", nargs="*")
    args = parser.parse_args()

    headers = {"Authorization": f"Bearer {args.key}"} if args.key else {}
    async with httpx.AsyncClient(headers=headers, timeout=30) as http:
        card = await A2ACardResolver(http, args.base).get_agent_card()
        if args.action == "card":
            answer = {"card": wire(card)}
            if args.rest:
                answer["verified"] = verified(card, args.rest[0])
                tampered = AgentCard()
                tampered.CopyFrom(card)
                tampered.name = card.name + " (tampered)"
                answer["tampered_verified"] = verified(tampered, args.rest[0])
            print(json.dumps(answer))
            return
        streaming = args.action in ("stream", "subscribe")
        config = ClientConfig(httpx_client=http, streaming=streaming)
        client = ClientFactory(config).create(card)
        try:
            if args.action in ("send", "stream"):
                tool, arguments, message_id, *context = args.rest
                data = ParseDict({"tool": tool, "arguments": json.loads(arguments)}, Value())
                message = Message(
                    message_id=message_id,
                    role=Role.ROLE_USER,
                    parts=[Part(text=f"call {tool}"), Part(data=data)],
                )
                if context:
                    message.context_id = context[0]
                async for event in client.send_message(SendMessageRequest(message=message)):
                    print(json.dumps(wire(event)))
            elif args.action == "subscribe":
                async for event in client.subscribe(SubscribeToTaskRequest(id=args.rest[0])):
                    print(json.dumps(wire(event)), flush=True)
            elif args.action == "extended":
                request = GetExtendedAgentCardRequest()
                print(json.dumps(wire(await client.get_extended_agent_card(request))))
            elif args.action == "get":
                print(json.dumps(wire(await client.get_task(GetTaskRequest(id=args.rest[0])))))
            elif args.action == "list":
                fields = json.loads(args.rest[0]) if args.rest else {}
                request = ParseDict(fields, ListTasksRequest())
                print(json.dumps(wire(await client.list_tasks(request))))
            elif args.action == "cancel":
                task = await client.cancel_task(CancelTaskRequest(id=args.rest[0]))
                print(json.dumps(wire(task)))
            elif args.action == "push":
                config = TaskPushNotificationConfig(task_id=args.rest[0], url=args.rest[1])
                if len(args.rest) > 2:
                    config.token = args.rest[2]
                answer = await client.create_task_push_notification_config(config)
                print(json.dumps(wire(answer)))
            else:
                sys.exit(f"unknown action {args.action}")
        except Exception as error:  # noqa: BLE001 - the test reads what the SDK raised
            print(json.dumps({"error": {"type": type(error).__name__, "message": str(error)}}))


if __name__ == "__main__":
    asyncio.run(main())
