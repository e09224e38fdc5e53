"""What the ``graphfix`` command found at start-up, before its heavy imports: the standard
streams that were closed (``>&-``), which it gave the null device so that nothing fails on
them. A command whose result is what it prints says it cannot print it there."""

from __future__ import annotations

CLOSED: set[str] = set()  # "stdin", "stdout", "stderr"
