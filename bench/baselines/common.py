"""
What both baselines share: the bench role's tunables (image, hostPath base), the status
they write, the reconcile summary they log as the operator does (``ansible_kopf.run.summary``:
the benchmark reads every design's runs from it alike), and the optional periodic reconcile
(``BENCH_RECONCILE_PERIOD``), and the kopf handlers that call a baseline's reconcile
(:func:`register`).
"""
import datetime
import logging
import os
import pathlib
import time
from collections.abc import Callable, Mapping
from typing import Any

import kopf
import kubernetes
import yaml

from ansible_kopf.run import summary

GROUP, VERSION, PLURAL = 'bench.otus.test', 'v1', 'mysqls'
KIND = f"{GROUP}/{VERSION}/MySQL"  # a summary's kind, as the operator writes it
ROLE_DEFAULTS: dict[str, Any] = yaml.safe_load(
    (pathlib.Path(__file__).parents[1] / 'roles' / 'bench_mysql' / 'defaults' / 'main.yml')
    .read_text())
PERIOD = float(os.environ.get('BENCH_RECONCILE_PERIOD') or 0)
logger = logging.getLogger('bench.baseline')


def api() -> kubernetes.client.ApiClient:
    configuration = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(client_configuration=configuration)
    return kubernetes.client.ApiClient(configuration)


def now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime('%Y-%m-%dT%H:%M:%SZ')


def conditions(successful: bool, message: str) -> list[dict[str, Any]]:
    stamp = now()
    if successful:
        return [
            {'type': 'Running', 'status': 'True', 'reason': 'Successful',
             'message': 'Awaiting next reconciliation', 'lastTransitionTime': stamp},
            {'type': 'Successful', 'status': 'True', 'reason': 'Successful',
             'message': 'Last reconciliation succeeded', 'lastTransitionTime': stamp},
            {'type': 'Failure', 'status': 'False', 'reason': 'Successful', 'message': '',
             'lastTransitionTime': stamp}]
    return [{'type': 'Running', 'status': 'False', 'reason': 'Failed', 'message': message,
             'lastTransitionTime': stamp},
            {'type': 'Failure', 'status': 'True', 'reason': 'Failed', 'message': message,
             'lastTransitionTime': stamp}]


def timed(namespace: str, name: str, work: Callable[[], Mapping[str, int]]) -> None:
    """Run one reconcile (``work`` returns its counts) and log its summary the way the
    operator does: the sentence for people, the line for the benchmark."""
    started = time.monotonic()
    counts = work()
    record = summary.Summary(
        action='reconcile', kind=KIND, namespace=namespace, name=name, status='successful',
        counts=dict(counts), seconds=round(time.monotonic() - started, 3),
        finished=summary.now())
    logger.info(record.sentence())
    logger.info(record.line())


def register(reconcile: Callable[[kopf.Body, str, str], None], prefix: str,
             max_workers: int | None = None) -> None:
    """
    Wire ``reconcile`` to create, resume and spec updates (and the periodic timer when
    ``BENCH_RECONCILE_PERIOD`` is set), with progress kept in annotations ``<prefix>/*``.
    """
    def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=prefix)
        settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
            prefix=prefix, key='last-handled-configuration')
        settings.posting.level = 40
        if max_workers is not None:
            settings.execution.max_workers = max_workers

    def on_event(body: kopf.Body, namespace: str, name: str, **_: Any) -> None:
        reconcile(body, namespace, name)

    def on_timer(body: kopf.Body, namespace: str, name: str, **_: Any) -> None:
        reconcile(body, namespace, name)

    # explicit ids: the ids of module-level handlers (bench/__main__.py waits for the
    # log line "'configure' succeeded"; progress annotations are keyed by them)
    kopf.on.startup(id='configure')(configure)
    kopf.on.create(GROUP, VERSION, PLURAL, id='on_event')(on_event)
    kopf.on.resume(GROUP, VERSION, PLURAL, id='on_event')(on_event)
    kopf.on.update(GROUP, VERSION, PLURAL, field='spec', id='on_event')(on_event)
    if PERIOD:
        kopf.timer(GROUP, VERSION, PLURAL, interval=PERIOD, initial_delay=PERIOD,
                   idle=PERIOD, id='on_timer')(on_timer)
