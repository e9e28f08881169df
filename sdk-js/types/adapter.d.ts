/// <reference path="./interfaces/gatehouse-plugin-caller.d.ts" />
/// <reference path="./interfaces/gatehouse-plugin-log.d.ts" />
/// <reference path="./interfaces/gatehouse-plugin-types.d.ts" />
/// <reference path="./interfaces/wasi-clocks-monotonic-clock.d.ts" />
/// <reference path="./interfaces/wasi-http-outgoing-handler.d.ts" />
/// <reference path="./interfaces/wasi-http-types.d.ts" />
/// <reference path="./interfaces/wasi-io-error.d.ts" />
/// <reference path="./interfaces/wasi-io-poll.d.ts" />
/// <reference path="./interfaces/wasi-io-streams.d.ts" />
declare module 'gatehouse:plugin/adapter@0.8.0' {
  export type CallContext = import('gatehouse:plugin/types@0.8.0').CallContext;
  export type ToolOutput = import('gatehouse:plugin/types@0.8.0').ToolOutput;
  export type ToolError = import('gatehouse:plugin/types@0.8.0').ToolError;
  export type EmbeddedResource = import('gatehouse:plugin/types@0.8.0').EmbeddedResource;
  export type Prompt = import('gatehouse:plugin/types@0.8.0').Prompt;
  export type CompletionRef = import('gatehouse:plugin/types@0.8.0').CompletionRef;
  export type Completion = import('gatehouse:plugin/types@0.8.0').Completion;
  export type * as GatehousePluginCaller080 from 'gatehouse:plugin/caller@0.8.0'; // import gatehouse:plugin/caller@0.8.0
  export type * as GatehousePluginLog080 from 'gatehouse:plugin/log@0.8.0'; // import gatehouse:plugin/log@0.8.0
  export type * as GatehousePluginTypes080 from 'gatehouse:plugin/types@0.8.0'; // import gatehouse:plugin/types@0.8.0
  export type * as WasiClocksMonotonicClock0212 from 'wasi:clocks/monotonic-clock@0.2.12'; // import wasi:clocks/monotonic-clock@0.2.12
  export type * as WasiHttpOutgoingHandler0212 from 'wasi:http/outgoing-handler@0.2.12'; // import wasi:http/outgoing-handler@0.2.12
  export type * as WasiHttpTypes0212 from 'wasi:http/types@0.2.12'; // import wasi:http/types@0.2.12
  export type * as WasiIoError0212 from 'wasi:io/error@0.2.12'; // import wasi:io/error@0.2.12
  export type * as WasiIoPoll0212 from 'wasi:io/poll@0.2.12'; // import wasi:io/poll@0.2.12
  export type * as WasiIoStreams0212 from 'wasi:io/streams@0.2.12'; // import wasi:io/streams@0.2.12
  /**
  * Run one capability with JSON arguments.
  */
  export function invoke(ctx: CallContext, capability: string, args: string): ToolOutput;
  /**
  * Read one resource (0.6.0): `uri` is one the manifest declares (`[[resource]]`), or one
  * that matches a template it declares (`[[resource_template]]`), and `ctx.upstream` is that
  * entry's `upstream` table. The host has already checked the URI against the manifest and
  * the template's parameters against their schema and the operator's constraints. Its
  * contents are what MCP's `resources/read` answers (each with a URI and text or data).
  */
  export function readResource(ctx: CallContext, uri: string): Array<EmbeddedResource>;
  /**
  * Fill in one prompt the manifest declares (`[[prompt]]`), by its id (0.6.0): `args` is a
  * JSON object of the prompt's arguments (strings), already checked against its declared
  * arguments.
  */
  export function getPrompt(ctx: CallContext, name: string, args: string): Prompt;
  /**
  * Suggest values for an argument of a prompt or a parameter of a resource template (0.6.0):
  * `argument` is its name, `value` what the user typed so far, `context` a JSON object of
  * the values of the arguments already given. An adapter that suggests nothing answers no
  * values.
  */
  export function complete(ctx: CallContext, reference: CompletionRef, argument: string, value: string, context: string): Completion;
  export type Result<T, E> = { tag: 'ok', val: T } | { tag: 'err', val: E };
}
