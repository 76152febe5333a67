"""D8: bounded retries of provider failures inside the same turn and step.

At most `max_retries`; backoff `base_s` doubling to `cap_s` with ±`jitter`; a provider `Retry-After`
no longer than the cap replaces the backoff (no jitter); a longer one is not waited for: the normal
backoff applies (a retry that comes early costs one refused request; a long silence would cost the
user a turn that looks hung). Only transient codes are retried; cancellation beats retry.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from dsh_daemon.model.provider import RETRYABLE_CODES, LlmFailure


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 5
    base_s: float = 0.5
    cap_s: float = 10.0
    jitter: float = 0.1
    retryable: frozenset[str] = field(default_factory=lambda: RETRYABLE_CODES)

    def delay(
        self, failure: LlmFailure, retries_so_far: int, rng: random.Random | None = None
    ) -> float | None:
        """Seconds to wait before the next attempt, or None when the failure is terminal."""
        if failure.code not in self.retryable or retries_so_far >= self.max_retries:
            return None
        if failure.retry_after_ms is not None and failure.retry_after_ms / 1000 <= self.cap_s:
            return failure.retry_after_ms / 1000
        backoff = min(self.base_s * (2.0**retries_so_far), self.cap_s)
        spread: float = (rng or random).uniform(-self.jitter, self.jitter)
        return max(0.0, backoff * (1 + spread))
