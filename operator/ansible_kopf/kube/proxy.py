"""
The API proxy between the runs and the API server: owner references injected into what a
run creates, and the kinds a run creates or reads that its object owns reported to
:mod:`dependents` (the Operator SDK's design: its runs talk to a local proxy too).

Each run gets a kubeconfig of its own (``K8S_AUTH_KUBECONFIG``, mode 0600, removed when
the run ends) that points ``kubernetes.core`` at ``http://127.0.0.1:<port>`` with a random
bearer token. The token tells the proxy which object the run is for; a request without a
live run's token is refused (401), so the proxy gives nobody on the host the operator's
rights. Requests are passed on with the operator's own credentials; responses, watches
included, are streamed back unchanged.

What the proxy changes (the SDK's ``--inject-owner-ref`` semantics): the body of a
``POST`` that creates an object. In the run's object's namespace the new object gets a
controller owner reference to it, unless it already has a controller; a cluster-scoped
object, or one in another namespace, gets the annotations
``operator-sdk/primary-resource`` (``<namespace>/<name>``) and
``operator-sdk/primary-resource-type`` (``<Kind>.<group>``). A watches entry with
``injectOwnerRef: false`` turns this off for its kind.

What it reports: the resource (group, version, plural, scope) of an object a run created
and that its object owns, and of one it read (``GET`` of one object or a list) that its
object controls. A read is only inspected until that resource is known for that kind. Also
the resource of an object any run writes with the SDK's ``operator-sdk/primary-resource``
annotations naming an object of a watched kind (``annotated``: type annotation to watches
entry): a run of another kind may make an object another kind's dependent (the SDK's way to
own across namespaces or kinds), and that kind's own runs may never read it. And,
before a write (create, replace, patch) of an object of a kind its object's kind follows
goes on, which fields it writes (:mod:`written`), so that :mod:`dependents` can tell a
change to them from one to fields no run wrote.

What it logs: each ``Warning`` header the API server answers a run's request with (a
deprecated API or field, an unknown or duplicate field, a Pod Security warning), at
WARNING: ``[<gvk> <namespace>/<name>] API server warning on <METHOD> <path>: <text>``.
Nothing else shows them by default: ``kubernetes.core`` puts them in a task's result only,
whose printed text the operator logs with ``ANSIBLE_LOG_EVENTS=Everything`` only
(:mod:`ansible_kopf.run.runner_events`), and drops a text with a comma in it (``... is
deprecated in v1.21+, unavailable in v1.25+; ...``).
"""
import contextlib
import dataclasses
import json
import logging
import os
import pathlib
import re
import secrets
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Final

import aiohttp
import multidict
import yaml
from aiohttp import web

from ansible_kopf.kube import client, written
from ansible_kopf.sdk import watches

logger = logging.getLogger(__name__)

HTTP_OK: Final = 200
HTTP_CREATED: Final = 201
PRIMARY_RESOURCE: Final = 'operator-sdk/primary-resource'
PRIMARY_RESOURCE_TYPE: Final = 'operator-sdk/primary-resource-type'
# not forwarded either way: hop-by-hop headers, and what the proxy sets itself
_REQUEST_DROPPED: Final = frozenset({'host', 'authorization', 'connection', 'content-length',
                                     'transfer-encoding', 'accept-encoding', 'keep-alive',
                                     'proxy-authorization', 'upgrade'})
_RESPONSE_DROPPED: Final = frozenset({'connection', 'content-length', 'transfer-encoding',
                                      'keep-alive', 'content-encoding'})
# What the log line of a run's API server warning says before the request (tests read it back).
SERVER_WARNING: Final = 'API server warning on'
# A Warning header's warning: code, agent, quoted text (RFC 7234 5.5, as the API server sends it).
_WARNING: Final = re.compile(r'\d{3} \S+ "((?:[^"\\]|\\.)*)"')
_ESCAPED: Final = re.compile(r'\\(.)')
_PATH: Final = re.compile(
    r'^/(?:api/(?P<core>v1)|apis/(?P<group>[^/]+)/(?P<version>[^/]+))'
    r'(?:/namespaces/(?P<namespace>[^/]+))?/(?P<plural>[^/]+)(?:/(?P<name>[^/]+))?'
    r'(?:/(?P<sub>[^/]+))?$')


@dataclasses.dataclass(frozen=True)
class Dependent:
    """A resource whose objects a watched kind's objects own."""
    group: str
    version: str
    plural: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


def follows(watch: watches.Watch, dependent: Dependent, kind: str | None = None) -> bool:
    """Whether ``watch``'s kind follows ``dependent`` (of ``kind``, once known)."""
    return watch.watch_dependents and (dependent.namespaced or watch.watch_cluster_scoped) and (
        (dependent.group, dependent.version, kind) not in watch.blacklist)


@dataclasses.dataclass(frozen=True)
class Owner:
    """The object a run is for, and its watches entry."""
    api_version: str
    kind: str
    namespace: str | None
    name: str
    uid: str
    watch: watches.Watch

    @classmethod
    def of(cls, obj: Mapping[str, Any], watch: watches.Watch) -> 'Owner':
        metadata = obj.get('metadata') or {}
        return cls(api_version=str(obj.get('apiVersion')), kind=str(obj.get('kind')),
                   namespace=metadata.get('namespace'), name=str(metadata.get('name')),
                   uid=str(metadata.get('uid')), watch=watch)

    def reference(self) -> dict[str, Any]:
        return {'apiVersion': self.api_version, 'kind': self.kind, 'name': self.name,
                'uid': self.uid, 'controller': True, 'blockOwnerDeletion': True}

    def controls(self, obj: Any) -> bool:
        """Whether ``obj`` (an object of the API) has this owner as its controller."""
        if not isinstance(obj, Mapping):
            return False
        metadata = obj.get('metadata') or {}
        if any(isinstance(ref, Mapping) and ref.get('uid') == self.uid and ref.get('controller')
               for ref in metadata.get('ownerReferences') or ()):
            return True
        annotations = metadata.get('annotations') or {}
        return bool(annotations.get(PRIMARY_RESOURCE) == f"{self.namespace or ''}/{self.name}"
                    and annotations.get(PRIMARY_RESOURCE_TYPE) == self.type_annotation)

    @property
    def type_annotation(self) -> str:
        group = self.api_version.rpartition('/')[0]
        return f"{self.kind}.{group}"


@dataclasses.dataclass(frozen=True)
class RequestPath:
    """What a request's path addresses."""
    dependent: Dependent
    namespace: str | None
    name: str | None
    subresource: str | None

    @classmethod
    def parse(cls, path: str) -> 'RequestPath | None':
        match = _PATH.match(path)
        if match is None:
            return None
        namespaced = match['namespace'] is not None
        group, version = ('', match['core']) if match['core'] else (match['group'],
                                                                     match['version'])
        return cls(Dependent(group, version, match['plural'], namespaced=namespaced),
                   namespace=match['namespace'], name=match['name'], subresource=match['sub'])


def inject(owner: Owner, target: RequestPath, obj: dict[str, Any]) -> dict[str, Any]:
    """The object to create, with the owner reference or annotations the SDK would add."""
    metadata = obj.setdefault('metadata', {})
    if not isinstance(metadata, dict):
        return obj
    namespace = target.namespace or metadata.get('namespace')
    if target.dependent.namespaced and namespace == owner.namespace:
        references = metadata.get('ownerReferences') or []
        if isinstance(references, list) and not any(
                isinstance(ref, Mapping) and ref.get('controller') for ref in references):
            metadata['ownerReferences'] = [*references, owner.reference()]
    else:
        annotations = metadata.setdefault('annotations', {}) or {}
        if isinstance(annotations, dict):
            annotations.setdefault(PRIMARY_RESOURCE, f"{owner.namespace or ''}/{owner.name}")
            annotations.setdefault(PRIMARY_RESOURCE_TYPE, owner.type_annotation)
            metadata['annotations'] = annotations
    return obj


def server_warnings(values: Iterable[str]) -> list[str]:
    """The texts of ``Warning`` header values (``299 - "<text>"``, one or more a value),
    unquoted; a value of another form as it is."""
    texts = []
    for value in values:
        found = [_ESCAPED.sub(r'\1', match[1]) for match in _WARNING.finditer(value)]
        texts += found or [value]
    return texts


def kubeconfig(*, port: int, token: str) -> str:
    """A run's kubeconfig: the proxy, and the run's token."""
    return yaml.safe_dump({
        'apiVersion': 'v1', 'kind': 'Config',
        'clusters': [{'name': 'proxy', 'cluster': {'server': f"http://127.0.0.1:{port}"}}],
        'users': [{'name': 'run', 'user': {'token': token}}],
        'contexts': [{'name': 'run', 'context': {'cluster': 'proxy', 'user': 'run'}}],
        'current-context': 'run',
    })


Learned = Callable[[Owner, Dependent], None]
# a write's resource, namespace, name, fields (None: unknown), whether it replaces the object
Writing = Callable[[Dependent, str | None, str, frozenset[written.Path] | None, bool], None]


class Proxy:
    """The proxy server; :meth:`run` gives one run its kubeconfig."""

    def __init__(self, upstream: client.Upstream, directory: pathlib.Path,
                 learned: Learned, writing: Writing | None = None,
                 annotated: Mapping[str, watches.Watch] | None = None) -> None:
        self._upstream = upstream
        self._directory = directory
        self._learned = learned
        self._writing = writing
        self._annotated = dict(annotated or {})  # "<Kind>.<group>": its watches entry
        self._runs: dict[str, Owner] = {}
        self._known: set[tuple[str, str, Dependent]] = set()  # (apiVersion, kind, resource)
        self._session: aiohttp.ClientSession | None = None
        self._site: web.ServerRunner | None = None
        self.port = 0

    async def start(self, port: int = 0) -> None:
        self._directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=self._upstream.ssl),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=30),
            auto_decompress=False)
        server = web.Server(self._handle, access_log=None)  # the runs' requests: not logged
        runner = web.ServerRunner(server, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, '127.0.0.1', port)
        await site.start()
        self._site = runner
        self.port = int(runner.addresses[0][1])
        logger.info(f"API proxy for the runs listening on 127.0.0.1:{self.port}")

    async def close(self) -> None:
        if self._site is not None:
            await self._site.cleanup()
        if self._session is not None:
            await self._session.close()

    @contextlib.contextmanager
    def run(self, owner: Owner) -> Iterator[str]:
        """The path of a kubeconfig for one run for ``owner``, valid until the block ends."""
        token = secrets.token_urlsafe(32)
        path = self._directory / f"run-{secrets.token_hex(8)}.kubeconfig"
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, 'w', encoding='utf-8') as file:
            file.write(kubeconfig(port=self.port, token=token))
        self._runs[token] = owner
        try:
            yield str(path)
        finally:
            del self._runs[token]
            path.unlink(missing_ok=True)

    def _learn(self, owner: Owner, dependent: Dependent) -> None:
        key = (owner.api_version, owner.kind, dependent)
        if key not in self._known:
            self._known.add(key)
            self._learned(owner, dependent)

    def _follows(self, owner: Owner, dependent: Dependent, kind: str | None = None) -> bool:
        """Whether ``owner``'s kind follows ``dependent`` (of ``kind``, once known)."""
        return follows(owner.watch, dependent, kind)

    def _annotated_write(self, target: RequestPath, data: Any) -> None:
        """Learn ``target``'s resource for the watched kind a write's primary-resource
        annotations name (whichever run writes them)."""
        metadata = data.get('metadata') if isinstance(data, dict) else None
        annotations = metadata.get('annotations') if isinstance(metadata, dict) else None
        if not isinstance(annotations, dict) or not annotations.get(PRIMARY_RESOURCE):
            return
        watch = self._annotated.get(str(annotations.get(PRIMARY_RESOURCE_TYPE) or ''))
        kind = data.get('kind') if isinstance(data.get('kind'), str) else None
        if watch is None or not follows(watch, target.dependent, kind):
            return
        owner = Owner(api_version=f"{watch.group}/{watch.version}", kind=watch.kind,
                      namespace=None, name='', uid='', watch=watch)
        self._learn(owner, target.dependent)

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        authorization = request.headers.get('Authorization', '')
        owner = self._runs.get(authorization.removeprefix('Bearer ').strip())
        if owner is None or self._session is None:
            return web.json_response(
                {'kind': 'Status', 'apiVersion': 'v1', 'status': 'Failure', 'code': 401,
                 'reason': 'Unauthorized', 'message': 'not a token of a running reconcile'},
                status=401)
        body = await request.read()
        target = RequestPath.parse(request.path)
        created: Dependent | None = None
        writes = request.method in ('POST', 'PUT', 'PATCH') and target is not None and bool(body)
        data = written.decode(body, request.content_type) if writes else None  # parsed once
        if (request.method == 'POST' and target is not None and target.name is None
                and isinstance(data, dict) and request.content_type == 'application/json'):
            body, created, data = self._creating(owner, target, body, data)
        if (self._writing is not None and writes and target is not None
                and target.subresource is None and self._follows(owner, target.dependent)):
            self._tell_writing(request.method, target, data, request.content_type)
        if writes and target is not None and target.subresource is None and self._annotated:
            self._annotated_write(target, data)
        inspect = (request.method == 'GET' and target is not None and target.subresource is None
                   and request.query.get('watch') not in ('1', 'true')
                   and self._follows(owner, target.dependent)
                   and (owner.api_version, owner.kind, target.dependent) not in self._known)
        try:
            return await self._forward(request, owner=owner, target=target, body=body,
                                       created=created, inspect=inspect)
        except aiohttp.ClientError as e:  # the API server down: the run's request fails
            return web.json_response(
                {'kind': 'Status', 'apiVersion': 'v1', 'status': 'Failure', 'code': 502,
                 'reason': 'BadGateway', 'message': f"API server unreachable: {e}"},
                status=502)

    async def _forward(self, request: web.BaseRequest, *, owner: Owner, target: RequestPath | None,
                       body: bytes, created: Dependent | None,
                       inspect: bool) -> web.StreamResponse:
        assert self._session is not None  # noqa: S101  (checked by the caller)
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _REQUEST_DROPPED}
        token = self._upstream.authorization()
        if token:
            headers['Authorization'] = token
        # the bodies pass (and are read) as they are: aiohttp would otherwise ask for gzip,
        # which the API server uses above 128 KB, and the run would get it undeclared
        headers['Accept-Encoding'] = 'identity'
        async with self._session.request(request.method, self._upstream.host + request.raw_path,
                                         headers=headers, data=body or None) as upstream:
            for text in server_warnings(upstream.headers.getall('Warning', ())):
                where = f"{owner.namespace}/{owner.name}" if owner.namespace else owner.name
                logger.warning(f"[{owner.watch.gvk} {where}] {SERVER_WARNING} "
                               f"{request.method} {request.path}: {text}")
            # a multidict: a header the API server sends more than once (Warning) reaches
            # the run as many times
            response_headers = multidict.CIMultiDict(
                (k, v) for k, v in upstream.headers.items() if k.lower() not in _RESPONSE_DROPPED)
            if created is not None and upstream.status in (HTTP_OK, HTTP_CREATED):
                self._learn(owner, created)
            if inspect and upstream.status == HTTP_OK and target is not None:
                data = await upstream.read()
                self._inspect(owner, target.dependent, data)
                return web.Response(body=data, status=upstream.status, headers=response_headers)
            response = web.StreamResponse(status=upstream.status, headers=response_headers)
            await response.prepare(request)
            try:
                async for chunk in upstream.content.iter_any():
                    await response.write(chunk)
                await response.write_eof()
            except (ConnectionResetError, aiohttp.ClientError):
                pass  # the run stopped reading (a watch it ended), or the API server went away
            return response

    def _creating(self, owner: Owner, target: RequestPath, body: bytes,
                  obj: dict[str, Any]) -> tuple[bytes, Dependent | None, dict[str, Any]]:
        """The body (and its object) to send instead, and the resource to report once it
        is created."""
        if not isinstance(obj.get('kind'), str):
            return body, None, obj
        if owner.watch.inject_owner_ref:
            obj = inject(owner, target, obj)
            body = json.dumps(obj).encode()
        if owner.controls(obj) and self._follows(owner, target.dependent, obj['kind']):
            return body, target.dependent, obj
        return body, None, obj

    def _tell_writing(self, method: str, target: RequestPath, data: Any, content_type: str) -> None:
        """Report the fields a create, replace or patch of one object writes (``data``:
        the decoded body)."""
        name = target.name
        if method == 'POST' and name is None:
            metadata = data.get('metadata') if isinstance(data, dict) else None
            name = metadata.get('name') if isinstance(metadata, dict) else None
        elif method not in ('PUT', 'PATCH') or name is None:
            return
        if isinstance(name, str) and name and self._writing is not None:
            self._writing(target.dependent, target.namespace, name,
                          written.paths_in(data, content_type), method != 'PATCH')

    def _inspect(self, owner: Owner, dependent: Dependent, data: bytes) -> None:
        try:
            obj = json.loads(data)
        except ValueError:
            return
        if not isinstance(obj, Mapping):
            return
        items = obj.get('items')
        objects = items if isinstance(items, list) else [obj]
        kind = str(obj.get('kind') or '')
        kind = kind.removesuffix('List') if isinstance(items, list) else kind
        if self._follows(owner, dependent, kind) and any(owner.controls(i) for i in objects):
            self._learn(owner, dependent)
