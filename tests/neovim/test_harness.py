"""Without Neovim the plugin tests skip and say why; under CI they fail instead."""

from __future__ import annotations

import pytest

from tests.neovim import harness


def test_missing_neovim_skips_outside_ci_and_fails_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(harness, "find_nvim", lambda: (None, "nvim is not installed"))
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="nvim is not installed"):
        harness.require_nvim()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=r"run scripts/setup-neovim\.sh"):
        harness.require_nvim()
