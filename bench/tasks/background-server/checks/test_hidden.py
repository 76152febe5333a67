"""Hidden checks: a server of our own (on a free port) pages right, and the repository's e2e test passes
against it."""

import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    server = subprocess.Popen(
        [sys.executable, "-m", "app.server", "--port", "0"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        assert line.startswith("listening on "), line
        yield line.split()[-1]
    finally:
        server.terminate()
        server.wait(10)


def ids(base_url: str, query: str) -> list[int]:
    with urllib.request.urlopen(f"{base_url}/items?{query}", timeout=5) as response:
        return [item["id"] for item in json.load(response)["items"]]


def test_pages(base_url: str) -> None:
    assert ids(base_url, "limit=3") == [1, 2, 3]
    assert ids(base_url, "limit=4&offset=18") == [19, 20]
    assert ids(base_url, "limit=1&offset=7") == [8]
    assert len(ids(base_url, "")) == 10


def test_the_e2e_test_passes(base_url: str) -> None:
    env = {**os.environ, "APP_URL": base_url, "NO_PROXY": "127.0.0.1,localhost"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_e2e.py"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout[-2000:]
