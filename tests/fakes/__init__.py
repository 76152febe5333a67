"""Test doubles shared by the test suites (a fake DeepSeek server, ...)."""
