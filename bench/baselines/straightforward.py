"""
Baseline (b), "the straightforward design": every event runs a fresh ansible-runner run
in a fresh private data dir (nothing reused between runs), of a playbook with one
``kubernetes.core.k8s`` task per object (``straightforward.yml``). Like the Operator
SDK it marks ``Running`` before the run and ``Successful`` after it, every time.
At most ``BENCH_MAX_RUNS`` (default 4) runs at once.

    kopf run --standalone --namespace NS --module bench.baselines.straightforward
"""
import json
import os
import pathlib
import sys
import tempfile
import threading
import uuid
from typing import Any

import ansible_runner
import kopf
import kubernetes

from bench.baselines import common

CUSTOM = kubernetes.client.CustomObjectsApi(common.api())
PLAYBOOK = pathlib.Path(__file__).with_name('straightforward.yml')
WORKDIR = pathlib.Path(os.environ.get('BENCH_WORKDIR')
                       or pathlib.Path(tempfile.gettempdir()) / 'bench-straightforward')
SLOTS = threading.BoundedSemaphore(int(os.environ.get('BENCH_MAX_RUNS') or 4))
# localhost with this interpreter (it has the kubernetes client), as the operator does.
INVENTORY = {'all': {'hosts': {'localhost': {'ansible_connection': 'local',
                                             'ansible_python_interpreter': sys.executable}}}}
# ansible-playbook of this environment, whatever PATH the operator was started with.
PATH = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get('PATH', os.defpath)])


def status(namespace: str, name: str, body: dict[str, Any]) -> None:
    CUSTOM.patch_namespaced_custom_object_status(common.GROUP, common.VERSION, namespace,
                                                 common.PLURAL, name, {'status': body})


def reconcile(body: kopf.Body, namespace: str, name: str) -> None:
    def work() -> dict[str, int]:
        status(namespace, name, {'conditions': [
            {'type': 'Running', 'status': 'True', 'reason': 'Running',
             'message': 'Running reconciliation', 'lastTransitionTime': common.now()}]})
        obj = json.loads(json.dumps(dict(body)))
        variables = {**{k: v for k, v in (obj.get('spec') or {}).items()},
                     'ansible_operator_meta': {'name': name, 'namespace': namespace},
                     '_bench_otus_test_mysql': obj}
        private = WORKDIR / name / uuid.uuid4().hex
        private.mkdir(parents=True)
        with SLOTS:
            result = ansible_runner.run(
                private_data_dir=str(private),
                playbook=str(PLAYBOOK), inventory=INVENTORY, extravars=variables,
                quiet=True, envvars={'ANSIBLE_PIPELINING': 'True', 'PATH': PATH})
        ok = result.status == 'successful'
        status(namespace, name, {'conditions': common.conditions(ok, result.status),
                                 'observedGeneration': body.metadata.get('generation')})
        if not ok:
            raise kopf.TemporaryError(f"run {result.status}", delay=5)
        stats = result.stats or {}
        return {k: sum((stats.get(k) or {}).values())
                for k in ('ok', 'changed', 'failures', 'skipped')}
    common.timed(namespace, name, work)


common.register(reconcile, 'bench-b', max_workers=100)  # the runs themselves are bounded by SLOTS
