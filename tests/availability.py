"""
What an application writing to the database saw, read from the log of the availability
test's writer (tests/integration/test_availability.py): one line per write attempt,
``<seq> <epoch-ms> ok|fail <short reason>``, and the longest outage within each
operation's window. Pure functions, no I/O (tests/unit/test_availability_figures.py).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Sequence

_LINE = re.compile(r"^(\d+) (\d+) (ok|fail)(?: (.*))?$")


@dataclasses.dataclass(frozen=True)
class Attempt:
    """One write: its sequence number, when it started (epoch milliseconds, the writer's
    clock), whether the client exited 0 (the row is acknowledged), and what it said."""

    seq: int
    at_ms: int
    ok: bool
    reason: str = ""


@dataclasses.dataclass(frozen=True)
class Window:
    """An operation's stretch of time, from ``start_ms`` (included) to ``end_ms`` (not)."""

    name: str
    start_ms: int
    end_ms: int


def parse(log: str) -> list[Attempt]:
    """The attempts of a writer's log, by sequence number; other lines are skipped."""
    found = []
    for line in log.splitlines():
        match = _LINE.match(line.strip())
        if match is not None:
            found.append(Attempt(int(match[1]), int(match[2]), match[3] == "ok", match[4] or ""))
    return sorted(found, key=lambda a: a.seq)


def acknowledged(attempts: Iterable[Attempt]) -> set[int]:
    """The sequence numbers of the rows the server acknowledged."""
    return {a.seq for a in attempts if a.ok}


def longest_outage(attempts: Sequence[Attempt], start_ms: int, end_ms: int) -> float:
    """
    Seconds of the longest run of failed writes that began in ``[start_ms, end_ms)``: from
    its first failed attempt to the first acknowledged one after it (to its last failed
    attempt if none followed). A run that began earlier belongs to the window it began in,
    and one that began here counts whole even if it outlasts the window. 0.0 when no write
    failed there.
    """
    ordered = sorted(attempts, key=lambda a: a.seq)
    longest = 0
    first: Attempt | None = None  # the first failure of the run under way
    last: Attempt | None = None
    for attempt in ordered:
        if not attempt.ok:
            if first is None:
                first = attempt
            last = attempt
            continue
        if first is not None and start_ms <= first.at_ms < end_ms:
            longest = max(longest, attempt.at_ms - first.at_ms)
        first = last = None
    if first is not None and last is not None and start_ms <= first.at_ms < end_ms:
        longest = max(longest, last.at_ms - first.at_ms)
    return longest / 1000


def figures_line(label: str, attempts: Sequence[Attempt], windows: Sequence[Window]) -> str:
    """``availability <label>: rotation-by-spec 15.2 s, ... (longest run of failed writes
    within each operation's window; 268 writes, 150 failed)``."""
    outages = ", ".join(f"{w.name} {longest_outage(attempts, w.start_ms, w.end_ms):.1f} s" for w in windows)
    failed = sum(1 for a in attempts if not a.ok)
    return (f"availability {label}: {outages} (longest run of failed writes within each operation's "
            f"window; {len(attempts)} writes, {failed} failed)")


def steady(attempts: Sequence[Attempt], since_ms: int, count: int) -> bool:
    """Whether the writer has had ``count`` acknowledged writes in a row, all started at
    ``since_ms`` or later (writing is steady again after an operation)."""
    run = 0
    for attempt in sorted(attempts, key=lambda a: a.seq):
        if attempt.at_ms < since_ms:
            continue
        run = run + 1 if attempt.ok else 0
        if run >= count:
            return True
    return False


_FIGURES = re.compile(r"^availability (?P<label>.+?): (?P<outages>.*) \(longest run of failed writes within"
                      r" each operation's window; (?P<writes>\d+) writes, (?P<failed>\d+) failed\)$")


def read_figures(output: str) -> dict[str, dict[str, object]]:
    """The figures lines (`figures_line`) in a test run's output, by label: each operation's
    longest outage in seconds, and the writes and failed writes (the bench reads them)."""
    found: dict[str, dict[str, object]] = {}
    for line in output.splitlines():
        match = _FIGURES.match(line.strip())
        if match is None:
            continue
        outages = {}
        for part in match["outages"].split(", "):
            name, _, seconds = part.rpartition(" ")[0].rpartition(" ")
            outages[name] = float(seconds)
        found[match["label"]] = {"outage_s": outages, "writes": int(match["writes"]),
                                 "failed": int(match["failed"])}
    return found
