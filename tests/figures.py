"""The suite's figures: what the fault, bad-input, leak-scan and backup tests survived and
checked in this run, summed here and printed by tests/conftest.py as the run's last line; and
lines of figures a test measured (the availability test's outages), printed before it."""

from __future__ import annotations

from collections import Counter

ORDER = (
    "operator kills survived",
    "server kills survived",
    "API server freezes survived",
    "full backup volumes survived",
    "objects converged",
    "rows checked",
    "bad inputs refused",
    "bad inputs reconciled",
    "leak scans",
    "leaks found",
    "backups verified",
    "bad backups caught",
    "scheduled dumps killed",
    "dumps taken again after DDL",
    "point-in-time restores checked",
    "archived logs searched for secrets",
)
FIGURES: Counter[str] = Counter()
MEASURED: list[str] = []  # one line per measurement, as the test worded it


def add(name: str, count: int = 1) -> None:
    if name not in ORDER:
        raise KeyError(f"not a suite figure: {name!r} (one of {ORDER})")
    FIGURES[name] += count


def measured(text: str) -> None:
    """A line of figures a test measured (printed in the run's summary, passed or not)."""
    MEASURED.append(text)


def line() -> str:
    """`suite figures: 4 operator kills survived, ...`, or "" when no figure was counted."""
    if not FIGURES:
        return ""
    return "suite figures: " + ", ".join(f"{FIGURES[name]} {name}" for name in ORDER)
