"""Hosting agents on sessions: the session manager wires a durable log to an agent. Front ends (the
LSP server, ACP mode, the benches) build on it; it knows neither of them."""
