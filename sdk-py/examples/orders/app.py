"""An orders integration over HTTP: reads an order (GET) and creates one (a write-class POST
that carries the call's idempotency key). Every request passes the host's egress gate: the
operator's grant decides which service is reachable and injects its credential.
It tells its caller how far a read got, asks the user to confirm a large order (when the
caller can show a form), and serves a resource (what it does) and a prompt (a review)."""

from urllib.parse import quote

from gatehouse_sdk import (
    Adapter,
    ToolFailure,
    ask,
    caller,
    http,
    json_result,
    log,
    text_resource,
    user_message,
)

# Orders above this many items are confirmed by the user first.
CONFIRM_ABOVE = 100


def answer(response: http.Response) -> dict:
    if response.status >= 500 or response.status == 429:
        raise ToolFailure(
            "unavailable",
            "UPSTREAM_UNAVAILABLE",
            f"the orders service answered {response.status}",
            retryable=True,
        )
    if response.status == 404:
        raise ToolFailure("not_found", "ORDER_NOT_FOUND", "the orders service has no such order")
    try:
        body = response.json()
    except ValueError:
        body = response.text()
    return {"status": response.status, "body": body}


class WitWorld(Adapter):
    def get_order(self, args, ctx):
        url = f"{args['base_url'].rstrip('/')}/orders/{quote(args['order_id'], safe='')}"
        log.info(f"GET {url}")
        result = answer(http.get(url))
        caller.progress(1, total=1, message=f"read order {args['order_id']}")
        return json_result(result)

    def create_order(self, args, ctx):
        item, quantity = args["item"], args["quantity"]
        if quantity > CONFIRM_ABOVE and caller.can().elicit_form:
            schema = {"type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]}
            confirmed = caller.ask(ask.form("confirm", f"Order {quantity} of {item}?", schema))
            if confirmed.get("action") != "accept" or (confirmed.get("content") or {}).get("confirm") is not True:
                raise ToolFailure("conflict", "NOT_CONFIRMED", f"the user did not confirm {quantity} of {item}")
        # The host adds the call's Idempotency-Key to every non-safe request; the adapter
        # reports it as evidence of which request created the order.
        url = f"{args['base_url'].rstrip('/')}/orders"
        response = http.post_json(url, {"item": args["item"], "quantity": args["quantity"]})
        result = answer(response)
        result["idempotency_key"] = ctx.idempotency_key
        return json_result(result, evidence=[f"idempotency-key:{ctx.idempotency_key}"])

    def resource(self, uri, ctx):
        return text_resource(
            uri, "get_order reads an order by id; create_order creates one, once per idempotency key.", "text/plain"
        )

    def prompt(self, name, args, ctx):
        if name != "review_order":
            return super().prompt(name, args, ctx)
        return [user_message(f"Review order {args['order_id']}: is anything unusual about it?")]
