"""What the LSP front end knows at start (pygls-free: read before the LSP machinery is imported)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

INIT_OPTIONS = "initializationOptions"  # how option errors name what they came in


@dataclass
class Settings:
    """Everything the daemon knows at start; `initializationOptions` refine it."""

    state_dir: Path
    flags: Mapping[str, Any] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
