"""MCP servers as tools: configuration (`config`), the client and its lifecycle (`client`), the tool
adapter (`tools`). Importing this package or `config` loads nothing of the `mcp` SDK: the server
parses `mcpServers` while answering `initialize`, which must stay fast; the SDK is imported when a
session first starts a server."""
