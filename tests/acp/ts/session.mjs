// A scripted session of the official TypeScript ACP SDK's client against `dsh-daemon acp`
// (tests/acp/test_ts_sdk.py), every message on the wire zod-checked both ways (checked.mjs); the
// violations, the messages checked and what the session saw are printed as one JSON line on stdout.
import { spawn } from "node:child_process";
import { readFile, writeFile } from "node:fs/promises";
import { acp, checked, tolerated, violations, withAgent } from "./checked.mjs";

const cwd = process.env.DSH_WORK;
const updates = [];
const terminals = new Map();
const permissions = [];
const allowFirst = async ({ params }) => {
  permissions.push({ title: params.toolCall.title, options: params.options.map((o) => o.name) });
  return { outcome: { outcome: "selected", optionId: params.options[0].optionId } };
};
const m = acp.methods.client;
const build = (app) => app
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
await withAgent(process.env, build, async (agent) => {
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
process.stdout.write(JSON.stringify({ checked, violations, tolerated: [...new Set(tolerated)], seen }) + "\n");
