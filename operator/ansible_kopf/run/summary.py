"""
The reconcile summary: one record per run of a role or playbook for one object, which
:mod:`ansible_kopf.reconciling` logs twice, as a sentence for people and as a line of
fields for programs.

The line of fields is an interface. ``bench/`` (its baselines write the same line, so the
bench reads every design alike) and ``tests/`` read it with :func:`parse`, never with a
pattern of their own: a change here is a change for them, made here once. The line is
the log message ``reconcile-summary {...}``: :data:`PREFIX`, then the record as one JSON
object with sorted keys (:meth:`Summary.line`). Whatever the log format puts in front of
the message (kopf's time stamp, logger name, level) is ignored by :func:`parse`.
"""
import dataclasses
import datetime
import json
from collections.abc import Mapping
from typing import Any, Final, Literal

PREFIX: Final = 'reconcile-summary '
COUNTS: Final = ('ok', 'changed', 'failures', 'skipped', 'unreachable')  # the sentence's order
Action = Literal['reconcile', 'finalize']


@dataclasses.dataclass(frozen=True)
class Summary:
    """What one run did for one object, and when it finished."""
    action: Action
    kind: str  # "<group>/<version>/<kind>" as in watches.yaml
    namespace: str | None  # None: a cluster-scoped object
    name: str
    status: str  # ansible-runner's: successful | failed | timeout | canceled
    counts: Mapping[str, int]  # ok, changed, failures, skipped, unreachable
    seconds: float  # wall time of the Ansible run
    finished: str  # ISO 8601, UTC, milliseconds

    @property
    def key(self) -> str:
        """``namespace/name``, or ``name`` for a cluster-scoped object."""
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    def sentence(self) -> str:
        """For people: ``Reconciled ns/name: successful ok=3 changed=0 ... in 1.23s``."""
        keys = [*COUNTS, *sorted(set(self.counts) - set(COUNTS))]
        counts = ' '.join(f"{k}={self.counts[k]}" for k in keys if k in self.counts)
        verb = 'Finalized' if self.action == 'finalize' else 'Reconciled'
        return f"{verb} {self.key}: {self.status} {counts} in {self.seconds:.2f}s"

    def line(self) -> str:
        """For programs: :data:`PREFIX` and the fields as JSON (read back by :func:`parse`)."""
        return PREFIX + json.dumps(dataclasses.asdict(self) | {'counts': dict(self.counts)},
                                   sort_keys=True)

    @property
    def finished_at(self) -> datetime.datetime:
        return datetime.datetime.fromisoformat(self.finished)


def now() -> str:
    """The ``finished`` stamp of a run that ends now."""
    return datetime.datetime.now(datetime.UTC).isoformat(timespec='milliseconds')


def parse(line: str) -> Summary | None:
    """The summary in a log line, or ``None`` if the line holds none."""
    start = line.find(PREFIX)
    if start < 0:
        return None
    try:
        fields: Any = json.loads(line[start + len(PREFIX):])
    except ValueError:
        return None
    if not isinstance(fields, Mapping):
        return None
    try:
        return Summary(**fields)
    except TypeError:  # fields missing or unknown: another version's line
        return None


def parse_all(text: str) -> list[Summary]:
    """Every summary in a log, in order."""
    return [s for s in map(parse, text.splitlines()) if s is not None]
