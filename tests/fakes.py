"""Stand-ins shared by tests: a clock the test sets by hand."""

from __future__ import annotations


class FakeClock:
    """A clock that reads `now` until the test moves it (`clock.now += 2.0`)."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now
