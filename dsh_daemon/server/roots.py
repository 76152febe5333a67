"""The workspace roots an editor names at `initialize`, checked before anything uses them.

A `file:` URI with a host part (`file://ws/p`, `file://localhost/p`) names no local directory this
daemon could use: read as a path it becomes `//ws/p`, which no tool root can contain, so the tools'
workspace silently fell back to the daemon's own directory. Such a root is refused in the
`initialize` reply (`-32602`, naming the URI) instead of widening or moving what the tools may touch.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from lsprotocol import types

from dsh_daemon.host import errors


def check_root_uris(params: types.InitializeParams) -> None:
    """Raise `invalid_params` naming the first root or workspace folder URI that is a `file:` URI
    with a host; other schemes are left to the features that read them."""
    uris = [params.root_uri] + [folder.uri for folder in params.workspace_folders or []]
    for uri in uris:
        if not uri:
            continue
        try:
            parts = urlsplit(uri)
        except ValueError as exc:
            raise errors.invalid_params(
                f"initialize: root URI {errors.shown(uri)} is not a URI: {exc}"
            ) from None
        if parts.scheme.lower() == "file" and parts.netloc:
            raise errors.invalid_params(
                f"initialize: root URI {errors.shown(uri)} names host {errors.shown(parts.netloc)}; "
                "only local directories can be workspace roots (file:///path)"
            )
