"""
Go duration strings (``30s``, ``1m30s``, ``1.5h``, ``0``) as used by ``reconcilePeriod``
in the Operator SDK's ``watches.yaml``, parsed into seconds.

Follows Go's ``time.ParseDuration``: a sequence of decimal numbers each with a unit
(``ns``, ``us``/``µs``, ``ms``, ``s``, ``m``, ``h``); a bare ``0`` means zero.
Negative durations are rejected: a period cannot be negative.
"""
import re
from typing import Final

_UNITS: Final = {
    'ns': 1e-9,
    'us': 1e-6,
    'µs': 1e-6,  # U+00B5 micro sign
    'μs': 1e-6,  # U+03BC greek mu
    'ms': 1e-3,
    's': 1.0,
    'm': 60.0,
    'h': 3600.0,
}
_PART: Final = re.compile(r'(\d+(?:\.\d*)?|\.\d+)([a-zµμ]+)')


class DurationError(ValueError):
    """The text is not a Go duration."""


def parse(text: str) -> float:
    """Parse a Go duration string into seconds; raise :class:`DurationError` if invalid."""
    original = text
    text = text.strip()
    if text.startswith('+'):
        text = text[1:]
    if text.startswith('-'):
        raise DurationError(f"negative duration {original!r}")
    if text == '0':
        return 0.0
    if not text:
        raise DurationError(f"invalid duration {original!r}")
    total = 0.0
    position = 0
    while position < len(text):
        match = _PART.match(text, position)
        if match is None:
            raise DurationError(
                f"invalid duration {original!r} (expected e.g. '30s', '1m30s', '2h', or '0')")
        number, unit = match.groups()
        if unit not in _UNITS:
            raise DurationError(f"unknown unit {unit!r} in duration {original!r}")
        total += float(number) * _UNITS[unit]
        position = match.end()
    return total
