// A small stdio MCP server for the import tests, packed by them into npm tarballs with the
// version a test needs: one read-only tool, `echo`. Node's standard library only.
const readline = require("node:readline");

const lines = readline.createInterface({ input: process.stdin });
const send = (message) => process.stdout.write(JSON.stringify({ jsonrpc: "2.0", ...message }) + "\n");

lines.on("line", (line) => {
  const message = JSON.parse(line);
  if (message.id === undefined) {
    return;
  }
  const { id, method, params } = message;
  if (method === "initialize") {
    send({
      id,
      result: {
        protocolVersion: params.protocolVersion,
        capabilities: { tools: {} },
        serverInfo: { name: "echo-server", version: "1.0.0" },
      },
    });
  } else if (method === "tools/list") {
    send({
      id,
      result: {
        tools: [
          {
            name: "echo",
            description: "Says the text back.",
            inputSchema: { type: "object", properties: { text: { type: "string" } } },
            annotations: { readOnlyHint: true },
          },
        ],
      },
    });
  } else if (method === "tools/call") {
    const text = (params.arguments && params.arguments.text) || "";
    send({ id, result: { content: [{ type: "text", text: `echo ${text}` }] } });
  } else if (method === "ping") {
    send({ id, result: {} });
  } else {
    send({ id, error: { code: -32601, message: "no such method" } });
  }
});
