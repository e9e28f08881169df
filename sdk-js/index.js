// gatehouse SDK for JavaScript and TypeScript: small helpers over the WIT contract
// (wit/gatehouse.wit). `build.mjs` bundles a module that imports it into a component.
//
// An adapter exports `invoke`; `adapter({...})` builds it from one handler per capability.
// A policy exports `evaluate`; `policy(fn)` builds it from one function.
// Types: index.d.ts; the contract's own declarations: types/.

import { log as hostLog } from 'gatehouse:plugin/log@0.2.0';

/** Log lines into the call's trace (bounded by the host per call). */
export const log = {
  trace: (message) => hostLog('trace', String(message)),
  debug: (message) => hostLog('debug', String(message)),
  info: (message) => hostLog('info', String(message)),
  warn: (message) => hostLog('warn', String(message)),
  error: (message) => hostLog('error', String(message)),
};

/**
 * A structured failure of a capability: thrown from a handler, it becomes the WIT
 * `tool-error` the host reports (kind, code, message, retryable, remediation).
 */
export class ToolFailure extends Error {
  constructor(kind, code, message, { retryable = false, remediation } = {}) {
    super(message);
    this.name = 'ToolFailure';
    this.kind = kind;
    this.code = code;
    this.retryable = retryable;
    this.remediation = remediation;
  }

  /** The `tool-error` record (componentize-js lowers a thrown error's `payload`). */
  get payload() {
    return {
      kind: this.kind,
      code: this.code,
      message: this.message,
      retryable: this.retryable,
      remediation: this.remediation,
    };
  }
}

function failure(kind) {
  return (code, message, options) => new ToolFailure(kind, code, message, options);
}

/** Constructors of `ToolFailure`, one per WIT `error-kind`: `throw fail.notFound(...)`. */
export const fail = {
  validation: failure('validation'),
  notFound: failure('not-found'),
  conflict: failure('conflict'),
  upstream: failure('upstream'),
  unavailable: failure('unavailable'),
  internal: failure('internal'),
};

/** A result of text content blocks. */
export function text(...texts) {
  return {
    content: texts.map((val) => ({ tag: 'text', val: String(val) })),
    structured: undefined,
    evidenceRefs: [],
  };
}

/**
 * A result whose structured content is `value` (checked by the host against the capability's
 * output schema), with the same JSON as its text block unless `text` is given.
 */
/** The reserved capability id `gatehouse pack` asks the handled ids with. */
const HANDLES_PROBE = 'gatehouse:handles';

export function json(value, { text: summary, evidence = [] } = {}) {
  const structured = JSON.stringify(value);
  return {
    content: [{ tag: 'text', val: summary ?? structured }],
    structured,
    evidenceRefs: evidence.map(String),
  };
}

/** The operator's context text resolved for this call (skills), if any. */
export function skillContext(ctx) {
  return ctx.skillContext ?? undefined;
}

/**
 * Builds an adapter's `invoke` export from one handler per capability id. A handler gets the
 * parsed arguments and the call context, and returns a result (`json`, `text`) or throws a
 * `ToolFailure`; it may be async (an awaited `fetch`). Anything else it throws is reported as
 * an `internal` failure with the error's message.
 *
 *   export const invoke = adapter({ lookup: async ({ id }, ctx) => json(...) });
 */
export function adapter(handlers) {
  return async function invoke(ctx, capability, rawArgs) {
    // `gatehouse pack` asks which capability ids this code handles (no id has a `:`), to
    // check them against manifest.toml; no handler runs.
    if (capability === HANDLES_PROBE) return json({ handles: Object.keys(handlers) });
    const handler = Object.hasOwn(handlers, capability) ? handlers[capability] : undefined;
    if (typeof handler !== 'function') {
      throw fail.validation('UNKNOWN_CAPABILITY', `this adapter has no capability \`${capability}\``);
    }
    let args;
    try {
      args = JSON.parse(rawArgs);
    } catch (e) {
      throw fail.validation('INVALID_ARGUMENTS', `the arguments are not JSON: ${e.message}`);
    }
    try {
      return await handler(args, ctx);
    } catch (e) {
      if (e instanceof ToolFailure) throw e;
      if (isFetchFailure(e)) throw unreachable();
      throw fail.internal('ADAPTER_ERROR', e instanceof Error ? e.message : String(e));
    }
  };
}

/**
 * Whether an upstream answering `status` may answer differently later: 408, 425, 429 and the
 * 5xx statuses but 501 and 505 (the Rust SDK's `http::retryable_status`). Use it for the
 * `retryable` of a failure built from a response: a 404 stays a 404.
 */
export function retryableStatus(status) {
  return [408, 425, 429].includes(status) || (status >= 500 && status < 600 && status !== 501 && status !== 505);
}

// `fetch` rejects with a TypeError when a request gets no response, whatever the cause: the
// gateway refused it (its egress record on the call says why) or the upstream is unreachable.
// The engine does not say which, so neither does the failure. It stays retryable because an
// unreachable upstream can come back; where the gateway refused the request, the host reports
// `EGRESS_DENIED`, not retryable, in its place (it recorded the refusal).
function isFetchFailure(e) {
  return e instanceof TypeError && e.message.startsWith('NetworkError');
}

function unreachable() {
  return fail.unavailable(
    'UPSTREAM_UNREACHABLE',
    'the request got no response: the gateway refused it (the call\'s egress record says why) or the upstream is unreachable',
    {
      retryable: true,
      remediation: 'ask the operator to grant this destination, or use a URL it grants',
    },
  );
}

/** Verdicts. */
export function allow(options) {
  return decision('allow', options);
}
export function deny(code, message, options) {
  return decision('deny', { ...options, reasons: [{ code, message }, ...(options?.reasons ?? [])] });
}
export function requireApproval(code, message, options) {
  return decision('require-approval', {
    ...options,
    reasons: [{ code, message }, ...(options?.reasons ?? [])],
  });
}
export function abstain() {
  return decision('abstain');
}

function decision(verdict, { reasons = [], effectiveMode, evidence = [], obligations = [] } = {}) {
  return {
    verdict,
    effectiveMode,
    reasons,
    evidenceRefs: evidence.map(String),
    obligations,
  };
}

/** Obligations the host applies to the result before delivering it. */
export const obligations = {
  /** Replace the value at this JSON pointer of the structured result with "[REDACTED]". */
  redact: (pointer) => ({ tag: 'redact-pointer', val: pointer }),
  /** Mask e-mail addresses and/or phone numbers in every text of the result. */
  maskPii: (...kinds) => ({ tag: 'mask-pii', val: kinds }),
};

/**
 * Builds a policy's `evaluate` export from `fn(action, config)`: the action with its `args`
 * parsed, and the binding's config parsed (`{}` when empty). It returns a decision (`allow`,
 * `deny`, `requireApproval`, `abstain`). A throw denies: the host fails closed.
 */
export function policy(fn) {
  return function evaluate(action, rawConfig) {
    const config = rawConfig ? JSON.parse(rawConfig) : {};
    return fn({ ...action, args: JSON.parse(action.args) }, config);
  };
}
