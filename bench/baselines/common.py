"""
What both baselines share: the bench role's tunables (image, hostPath base), the status
they write, the log line the benchmark parses, and the optional periodic reconcile
(``BENCH_RECONCILE_PERIOD``).
"""
import datetime
import logging
import os
import pathlib
import time
from collections.abc import Callable
from typing import Any

import kubernetes
import yaml

GROUP, VERSION, PLURAL = 'bench.otus.test', 'v1', 'mysqls'
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


def timed(namespace: str, name: str, work: Callable[[], str]) -> None:
    """Run one reconcile and log it the way the operator does."""
    started = time.monotonic()
    counts = work()
    logger.info(f"Reconciled {namespace}/{name}: successful {counts} "
                f"in {time.monotonic() - started:.2f}s")
