"""
The operator's own calls to the Kubernetes API: read a watched object fresh before a run,
merge-patch its ``.status`` through the status subresource, and post a Warning Event on
it when a run that no kopf handler made fails (kopf's own posting works only inside its
handlers' tasks).

kopf has no public call for "patch now" (its ``patch`` kwarg is applied after the handler
returns), and ``Running`` must be visible while a run is in progress; so these two calls
go through the official ``kubernetes`` client (already needed by ``kubernetes.core`` in
the roles), in a thread, at the object's own path: ``/api/v1/...`` for the core group (a
watched Secret or ConfigMap), ``/apis/<group>/<version>/...`` otherwise, namespaced or
cluster-scoped. A kind without a status subresource answers the status patch with 404,
which is taken as "nothing to report" like an object deleted meanwhile; any other error
status is raised as one of :mod:`errors`.

The client is configured like kopf and ``kubernetes.core``: in-cluster service account
when available, otherwise ``KUBECONFIG`` / ``~/.kube/config``. The same configuration is
what :mod:`proxy` and :mod:`dependents` use to reach the API server (:class:`Upstream`),
and :meth:`KubernetesApi.resource` finds a watched kind's plural and scope.
"""
import asyncio
import dataclasses
import datetime
import ssl
import time
from collections.abc import Callable, Mapping
from typing import Any, Final, Protocol, cast

import kopf

from ansible_kopf.kube import errors

FIELD_MANAGER: Final = 'ansible-kopf'
EVENT_SOURCE: Final = 'kopf'  # as kopf's own Events say, so that both read the same in kubectl
REQUEST_TIMEOUT: Final = 30  # seconds
# How long an Authorization header value is reused. The refresh hook behind it re-reads
# the kubeconfig (or token file) and resets the client's proxy from the environment on
# every call: about 3 ms, a tenth of the operator's CPU when every proxied request paid it.
# Tokens are rotated well before they expire, so seconds of reuse change nothing.
AUTHORIZATION_TTL: Final = 5.0  # seconds


class ObjectsApi(Protocol):
    """What reconciling needs from the API (a protocol, so tests can run without one)."""

    async def get(self, resource: kopf.Resource, *, namespace: str | None,
                  name: str) -> dict[str, Any] | None: ...

    async def patch_status(self, resource: kopf.Resource, *, namespace: str | None, name: str,
                           patch: Mapping[str, Any]) -> dict[str, Any] | None: ...

    async def warn(self, obj: Mapping[str, Any], *, reason: str, message: str) -> None: ...


def path(resource: kopf.Resource, *, namespace: str | None, name: str,
         subresource: str = '') -> str:
    """The API path of one object (and of its subresource)."""
    version = resource.version
    base = f"/apis/{resource.group}/{version}" if resource.group else f"/api/{version}"
    scope = f"/namespaces/{namespace}" if resource.namespaced else ''
    return f"{base}{scope}/{resource.plural}/{name}" + (f"/{subresource}" if subresource else '')


class KubernetesApi:
    """:class:`ObjectsApi` through ``kubernetes.client.ApiClient`` at the objects' paths."""

    def __init__(self, api_client: Any) -> None:
        self._client = api_client

    async def _call(self, method: str, url: str, *, body: Any = None,
                    headers: Mapping[str, str] | None = None,
                    query: list[tuple[str, str]] | None = None) -> dict[str, Any] | None:
        def call() -> Any:
            request = self._client.param_serialize(
                method, url, query_params=query or [], body=body, auth_settings=['BearerToken'],
                header_params={'Accept': 'application/json', **(headers or {})})
            response = self._client.call_api(*request, _request_timeout=REQUEST_TIMEOUT)
            response.read()
            types = {'200': 'object', '201': 'object'}
            return self._client.response_deserialize(response, types).data

        def translated_call() -> Any:
            with errors.translated():
                return call()

        try:
            result = await asyncio.to_thread(translated_call)
        except errors.NotFound:  # deleted meanwhile (or no status subresource)
            return None
        return dict(result) if isinstance(result, Mapping) else None

    async def get(self, resource: kopf.Resource, *, namespace: str | None,
                  name: str) -> dict[str, Any] | None:
        return await self._call('GET', path(resource, namespace=namespace, name=name))

    async def resource(self, group: str, version: str, kind: str) -> kopf.Resource | None:
        """The kind's resource (plural, scope) from discovery; ``None`` if not served."""
        base = f"/apis/{group}/{version}" if group else f"/api/{version}"
        listing = await self._call('GET', base)
        for entry in (listing or {}).get('resources') or []:
            if entry.get('kind') == kind and '/' not in str(entry.get('name')):
                return kopf.Resource(group, version, str(entry['name']), kind=kind,
                                     namespaced=bool(entry.get('namespaced')))
        return None

    def upstream(self) -> 'Upstream':
        return upstream_of(self._client.configuration)

    def leases(self) -> Any:
        """The blocking ``CoordinationV1Api`` on this client (:mod:`leader_election` uses it)."""
        import kubernetes.client  # noqa: PLC0415
        return kubernetes.client.CoordinationV1Api(self._client)

    async def warn(self, obj: Mapping[str, Any], *, reason: str, message: str) -> None:
        await self._call('POST', f"/api/v1/namespaces/{_event_namespace(obj)}/events",
                         body=event(obj, reason=reason, message=message))

    async def patch_status(self, resource: kopf.Resource, *, namespace: str | None, name: str,
                           patch: Mapping[str, Any]) -> dict[str, Any] | None:
        return await self._call(
            'PATCH', path(resource, namespace=namespace, name=name, subresource='status'),
            body={'status': dict(patch)}, headers={'Content-Type': 'application/merge-patch+json'},
            query=[('fieldManager', FIELD_MANAGER)])


def _event_namespace(obj: Mapping[str, Any]) -> str:
    return str((obj.get('metadata') or {}).get('namespace') or 'default')


def event(obj: Mapping[str, Any], *, reason: str, message: str,
          now: datetime.datetime | None = None) -> dict[str, Any]:
    """A core v1 Warning Event about ``obj`` (a cluster-scoped one's goes to ``default``)."""
    metadata = obj.get('metadata') or {}
    stamp = (now or datetime.datetime.now(datetime.UTC)).strftime('%Y-%m-%dT%H:%M:%S.%fZ')
    return {
        'apiVersion': 'v1', 'kind': 'Event',
        'metadata': {'generateName': f"{metadata.get('name', 'object')}.",
                     'namespace': _event_namespace(obj)},
        'type': 'Warning', 'reason': reason, 'message': message,
        'involvedObject': {'apiVersion': obj.get('apiVersion'), 'kind': obj.get('kind'),
                           'name': metadata.get('name'), 'namespace': metadata.get('namespace'),
                           'uid': metadata.get('uid')},
        'source': {'component': EVENT_SOURCE}, 'reportingComponent': EVENT_SOURCE,
        'firstTimestamp': stamp[:19] + 'Z', 'lastTimestamp': stamp[:19] + 'Z', 'count': 1,
    }


@dataclasses.dataclass(frozen=True)
class Upstream:
    """Where the API server is and how to authenticate to it, for an HTTP client of our own."""
    host: str  # https://host:port, no trailing slash
    ssl: ssl.SSLContext | bool  # False: do not verify (the kubeconfig said so)
    # the Authorization header's value, at most AUTHORIZATION_TTL old
    authorization: Callable[[], str | None]


def upstream_of(configuration: Any) -> Upstream:
    """The :class:`Upstream` of a ``kubernetes.client.Configuration``."""
    context: ssl.SSLContext | bool = False
    if configuration.verify_ssl:
        context = ssl.create_default_context(cafile=configuration.ssl_ca_cert or None)
    if configuration.cert_file:
        if not isinstance(context, ssl.SSLContext):
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        context.load_cert_chain(configuration.cert_file, configuration.key_file)

    fresh: dict[str, Any] = {}  # the last value, and when it was read

    def authorization() -> str | None:
        now = time.monotonic()
        if now - fresh.get('at', -AUTHORIZATION_TTL) >= AUTHORIZATION_TTL:
            settings = configuration.auth_settings()  # calls the token refresh hook, if any
            value = (settings.get('BearerToken') or {}).get('value')
            fresh.update(at=now, value=str(value) if value else None)
        return cast('str | None', fresh['value'])

    return Upstream(host=str(configuration.host).rstrip('/'), ssl=context,
                    authorization=authorization)


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
