// Issue 39 item by item, spoken by the official TypeScript ACP SDK's client to two `dsh-daemon acp`
// processes (two chats on one session), every message zod-checked both ways (checked.mjs); run by
// tests/acp/test_ts_sdk.py, which scripts the model and checks what is printed: one JSON line
// {checked, violations, tolerated, seen}.
// The SDK's unstable API: `session/fork` and a prompt answer's `usage` are in it.
import { checked, text, tolerated, unstable as acp, violations, withAgent } from "./checked.mjs";

const cwd = process.env.DSH_WORK;
const a = acp.methods.agent;
const m = acp.methods.client;
const seen = {};

/** A client that records its session updates and allows what it is asked. */
function recorder(updates) {
  return (app) =>
    app
      .onNotification(m.session.update, async ({ params }) => {
        updates.push(params);
      })
      .onRequest(m.session.requestPermission, async ({ params }) => ({
        outcome: { outcome: "selected", optionId: params.options[0].optionId },
      }));
}
const options = (configOptions) => Object.fromEntries(configOptions.map((o) => [o.id, o]));
const current = (configOptions) => Object.fromEntries(configOptions.map((o) => [o.id, o.currentValue]));
const of = (updates, sessionId, kind) =>
  updates.filter((u) => u.sessionId === sessionId && u.update.sessionUpdate === kind).map((u) => u.update);
const chunks = (updates, sessionId) =>
  of(updates, sessionId, "agent_message_chunk").map((u) => u.content.text ?? "").join("");
async function until(predicate, what) {
  for (let i = 0; i < 2000 && !predicate(); i++) await new Promise((resolve) => setTimeout(resolve, 10));
  if (!predicate()) throw new Error(`timed out waiting for ${what}`);
}
/** The index in `wire.lines` of the answer to our prompt whose first text is `first`. */
function answerIndex(wire, first) {
  const id = [...wire.asked].find(([, m]) => m.method === "session/prompt" && m.params.prompt[0]?.text === first)?.[0];
  return wire.lines.findIndex((line) => line.id === id && !line.method);
}

const inA = [];
await withAgent(process.env, recorder(inA), async (agent, wire) => {
  const init = await agent.request(a.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: { fs: { readTextFile: false, writeTextFile: false } },
  });
  seen.image = init.agentCapabilities.promptCapabilities.image; // 7: the models take text only
  seen.forkCapability = init.agentCapabilities.sessionCapabilities.fork !== undefined; // 8
  const created = await agent.request(a.session.new, { cwd, mcpServers: [] });
  const { sessionId } = created;
  const offered = options(created.configOptions);
  // 1: the mode as a select config option; 2: no boolean for a client that did not say it takes them.
  seen.modeOption = [offered.mode.type, offered.mode.category, offered.mode.currentValue];
  seen.thinkingA = [offered.thinking.type, offered.thinking.options.map((o) => o.value)];
  const planned = await agent.request(a.session.setConfigOption, { sessionId, configId: "mode", value: "plan" });
  seen.modeSet = current(planned.configOptions).mode;
  await until(() => of(inA, sessionId, "current_mode_update").length === 1, "the mode update");
  seen.modeUpdates = of(inA, sessionId, "current_mode_update").map((u) => u.currentModeId);
  await agent.request(a.session.setMode, { sessionId, modeId: "accept-edits" });
  await until(
    () => current(of(inA, sessionId, "config_option_update").at(-1)?.configOptions ?? []).mode === "accept-edits",
    "set_mode's config option update",
  );
  seen.modeUpdates.push(of(inA, sessionId, "current_mode_update").at(-1).currentModeId);
  await agent.request(a.session.setConfigOption, { sessionId, configId: "thinking", value: "off" });
  await agent.request(a.session.setConfigOption, { sessionId, configId: "model", value: "deepseek-v4-pro" });

  // 6 and 7: the plan tool's plan (its call kind `think`), and the turn's usage in the answer.
  const plannedTurn = await agent.request(a.session.prompt, { sessionId, prompt: text("plan it") });
  seen.planStop = plannedTurn.stopReason;
  seen.usage = wire.lines[answerIndex(wire, "plan it")].result.usage;
  seen.plans = of(inA, sessionId, "plan").map((u) => u.entries.map((e) => [e.content, e.status]));
  seen.planCallKind = of(inA, sessionId, "tool_call").find((u) => u.title === "Update the plan")?.kind;

  // 3: an idle /queue and /steer run their turn inside the prompt that asked for it.
  for (const [typed, key] of [["/queue hello queued", "queue"], ["/steer look at the tests", "steer"]]) {
    const before = chunks(inA, sessionId).length;
    seen[key] = (await agent.request(a.session.prompt, { sessionId, prompt: text(typed) })).stopReason;
    seen[`${key}Said`] = chunks(inA, sessionId).slice(before);
    const reply = wire.lines.findIndex((l) => l.params?.update?.content?.text === `${key} reply`);
    seen[`${key}Inside`] = reply >= 0 && reply < answerIndex(wire, typed);
  }

  // 4: a command typed after a cancel, behind the re-sent cancelled prompt, is still a command.
  const resent = [...text("plan it"), ...text("/rename Issue 39")];
  seen.resent = (await agent.request(a.session.prompt, { sessionId, prompt: resent })).stopReason;
  await until(() => of(inA, sessionId, "session_info_update").some((u) => u.title === "Issue 39"), "the title");

  // 7: an image is refused in words, never dropped.
  const image = [...text("what is this?"), { type: "image", mimeType: "image/png", data: "iVBORw0KGgo=" }];
  try {
    await agent.request(a.session.prompt, { sessionId, prompt: image });
    seen.imageRefused = null;
  } catch (error) {
    seen.imageRefused = { code: error.code, message: error.message };
  }

  // 8: review findings as tool calls with locations; session/fork.
  seen.review = (await agent.request(a.session.prompt, { sessionId, prompt: text("/review look at math") })).stopReason;
  seen.findings = of(inA, sessionId, "tool_call")
    .filter((u) => u.title.startsWith("error:"))
    .map((u) => ({ kind: u.kind, locations: u.locations }));
  const forked = await agent.request(a.session.fork, { sessionId, cwd, mcpServers: [] });
  seen.forked = forked.sessionId !== sessionId && current(forked.configOptions).model === "deepseek-v4-pro";

  // 9: a chat never prompted does not fill the list, here (where it is open) or in another window.
  const { sessionId: empty } = await agent.request(a.session.new, { cwd, mcpServers: [] });
  const listedInA = (await agent.request(a.session.list, { cwd })).sessions.map((s) => s.sessionId);
  seen.listedInA = { original: listedInA.includes(sessionId), empty: listedInA.includes(empty) };

  // 5 and 9: a second chat (another process, a client that takes booleans) takes the session over.
  const inB = [];
  await withAgent(process.env, recorder(inB), async (other) => {
    await other.request(a.initialize, {
      protocolVersion: acp.PROTOCOL_VERSION,
      clientCapabilities: { session: { configOptions: { boolean: {} } } },
    });
    const listed = (await other.request(a.session.list, { cwd })).sessions.map((s) => s.sessionId);
    seen.listedInB = { original: listed.includes(sessionId), empty: listed.includes(empty) };
    const loaded = await other.request(a.session.load, { sessionId, cwd, mcpServers: [] });
    const settings = current(loaded.configOptions);
    seen.loadedInB = { model: settings.model, thinking: settings.thinking, type: options(loaded.configOptions).thinking.type };
    const shownInA = inA.length;
    seen.fromB = (await other.request(a.session.prompt, { sessionId, prompt: text("from B") })).stopReason;
    await until(() => chunks(inA, sessionId).includes("B answer"), "B's answer in A");
    const later = inA.slice(shownInA).filter((u) => u.sessionId === sessionId).map((u) => u.update);
    const user = later.findIndex((u) => u.sessionUpdate === "user_message_chunk" && u.content.text === "from B");
    const answer = later.findIndex((u) => u.sessionUpdate === "agent_message_chunk" && u.content.text?.includes("B answer"));
    seen.separated = user >= 0 && user < answer; // A shows B's prompt before B's answer
    // B's model choice reaches A's picker while B drives the session.
    await other.request(a.session.setConfigOption, { sessionId, configId: "model", value: "deepseek-v4-flash" });
    await until(
      () => current(of(inA, sessionId, "config_option_update").at(-1).configOptions).model === "deepseek-v4-flash",
      "B's model choice in A",
    );
    // A takes the session back: the choice is the session's, not this process's.
    seen.backInA = (await agent.request(a.session.prompt, { sessionId, prompt: text("back in A") })).stopReason;
    seen.modelInAAfter = current(of(inA, sessionId, "config_option_update").at(-1).configOptions).model;
  }, acp);
}, acp);
process.stdout.write(JSON.stringify({ checked, violations, tolerated: [...new Set(tolerated)], seen }) + "\n");
