#!/usr/bin/env node
// An agent host on the official MCP TypeScript SDKs (pinned in package.json): the e2e tests drive
// gatehouse with it the way an agent host calls a tool, with a name and arguments.
//
// usage: node agent.mjs URL VERSION TOOL [JSON_ARGS] [options]
//   VERSION  2025-11-25 (an `initialize` handshake) or 2026-07-28 (@modelcontextprotocol/client
//            only, pinned to it through `server/discover`)
//
// It prints one JSON object per line, as agent.py does: elicitation, notification, task,
// result, error.
//
// options:
//   --sdk v1|v2        v1: @modelcontextprotocol/sdk 1.32.2 (2025-11-25 only); v2 (default):
//                      @modelcontextprotocol/client 2.4.0
//   --token T          send `Authorization: Bearer T`
//   --action A         the elicitation handler's answer: accept (default), decline or cancel
//   --approve BOOL     what an accepted consent form answers (default true)
//   --answer TEXT      what an accepted form answers instead: `{"answer": TEXT}` (a question
//                      an A2A agent asked through the gateway)
//   --task-ttl MS      2025-11-25: a task-augmented call (v1: experimental.tasks.callToolStream;
//                      v2: tools/call with params.task, then tasks/get and tasks/result)
//   --task-create      with --task-ttl: print the new task and stop
//   --task-get ID      poll task ID to its end, then tasks/result (2025-11-25)
//   --task-cancel ID   cancel task ID (2025-11-25)
//   --timeout MS       each request's timeout (default 120000)
//   --linger MS        keep the session open MS after the call before closing it, as an agent
//                      host goes on with its session after a request timed out (the SDK's
//                      `notifications/cancelled` for it is then sent, not cut off by the close)
//   --progress         ask for the call's progress; print each notification (`progress`)
//   --log-level L      2025-11-25: `logging/setLevel` L first; print each log line (`log`)
import process from 'node:process';

const argv = process.argv.slice(2);
const option = (name, fallback) => {
    const i = argv.indexOf(name);
    if (i < 0) return fallback;
    const value = argv[i + 1];
    argv.splice(i, 2);
    return value;
};
const flag = name => {
    const i = argv.indexOf(name);
    if (i < 0) return false;
    argv.splice(i, 1);
    return true;
};
const sdk = option('--sdk', 'v2');
const token = option('--token');
const action = option('--action', 'accept');
const approve = option('--approve', 'true') === 'true';
const answer = option('--answer');
const taskTtl = option('--task-ttl');
const taskCreate = flag('--task-create');
const taskGet = option('--task-get');
const taskCancel = option('--task-cancel');
const timeout = Number(option('--timeout', '120000'));
const linger = Number(option('--linger', '0'));
const progress = flag('--progress');
const logLevel = option('--log-level');
const [url, version, tool, argsJson = '{}'] = argv;
if (!url || !version || !tool) {
    console.error('usage: agent.mjs URL 2025-11-25|2026-07-28 TOOL [JSON_ARGS] [options]');
    process.exit(2);
}
const args = JSON.parse(argsJson);
const emit = (event, fields) => console.log(JSON.stringify({ event, ...fields }));
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));
const requestInit = token ? { headers: { Authorization: `Bearer ${token}` } } : undefined;

async function onElicit(request, context) {
    const params = request.params;
    emit('elicitation', { key: String(context?.mcpReq?.id ?? context?.requestId ?? ''), params });
    if (params.mode === 'url' || action !== 'accept') return { action };
    return { action, content: answer === undefined ? { approve } : { answer } };
}

async function connect() {
    if (sdk === 'v1') {
        if (version !== '2025-11-25') throw new Error('@modelcontextprotocol/sdk 1.32.2 speaks 2025-11-25 at most');
        const m = await import('@modelcontextprotocol/sdk/client/index.js');
        const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
        const types = await import('@modelcontextprotocol/sdk/types.js');
        const client = new m.Client({ name: 'gatehouse-e2e-ts-v1', version: '1' }, { capabilities: { elicitation: { form: {}, url: {} } } });
        client.setRequestHandler(types.ElicitRequestSchema, onElicit);
        client.setNotificationHandler(types.ElicitationCompleteNotificationSchema, message => emit('notification', { message }));
        await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit }));
        return { client, types };
    }
    const types = await import('@modelcontextprotocol/client');
    const versionNegotiation = version === '2026-07-28' ? { mode: { pin: '2026-07-28' } } : undefined;
    const client = new types.Client(
        { name: 'gatehouse-e2e-ts-v2', version: '1' },
        { capabilities: { elicitation: { form: {}, url: {} } }, versionNegotiation }
    );
    client.setRequestHandler('elicitation/create', onElicit);
    client.setNotificationHandler('notifications/elicitation/complete', message => emit('notification', { message }));
    await client.connect(new types.StreamableHTTPClientTransport(new URL(url), { requestInit }), { timeout });
    return { client, types };
}

// 2025-11-25 tasks, through each SDK's own request API.
async function request(client, types, method, params, schema) {
    if (sdk === 'v1') return client.request({ method, params }, schema, { timeout });
    return client.request({ method, params }, schema, { timeout });
}

async function pollTask(client, types, taskId) {
    const schemas = sdk === 'v1' ? types : types.specTypeSchemas;
    const getSchema = sdk === 'v1' ? types.GetTaskResultSchema : schemas.GetTaskResult;
    const resultSchema = sdk === 'v1' ? types.CallToolResultSchema : schemas.CallToolResult;
    for (;;) {
        const task = await request(client, types, 'tasks/get', { taskId }, getSchema);
        emit('task', { task });
        if (['completed', 'failed', 'cancelled', 'input_required'].includes(task.status)) break;
        await sleep(task.pollInterval ?? 1000);
    }
    return request(client, types, 'tasks/result', { taskId }, resultSchema);
}

async function run() {
    const { client, types } = await connect();
    try {
        let result;
        if (taskGet) {
            result = await pollTask(client, types, taskGet);
        } else if (taskCancel) {
            const schema = sdk === 'v1' ? types.CancelTaskResultSchema : types.specTypeSchemas.CancelTaskResult;
            const answer = await request(client, types, 'tasks/cancel', { taskId: taskCancel }, schema);
            emit('cancelled', { answer });
            return 0;
        } else if (taskTtl !== undefined && sdk === 'v1' && !taskCreate) {
            const stream = client.experimental.tasks.callToolStream({ name: tool, arguments: args }, types.CallToolResultSchema, {
                task: { ttl: Number(taskTtl) },
                timeout
            });
            for await (const message of stream) {
                if (message.type === 'taskCreated' || message.type === 'taskStatus') emit('task', { task: message.task });
                if (message.type === 'result') result = message.result;
                if (message.type === 'error') throw message.error;
            }
        } else if (taskTtl !== undefined) {
            const schema = sdk === 'v1' ? types.CreateTaskResultSchema : types.specTypeSchemas.CreateTaskResult;
            const created = await request(client, types, 'tools/call', { name: tool, arguments: args, task: { ttl: Number(taskTtl) } }, schema);
            emit('task', { task: created.task });
            if (taskCreate) return 0;
            result = await pollTask(client, types, created.task.taskId);
        } else {
            const options = { timeout, ...(progress ? { onprogress: p => emit('progress', { progress: p }) } : {}) };
            if (logLevel) {
                client.setNotificationHandler(sdk === 'v1' ? types.LoggingMessageNotificationSchema : 'notifications/message',
                    message => emit('log', { params: message.params }));
                await client.setLoggingLevel(logLevel);
            }
            result = sdk === 'v1'
                ? await client.callTool({ name: tool, arguments: args }, undefined, options)
                : await client.callTool({ name: tool, arguments: args }, options);
        }
        emit('result', { result });
        return 0;
    } catch (error) {
        const elicitations = error?.elicitations;
        emit('error', { code: error?.code, message: error?.message, data: error?.data, elicitations });
        return 1;
    } finally {
        await sleep(linger);
        await client.close().catch(() => {});
    }
}

let code = 1;
try {
    code = await run();
} catch (error) {
    emit('error', { code: error?.code, message: String(error?.message ?? error), data: error?.data });
}
process.exit(code);
