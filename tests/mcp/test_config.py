"""`mcpServers` parsing: both shapes, every source, errors that name the key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dsh_daemon.host.options import OptionsError, parse_options
from dsh_daemon.mcp.config import (
    HttpServer,
    McpConfigError,
    StdioServer,
    load_file_servers,
    merge,
    parse_acp_servers,
    parse_servers,
)
from dsh_daemon.mcp.tools import MAX_TOOL_NAME, tool_name


def test_object_shape() -> None:
    servers = parse_servers(
        {
            "files": {"command": "npx", "args": ["-y", "srv"], "env": {"K": "v"}, "cwd": "/p"},
            "docs": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer x"}},
            "typed": {"type": "http", "url": "http://localhost:1/mcp", "startupTimeoutS": 5},
            "gone": None,
        }
    )
    assert servers["files"] == StdioServer("files", "npx", ("-y", "srv"), (("K", "v"),), "/p")
    assert servers["docs"] == HttpServer("docs", "https://example.com/mcp", (("Authorization", "Bearer x"),))
    assert servers["typed"] == HttpServer("typed", "http://localhost:1/mcp", (), 5.0)
    assert servers["gone"] is None


@pytest.mark.parametrize(
    ("raw", "named"),
    [
        ([], "mcpServers must be an object"),
        ({"x": 5}, "mcpServers.x must be an object"),
        ({"x": {"command": ""}}, "mcpServers.x.command"),
        ({"x": {"command": "a", "args": "b"}}, "mcpServers.x.args"),
        ({"x": {"command": "a", "env": {"K": 1}}}, "mcpServers.x.env"),
        ({"x": {"command": "a", "bogus": 1}}, "unknown settings ['bogus']"),
        ({"x": {"url": "ftp://h"}}, "mcpServers.x.url"),
        ({"x": {"type": "sse", "url": "http://h"}}, "sse transport is not supported"),
        ({"x": {"command": "a", "startupTimeoutS": 0}}, "mcpServers.x.startupTimeoutS"),
        ({"": {"command": "a"}}, "server name"),
    ],
)
def test_object_shape_errors_name_the_key(raw: object, named: str) -> None:
    with pytest.raises(McpConfigError, match=None) as info:
        parse_servers(raw)
    assert named in str(info.value)


def test_acp_list_shape() -> None:
    servers = parse_acp_servers(
        [
            {"name": "fs", "command": "/bin/srv", "args": ["--x"], "env": [{"name": "A", "value": "1"}]},
            {"type": "http", "name": "web", "url": "https://h/mcp", "headers": [{"name": "H", "value": "v"}]},
        ]
    )
    assert servers == {
        "fs": StdioServer("fs", "/bin/srv", ("--x",), (("A", "1"),)),
        "web": HttpServer("web", "https://h/mcp", (("H", "v"),)),
    }
    with pytest.raises(McpConfigError, match=r"mcpServers\[0\].type 'sse' is not supported"):
        parse_acp_servers([{"type": "sse", "name": "s", "url": "https://h", "headers": []}])
    with pytest.raises(McpConfigError, match=r"mcpServers\[0\].env"):
        parse_acp_servers([{"name": "s", "command": "c", "args": [], "env": {"A": "1"}}])


def test_names_become_safe_keys_and_tool_names() -> None:
    (key,) = parse_servers({"My Server.v2": {"command": "c"}})
    assert key == "My_Server_v2"
    assert tool_name("files", "read.file") == "mcp__files__read_file"
    long = tool_name("s" * 30, "t" * 80)
    assert len(long) == MAX_TOOL_NAME and long.startswith("mcp__" + "s" * 30 + "__t")
    assert long != tool_name("s" * 30, "t" * 79 + "u")  # cut names keep apart


def test_sources_merge_by_name_and_null_removes(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(
        json.dumps({"provider": {}, "mcpServers": {"a": {"command": "x"}, "b": {"command": "y"}}})
    )
    merged = merge(load_file_servers(tmp_path), parse_servers({"b": None, "c": {"url": "http://h"}}))
    assert sorted(merged) == ["a", "c"]
    assert load_file_servers(tmp_path / "none") == {}


def test_initialize_refuses_a_bad_value_naming_the_key(tmp_path: Path) -> None:
    options = parse_options(
        tmp_path, {}, {}, {"mcpServers": {"fix": {"command": "srv"}}}, what="initializationOptions"
    )
    assert options.mcp_servers == {"fix": StdioServer("fix", "srv")}
    assert options.provider.model  # mcpServers is not taken for a provider key
    with pytest.raises(OptionsError) as info:
        parse_options(tmp_path, {}, {}, {"mcpServers": {"fix": {"args": []}}}, what="initializationOptions")
    assert "mcpServers.fix.command" in str(info.value)
    # a bad server in config.json is left out and reported (issue 18 item 11), the good one kept
    (tmp_path / "config.json").write_text(
        json.dumps({"mcpServers": {"bad": {"url": 5}, "ok": {"command": "s"}}})
    )
    options = parse_options(tmp_path, {}, {}, {}, what="initializationOptions")
    assert list(options.mcp_servers) == ["ok"]
    (problem,) = options.file_problems
    assert "mcpServers.bad.url" in problem and problem.endswith("ignored")


def test_tool_timeout_and_message_cap() -> None:
    servers = parse_servers(
        {
            "s": {"command": "srv", "toolTimeoutS": 2.5, "maxMessageBytes": 4096},
            "h": {"url": "https://example.com/mcp", "toolTimeoutS": 9},
            "d": {"command": "srv"},
        }
    )
    s, h, d = servers["s"], servers["h"], servers["d"]
    assert isinstance(s, StdioServer) and (s.tool_timeout_s, s.max_message_bytes) == (2.5, 4096)
    assert isinstance(h, HttpServer) and h.tool_timeout_s == 9.0
    assert isinstance(d, StdioServer) and (d.tool_timeout_s, d.max_message_bytes) == (300.0, 16 * 1024 * 1024)
    for bad, named in (
        ({"command": "srv", "maxMessageBytes": 10}, "maxMessageBytes"),
        ({"command": "srv", "maxMessageBytes": 1.5e6}, "maxMessageBytes"),
        ({"command": "srv", "toolTimeoutS": 0}, "toolTimeoutS"),
        ({"url": "https://x/mcp", "maxMessageBytes": 4096}, "maxMessageBytes"),
    ):
        with pytest.raises(McpConfigError, match=named):
            parse_servers({"x": bad})
