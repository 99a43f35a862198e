#!/usr/bin/env node
// A small client built on the official TypeScript SDK (@modelcontextprotocol/sdk), in plain ESM.
// It connects to llmc-mcp over stdio or streamable HTTP, lists the tools, reads the instructions,
// and runs a whole gated reprojection: the miss, one justification per hint, the retry.
// It prints ONE JSON summary on stdout; progress and errors go to stderr. Exit 0 on success.
//
//   node ts_client.mjs --transport stdio --command .venv/bin/llmc-mcp --workspace WS [--classic]
//   node ts_client.mjs --transport http --url http://127.0.0.1:8000/mcp [--classic]
//
// --classic runs the classic-mode flow (raster_reproject / persist_justification, prompts);
// over stdio it also starts the server with --mode classic. Without it the code-mode flow runs
// (00_INIT, read_stubs, execute_code). --src / --dst / --dst-crs / --resampling pick the job.

import { parseArgs } from "node:util";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport, getDefaultEnvironment } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const { values: opts } = parseArgs({
  options: {
    transport: { type: "string", default: "stdio" },
    command: { type: "string", default: "llmc-mcp" },
    workspace: { type: "string" },
    url: { type: "string" },
    classic: { type: "boolean", default: false },
    src: { type: "string", default: "RGB.byte.tif" },
    dst: { type: "string", default: "rgb_4326_ts.tif" },
    "dst-crs": { type: "string", default: "EPSG:4326" },
    resampling: { type: "string", default: "nearest" },
  },
});

const MODE = opts.classic ? "classic" : "code";

function fail(message) {
  process.stderr.write(`ts_client: ${message}\n`);
  process.exit(2);
}

function makeTransport() {
  if (opts.transport === "stdio") {
    const args = ["serve"];
    if (opts.workspace) args.push("--workspace", opts.workspace);
    args.push("--mode", MODE);
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

const textOf = (result) => (result.content ?? []).map((block) => block.text ?? "").join("");

// A valid justification for one hint: choice.method must be the value the hint asks about.
function justificationFor(hint) {
  return {
    intent: "An overlay in geographic coordinates for a web viewer.",
    alternatives: [{ method: "keep the source grid", why_not: "The viewer needs the target grid." }],
    choice: {
      method: Object.values(hint.prompt_args)[0],
      rationale: "It matches the viewer.",
      tradeoffs: "Every pixel is resampled.",
    },
    confidence: "medium",
  };
}

// Python source literal for a JS string: a JSON string literal is a valid Python string literal.
const py = (value) => JSON.stringify(value);

function reprojectCall() {
  return (
    `raster.reproject(${py(opts.src)}, ${py(opts.dst)}, dst_crs=${py(opts["dst-crs"])}, ` +
    `resampling=${py(opts.resampling)})`
  );
}

// A classic error carries its JSON in the text only (no structuredContent); execute_code keeps both.
function errorData(result) {
  if (result.structuredContent) return result.structuredContent;
  try {
    return JSON.parse(textOf(result));
  } catch {
    return {};
  }
}

function missSummary(result) {
  const data = errorData(result);
  const hints = data.reflection_required ?? [];
  return {
    isError: result.isError === true,
    hasStructuredContent: result.structuredContent !== undefined,
    errorType: data.error?.type ?? data.type ?? null,
    domains: hints.map((h) => h.domain),
    hashes: hints.map((h) => h.hash),
    promptTextsPresent: hints.every((h) => typeof h.prompt_text === "string" && h.prompt_text.length > 0),
    nextAction: data.next_action ?? null,
    hints,
  };
}

async function codeFlow(client, summary) {
  const init = await client.callTool({ name: "00_INIT", arguments: {} });
  summary.init = { isError: init.isError === true, text: textOf(init) };
  summary.initMatchesInstructions = textOf(init) === summary.instructions;

  const index = await client.callTool({ name: "read_stubs", arguments: {} });
  const rasterStub = await client.callTool({ name: "read_stubs", arguments: { module: "raster" } });
  summary.readStubs = { index: textOf(index), raster: textOf(rasterStub) };

  const info = await client.callTool({
    name: "execute_code",
    arguments: { code: `info = raster.info(${py(opts.src)})\nprint(info["driver"])\ninfo["width"]` },
  });
  summary.info = info.structuredContent;

  const miss = await client.callTool({ name: "execute_code", arguments: { code: reprojectCall() } });
  summary.miss = missSummary(miss);
  if (!summary.miss.isError || summary.miss.hints.length === 0) fail(`expected a reflection miss: ${textOf(miss)}`);

  // One call: persist every hint, then the same operation again.
  const lines = [`import json`, `hints = json.loads(${py(JSON.stringify(summary.miss.hints))})`, `persisted = []`];
  for (const [i, hint] of summary.miss.hints.entries()) {
    const justification = py(JSON.stringify(justificationFor(hint)));
    lines.push(`persisted.append(reflection.persist(hints[${i}]["hash"], hints[${i}]["domain"], json.loads(${justification})))`);
  }
  lines.push(`out = ${reprojectCall()}`);
  lines.push(`{"crs": out["crs"]["epsg"], "width": out["width"], "height": out["height"], "persisted": len(persisted)}`);
  const retry = await client.callTool({ name: "execute_code", arguments: { code: lines.join("\n") } });
  summary.retry = { isError: retry.isError === true, structured: retry.structuredContent };
  if (retry.isError) fail(`retry failed: ${textOf(retry)}`);

  const check = await client.callTool({
    name: "execute_code",
    arguments: { code: `raster.info(${py(opts.dst)})["crs"]["epsg"]` },
  });
  summary.output = { path: opts.dst, epsg: check.structuredContent?.result ?? null };
}

async function classicFlow(client, summary) {
  const prompts = await client.listPrompts();
  summary.prompts = prompts.prompts.map((p) => p.name).sort();
  const prompt = await client.getPrompt({
    name: "justify_resampling_method",
    arguments: { method: opts.resampling, data: "continuous", purpose: "warping" },
  });
  summary.promptText = prompt.messages.map((m) => m.content.text ?? "").join("");

  const info = await client.callTool({ name: "raster_info", arguments: { path: opts.src } });
  summary.info = info.structuredContent;

  // The SDK validates every successful result against the tool's outputSchema (and throws if it
  // does not conform); an isError result it takes as it is.
  const cheap = {
    raster_stats: { path: opts.src, bands: [1] },
    raster_preview: { path: opts.src, max_size: 32 },
    raster_sample: { path: opts.src, points: [[102000, 2826000]], crs: "EPSG:32618" },
    crs_info: { crs: "EPSG:32618" },
    crs_transform: { points: [[0, 0]], src_crs: "EPSG:4326", dst_crs: "EPSG:3857" },
    files_list: {},
    workflow_list: {},
  };
  summary.conforming = [];
  for (const [name, args] of Object.entries(cheap)) {
    const res = await client.callTool({ name, arguments: args });
    if (res.isError) fail(`${name} failed: ${textOf(res)}`);
    summary.conforming.push(name);
  }
  const badEnum = await client.callTool({
    name: "raster_reproject",
    arguments: { src: opts.src, dst: opts.dst, dst_crs: opts["dst-crs"], resampling: "magic" },
  });
  summary.badEnum = {
    isError: badEnum.isError === true,
    hasStructuredContent: badEnum.structuredContent !== undefined,
    error: errorData(badEnum),
  };

  const job = { src: opts.src, dst: opts.dst, dst_crs: opts["dst-crs"], resampling: opts.resampling };
  const miss = await client.callTool({ name: "raster_reproject", arguments: job });
  summary.miss = missSummary(miss);
  if (!summary.miss.isError || summary.miss.hints.length === 0) fail(`expected a reflection miss: ${textOf(miss)}`);

  summary.persisted = [];
  for (const hint of summary.miss.hints) {
    const res = await client.callTool({
      name: "persist_justification",
      arguments: { hash: hint.hash, domain: hint.domain, justification: justificationFor(hint) },
    });
    if (res.isError) fail(`persist_justification failed: ${textOf(res)}`);
    summary.persisted.push(res.structuredContent);
  }

  const retry = await client.callTool({ name: "raster_reproject", arguments: job });
  summary.retry = { isError: retry.isError === true, structured: retry.structuredContent };
  if (retry.isError) fail(`retry failed: ${textOf(retry)}`);

  const check = await client.callTool({ name: "raster_info", arguments: { path: opts.dst } });
  summary.output = { path: opts.dst, epsg: check.structuredContent?.crs?.epsg ?? null };
}

async function main() {
  const client = new Client({ name: "llmc-ts-client", version: "0.1.0" });
  await client.connect(makeTransport());
  try {
    const summary = {
      transport: opts.transport,
      mode: MODE,
      serverVersion: client.getServerVersion(),
      capabilities: client.getServerCapabilities(),
      instructions: client.getInstructions() ?? null,
    };
    const listed = (await client.listTools()).tools;
    summary.tools = listed.map((t) => t.name).sort();
    summary.withOutputSchema = listed.filter((t) => t.outputSchema).map((t) => t.name).sort();
    await (opts.classic ? classicFlow(client, summary) : codeFlow(client, summary));
    process.stdout.write(`${JSON.stringify(summary)}\n`);
  } finally {
    await client.close();
  }
}

main().catch((err) => fail(err?.stack ?? String(err)));
