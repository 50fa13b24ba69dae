"""
Baseline (a): a minimal kopf handler that applies the bench role's objects (Secret, PV,
PVC, Deployment, Service) with direct calls of the ``kubernetes`` client: read each
object, create it if absent, patch it if a desired field differs, else write nothing;
then write ``.status`` only if it does not say Successful for this generation yet.

    kopf run --standalone --namespace NS --module bench.baselines.direct  # from the repository
"""
import base64
import posixpath
from typing import Any

import kopf
import kubernetes

from bench.baselines import common

API = common.api()
CORE = kubernetes.client.CoreV1Api(API)
APPS = kubernetes.client.AppsV1Api(API)
CUSTOM = kubernetes.client.CustomObjectsApi(API)
IMAGE = common.ROLE_DEFAULTS['bench_mysql_image']
HOSTPATH_BASE = common.ROLE_DEFAULTS['bench_mysql_hostpath_base']


def contains(actual: Any, desired: Any) -> bool:
    if isinstance(desired, dict):
        return isinstance(actual, dict) and all(
            k in actual and contains(actual[k], v) for k, v in desired.items())
    if isinstance(desired, list):
        return isinstance(actual, list) and len(actual) == len(desired) and all(
            contains(a, d) for a, d in zip(actual, desired, strict=True))
    return actual == desired


def manifests(body: kopf.Body) -> list[tuple[str, dict[str, Any]]]:
    name, ns, uid = body.metadata.name, body.metadata.namespace, body.metadata.uid
    spec = body.spec
    size = spec.get('storage_size', '1Gi')
    labels = {'app.kubernetes.io/name': 'bench-mysql', 'app.kubernetes.io/instance': name,
              'bench.otus.test/owner': 'bench'}
    owner = [{'apiVersion': 'bench.otus.test/v1', 'kind': 'MySQL', 'name': name, 'uid': uid,
              'controller': True, 'blockOwnerDeletion': True}]
    meta = {'namespace': ns, 'labels': labels, 'ownerReferences': owner}
    pv, pvc = f"bench-data-{ns}-{name}", f"{name}-data"
    password = base64.b64encode(str(spec.get('password', 'benchpassword')).encode()).decode()
    return [
        ('secret', {'apiVersion': 'v1', 'kind': 'Secret', 'type': 'Opaque',
                    'metadata': {'name': f"{name}-credentials", **meta},
                    'data': {'password': password}}),
        ('pv', {'apiVersion': 'v1', 'kind': 'PersistentVolume',
                'metadata': {'name': pv, 'labels': labels},
                'spec': {'capacity': {'storage': size}, 'accessModes': ['ReadWriteOnce'],
                         'persistentVolumeReclaimPolicy': 'Retain',
                         'claimRef': {'namespace': ns, 'name': pvc},
                         'hostPath': {'path': posixpath.join(HOSTPATH_BASE, ns, name),
                                      'type': 'DirectoryOrCreate'}}}),
        ('pvc', {'apiVersion': 'v1', 'kind': 'PersistentVolumeClaim',
                 'metadata': {'name': pvc, **meta},
                 'spec': {'accessModes': ['ReadWriteOnce'], 'storageClassName': '',
                          'volumeName': pv, 'resources': {'requests': {'storage': size}}}}),
        ('deployment', {'apiVersion': 'apps/v1', 'kind': 'Deployment',
                        'metadata': {'name': name, **meta},
                        'spec': {'replicas': int(spec.get('replicas', 1)),
                                 'strategy': {'type': 'Recreate'},
                                 'selector': {'matchLabels': labels},
                                 'template': {'metadata': {'labels': labels}, 'spec': {
                                     'enableServiceLinks': False,
                                     'terminationGracePeriodSeconds': 0,
                                     'containers': [{
                                         'name': 'server', 'image': IMAGE,
                                         'imagePullPolicy': 'IfNotPresent',
                                         'env': [{'name': 'MYSQL_ROOT_PASSWORD', 'valueFrom': {
                                             'secretKeyRef': {'name': f"{name}-credentials",
                                                              'key': 'password'}}}],
                                         'ports': [{'name': 'mysql', 'containerPort': 3306,
                                                    'protocol': 'TCP'}]}]}}}}),
        ('service', {'apiVersion': 'v1', 'kind': 'Service', 'metadata': {'name': name, **meta},
                     'spec': {'type': 'ClusterIP', 'selector': labels,
                              'ports': [{'name': 'mysql', 'port': 3306, 'targetPort': 'mysql',
                                         'protocol': 'TCP'}]}}),
    ]


CALLS = {  # kind -> (read, create, patch), namespaced unless noted
    'secret': ('read_namespaced_secret', 'create_namespaced_secret', 'patch_namespaced_secret'),
    'pv': ('read_persistent_volume', 'create_persistent_volume', 'patch_persistent_volume'),
    'pvc': ('read_namespaced_persistent_volume_claim', 'create_namespaced_persistent_volume_claim',
            'patch_namespaced_persistent_volume_claim'),
    'deployment': ('read_namespaced_deployment', 'create_namespaced_deployment',
                   'patch_namespaced_deployment'),
    'service': ('read_namespaced_service', 'create_namespaced_service',
                'patch_namespaced_service'),
}


def apply(kind: str, desired: dict[str, Any]) -> str:
    client = APPS if kind == 'deployment' else CORE
    read, create, patch = (getattr(client, n) for n in CALLS[kind])
    name, ns = desired['metadata']['name'], desired['metadata'].get('namespace')
    args = (name, ns) if kind != 'pv' else (name,)
    try:
        actual = API.sanitize_for_serialization(read(*args))
    except kubernetes.client.ApiException as e:
        if e.status != 404:  # noqa: PLR2004
            raise
        create(*(args[1:]), desired)
        return 'created'
    if contains(actual, desired):
        return 'ok'
    patch(*args, desired)
    return 'changed'


def reconcile(body: kopf.Body, namespace: str, name: str) -> None:
    def work() -> dict[str, int]:
        results = [apply(kind, desired) for kind, desired in manifests(body)]
        status = body.get('status') or {}
        generation = body.metadata.get('generation')
        done = any(c.get('type') == 'Successful' and c.get('status') == 'True'
                   for c in status.get('conditions') or [])
        if not done or status.get('observedGeneration') != generation:
            CUSTOM.patch_namespaced_custom_object_status(
                common.GROUP, common.VERSION, namespace, common.PLURAL, name,
                {'status': {'conditions': common.conditions(True, ''),
                            'observedGeneration': generation}})
        return {r: results.count(r) for r in ('created', 'changed', 'ok')}
    common.timed(namespace, name, work)


common.register(reconcile, 'bench-a')
