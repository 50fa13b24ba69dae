"""
ansible-runner's event stream: what the operator logs from it, and what it keeps of it
(the :class:`Outcome` of a run).

A :class:`Collector` is the ``event_handler`` of one run. It is called in the runner's
thread for every event, so it does little: a log line and a few counters.

What is kept:

* counts from ``playbook_on_stats`` (``ok``, ``changed``, ``failures``, ``skipped``,
  ``unreachable`` = Ansible's "dark"), summed over hosts;
* custom stats: ``playbook_on_stats``'s ``artifact_data``, which ansible-runner fills from
  ``ansible.builtin.set_stats`` data aggregated for the whole run (``per_host: false``,
  the default);
* the failure that ended the run: task name and ``res.msg`` of the last
  ``runner_on_failed`` (not ignored) or ``runner_on_unreachable`` event. Failures that a
  ``rescue:`` recovered from do not fail the run and are not reported. An API server's
  error response that a module put in its message (kubernetes.core's ``Failed to create
  object: {"kind":"Status",...}``, JSON with escaped quotes, or the repr of its bytes) is
  replaced by the response's own message, reason and code: ``configmaps "x" is forbidden:
  User "system:serviceaccount:ns:sa" cannot get resource "configmaps" ...`` is what a user
  needs to read, and the status line and headers of the client's exception are dropped.

**no_log**: ansible-runner's callback replaces the result (``res``) of a ``no_log`` task
with ``{"censored": ...}`` inside the Ansible process, but ansible-core 2.19 still prints
the failure's message (``[ERROR]: Task failed: Action failed: <msg>``) in the event's
``stdout`` text, e.g. for ``ansible.builtin.fail`` with a password in ``msg``. The collector
replaces the ``stdout`` of every event whose result is censored before it is written
(the very dict handed to the ``event_handler`` is what goes to ``job_events/``, see
:class:`ansible_kopf.run.runner.EventFiles`, and to ansible-runner's ``stdout`` artifact), so the
text reaches neither the disk nor the log.

What is logged (``ANSIBLE_LOG_EVENTS``): ``Tasks`` (default) logs each task result with
its name at INFO (skips at DEBUG; ``done (no_log)`` instead of ok/changed for a censored
result, which no longer says which), failures at WARNING with the message; ``Everything``
also logs the text Ansible printed for every event; ``Nothing`` logs nothing.
The variables passed to the run are never logged.
"""
import ast
import contextlib
import dataclasses
import json
import logging
import re
from collections.abc import Mapping, MutableMapping
from typing import Any, Final

from ansible_kopf import constants
from ansible_kopf.sdk import durations

# a task of operator_sdk.util.requeue_after: its result's `period` asks for another run
REQUEUE_ACTIONS: Final = frozenset({'operator_sdk.util.requeue_after', 'requeue_after'})
# a task of operator_sdk.util.osdk_metric: its result is a metric to update (see metrics)
METRIC_ACTIONS: Final = frozenset({'operator_sdk.util.osdk_metric', 'osdk_metric'})
FAILED_EVENTS: Final = frozenset({'runner_on_failed', 'runner_on_unreachable'})
UNKNOWN_FAILURE: Final = 'unknown playbook failure'
# Where an API error body may start in a message: JSON, or the repr of its bytes.
_BODY_START: Final = re.compile(r"""b'(?=\{)|b"(?=\{)|\{""")
_BYTES_LITERAL: Final = re.compile(r"b'(?:[^'\\]|\\.)*'" r'|b"(?:[^"\\]|\\.)*"', re.DOTALL)
# What the kubernetes client's exceptions print before the body: status, reason, headers.
_EXCEPTION_DUMP: Final = re.compile(
    r'\(?\d{3}\)?\nReason: [^\n]*\n(?:HTTP response headers: [^\n]*\n)?HTTP response body: $')


@dataclasses.dataclass(frozen=True)
class Counts:
    ok: int = 0
    changed: int = 0
    failures: int = 0
    skipped: int = 0
    unreachable: int = 0

    def as_dict(self) -> dict[str, int]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Outcome:
    """The result of one ansible-runner run."""
    status: str  # ansible-runner's: successful | failed | timeout | canceled
    rc: int
    counts: Counts
    failed_task: str | None
    message: str | None  # why it failed; None when successful
    custom_stats: Mapping[str, Any]
    ident: str
    duration: float  # seconds, wall time of the run
    requeue_after: float | None = None  # seconds: requeue_after task, else the reconcile period
    periodic: bool = False  # requeue_after is the reconcile period (annotation or watches entry)
    metrics: tuple[Mapping[str, Any], ...] = ()  # operator_sdk.util.osdk_metric results

    @property
    def successful(self) -> bool:
        return self.status == 'successful'


def failure_message(res: Any) -> str:
    """The human-readable reason from a failed task's result (``res.msg`` first)."""
    if not isinstance(res, Mapping):
        return UNKNOWN_FAILURE
    message = res.get('msg') or res.get('censored') or res.get('stderr') or res.get('reason')
    if not message:
        return UNKNOWN_FAILURE
    text = api_errors(message if isinstance(message, str) else json.dumps(message, default=str))
    for item in res.get('results') or ():
        if isinstance(item, Mapping) and item.get('failed') and item.get('msg'):
            return f"{text}: {failure_message(item)}"
    return text


def api_errors(text: str) -> str:
    """``text`` with each API error body in it (a ``Status``, see the module's docstring)
    replaced by ``<its message> (<reason>, HTTP <code>)``; other text is kept as it is."""
    if 'Status' not in text:
        return text
    pieces: list[str] = []
    done = position = 0
    while (match := _BODY_START.search(text, position)) is not None:
        decoded = _decode(text, match.start())
        if decoded is None:
            position = match.end()
            continue
        body, end = decoded
        position = end  # a JSON object that is not a Status: not into it again
        readable = _status_text(body)
        if readable is None:
            continue
        pieces += [_EXCEPTION_DUMP.sub('', text[done:match.start()]), readable]
        done = position = end + 1 if text.startswith('\n', end) else end
    if not pieces:
        return text
    return ''.join([*pieces, text[done:]])


def _decode(text: str, start: int) -> tuple[Any, int] | None:
    """The JSON value at ``start`` (JSON text or a bytes literal of it) and where it ends."""
    try:
        if text.startswith('{', start):
            return json.JSONDecoder().raw_decode(text, start)
        literal = _BYTES_LITERAL.match(text, start)
        if literal is None:
            return None
        return json.loads(ast.literal_eval(literal.group())), literal.end()
    except (ValueError, SyntaxError):
        return None


def _status_text(body: Any) -> str | None:
    """``<message> (<reason>, HTTP <code>)`` of a ``Status`` object, else ``None``."""
    if not isinstance(body, Mapping) or body.get('kind') != 'Status' or not body.get('message'):
        return None
    details = [str(body['reason'])] if body.get('reason') else []
    details += [f"HTTP {body['code']}"] if body.get('code') else []
    return f"{body['message']} ({', '.join(details)})" if details else str(body['message'])


def censored(res: Any) -> bool:
    """Whether a task result was censored for ``no_log`` (as a whole or any loop item)."""
    if not isinstance(res, Mapping):
        return False
    if 'censored' in res:
        return True
    items = res.get('results')
    return isinstance(items, list) and any(
        isinstance(item, Mapping) and 'censored' in item for item in items)


def _total(per_host: Any) -> int:
    if isinstance(per_host, Mapping):
        return sum(int(value) for value in per_host.values())
    return 0


class Collector:
    """The ``event_handler`` for one run: logs events and remembers the outcome."""

    def __init__(self, *, logger: logging.Logger, label: str,
                 log_events: constants.LogEvents) -> None:
        self._logger = logger
        self._label = label
        self._log_tasks = log_events in ('Tasks', 'Everything')
        self._log_everything = log_events == 'Everything'
        self.counts = Counts()
        self.custom_stats: dict[str, Any] = {}
        self.failed_task: str | None = None
        self.message: str | None = None
        self.errors: list[str] = []  # error lines printed outside of tasks (e.g. syntax)
        self.controller_pid: int | None = None  # ansible-playbook's (see launchers.Cancellation)
        self.requeue_after: float | None = None
        self.metrics: list[Mapping[str, Any]] = []

    def __call__(self, event: MutableMapping[str, Any]) -> bool:
        if self.controller_pid is None and isinstance(event.get('pid'), int):
            self.controller_pid = event['pid']  # the callback runs in the controller
        return self._handle(event)

    def _handle(self, event: MutableMapping[str, Any]) -> bool:
        name = event.get('event', '')
        data = event.get('event_data') or {}
        if censored(data.get('res')) and event.get('stdout'):
            event['stdout'] = f"{name}: {data.get('task') or '?'}: output hidden (no_log)"
        if self._log_everything:
            self._log_text(event)
        if name in ('runner_on_ok', 'runner_on_skipped') or name in FAILED_EVENTS:
            self._task_result(name, data)
        elif name == 'playbook_on_stats':
            self._stats(data)
        elif name in ('verbose', 'error'):
            self._verbose(event)
        return True  # keep writing the event to the artifacts

    def _log_text(self, event: Mapping[str, Any]) -> None:
        text = str(event.get('stdout') or '').strip()
        if text:
            self._logger.info(f"[{self._label}] {text}")

    def _task_result(self, name: str, data: Mapping[str, Any]) -> None:
        task = str(data.get('task') or '?')
        res = data.get('res')
        if (name == 'runner_on_ok' and data.get('task_action') in REQUEUE_ACTIONS
                and isinstance(res, Mapping)):
            with contextlib.suppress(durations.DurationError, TypeError):
                self.requeue_after = durations.parse(str(res.get('period')))
        if (name == 'runner_on_ok' and data.get('task_action') in METRIC_ACTIONS
                and isinstance(res, Mapping) and not censored(res)):
            self.metrics.append(dict(res))
        if name in FAILED_EVENTS and not data.get('ignore_errors'):
            self.failed_task = task
            self.message = failure_message(res)
            if self._log_tasks:
                self._logger.warning(f"[{self._label}] task {task!r} failed: {self.message}")
        elif self._log_tasks and not self._log_everything:
            if name == 'runner_on_skipped':
                self._logger.debug(f"[{self._label}] task {task!r}: skipped")
            elif name in FAILED_EVENTS:
                self._logger.info(f"[{self._label}] task {task!r}: failed (ignored)")
            elif censored(res):  # the censored result no longer says whether it changed
                self._logger.info(f"[{self._label}] task {task!r}: done (no_log)")
            else:
                changed = isinstance(res, Mapping) and bool(res.get('changed'))
                state = 'changed' if changed else 'ok'
                self._logger.info(f"[{self._label}] task {task!r}: {state}")

    def _stats(self, data: Mapping[str, Any]) -> None:
        self.counts = Counts(
            ok=_total(data.get('ok')),
            changed=_total(data.get('changed')),
            failures=_total(data.get('failures')),
            skipped=_total(data.get('skipped')),
            unreachable=_total(data.get('dark')),
        )
        artifact_data = data.get('artifact_data')
        if isinstance(artifact_data, Mapping):
            self.custom_stats = dict(artifact_data)

    def _verbose(self, event: Mapping[str, Any]) -> None:
        for raw in str(event.get('stdout') or '').splitlines():
            line = raw.strip()
            if line.startswith(('ERROR', '[ERROR]')):
                self.errors.append(line)

    def outcome(self, *, status: str, rc: int, ident: str, duration: float) -> Outcome:
        """The run's outcome, once ansible-runner has finished."""
        successful = status == 'successful'
        message = None
        if not successful:
            message = self.message or ' '.join(self.errors) or (
                f"ansible-playbook ended with status {status!r}, rc={rc}")
        if self._log_tasks:
            c = self.counts
            level = logging.INFO if successful else logging.WARNING
            self._logger.log(level, f"[{self._label}] run {ident} {status} in {duration:.1f}s: "
                                    f"ok={c.ok} changed={c.changed} failures={c.failures} "
                                    f"skipped={c.skipped} unreachable={c.unreachable}")
        return Outcome(
            status=status, rc=rc, counts=self.counts,
            failed_task=None if successful else self.failed_task,
            message=message,
            custom_stats=self.custom_stats,
            ident=ident, duration=duration,
            requeue_after=self.requeue_after if successful else None,
            metrics=tuple(self.metrics),
        )
