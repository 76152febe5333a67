// A small fake OpenAI-compatible /chat/completions SSE server on 127.0.0.1 for tests: scripted replies,
// optional per-chunk delays and a gate that holds a stream open until the test releases it.
import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Reply {
  /** `data:` payloads (objects are JSON-encoded); `[DONE]` is appended. */
  chunks: unknown[];
  /** Delay before each chunk, ms. */
  delayMs?: number;
  /** The stream waits for this before its last chunk (the finish_reason one). */
  gate?: Promise<void>;
  /** The stream waits for this before its first chunk. */
  startGate?: Promise<void>;
  status?: number;
  /** An error reply: this JSON body instead of a stream (with `status`). */
  errorBody?: unknown;
}

const base = { id: 'fake-1', object: 'chat.completion.chunk', created: 1764460800, model: 'fake-model' };
const usage = { prompt_tokens: 12, completion_tokens: 3, total_tokens: 15, prompt_cache_hit_tokens: 0, prompt_cache_miss_tokens: 12 };

export function chunk(delta: Record<string, unknown>, finish: string | null = null, withUsage = false): unknown {
  return { ...base, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }], usage: withUsage ? usage : null };
}

export function textReply(pieces: string[] | string, opts: Omit<Reply, 'chunks'> = {}): Reply {
  const ps = typeof pieces === 'string' ? [pieces] : pieces;
  return {
    ...opts,
    chunks: [chunk({ role: 'assistant', content: '' }), ...ps.map((p) => chunk({ content: p })), chunk({ content: '' }, 'stop', true)],
  };
}

export function reasoningReply(reasoning: string, text: string): Reply {
  return {
    chunks: [
      chunk({ role: 'assistant', content: null, reasoning_content: '' }),
      chunk({ content: null, reasoning_content: reasoning }),
      chunk({ content: text, reasoning_content: null }),
      chunk({ content: '' }, 'stop', true),
    ],
  };
}

export function toolReply(calls: Array<{ id: string; name: string; args: unknown }>, text = ''): Reply {
  const chunks: unknown[] = [chunk({ role: 'assistant', content: '' })];
  if (text) chunks.push(chunk({ content: text }));
  calls.forEach((c, index) => {
    chunks.push(chunk({ tool_calls: [{ index, id: c.id, type: 'function', function: { name: c.name, arguments: '' } }] }));
    chunks.push(chunk({ tool_calls: [{ index, function: { arguments: JSON.stringify(c.args) } }] }));
  });
  chunks.push(chunk({ content: '' }, 'tool_calls', true));
  return { chunks };
}

export interface RecordedRequest {
  body: any; disconnected: boolean; authorization?: string;
  /** Date.now() right after each `data:` chunk was written (for latency measurements). */
  writeTimes: number[];
}

export class FakeProvider {
  private server: Server;
  private queue: Reply[] = [];
  readonly requests: RecordedRequest[] = [];
  defaultReply: () => Reply = () => textReply(['Hello', ' there', '!']);
  private waiters: Array<() => void> = [];

  constructor() {
    this.server = createServer((req, res) => void this.handle(req, res));
  }

  async start(port = 0): Promise<string> {
    await new Promise<void>((r) => this.server.listen(port, '127.0.0.1', r));
    return this.baseUrl;
  }

  get baseUrl(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  script(...replies: Reply[]): void { this.queue.push(...replies); }

  /** Resolves once `n` requests in all have arrived. */
  async waitRequests(n: number, timeoutMs = 15000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.requests.length < n) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${n} requests (have ${this.requests.length})`);
      await new Promise<void>((r) => { this.waiters.push(r); setTimeout(r, 50); });
    }
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((r) => this.server.close(() => r()));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let raw = '';
    for await (const c of req) raw += c;
    if (!req.url?.endsWith('/chat/completions')) { res.writeHead(404).end(); return; }
    const rec: RecordedRequest = { body: JSON.parse(raw || '{}'), disconnected: false, authorization: req.headers.authorization, writeTimes: [] };
    this.requests.push(rec);
    for (const w of this.waiters.splice(0)) w();
    res.on('close', () => { if (!res.writableFinished) rec.disconnected = true; });
    const reply = this.queue.shift() ?? this.defaultReply();
    if (reply.errorBody !== undefined) {
      res.writeHead(reply.status ?? 500, { 'content-type': 'application/json' }).end(JSON.stringify(reply.errorBody));
      return;
    }
    res.writeHead(reply.status ?? 200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
    const chunks = reply.chunks;
    if (reply.startGate) await reply.startGate;
    for (let i = 0; i < chunks.length; i++) {
      if (rec.disconnected) return;
      if (i === chunks.length - 1 && reply.gate) await reply.gate;
      if (reply.delayMs) await new Promise((r) => setTimeout(r, reply.delayMs));
      if (rec.disconnected) return;
      const c = chunks[i];
      res.write(`data: ${typeof c === 'string' ? c : JSON.stringify(c)}\n\n`);
      rec.writeTimes.push(Date.now());
    }
    res.end('data: [DONE]\n\n');
  }
}

/** A provider's error reply: `status` with an OpenAI-style `{"error": {...}}` body. */
export function errorReply(status: number, message: string): Reply {
  return { chunks: [], status, errorBody: { error: { message, type: 'server_error', code: null } } };
}

/** A gate a test opens by hand. */
export function gate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((r) => { open = r; });
  return { promise, open };
}
