/// <reference path="./interfaces/gatehouse-plugin-log.d.ts" />
/// <reference path="./interfaces/gatehouse-plugin-types.d.ts" />
/// <reference path="./interfaces/wasi-clocks-monotonic-clock.d.ts" />
/// <reference path="./interfaces/wasi-http-outgoing-handler.d.ts" />
/// <reference path="./interfaces/wasi-http-types.d.ts" />
/// <reference path="./interfaces/wasi-io-error.d.ts" />
/// <reference path="./interfaces/wasi-io-poll.d.ts" />
/// <reference path="./interfaces/wasi-io-streams.d.ts" />
declare module 'gatehouse:plugin/adapter@0.2.0' {
  export type CallContext = import('gatehouse:plugin/types@0.2.0').CallContext;
  export type ToolOutput = import('gatehouse:plugin/types@0.2.0').ToolOutput;
  export type ToolError = import('gatehouse:plugin/types@0.2.0').ToolError;
  export type * as GatehousePluginLog020 from 'gatehouse:plugin/log@0.2.0'; // import gatehouse:plugin/log@0.2.0
  export type * as GatehousePluginTypes020 from 'gatehouse:plugin/types@0.2.0'; // import gatehouse:plugin/types@0.2.0
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
  export type Result<T, E> = { tag: 'ok', val: T } | { tag: 'err', val: E };
}
