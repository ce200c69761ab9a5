"""A wrapper that counts the calls of the function it stands in for (the reference tests ask how
often the float64 reference, the other-shape search or the whole reference ran)."""

from __future__ import annotations


class Spy:
    def __init__(self, fn):
        self.fn, self.calls = fn, 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return self.fn(*args, **kwargs)
