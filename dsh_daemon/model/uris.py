"""Whether a client's URI can be taken apart: a module of its own because the LSP read loop checks
URIs before `initialize` is answered, without loading the wire's codec (issue 20)."""

from __future__ import annotations

from urllib.parse import urlsplit


def uri_problem(value: str) -> str | None:
    """Why `value` is no URI this daemon can take apart (None: it is one). A client's URI is split
    wherever it is used (a path, a fragment); one `urlsplit` refuses (`file://[x/a.py`: an unclosed
    IPv6 host) must be the client's mistake where it arrives, not a daemon fault later."""
    try:
        urlsplit(value)
    except ValueError as exc:
        return f"is not a URI ({exc})"
    return None
