// `dsh-daemon acp` as a child process, spoken to by the official TypeScript ACP SDK's client, with
// every message on the wire checked both ways against the SDK's zod schemas (its unstable set, a
// superset of the stable one that also has `usage`, `session/fork`, …):
// - what the agent writes: a response by the method it answers, a session/update notification, a
//   request to the client by its method;
// - what the client writes: its requests by method, its answers to the agent's requests.
// A check is lossless: the message must parse, and parsing must keep every field that was sent (zod
// drops unknown keys and replaces a bad optional field by its default without a word, as a client
// built on the SDK then does).
import { spawn } from "node:child_process";
import * as acp from "@agentclientprotocol/sdk";
// Its unstable API: the stable one has no `session/fork` method and no `usage` in a prompt's answer.
import * as unstable from "@agentclientprotocol/sdk/unstable";
// The SDK exports no path to its zod schemas: imported by file.
import * as z from "./node_modules/@agentclientprotocol/sdk/dist/v1/unstable/schema/zod.gen.js";

export { acp, unstable, z };

const AGENT_RESPONSES = {
  initialize: z.zInitializeResponse,
  authenticate: z.zAuthenticateResponse,
  "session/new": z.zNewSessionResponse,
  "session/load": z.zLoadSessionResponse,
  "session/resume": z.zResumeSessionResponse,
  "session/fork": z.zForkSessionResponse,
  "session/list": z.zListSessionsResponse,
  "session/close": z.zCloseSessionResponse,
  "session/delete": z.zDeleteSessionResponse,
  "session/set_mode": z.zSetSessionModeResponse,
  "session/set_config_option": z.zSetSessionConfigOptionResponse,
  "session/prompt": z.zPromptResponse,
};
const AGENT_REQUESTS = {
  "session/request_permission": z.zRequestPermissionRequest,
  "terminal/create": z.zCreateTerminalRequest,
  "terminal/output": z.zTerminalOutputRequest,
  "terminal/wait_for_exit": z.zWaitForTerminalExitRequest,
  "terminal/kill": z.zKillTerminalRequest,
  "terminal/release": z.zReleaseTerminalRequest,
  "fs/read_text_file": z.zReadTextFileRequest,
  "fs/write_text_file": z.zWriteTextFileRequest,
};
const CLIENT_REQUESTS = {
  initialize: z.zInitializeRequest,
  authenticate: z.zAuthenticateRequest,
  "session/new": z.zNewSessionRequest,
  "session/load": z.zLoadSessionRequest,
  "session/resume": z.zResumeSessionRequest,
  "session/fork": z.zForkSessionRequest,
  "session/list": z.zListSessionsRequest,
  "session/close": z.zCloseSessionRequest,
  "session/set_mode": z.zSetSessionModeRequest,
  "session/set_config_option": z.zSetSessionConfigOptionRequest,
  "session/prompt": z.zPromptRequest,
  "session/cancel": z.zCancelNotification,
};
const CLIENT_RESPONSES = {
  "session/request_permission": z.zRequestPermissionResponse,
  "terminal/create": z.zCreateTerminalResponse,
  "terminal/output": z.zTerminalOutputResponse,
  "terminal/wait_for_exit": z.zWaitForTerminalExitResponse,
  "terminal/kill": z.zKillTerminalResponse,
  "terminal/release": z.zReleaseTerminalResponse,
  "fs/read_text_file": z.zReadTextFileResponse,
  "fs/write_text_file": z.zWriteTextFileResponse,
};

// What SDK 2.4.0 reads otherwise, knowingly: ACP's environment-variable auth method (`type:
// "env_var"`, `vars`, `link`; the Python SDK's schema has it) is newer than this SDK's schema, which
// reads it as an agent-handled method: such a client then calls `authenticate`, which is answered.
const TOLERATED = [{ what: "initialize result", path: /^\.authMethods\[\d+\]\.(type|vars|link)$/ }];

export const violations = [];
export const tolerated = [];
export let checked = 0;

/** The paths of what `sent` has and `kept` (zod's reading of it) does not, or has otherwise. */
function lostFields(sent, kept, path = "") {
  if (Array.isArray(sent)) {
    if (!Array.isArray(kept) || kept.length !== sent.length) return [path || "."];
    return sent.flatMap((item, index) => lostFields(item, kept[index], `${path}[${index}]`));
  }
  if (sent !== null && typeof sent === "object") {
    if (kept === null || typeof kept !== "object") return [path || "."];
    return Object.entries(sent).flatMap(([key, value]) => {
      if (!(key in kept)) return value === null ? [] : [`${path}.${key}`];
      return lostFields(value, kept[key], `${path}.${key}`);
    });
  }
  return sent === kept ? [] : [`${path} (${JSON.stringify(sent)} read as ${JSON.stringify(kept)})`];
}

function check(schema, value, what) {
  checked += 1;
  const result = schema.safeParse(value);
  if (!result.success) return violations.push({ what, issues: result.error.issues.slice(0, 3), value });
  const lost = lostFields(value, result.data);
  const known = (path) => TOLERATED.some((t) => t.what === what && t.path.test(path));
  tolerated.push(...lost.filter(known).map((path) => `${what}: ${path}`));
  if (lost.some((path) => !known(path))) violations.push({ what, lost: lost.filter((p) => !known(p)), value });
}

/**
 * Spawns the agent (DSH_AGENT_COMMAND) with `env`, hands the client `build(app)` returns (of `sdk`: the
 * stable API, or `unstable`) a
 * checked stream to it, runs `body(agent, wire)` and ends the agent. `wire.results` maps our
 * request ids to the agent's raw answers, `wire.asked` to our requests (method, params); `wire.lines`
 * holds every line the agent wrote.
 */
export async function withAgent(env, build, body, sdk = acp) {
  const [command, ...args] = JSON.parse(env.DSH_AGENT_COMMAND);
  const child = spawn(command, args, { stdio: ["pipe", "pipe", "inherit"], env });
  const ourRequests = new Map(); // our request id -> method (to check its answer)
  const theirRequests = new Map(); // the agent's request id -> method (to check our answer)
  const wire = { lines: [], results: new Map(), asked: new Map() };

  const trace = process.env.DSH_TS_TRACE ? (who, m) => process.stderr.write(`${who} ${JSON.stringify(m).slice(0, 400)}\n`) : () => {};
  function checkFromAgent(message) {
    trace("<-", message);
    wire.lines.push(message);
    if (message.method === "session/update") return check(z.zSessionNotification, message.params, "session/update");
    if (message.method && message.id !== undefined) {
      theirRequests.set(message.id, message.method);
      if (AGENT_REQUESTS[message.method]) check(AGENT_REQUESTS[message.method], message.params, message.method);
      return;
    }
    if (message.method) return; // extensions (_dsh/*, $/cancel_request)
    const method = ourRequests.get(message.id);
    wire.results.set(message.id, message);
    if (message.error) return check(z.zError, message.error, `${method} error`);
    if (AGENT_RESPONSES[method]) check(AGENT_RESPONSES[method], message.result, `${method} result`);
  }

  function checkFromClient(message) {
    trace("->", message);
    if (message.method) {
      if (message.id !== undefined) {
        ourRequests.set(message.id, message.method);
        wire.asked.set(message.id, { method: message.method, params: message.params });
      }
      const schema = CLIENT_REQUESTS[message.method];
      if (schema) check(schema, message.params, `client ${message.method}`);
      return;
    }
    const method = theirRequests.get(message.id);
    if (message.result !== undefined && CLIENT_RESPONSES[method]) {
      check(CLIENT_RESPONSES[method], message.result, `client ${method} result`);
    }
  }

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
          if (line.trim()) checkFromAgent(JSON.parse(line));
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
  const output = new WritableStream({
    write(chunk) {
      const text = new TextDecoder().decode(chunk);
      for (const line of text.split("\n")) if (line.trim()) checkFromClient(JSON.parse(line));
      return new Promise((resolve) => child.stdin.write(chunk, () => resolve()));
    },
  });
  const app = build(sdk.client({ name: "dsh-ts-sdk-check" }));
  let result;
  await app.connectWith(sdk.ndJsonStream(output, input), async (agent) => {
    result = await body(agent, wire);
  });
  child.stdin.end();
  await new Promise((resolve) => (child.exitCode !== null ? resolve() : child.on("exit", resolve)));
  return result;
}

/** The text of a prompt, as a client sends it. */
export const text = (t) => [{ type: "text", text: t }];
