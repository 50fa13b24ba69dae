"""
The table of ``bench/against.sh``: create latency of an earlier commit (``ref-N.json``) and
of this checkout (``ours-N.json``), round by round, as each side's bench wrote it, with the
median of the rounds and ours as a fraction of the earlier commit's.
"""
import argparse
import json
import pathlib
import statistics
import sys
from collections.abc import Callable
from typing import Any

ROWS: list[tuple[str, Callable[[dict[str, Any]], float]]] = [
    ('1 object, p50', lambda r: float(r['one']['p50'])),
    ('10 at once, all Successful (p50 of the trials)', lambda r: float(r['ten_all']['p50'])),
    ('100 at once, all Successful', lambda r: float(r['hundred_all'])),
    ('100 at once, median object', lambda r: float(r['hundred_p50'])),
]


def latency(path: pathlib.Path) -> dict[str, Any] | None:
    """The ``ours`` design's latency figures in one side's results.json, if it has them."""
    try:
        found = json.loads(path.read_text())['ours']['latency']
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return found if isinstance(found, dict) and 'error' not in found else None


def figures(directory: pathlib.Path, side: str) -> list[dict[str, Any]]:
    rounds = sorted(directory.glob(f'{side}-*.json'), key=lambda p: int(p.stem.split('-')[1]))
    return [found for p in rounds if (found := latency(p)) is not None]


def table(ref: list[dict[str, Any]], ours: list[dict[str, Any]], names: tuple[str, str]) -> str:
    lines = [f"| scenario | {names[0]} (each round) | {names[1]} (each round) "
             f"| median {names[0]} | median {names[1]} | {names[1]} / {names[0]} |",
             '|---|---|---|---|---|---|']
    for title, get in ROWS:
        a, b = [get(r) for r in ref], [get(r) for r in ours]
        ma, mb = statistics.median(a), statistics.median(b)
        lines.append(f"| {title} | {', '.join(f'{v:.2f}' for v in a)} "
                     f"| {', '.join(f'{v:.2f}' for v in b)} | {ma:.2f} s | {mb:.2f} s "
                     f"| {mb / ma:.2f} |")
    return '\n'.join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('directory', type=pathlib.Path)
    parser.add_argument('--ref', default='ref', help='name of the earlier commit')
    parser.add_argument('--ours', default='ours', help='name of this checkout')
    args = parser.parse_args()
    ref, ours = figures(args.directory, 'ref'), figures(args.directory, 'ours')
    if not ref or not ours:
        print(f"no complete rounds of both sides in {args.directory}", file=sys.stderr)
        return 1
    print(table(ref, ours, (args.ref, args.ours)))
    print(f"\n{len(ref)} round(s) of {args.ref}, {len(ours)} of {args.ours}, alternating; "
          "seconds from the create request until a watch saw the object Successful.")
    return 0


if __name__ == '__main__':
    sys.exit(main())
