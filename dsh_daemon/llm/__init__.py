"""The DeepSeek / OpenAI-compatible provider (`deepseek.py`) and its configuration (`config.py`)."""

import sys

# httpx imports its command line (click, rich, pygments: ~110 ms) whenever those are installed, and
# `rich` is installed for the chat. No daemon process runs httpx's CLI: None in sys.modules makes that
# one import fail, which httpx's __init__ catches. Set here, before anything of ours imports httpx (the
# provider, or the MCP SDK: both front ends import `llm.config` while they parse options). An already
# imported CLI is left alone.
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
