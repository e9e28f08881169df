// An orders integration over HTTP: reads an order (GET) and creates one (a write-class POST
// that carries the call's idempotency key). Every request passes the host's egress gate: the
// operator's grant decides which service is reachable and injects its credential.
import { adapter, fail, json, log } from '@gatehouse/sdk';
import type { CallContext } from 'gatehouse:plugin/types@0.2.0';

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
    return json(await answer(await fetch(url)));
  },

  async create_order(
    { base_url, item, quantity }: { base_url: string; item: string; quantity: number },
    ctx: CallContext,
  ) {
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
