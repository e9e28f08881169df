// An orders integration over HTTP: reads an order (GET) and creates one (a write-class POST
// that carries the call's idempotency key). Every request passes the host's egress gate: the
// operator's grant decides which service is reachable and injects its credential.
// It tells its caller how far a read got, asks the user to confirm a large order (when the
// caller can show a form), and serves a resource (what it does) and a prompt (a review).
import {
  adapter,
  ask,
  caller,
  fail,
  json,
  log,
  message,
  prompts,
  resources,
  textResource,
} from '@gatehouse/sdk';
import type { CallContext } from 'gatehouse:plugin/types@0.8.0';

/** Orders above this many items are confirmed by the user first. */
const CONFIRM_ABOVE = 100;

async function answer(response: Response) {
  const text = await response.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // Not JSON: delivered as text.
  }
  if (response.status >= 500 || response.status === 429) {
    throw fail.unavailable('UPSTREAM_UNAVAILABLE', `the orders service answered ${response.status}`, {
      retryable: true,
    });
  }
  if (response.status === 404) {
    throw fail.notFound('ORDER_NOT_FOUND', 'the orders service has no such order');
  }
  return { status: response.status, body };
}

export const invoke = adapter({
  async get_order({ base_url, order_id }: { base_url: string; order_id: string }) {
    const url = `${base_url.replace(/\/$/, '')}/orders/${encodeURIComponent(order_id)}`;
    log.info(`GET ${url}`);
    const result = await answer(await fetch(url));
    caller.progress(1, { total: 1, message: `read order ${order_id}` });
    return json(result);
  },

  async create_order(
    { base_url, item, quantity }: { base_url: string; item: string; quantity: number },
    ctx: CallContext,
  ) {
    if (quantity > CONFIRM_ABOVE && caller.can().elicitForm) {
      const schema = { type: 'object', properties: { confirm: { type: 'boolean' } }, required: ['confirm'] };
      const answer = caller.ask(ask.form('confirm', `Order ${quantity} of ${item}?`, schema));
      if (answer.action !== 'accept' || answer.content?.confirm !== true) {
        throw fail.conflict('NOT_CONFIRMED', `the user did not confirm ${quantity} of ${item}`);
      }
    }
    // The host adds the call's Idempotency-Key to every non-safe request; the adapter reports
    // it as evidence of which request created the order.
    const url = `${base_url.replace(/\/$/, '')}/orders`;
    const response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ item, quantity }),
    });
    const result = await answer(response);
    return json({ ...result, idempotency_key: ctx.idempotencyKey ?? null }, {
      evidence: [`idempotency-key:${ctx.idempotencyKey}`],
    });
  },
});

export const readResource = resources((uri) =>
  textResource(uri, 'get_order reads an order by id; create_order creates one, once per idempotency key.', 'text/plain'),
);

export const getPrompt = prompts({
  review_order: ({ order_id }) => [message.user(`Review order ${order_id}: is anything unusual about it?`)],
});
