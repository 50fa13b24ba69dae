"""
The operator's own calls to the Kubernetes API: read a watched object fresh before a run,
and merge-patch its ``.status`` through the status subresource.

kopf has no public call for "patch now" (its ``patch`` kwarg is applied after the handler
returns), and ``Running`` must be visible while a run is in progress; so these two calls
go through the official ``kubernetes`` client (already needed by ``kubernetes.core`` in
the roles), in a thread. Only custom resources are supported, namespaced or cluster-scoped.

The client is configured like kopf and ``kubernetes.core``: in-cluster service account
when available, otherwise ``KUBECONFIG`` / ``~/.kube/config``.
"""
import asyncio
from collections.abc import Mapping
from typing import Any, Final, Protocol

import kopf

FIELD_MANAGER: Final = 'ansible-kopf'
REQUEST_TIMEOUT: Final = 30  # seconds
HTTP_NOT_FOUND: Final = 404


class ObjectsApi(Protocol):
    """What reconciling needs from the API (a protocol, so tests can run without one)."""

    async def get(self, resource: kopf.Resource, *, namespace: str | None,
                  name: str) -> dict[str, Any] | None: ...

    async def patch_status(self, resource: kopf.Resource, *, namespace: str | None, name: str,
                           patch: Mapping[str, Any]) -> dict[str, Any] | None: ...


class KubernetesApi:
    """:class:`ObjectsApi` through ``kubernetes.client.CustomObjectsApi``."""

    def __init__(self, api_client: Any) -> None:
        import kubernetes.client  # noqa: PLC0415  (slow to import: only when connecting)
        self._api = kubernetes.client.CustomObjectsApi(api_client)
        self._api_exception = kubernetes.client.ApiException

    async def _call(self, method: str, resource: kopf.Resource, namespace: str | None,
                    name: str, *body: Any, **kwargs: Any) -> dict[str, Any] | None:
        if resource.namespaced:
            call = getattr(self._api, f"{method.format(scope='namespaced')}")
            args: tuple[Any, ...] = (resource.group, resource.version, namespace,
                                     resource.plural, name, *body)
        else:
            call = getattr(self._api, f"{method.format(scope='cluster')}")
            args = (resource.group, resource.version, resource.plural, name, *body)
        try:
            result = await asyncio.to_thread(call, *args, _request_timeout=REQUEST_TIMEOUT,
                                             **kwargs)
        except self._api_exception as e:
            if e.status == HTTP_NOT_FOUND:  # deleted meanwhile: nothing to read or to report
                return None
            raise
        return dict(result) if isinstance(result, Mapping) else None

    async def get(self, resource: kopf.Resource, *, namespace: str | None,
                  name: str) -> dict[str, Any] | None:
        return await self._call('get_{scope}_custom_object', resource, namespace, name)

    async def patch_status(self, resource: kopf.Resource, *, namespace: str | None, name: str,
                           patch: Mapping[str, Any]) -> dict[str, Any] | None:
        return await self._call('patch_{scope}_custom_object_status', resource, namespace, name,
                                {'status': dict(patch)}, field_manager=FIELD_MANAGER)


def connect() -> KubernetesApi:
    """Configure the client from the pod's service account, else from the kubeconfig."""
    import kubernetes.client  # noqa: PLC0415
    import kubernetes.config  # noqa: PLC0415
    configuration = kubernetes.client.Configuration()
    try:
        kubernetes.config.load_incluster_config(  # type: ignore[no-untyped-call]
            client_configuration=configuration)
    except kubernetes.config.ConfigException:
        kubernetes.config.load_kube_config(  # type: ignore[no-untyped-call]
            client_configuration=configuration)
    return KubernetesApi(kubernetes.client.ApiClient(configuration))
