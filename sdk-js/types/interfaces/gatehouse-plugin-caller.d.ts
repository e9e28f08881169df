declare module 'gatehouse:plugin/caller@0.8.0' {
  /**
   * What the caller declared it can be asked.
   */
  export function can(): CallerCan;
  /**
   * Progress of the call; reaches the caller when its request asked for progress.
   */
  export function progress(progress: number, total: number | undefined, message: string | undefined): void;
  /**
   * A log line for the caller: `data` is a JSON document (a string is a JSON string).
   */
  export function notify(level: LogLevel, logger: string | undefined, data: string): void;
  /**
   * Asks the caller and waits: `params` is the MCP request's params (JSON), the answer its
   * result (JSON).
   */
  export function ask(key: string, kind: AskKind, params: string): string;
  /**
   * Asks several questions at once and waits for every answer, in order: the caller gets
   * them together (one round of MCP 2026-07-28's `inputRequests`). Each counts as one ask.
   */
  export function askAll(requests: Array<InputRequest>): Array<Result<string, AskError>>;
  /**
   * The severity of a log line: MCP's, after syslog's.
   * # Variants
   * 
   * ## `"debug"`
   * 
   * ## `"info"`
   * 
   * ## `"notice"`
   * 
   * ## `"warning"`
   * 
   * ## `"error"`
   * 
   * ## `"critical"`
   * 
   * ## `"alert"`
   * 
   * ## `"emergency"`
   */
  export type LogLevel = 'debug' | 'info' | 'notice' | 'warning' | 'error' | 'critical' | 'alert' | 'emergency';
  /**
   * What an ask asks the caller for.
   * # Variants
   * 
   * ## `"elicitation"`
   * 
   * `elicitation/create`: a form (`requestedSchema`), or a URL to open (`"mode": "url"`),
   * for the user.
   * ## `"sampling"`
   * 
   * `sampling/createMessage`: a completion by the caller's model.
   * ## `"roots"`
   * 
   * `roots/list`: the caller's roots.
   */
  export type AskKind = 'elicitation' | 'sampling' | 'roots';
  /**
   * What the caller declared it can be asked (all false when nobody can be asked).
   */
  export interface CallerCan {
    elicitForm: boolean,
    elicitUrl: boolean,
    sample: boolean,
    roots: boolean,
  }
  /**
   * One question for the caller.
   */
  export interface InputRequest {
    /**
     * Names it within the call (1-64 of `[A-Za-z0-9_.-]`, unique in the call): the key of
     * MCP 2026-07-28's `inputRequests`.
     */
    key: string,
    kind: AskKind,
    /**
     * The MCP request's params, a JSON object: `elicitation/create`'s, `sampling/createMessage`'s
     * (with `maxTokens`) or `roots/list`'s (`{}`).
     */
    params: string,
  }
  /**
   * Why an ask has no answer.
   */
  export type AskError = AskErrorUnavailable | AskErrorNotSupported | AskErrorRefused | AskErrorFailed | AskErrorTimeout;
  /**
   * Nobody can be asked during this call (a call without a caller attached, such as one
   * from the command line).
   */
  export interface AskErrorUnavailable {
    tag: 'unavailable',
    val: string,
  }
  /**
   * The caller did not declare that it can answer this kind of request (for elicitation:
   * this mode, form or URL). Nothing was sent.
   */
  export interface AskErrorNotSupported {
    tag: 'not-supported',
    val: string,
  }
  /**
   * The host refused before asking: not declared in the manifest, not granted by the
   * operator, over a budget, malformed, or carrying a credential of the adapter's grants.
   * Nothing was sent.
   */
  export interface AskErrorRefused {
    tag: 'refused',
    val: string,
  }
  /**
   * The caller answered with an error, hung up, or answered more than the host accepts.
   */
  export interface AskErrorFailed {
    tag: 'failed',
    val: string,
  }
  /**
   * No answer within the ask's timeout, in seconds.
   */
  export interface AskErrorTimeout {
    tag: 'timeout',
    val: bigint,
  }
  export type Result<T, E> = { tag: 'ok', val: T } | { tag: 'err', val: E };
}
