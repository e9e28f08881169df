"""An orders integration over HTTP: reads an order (GET) and creates one (a write-class POST
that carries the call's idempotency key). Every request passes the host's egress gate: the
operator's grant decides which service is reachable and injects its credential."""

from urllib.parse import quote

from gatehouse_sdk import Adapter, ToolFailure, http, json_result, log


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
        return json_result(answer(http.get(url)))

    def create_order(self, args, ctx):
        # The host adds the call's Idempotency-Key to every non-safe request; the adapter
        # reports it as evidence of which request created the order.
        url = f"{args['base_url'].rstrip('/')}/orders"
        response = http.post_json(url, {"item": args["item"], "quantity": args["quantity"]})
        result = answer(response)
        result["idempotency_key"] = ctx.idempotency_key
        return json_result(result, evidence=[f"idempotency-key:{ctx.idempotency_key}"])
