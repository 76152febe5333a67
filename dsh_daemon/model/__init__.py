"""The values every layer shares: JSON values, events, messages, model requests and stream events,
inbox items. A leaf: it imports nothing else of dsh_daemon (tests/test_layers.py checks it)."""
