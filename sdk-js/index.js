// gatehouse SDK for JavaScript and TypeScript: small helpers over the WIT contract
// (wit/gatehouse.wit, gatehouse:plugin@0.8.0). `build.mjs` bundles a module that imports it
// into a component.
//
// An adapter exports `invoke`; `adapter({...})` builds it from one handler per capability.
// It may export `readResource` (`resources(fn)`), `getPrompt` (`prompts({...})`) and
// `complete` (`completions(fn)`) too; `build.mjs` supplies what it leaves out (no resources,
// no prompts, no suggestions). While it runs, a handler tells and asks its caller through
// `caller`.
// A policy exports `evaluate`; `policy(fn)` builds it from one function.
// Types: index.d.ts; the contract's own declarations: types/.

import { log as hostLog } from 'gatehouse:plugin/log@0.8.0';
// A policy's world has no `caller`: `build.mjs` binds this import to a module that refuses
// to be called when it builds one.
import {
  askAll as hostAskAll,
  can as hostCan,
  notify as hostNotify,
  progress as hostProgress,
} from 'gatehouse:plugin/caller@0.8.0';

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
 * Why an ask of the caller has no answer: `reason` is `unavailable` (nobody to ask),
 * `not-supported` (the caller did not declare it can answer this), `refused` (the gateway
 * refused before asking: manifest, operator grant, budget, a credential), `failed` (the
 * caller answered with an error or hung up) or `timeout`. Thrown out of a handler, it becomes
 * the tool error `CALLER_UNAVAILABLE`, `CALLER_NOT_SUPPORTED`, `ASK_REFUSED`, `ASK_FAILED` or
 * `ASK_TIMEOUT`.
 */
export class AskFailure extends Error {
  constructor(reason, message) {
    super(message);
    this.name = 'AskFailure';
    this.reason = reason;
  }

  /** The tool failure it becomes when a handler does not catch it. */
  toToolFailure() {
    const [kind, code, remediation] = {
      unavailable: ['unavailable', 'CALLER_UNAVAILABLE', 'call the tool from a client that can answer it'],
      'not-supported': ['unavailable', 'CALLER_NOT_SUPPORTED', 'call the tool from a client that declares this capability'],
      refused: ['internal', 'ASK_REFUSED', 'ask the operator to grant it in [[caller.grant]]'],
      failed: ['upstream', 'ASK_FAILED', 'try again'],
      timeout: ['unavailable', 'ASK_TIMEOUT', 'call again and answer in time'],
    }[this.reason] ?? ['internal', 'ASK_FAILED', 'try again'];
    return new ToolFailure(kind, code, this.message, { remediation });
  }
}

function askFailure(error) {
  if (error.tag === 'timeout') {
    return new AskFailure('timeout', `the caller did not answer within ${error.val} s`);
  }
  return new AskFailure(error.tag, String(error.val));
}

/**
 * What the adapter tells and asks its caller while a call runs (the contract's `caller`
 * interface). Each use must be declared in the manifest's `[caller]` table (`progress`, `log`,
 * `ask`); an ask must also be granted by the operator (`[[caller.grant]]`), within its budgets.
 */
export const caller = {
  /** What the caller declared it can be asked: `{ elicitForm, elicitUrl, sample, roots }`. */
  can: () => hostCan(),
  /** Progress of the call: `progress` of `total` (if known), with a `message`. */
  progress(progress, { total, message } = {}) {
    hostProgress(Number(progress), total === undefined ? undefined : Number(total), message);
  },
  /** A log line for the caller at `level` (MCP's: `debug` to `emergency`); `data` any JSON. */
  notify(level, data, { logger } = {}) {
    hostNotify(level, logger, JSON.stringify(data ?? null));
  },
  /** Asks one question (`ask.form`, `ask.url`, `ask.sample`, `ask.roots`) and waits: the answer (MCP's result), or a thrown `AskFailure`. */
  ask(request) {
    const [answer] = caller.askAll([request]);
    if (answer instanceof AskFailure) throw answer;
    return answer;
  },
  /** Asks several questions at once (the caller gets them together) and waits for every answer, in order: each an answer or an `AskFailure`. */
  askAll(requests) {
    const asked = requests.map((r) => ({ key: r.key, kind: r.kind, params: JSON.stringify(r.params ?? {}) }));
    return hostAskAll(asked).map((answer) => {
      if (answer.tag === 'err') return askFailure(answer.val);
      try {
        return JSON.parse(answer.val);
      } catch (e) {
        return new AskFailure('failed', `the answer is not JSON: ${e.message}`);
      }
    });
  },
};

/** Questions for `caller.ask`, each named by a `key` unique in the call (1-64 of `[A-Za-z0-9_.-]`). */
export const ask = {
  /** A form for the user: `message`, and `schema`, the object schema of the fields asked. The answer: `{ action: 'accept' | 'decline' | 'cancel', content }`. */
  form: (key, message, schema) => ({ key, kind: 'elicitation', params: { message, requestedSchema: schema } }),
  /** A URL for the user to open, under `elicitationId`. */
  url: (key, message, url, elicitationId) => ({
    key,
    kind: 'elicitation',
    params: { mode: 'url', message, url, elicitationId },
  }),
  /** A completion of `prompt` by the caller's model, of at most `maxTokens`. The answer: `{ role, content, model }`. */
  sample: (key, prompt, maxTokens) => ({
    key,
    kind: 'sampling',
    params: { messages: [{ role: 'user', content: { type: 'text', text: prompt } }], maxTokens },
  }),
  /** The caller's roots. The answer: `{ roots: [{ uri, name }] }`. */
  roots: (key) => ({ key, kind: 'roots', params: {} }),
};

/** What a handler threw, as the tool failure the host reports. */
function asFailure(e) {
  if (e instanceof ToolFailure) return e;
  if (e instanceof AskFailure) return e.toToolFailure();
  if (isFetchFailure(e)) return unreachable();
  return fail.internal('ADAPTER_ERROR', e instanceof Error ? e.message : String(e));
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
      throw asFailure(e);
    }
  };
}

/** A resource's contents as text, for `resources`. */
export function textResource(uri, text, mimeType) {
  return { uri, mimeType, text: String(text), data: undefined };
}

/** A resource's contents as bytes (a `Uint8Array`), for `resources`. */
export function blobResource(uri, bytes, mimeType) {
  return { uri, mimeType, text: undefined, data: bytes };
}

/**
 * Builds an adapter's `readResource` export from `read(uri, ctx)`, which returns the contents
 * at `uri` (one `textResource` or `blobResource`, or a list of them) and may be async. The
 * host calls it only for a URI the manifest declares (`[[resource]]`) or one that matches a
 * template it declares (`[[resource_template]]`), after its gates; `ctx.upstream` is that
 * entry's `upstream` table (JSON).
 */
export function resources(read) {
  return async function readResource(ctx, uri) {
    try {
      const contents = await read(uri, ctx);
      return Array.isArray(contents) ? contents : [contents];
    } catch (e) {
      throw asFailure(e);
    }
  };
}

/** A prompt's message: `text` (a string) or a content block, said by the user or the assistant. */
export const message = {
  user: (content) => ({ role: 'user', content: block(content) }),
  assistant: (content) => ({ role: 'assistant', content: block(content) }),
};

function block(content) {
  return typeof content === 'string' ? { tag: 'text', val: content } : content;
}

/**
 * Builds an adapter's `getPrompt` export from one handler per prompt id (a `[[prompt]]` of
 * the manifest): it gets the prompt's arguments (strings, checked against the declared ones)
 * and the call context, and returns its messages (`message.user(...)`), or `{ description,
 * messages }`; it may be async.
 */
export function prompts(handlers) {
  return async function getPrompt(ctx, name, rawArgs) {
    const handler = Object.hasOwn(handlers, name) ? handlers[name] : undefined;
    if (typeof handler !== 'function') {
      throw fail.notFound('PROMPT_NOT_FOUND', `this adapter serves no prompt \`${name}\``);
    }
    try {
      const filled = await handler(JSON.parse(rawArgs), ctx);
      return Array.isArray(filled)
        ? { description: undefined, messages: filled }
        : { description: filled.description, messages: filled.messages };
    } catch (e) {
      throw asFailure(e);
    }
  };
}

/**
 * Builds an adapter's `complete` export from `suggest(request, ctx)`: `request` is `{ prompt }`
 * (a prompt's id) or `{ resource }` (a resource template's URI template), with `argument`, the
 * `value` typed so far and `context` (the arguments already given). It returns the suggested
 * values (at most 100), or `{ values, total, hasMore }`; it may be async.
 */
export function completions(suggest) {
  return async function complete(ctx, reference, argument, value, rawContext) {
    const on = reference.tag === 'prompt' ? { prompt: reference.val } : { resource: reference.val };
    let context = {};
    try {
      context = JSON.parse(rawContext);
    } catch {
      // Not JSON: no arguments given.
    }
    try {
      const found = await suggest({ ...on, argument, value, context }, ctx);
      const values = (Array.isArray(found) ? found : found.values).map(String);
      return {
        values,
        total: Array.isArray(found) ? undefined : found.total,
        hasMore: Array.isArray(found) ? false : Boolean(found.hasMore),
      };
    } catch (e) {
      throw asFailure(e);
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
  /**
   * Mask secrets of these kinds (`private-key`, `cloud-access-key`, `bearer-token`, `jwt`,
   * `high-entropy`) in the result and in the arguments as the host keeps them; `fields` name
   * the JSON keys whose high-entropy values are secrets.
   */
  maskSecrets: (kinds, fields = []) => ({ tag: 'mask-secrets', val: { kinds, fields } }),
  /** Mask what each named pattern matches as `[NAME]`, in the same places: `{ order: 'ord_[0-9]+' }`. */
  maskIdentifiers: (patterns) => ({
    tag: 'mask-identifiers',
    val: Object.entries(patterns).map(([name, pattern]) => ({ name, pattern })),
  }),
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
