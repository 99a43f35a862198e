#!/usr/bin/env node
// MCP tasks (the 2025-11-25 revision) through the official TypeScript SDK's experimental API:
// client.experimental.tasks.callToolStream, getTask, listTasks. It connects to llmc-mcp (classic
// mode) over stdio or streamable HTTP, calls a long tool once directly and once as a task, and
// prints ONE JSON summary on stdout; progress and errors go to stderr. Exit 0 unless it could not run.
//
//   node ts_tasks_client.mjs --transport stdio --command .venv/bin/llmc-mcp --workspace WS \
//       --server-arg=--exec-timeout --server-arg=0.3 --tool terrain_slope --args '{"dem": ...}'
//   node ts_tasks_client.mjs --transport http --url http://127.0.0.1:8000/mcp --tool ... --args ...
//
// --direct-args, if given, are the arguments of the direct (non-task) call made first.

import { parseArgs } from "node:util";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport, getDefaultEnvironment } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const { values: opts } = parseArgs({
  options: {
    transport: { type: "string", default: "stdio" },
    command: { type: "string", default: "llmc-mcp" },
    workspace: { type: "string" },
    "server-arg": { type: "string", multiple: true, default: [] },
    url: { type: "string" },
    tool: { type: "string", default: "terrain_slope" },
    args: { type: "string", default: "{}" },
    "direct-args": { type: "string" },
  },
});

function fail(message) {
  process.stderr.write(`ts_tasks_client: ${message}\n`);
  process.exit(2);
}

function makeTransport() {
  if (opts.transport === "stdio") {
    const args = ["serve", "--mode", "classic"];
    if (opts.workspace) args.push("--workspace", opts.workspace);
    args.push(...opts["server-arg"]);
    // The SDK passes a server only a few variables (HOME, PATH...); llmc-mcp's own, such as the
    // folder for its state, are passed on as a host's configuration would give them.
    const own = Object.fromEntries(Object.entries(process.env).filter(([k]) => k.startsWith("LLMC_MCP_")));
    const env = { ...getDefaultEnvironment(), ...own };
    return new StdioClientTransport({ command: opts.command, args, env, stderr: "inherit" });
  }
  if (opts.transport === "http") {
    if (!opts.url) fail("--transport http needs --url");
    return new StreamableHTTPClientTransport(new URL(opts.url));
  }
  return fail(`unknown transport ${opts.transport}`);
}

const textOf = (result) => (result?.content ?? []).map((block) => block.text ?? "").join("");
const errorOf = (error) => ({ code: error?.code ?? null, message: String(error?.message ?? error) });

const client = new Client({ name: "llmc-mcp-ts-tasks", version: "0.0.0" });
await client.connect(makeTransport());
const summary = {
  transport: opts.transport,
  protocolVersion: client.transport?.protocolVersion ?? null,
  serverTasks: client.getServerCapabilities()?.tasks ?? null,
};
try {
  const { tools } = await client.listTools();
  const tool = tools.find((t) => t.name === opts.tool);
  summary.execution = tool?.execution ?? null;
  summary.isToolTask = client.isToolTask(opts.tool);

  if (opts["direct-args"]) {
    const direct = await client.callTool({ name: opts.tool, arguments: JSON.parse(opts["direct-args"]) });
    summary.direct = { isError: direct.isError === true, text: textOf(direct).slice(0, 600) };
  }

  // The task: callToolStream puts `task: {ttl}` on tools/call (the tool is listed with
  // taskSupport), polls tasks/get every pollInterval and fetches tasks/result once it completed.
  const events = [];
  const stream = client.experimental.tasks.callToolStream(
    { name: opts.tool, arguments: JSON.parse(opts.args) },
    undefined,
    { task: { ttl: 600000 } },
  );
  for await (const message of stream) {
    if (message.type === "taskCreated" || message.type === "taskStatus") {
      events.push({ type: message.type, task: message.task });
    } else if (message.type === "result") {
      const result = message.result;
      events.push({ type: "result" });
      summary.result = {
        isError: result.isError === true,
        structured: result.structuredContent ?? null,
        meta: result._meta ?? null,
        text: textOf(result).slice(0, 600),
      };
    } else {
      events.push({ type: message.type, error: errorOf(message.error) });
    }
  }
  summary.events = events;
  const taskId = events.find((e) => e.type === "taskCreated")?.task.taskId;
  if (taskId) {
    summary.getTask = await client.experimental.tasks.getTask(taskId);
    const listed = await client.experimental.tasks.listTasks();
    summary.listed = listed.tasks.map((t) => ({ taskId: t.taskId, status: t.status }));
  }
} catch (error) {
  summary.exception = errorOf(error);
} finally {
  await client.close();
}
process.stdout.write(`${JSON.stringify(summary)}\n`);
process.exit(0);
