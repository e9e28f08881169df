// Declarations of the gatehouse SDK for JavaScript and TypeScript (index.js). The WIT
// contract's declarations are generated into types/ from the adapter world, whose types
// interface is the policy world's too (`npm run types`; a test checks they are current).
/// <reference path="./types/adapter.d.ts" />

import type {
  Action,
  ApprovalMode,
  CallContext,
  Completion,
  CompletionRef,
  Content,
  Decision,
  EmbeddedResource,
  ErrorKind,
  Obligation,
  PiiKind,
  Prompt,
  PromptMessage,
  Reason,
  SecretKind,
  ToolError,
  ToolOutput,
} from 'gatehouse:plugin/types@0.8.0';
import type { AskKind, CallerCan, LogLevel } from 'gatehouse:plugin/caller@0.8.0';

export type {
  Action,
  CallContext,
  Completion,
  Content,
  Decision,
  EmbeddedResource,
  Prompt,
  PromptMessage,
  ToolError,
  ToolOutput,
};

/** Log lines into the call's trace (bounded by the host per call). */
export declare const log: {
  trace(message: unknown): void;
  debug(message: unknown): void;
  info(message: unknown): void;
  warn(message: unknown): void;
  error(message: unknown): void;
};

export interface FailureOptions {
  /** Whether the same call may succeed later. Default: false. */
  retryable?: boolean;
  /** What the caller can do about it. */
  remediation?: string;
}

/** A structured failure: thrown from a handler, it becomes the WIT `tool-error`. */
export declare class ToolFailure extends Error {
  constructor(kind: ErrorKind, code: string, message: string, options?: FailureOptions);
  readonly kind: ErrorKind;
  readonly code: string;
  readonly retryable: boolean;
  readonly remediation: string | undefined;
  /** The `tool-error` record the host receives. */
  readonly payload: ToolError;
}

type Fail = (code: string, message: string, options?: FailureOptions) => ToolFailure;

/** Constructors of `ToolFailure`, one per WIT `error-kind`: `throw fail.notFound(...)`. */
export declare const fail: {
  validation: Fail;
  notFound: Fail;
  conflict: Fail;
  upstream: Fail;
  unavailable: Fail;
  internal: Fail;
};

/** A result of text content blocks. */
export declare function text(...texts: unknown[]): ToolOutput;

/** A result whose structured content is `value`, with its JSON (or `text`) as a text block. */
export declare function json(
  value: unknown,
  options?: { text?: string; evidence?: unknown[] },
): ToolOutput;

/** Whether an upstream answering `status` may answer differently later (408, 425, 429, 5xx but 501 and 505). */
export declare function retryableStatus(status: number): boolean;

/** The operator's context text resolved for this call (skills), if any. */
export declare function skillContext(ctx: CallContext): string | undefined;

/** One capability: parsed arguments and the call context in, a result out (or a throw). */
export type Handler = (args: any, ctx: CallContext) => ToolOutput | Promise<ToolOutput>;

/**
 * Builds an adapter's `invoke` export from one handler per capability id. A `ToolFailure`
 * thrown by a handler is the capability's error; a `fetch` that gets no response becomes
 * `UPSTREAM_UNREACHABLE` (unavailable, retryable); anything else thrown becomes
 * `ADAPTER_ERROR` (internal) with its message.
 */
export declare function adapter(
  handlers: Record<string, Handler>,
): (ctx: CallContext, capability: string, args: string) => Promise<ToolOutput>;

/** Why an ask of the caller has no answer; thrown out of a handler, the matching tool error. */
export declare class AskFailure extends Error {
  constructor(reason: AskFailure['reason'], message: string);
  readonly reason: 'unavailable' | 'not-supported' | 'refused' | 'failed' | 'timeout';
  /** The tool failure it becomes when a handler does not catch it. */
  toToolFailure(): ToolFailure;
}

/** One question for the caller (`ask.form`, `ask.url`, `ask.sample`, `ask.roots`). */
export interface Question {
  /** Names it within the call (1-64 of `[A-Za-z0-9_.-]`, unique in the call). */
  key: string;
  kind: AskKind;
  /** The MCP request's params. */
  params: unknown;
}

/**
 * What the adapter tells and asks its caller while a call runs. Each use must be declared in
 * the manifest's `[caller]` table; an ask must also be granted by the operator.
 */
export declare const caller: {
  /** What the caller declared it can be asked. */
  can(): CallerCan;
  /** Progress of the call. */
  progress(progress: number, options?: { total?: number; message?: string }): void;
  /** A log line for the caller; `data` any JSON. */
  notify(level: LogLevel, data: unknown, options?: { logger?: string }): void;
  /** Asks one question and waits: the answer (MCP's result); throws an `AskFailure`. */
  ask(question: Question): any;
  /** Asks several at once and waits for every answer, in order: each an answer or an `AskFailure`. */
  askAll(questions: Question[]): any[];
};

/** Questions for `caller.ask`. */
export declare const ask: {
  /** A form for the user; the answer is `{ action: 'accept' | 'decline' | 'cancel', content }`. */
  form(key: string, message: string, schema: object): Question;
  /** A URL for the user to open. */
  url(key: string, message: string, url: string, elicitationId: string): Question;
  /** A completion by the caller's model, of at most `maxTokens`. */
  sample(key: string, prompt: string, maxTokens: number): Question;
  /** The caller's roots. */
  roots(key: string): Question;
};

/** A resource's contents as text. */
export declare function textResource(uri: string, text: string, mimeType?: string): EmbeddedResource;

/** A resource's contents as bytes. */
export declare function blobResource(uri: string, bytes: Uint8Array, mimeType?: string): EmbeddedResource;

/**
 * Builds an adapter's `readResource` export from `read(uri, ctx)`: the contents at `uri`, one
 * or a list. The host calls it only for a URI its manifest declares, after its gates.
 */
export declare function resources(
  read: (uri: string, ctx: CallContext) => EmbeddedResource | EmbeddedResource[] | Promise<EmbeddedResource | EmbeddedResource[]>,
): (ctx: CallContext, uri: string) => Promise<EmbeddedResource[]>;

/** A prompt's message: text or a content block, said by the user or the assistant. */
export declare const message: {
  user(content: string | Content): PromptMessage;
  assistant(content: string | Content): PromptMessage;
};

/** A prompt filled in: its messages, or its description and messages. */
export type Filled = PromptMessage[] | { description?: string; messages: PromptMessage[] };

/**
 * Builds an adapter's `getPrompt` export from one handler per prompt id: the prompt's
 * arguments (strings) and the call context in, its messages out.
 */
export declare function prompts(
  handlers: Record<string, (args: Record<string, string>, ctx: CallContext) => Filled | Promise<Filled>>,
): (ctx: CallContext, name: string, args: string) => Promise<Prompt>;

/** What a completion is asked for. */
export type CompletionRequest = ({ prompt: string } | { resource: string }) & {
  argument: string;
  value: string;
  context: Record<string, string>;
};

/** Builds an adapter's `complete` export from `suggest(request, ctx)`: the values, or `{ values, total, hasMore }`. */
export declare function completions(
  suggest: (
    request: CompletionRequest,
    ctx: CallContext,
  ) => string[] | { values: string[]; total?: number; hasMore?: boolean } | Promise<string[] | { values: string[]; total?: number; hasMore?: boolean }>,
): (ctx: CallContext, reference: CompletionRef, argument: string, value: string, context: string) => Promise<Completion>;

export interface DecisionOptions {
  reasons?: Reason[];
  /** Lower the call's approval mode to this (the host ignores a raise). */
  effectiveMode?: ApprovalMode;
  evidence?: unknown[];
  obligations?: Obligation[];
}

export declare function allow(options?: DecisionOptions): Decision;
export declare function deny(code: string, message: string, options?: DecisionOptions): Decision;
export declare function requireApproval(
  code: string,
  message: string,
  options?: DecisionOptions,
): Decision;
export declare function abstain(): Decision;

/** Obligations the host applies to the result before delivering it. */
export declare const obligations: {
  /** Replace the value at this JSON pointer of the structured result with "[REDACTED]". */
  redact(pointer: string): Obligation;
  /** Mask e-mail addresses and/or phone numbers in every text of the result. */
  maskPii(...kinds: PiiKind[]): Obligation;
  /** Mask secrets of these kinds in the result and in the arguments as the host keeps them. */
  maskSecrets(kinds: SecretKind[], fields?: string[]): Obligation;
  /** Mask what each named pattern matches as `[NAME]`, in the same places. */
  maskIdentifiers(patterns: Record<string, string>): Obligation;
};

/** The action a policy decides on, with its arguments parsed. */
export type ParsedAction = Omit<Action, 'args'> & { args: any };

/**
 * Builds a policy's `evaluate` export from `fn(action, config)`: the action's arguments and the
 * binding's config parsed (`{}` when empty). A throw denies: the host fails closed.
 */
export declare function policy(
  fn: (action: ParsedAction, config: any) => Decision,
): (action: Action, config: string) => Decision;
