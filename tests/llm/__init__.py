"""Provider adapter tests: SSE, translation, errors, config, the fake server and a real local model."""
