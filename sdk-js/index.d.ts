// Declarations of the gatehouse SDK for JavaScript and TypeScript (index.js). The WIT
// contract's declarations are generated into types/ from the adapter world, whose types
// interface is the policy world's too (`npm run types`; a test checks they are current).
/// <reference path="./types/adapter.d.ts" />

import type {
  Action,
  ApprovalMode,
  CallContext,
  Decision,
  ErrorKind,
  Obligation,
  PiiKind,
  Reason,
  ToolError,
  ToolOutput,
} from 'gatehouse:plugin/types@0.2.0';

export type { Action, CallContext, Decision, ToolError, ToolOutput };

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
