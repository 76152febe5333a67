// A scripted session of the official TypeScript ACP SDK's client against `dsh-daemon acp`
// (tests/acp/test_ts_sdk.py). Every line the agent writes is also checked against the SDK's zod
// schema for what it is (a response by the method it answers, a session/update notification, a
// request to the client by its method); the violations, the messages checked and what the session
// saw are printed as one JSON line on stdout.
import { spawn } from "node:child_process";
import { readFile, writeFile } from "node:fs/promises";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";
// The SDK exports no path to its zod schemas: imported by file.
import * as z from "./node_modules/@agentclientprotocol/sdk/dist/v1/schema/zod.gen.js";

const [command, ...args] = JSON.parse(process.env.DSH_AGENT_COMMAND);
const cwd = process.env.DSH_WORK;
const child = spawn(command, args, { stdio: ["pipe", "pipe", "inherit"], env: process.env });

const RESPONSES = {
  initialize: z.zInitializeResponse,
  authenticate: z.zAuthenticateResponse,
  "session/new": z.zNewSessionResponse,
  "session/load": z.zLoadSessionResponse,
  "session/list": z.zListSessionsResponse,
  "session/close": z.zCloseSessionResponse,
  "session/set_mode": z.zSetSessionModeResponse,
  "session/set_config_option": z.zSetSessionConfigOptionResponse,
  "session/prompt": z.zPromptResponse,
};
const REQUESTS = {
  "session/request_permission": z.zRequestPermissionRequest,
  "terminal/create": z.zCreateTerminalRequest,
  "terminal/output": z.zTerminalOutputRequest,
  "terminal/wait_for_exit": z.zWaitForTerminalExitRequest,
  "terminal/kill": z.zKillTerminalRequest,
  "terminal/release": z.zReleaseTerminalRequest,
  "fs/read_text_file": z.zReadTextFileRequest,
  "fs/write_text_file": z.zWriteTextFileRequest,
};
const asked = new Map(); // our request id -> method (to check the answer)
const violations = [];
let checked = 0;

function check(schema, value, what) {
  checked += 1;
  const result = schema.safeParse(value);
  if (!result.success) violations.push({ what, issues: result.error.issues.slice(0, 3), value });
}

function checkIncoming(message) {
  if (message.method === "session/update") return check(z.zSessionNotification, message.params, "session/update");
  if (message.method && message.id !== undefined && REQUESTS[message.method]) {
    return check(REQUESTS[message.method], message.params, message.method);
  }
  if (message.method) return; // extensions (_dsh/*, $/cancel_request)
  const method = asked.get(message.id);
  if (message.error) return check(z.zError, message.error, `${method} error`);
  if (RESPONSES[method]) check(RESPONSES[method], message.result, `${method} result`);
}

// The agent's stdout: each line checked, then handed to the SDK unchanged.
let pending = "";
let open = true;
const input = new ReadableStream({
  start(controller) {
    child.stdout.on("data", (chunk) => {
      pending += chunk.toString("utf8");
      let newline;
      while ((newline = pending.indexOf("\n")) >= 0) {
        const line = pending.slice(0, newline);
        pending = pending.slice(newline + 1);
        if (line.trim()) checkIncoming(JSON.parse(line));
        if (open) controller.enqueue(new TextEncoder().encode(line + "\n"));
      }
    });
    child.stdout.on("end", () => {
      if (open) controller.close();
      open = false;
    });
  },
  cancel() {
    open = false; // the SDK is done reading: lines are still checked
  },
});
// What the SDK writes: its requests remembered by id, to check their answers.
const output = new WritableStream({
  write(chunk) {
    const text = new TextDecoder().decode(chunk);
    for (const line of text.split("\n")) {
      if (!line.trim()) continue;
      const message = JSON.parse(line);
      if (message.method && message.id !== undefined) asked.set(message.id, message.method);
    }
    return new Promise((resolve) => child.stdin.write(chunk, () => resolve()));
  },
});

const updates = [];
const terminals = new Map();
const permissions = [];
const allowFirst = async ({ params }) => {
  permissions.push({ title: params.toolCall.title, options: params.options.map((o) => o.name) });
  return { outcome: { outcome: "selected", optionId: params.options[0].optionId } };
};
const m = acp.methods.client;
const app = acp
  .client({ name: "dsh-ts-sdk-check" })
  .onNotification(m.session.update, async ({ params }) => {
    updates.push(params.update);
  })
  .onRequest(m.session.requestPermission, allowFirst)
  .onRequest(m.fs.readTextFile, async ({ params }) => ({ content: await readFile(params.path, "utf8") }))
  .onRequest(m.fs.writeTextFile, async ({ params }) => {
    await writeFile(params.path, params.content);
    return {};
  })
  .onRequest(m.terminal.create, async ({ params }) => {
    // As an editor does: really run it.
    const id = `term-${terminals.size + 1}`;
    const proc = spawn(params.command, params.args ?? [], { cwd: params.cwd, stdio: ["ignore", "pipe", "pipe"] });
    const term = { proc, output: "", exit: null };
    term.exited = new Promise((resolve) =>
      proc.on("close", (code, signal) => resolve((term.exit = { exitCode: code, signal }))),
    );
    proc.stdout.on("data", (d) => (term.output += d));
    proc.stderr.on("data", (d) => (term.output += d));
    terminals.set(id, term);
    return { terminalId: id };
  })
  .onRequest(m.terminal.output, async ({ params }) => {
    const term = terminals.get(params.terminalId);
    return { output: term.output, truncated: false, exitStatus: term.exit ?? undefined };
  })
  .onRequest(m.terminal.waitForExit, async ({ params }) => await terminals.get(params.terminalId).exited)
  .onRequest(m.terminal.kill, async ({ params }) => {
    terminals.get(params.terminalId).proc.kill("SIGKILL");
    return {};
  })
  .onRequest(m.terminal.release, async ({ params }) => {
    terminals.get(params.terminalId).proc.kill("SIGKILL");
    return {};
  });

const a = acp.methods.agent;
const seen = {};
await app.connectWith(acp.ndJsonStream(output, input), async (agent) => {
  const init = await agent.request(a.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: { fs: { readTextFile: true, writeTextFile: true }, terminal: true },
  });
  seen.authMethods = init.authMethods.map((method) => method.id);
  await agent.request(a.authenticate, { methodId: "deepseek-api-key" });
  const { sessionId } = await agent.request(a.session.new, { cwd, mcpServers: [] });
  await agent.request(a.session.setMode, { sessionId, modeId: "accept-edits" });
  await agent.request(a.session.setConfigOption, { sessionId, configId: "model", value: "deepseek-v4-pro" });
  const text = (t) => [{ type: "text", text: t }];
  seen.first = (await agent.request(a.session.prompt, { sessionId, prompt: text("run it") })).stopReason;
  seen.command = (await agent.request(a.session.prompt, { sessionId, prompt: text("/rename TS SDK") })).stopReason;
  // A subagent's card (the child's steps, then its summary) and a background process's card, zod-checked.
  seen.delegated = (await agent.request(a.session.prompt, { sessionId, prompt: text("delegate") })).stopReason;
  seen.ps = (await agent.request(a.session.prompt, { sessionId, prompt: text("/ps") })).stopReason;
  if (process.env.DSH_CONFINED === "1") {
    // The sandbox as a config option, then a confined command in this client's terminal (through
    // the attach wrapper) and an escalation's permission request, all zod-checked.
    const set = await agent.request(a.session.setConfigOption, { sessionId, configId: "sandbox", value: "workspace-write" });
    seen.sandbox = set.configOptions.find((o) => o.id === "sandbox").currentValue;
    seen.confined = (await agent.request(a.session.prompt, { sessionId, prompt: text("run it confined") })).stopReason;
    seen.escalated = (await agent.request(a.session.prompt, { sessionId, prompt: text("widen it") })).stopReason;
  }
  const listed = (await agent.request(a.session.list, { cwd })).sessions;
  seen.listed = listed.length;
  seen.children = listed.filter((s) => s._meta?.dsh?.parentId === sessionId).map((s) => s.title);
  await agent.request(a.session.close, { sessionId });
  await agent.request(a.session.load, { sessionId, cwd, mcpServers: [] });
});
seen.permissions = permissions;
seen.kinds = [...new Set(updates.map((u) => u.sessionUpdate))].sort();
const texts = (u) => (Array.isArray(u.content) ? u.content : []).map((c) => c.content?.text ?? "").join("");
const subagentCall = updates.find((u) => u.sessionUpdate === "tool_call" && u.title === "Subagent “ts worker”")?.toolCallId;
seen.subagentCard = updates.filter((u) => subagentCall && u.toolCallId === subagentCall).map(texts);
seen.processCard = updates.filter((u) => u.toolCallId === "process-p1").map((u) => [u.sessionUpdate, u.status, texts(u)]);
seen.terminalContent = updates.some((u) => Array.isArray(u.content) && u.content.some((c) => c.type === "terminal"));
child.stdin.end();
await new Promise((resolve) => child.on("exit", resolve));
process.stdout.write(JSON.stringify({ checked, violations, seen }) + "\n");
