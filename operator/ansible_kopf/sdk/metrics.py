"""
The operator's Prometheus metrics: what is counted (:class:`Registry`), in the text
exposition format, and the endpoint that serves it at ``/metrics`` (:func:`serve`).

Two sources, as under the Operator SDK:
- every run: ``ansible_operator_reconciles`` (a histogram of run seconds, labels ``GVK``
  and ``result``: ``succeeded`` or ``failed``) and ``ansible_operator_reconcile_total``
  (a counter with the same labels);
- the roles: a task of ``operator_sdk.util.osdk_metric`` names a metric, its help text and
  one of ``counter`` (``increment`` or ``add``), ``gauge`` (``set``, ``increment``,
  ``decrement``, ``add``, ``subtract``, ``set_to_current_time``), ``histogram``
  (``observe``) or ``summary`` (``observe``); the operator reads the task's result
  (:mod:`ansible_kopf.run.runner_events`) and updates the metric here. A name used with two
  types, or that is not a valid metric name, is refused with a warning in the log.
"""
import dataclasses
import logging
import math
import re
import time
from collections.abc import Mapping
from typing import Any, Final

from aiohttp import web

from ansible_kopf import constants

logger = logging.getLogger(__name__)

BUCKETS: Final = (0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
NAME: Final = re.compile(r'^[a-zA-Z_:][a-zA-Z0-9_:]*$')
Labels = tuple[tuple[str, str], ...]


def _escape(value: str) -> str:
    return value.replace('\\', r'\\').replace('"', r'\"').replace('\n', r'\n')


def _labels(labels: Labels, extra: Labels = ()) -> str:
    pairs = [*labels, *extra]
    if not pairs:
        return ''
    return '{' + ','.join(f'{k}="{_escape(v)}"' for k, v in pairs) + '}'


def _number(value: float) -> str:
    if math.isinf(value):
        return '+Inf' if value > 0 else '-Inf'
    return repr(float(value))


@dataclasses.dataclass
class _Observations:
    buckets: list[int]
    count: int = 0
    total: float = 0.0


@dataclasses.dataclass
class Metric:
    """One metric family: its type, help text and a value per label set."""
    name: str
    kind: str  # counter | gauge | histogram | summary
    help: str
    values: dict[Labels, float] = dataclasses.field(default_factory=dict)
    observations: dict[Labels, _Observations] = dataclasses.field(default_factory=dict)

    def observe(self, value: float, labels: Labels = ()) -> None:
        series = self.observations.setdefault(labels, _Observations([0] * len(BUCKETS)))
        series.count += 1
        series.total += value
        for index, bound in enumerate(BUCKETS):
            if value <= bound:
                series.buckets[index] += 1

    def render(self) -> list[str]:
        lines = [f"# HELP {self.name} {self.help.replace(chr(10), ' ')}",
                 f"# TYPE {self.name} {self.kind}"]
        for labels, value in sorted(self.values.items()):
            lines.append(f"{self.name}{_labels(labels)} {_number(value)}")
        for labels, series in sorted(self.observations.items(), key=lambda item: item[0]):
            if self.kind == 'histogram':
                for bound, count in zip(BUCKETS, series.buckets, strict=True):
                    lines.append(f"{self.name}_bucket{_labels(labels, (('le', _number(bound)),))}"
                                 f" {count}")
                lines.append(f"{self.name}_bucket{_labels(labels, (('le', '+Inf'),))} "
                             f"{series.count}")
            lines.append(f"{self.name}_sum{_labels(labels)} {_number(series.total)}")
            lines.append(f"{self.name}_count{_labels(labels)} {series.count}")
        return lines


class Registry:
    """The metrics of one operator process."""

    def __init__(self) -> None:
        self._metrics: dict[str, Metric] = {}

    def metric(self, name: str, kind: str, help_text: str) -> Metric | None:
        """The metric of that name, created if new; None if the name or type is wrong."""
        if not NAME.match(name):
            logger.warning(f"metric name {name!r} is not valid: ignored")
            return None
        existing = self._metrics.get(name)
        if existing is None:
            existing = self._metrics[name] = Metric(name=name, kind=kind, help=help_text)
        elif existing.kind != kind:
            logger.warning(f"metric {name!r} is a {existing.kind}, not a {kind}: ignored")
            return None
        return existing

    def reconciled(self, *, gvk: str, successful: bool, seconds: float) -> None:
        labels = (('GVK', gvk), ('result', 'succeeded' if successful else 'failed'))
        histogram = self.metric('ansible_operator_reconciles', 'histogram',
                                'Seconds of each reconcile run, by kind and result')
        counter = self.metric('ansible_operator_reconcile_total', 'counter',
                              'Reconcile runs, by kind and result')
        if histogram is not None and counter is not None:
            histogram.observe(seconds, labels)
            counter.values[labels] = counter.values.get(labels, 0.0) + 1

    def user_metric(self, request: Mapping[str, Any]) -> None:
        """Apply one ``osdk_metric`` task's result."""
        name, help_text = str(request.get('name') or ''), str(request.get('description') or '')
        for kind in ('counter', 'gauge', 'histogram', 'summary'):
            change = request.get(kind)
            if isinstance(change, Mapping):
                metric = self.metric(name, kind, help_text)
                if metric is not None:
                    _apply(metric, change)
                return

    def render(self) -> str:
        lines: list[str] = []
        for name in sorted(self._metrics):
            lines.extend(self._metrics[name].render())
        return '\n'.join(lines) + '\n'


def _apply(metric: Metric, change: Mapping[str, Any]) -> None:
    current = metric.values.get((), 0.0)
    try:
        if metric.kind in ('histogram', 'summary'):
            # shown from its creation, with zero counts, as Prometheus clients show one
            metric.observations.setdefault((), _Observations([0] * len(BUCKETS)))
            if change.get('observe') is not None:
                metric.observe(float(change['observe']))
            return
        if metric.kind == 'counter':
            step = float(change['add']) if change.get('add') is not None else (
                1.0 if change.get('increment') else 0.0)
            metric.values[()] = current + max(step, 0.0)  # a counter only goes up
            return
        if change.get('set_to_current_time'):
            metric.values[()] = time.time()
        elif change.get('set') is not None:
            metric.values[()] = float(change['set'])
        else:
            step = (float(change.get('add') or 0.0) - float(change.get('subtract') or 0.0)
                    + (1.0 if change.get('increment') else 0.0)
                    - (1.0 if change.get('decrement') else 0.0))
            metric.values[()] = current + step
    except (TypeError, ValueError):
        logger.warning(f"metric {metric.name!r}: not a number in {dict(change)!r}: ignored")


async def serve(registry: Registry, address: tuple[str, int]) -> web.AppRunner | None:
    """``/metrics`` on ``address``; ``None`` (and a warning) if it cannot listen there."""
    async def scrape(_: web.Request) -> web.Response:
        return web.Response(text=registry.render(), content_type='text/plain',
                            charset='utf-8', headers={'X-Content-Format': '0.0.4'})

    app = web.Application()
    app.router.add_get(constants.METRICS_PATH, scrape)
    server = web.AppRunner(app, handle_signals=False, access_log=None)
    await server.setup()
    try:
        await web.TCPSite(server, *address).start()
    except OSError as e:
        logger.warning(f"no metrics endpoint: cannot listen on {address[0]}:{address[1]}: {e}")
        await server.cleanup()
        return None
    logger.info(f"Metrics at http://{address[0]}:{address[1]}{constants.METRICS_PATH}")
    return server
