"""ACP mode (`dsh-daemon acp`): the Agent Client Protocol v1 front end over the same agent core and
session store as the LSP server. One module per job: `transport` (NDJSON lines), `rpc` (JSON-RPC
dispatch), `handlers` (the methods), `sessions` (wiring sessions to the core), `updates` (dsh events
as `session/update`s), `prompts` (which turn answers which `session/prompt`), `permissions`, `files`
(the client's `fs/*`), `context` (prompt blocks as messages), `options`, `main` (stdio)."""
