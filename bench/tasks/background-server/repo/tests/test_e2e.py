"""Needs the dev server running (`python -m app.server`); APP_URL says where (default port 8765)."""

import json
import os
import urllib.request

BASE = os.environ.get("APP_URL", "http://127.0.0.1:8765")


def get(path: str) -> dict[str, object]:
    try:
        with urllib.request.urlopen(BASE + path, timeout=5) as response:
            return json.load(response)
    except OSError as exc:
        raise AssertionError(f"the dev server is not running at {BASE}: start it with `python -m app.server` ({exc})") from exc


def test_health() -> None:
    assert get("/health") == {"ok": True}


def test_pages() -> None:
    first = get("/items?limit=5")
    assert [item["id"] for item in first["items"]] == [1, 2, 3, 4, 5]
    second = get("/items?limit=5&offset=5")
    assert [item["id"] for item in second["items"]] == [6, 7, 8, 9, 10]
    assert first["total"] == 20
