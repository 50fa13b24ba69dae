"""
Dependent watches: list-and-watch each resource that :mod:`proxy` reported, and tell the
owner of an object that changed (the SDK's ``watchDependentResources``).

One watch per resource (per watched namespace, or cluster-wide), started the first time a
run creates or reads an object of it that its object owns, and kept until the operator
stops. What counts as a change is the SDK's (operator-lib's ``DependentPredicate``):
- a deletion;
- an update of anything but ``status``, ``metadata.resourceVersion`` and
  ``metadata.managedFields`` (a Deployment's rollout progress is not a change; a hand edit
  of its spec, labels or annotations is), except, unlike the SDK, an update of none of the
  fields a run wrote to the object since the operator started (:mod:`written`; the proxy
  tells them before the write goes on): the revision annotation the Deployment controller
  adds to a new Deployment, or the volume a claim is bound to, would otherwise run the
  owner's role once more per object created, to write nothing;
- not a creation (a run's own doing), and not the objects found by a (re)list, except
  those that changed or went away while the watch was down.
An update of ``status`` alone is reported too, marked as such: a kind that asks for it
(``watchDependentStatus``, not an SDK key) runs on it, the others ignore it.
The owners are the object's controller owner reference and the
``operator-sdk/primary-resource`` annotations (see :mod:`proxy`; a Job that a CronJob
creates from a template carrying them has both). The callback gets the owner's group,
kind, namespace and name, and whether only the status changed; which kinds follow which
is the caller's.

A watch that fails (403 without list/watch RBAC, the API server down) is retried after
5 s, then up to a minute between tries; the first failure of a resource is a warning in
the log, the rest are debug lines.
"""
import asyncio
import contextlib
import dataclasses
import hashlib
import json
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, Literal

import aiohttp

from ansible_kopf.kube import client, errors, written
from ansible_kopf.kube.proxy import PRIMARY_RESOURCE, PRIMARY_RESOURCE_TYPE, Dependent

logger = logging.getLogger(__name__)

WATCH_SECONDS: Final = 290  # the API server ends a watch after this; we resume from its version
RETRY_FIRST: Final = 5.0
RETRY_CAP: Final = 60.0
HTTP_OK: Final = 200


@dataclasses.dataclass(frozen=True)
class OwnerKey:
    """The owner of a dependent that changed."""
    group: str  # "" for the core group
    kind: str
    namespace: str | None
    name: str


@dataclasses.dataclass(frozen=True)
class Change:
    """What the callback is told: an owner, the kind of its dependent that changed, and
    whether only that dependent's status did."""
    owner: OwnerKey
    group: str
    version: str
    kind: str
    status_only: bool = False
    name: str = ''  # of the dependent


Changed = Callable[[Change], None]


@dataclasses.dataclass(frozen=True)
class Seen:
    """What is kept of an owned object: its fingerprints and owners."""
    spec: str  # without status (the SDK's change)
    status: str
    owners: tuple[OwnerKey, ...]
    on_written: str | None = None  # digest on the fields the runs wrote, when known

    @classmethod
    def of(cls, obj: Mapping[str, Any], found: tuple[OwnerKey, ...],
           paths: frozenset[written.Path] | None = None) -> 'Seen':
        return cls(fingerprint(obj), _digest(obj.get('status')), found,
                   None if paths is None else written.digest(obj, paths))

    def change_from(self, before: 'Seen') -> Literal['spec', 'status'] | None:
        """What changed since ``before``: a change (``spec``), the status alone, or nothing.
        A change of none of the written fields (both digests taken on the same ones) is
        none."""
        if self.spec != before.spec and (self.on_written is None
                                         or self.on_written != before.on_written):
            return 'spec'
        return 'status' if self.status != before.status else None


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def fingerprint(obj: Mapping[str, Any]) -> str:
    """What a change is measured on: the object without status and bookkeeping. Nor its
    kind and apiVersion: a list's items come without them, a watch's objects with them,
    so the first event after a list would otherwise count as a change."""
    copy = {k: v for k, v in obj.items() if k not in ('status', 'kind', 'apiVersion')}
    copy['metadata'] = {k: v for k, v in (obj.get('metadata') or {}).items()
                        if k not in ('resourceVersion', 'managedFields')}
    return _digest(copy)


def owners(obj: Mapping[str, Any]) -> list[OwnerKey]:
    """The owners to tell: the controller reference and the SDK's annotations."""
    metadata = obj.get('metadata') or {}
    namespace = metadata.get('namespace')
    found = [OwnerKey(str(ref.get('apiVersion')).rpartition('/')[0], str(ref.get('kind')),
                      namespace, str(ref.get('name')))
             for ref in metadata.get('ownerReferences') or ()
             if isinstance(ref, Mapping) and ref.get('controller')]
    annotations = metadata.get('annotations') or {}
    primary, kind = annotations.get(PRIMARY_RESOURCE), annotations.get(PRIMARY_RESOURCE_TYPE)
    if isinstance(primary, str) and isinstance(kind, str) and '/' in primary:
        owner_namespace, _, name = primary.partition('/')
        kind_name, _, group = kind.partition('.')
        annotated = OwnerKey(group, kind_name, owner_namespace or None, name)
        if annotated not in found:
            found.append(annotated)
    return found


class Watcher:
    """The dependent watches of one operator."""

    def __init__(self, upstream: client.Upstream, namespaces: Iterable[str],
                 changed: Changed) -> None:
        self._upstream = upstream
        self._namespaces = tuple(namespaces)  # empty: cluster-wide
        self._changed = changed
        self._tasks: dict[tuple[Dependent, str | None], asyncio.Task[None]] = {}
        self._session: aiohttp.ClientSession | None = None
        # the fields the runs wrote, per object (resource, namespace, name); shared sets
        self._written: dict[tuple[Dependent, str | None, str], frozenset[written.Path]] = {}
        self._path_sets: dict[frozenset[written.Path], frozenset[written.Path]] = {}

    def wrote(self, dependent: Dependent, namespace: str | None, name: str,
              paths: frozenset[written.Path] | None, *, replace: bool) -> None:
        """A run is writing ``paths`` of this object (``replace``: a create or a replace,
        else a patch, whose paths add to the earlier ones); None: unknown paths, so any
        change counts again."""
        key = (dependent, namespace, name)
        if paths is None:
            self._written.pop(key, None)
            return
        if not replace:
            paths = paths | self._written.get(key, frozenset())
        self._written[key] = self._path_sets.setdefault(paths, paths)

    def _paths(self, dependent: Dependent,
               obj: Mapping[str, Any]) -> frozenset[written.Path] | None:
        metadata = obj.get('metadata') or {}
        return self._written.get((dependent, metadata.get('namespace'), str(metadata.get('name'))))

    def follow(self, dependent: Dependent) -> None:
        """Start watching ``dependent`` (nothing if already watched)."""
        scopes: tuple[str | None, ...] = (None,)
        if dependent.namespaced and self._namespaces:
            scopes = self._namespaces
        for namespace in scopes:
            key = (dependent, namespace)
            if key not in self._tasks:
                logger.info(f"Watching {dependent.api_version} {dependent.plural}"
                            f"{' in ' + namespace if namespace else ''} for changes to "
                            f"objects the watched kinds own")
                self._tasks[key] = asyncio.create_task(self._follow(dependent, namespace))

    async def close(self) -> None:
        for task in self._tasks.values():
            task.cancel()
        for task in self._tasks.values():
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._session is not None:
            await self._session.close()

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=self._upstream.ssl),
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=30,
                                              sock_read=WATCH_SECONDS + 30))
        return self._session

    def _url(self, dependent: Dependent, namespace: str | None) -> str:
        base = (f"/apis/{dependent.group}/{dependent.version}" if dependent.group
                else f"/api/{dependent.version}")
        scope = f"/namespaces/{namespace}" if namespace else ''
        return f"{self._upstream.host}{base}{scope}/{dependent.plural}"

    def _headers(self) -> dict[str, str]:
        token = self._upstream.authorization()
        return {'Accept': 'application/json', **({'Authorization': token} if token else {})}

    async def _follow(self, dependent: Dependent, namespace: str | None) -> None:
        seen: dict[str, Seen] = {}  # uid: (fingerprint, owners) of the owned objects
        failures = 0
        while True:
            try:
                version = await self._list(dependent, namespace, seen)
                failures = 0
                while True:
                    version = await self._watch(dependent, namespace, seen, version)
            except errors.Gone:  # the watch's resourceVersion is too old: list again
                continue
            except asyncio.CancelledError:
                raise
            except Exception as e:  # the API server down, RBAC: try again later
                log = logger.warning if failures == 0 else logger.debug
                log(f"Watch of {dependent.api_version} {dependent.plural} failed ({e}); "
                    f"retrying")
                delay = min(RETRY_FIRST * 2 ** failures, RETRY_CAP)
                failures += 1
                await asyncio.sleep(delay)

    async def _list(self, dependent: Dependent, namespace: str | None,
                    seen: dict[str, Seen]) -> str:
        async with self._client().get(self._url(dependent, namespace),
                                      headers=self._headers()) as response:
            if response.status != HTTP_OK:
                raise errors.for_status(response.status, (await response.text())[:200])
            listing = await response.json()
        kind = str(listing.get('kind') or '').removesuffix('List')
        current: dict[str, Seen] = {}
        for item in listing.get('items') or ():
            uid, found = (item.get('metadata') or {}).get('uid'), owners(item)
            if uid and found:
                current[uid] = Seen.of(item, tuple(found), self._paths(dependent, item))
        if seen:  # a relist: what changed or went away while the watch was down
            for uid, before in seen.items():
                after = current.get(uid)
                change = 'spec' if after is None else after.change_from(before)
                if change is not None:
                    self._tell(dependent, kind, (after or before).owners,
                               status_only=change == 'status')
            listed = {(m.get('namespace'), m.get('name'))
                      for m in ((i.get('metadata') or {}) for i in listing.get('items') or ())}
            for key in [k for k in self._written if k[0] == dependent
                        and namespace in (None, k[1]) and (k[1], k[2]) not in listed]:
                del self._written[key]  # went away while the watch was down
        seen.clear()
        seen.update(current)
        return str((listing.get('metadata') or {}).get('resourceVersion') or '')

    async def _watch(self, dependent: Dependent, namespace: str | None,
                     seen: dict[str, Seen], version: str) -> str:
        params = {'watch': '1', 'allowWatchBookmarks': 'true',
                  'timeoutSeconds': str(WATCH_SECONDS), 'resourceVersion': version}
        async with self._client().get(self._url(dependent, namespace), params=params,
                                      headers=self._headers()) as response:
            if response.status != HTTP_OK:
                raise errors.for_status(response.status, (await response.text())[:200])
            async for line in response.content:
                if not line.strip():
                    continue
                event = json.loads(line)
                kind, obj = event.get('type'), event.get('object') or {}
                if kind == 'ERROR':
                    code = obj.get('code')
                    raise errors.for_status(code if isinstance(code, int) else 0,
                                            str(obj.get('message') or ''))
                metadata = obj.get('metadata') or {}
                version = str(metadata.get('resourceVersion') or version)
                uid = metadata.get('uid')
                if kind == 'BOOKMARK' or not uid:
                    continue
                found = tuple(owners(obj))
                of, name = str(obj.get('kind') or ''), str(metadata.get('name') or '')
                if kind == 'DELETED':
                    seen.pop(uid, None)
                    self._written.pop((dependent, metadata.get('namespace'), name), None)
                    self._tell(dependent, of, found, status_only=False, name=name)
                    continue
                before = seen.pop(uid, None)
                if not found:
                    continue
                after = seen[uid] = Seen.of(obj, found, self._paths(dependent, obj))
                change = (after.change_from(before) if kind == 'MODIFIED' and before is not None
                          else None)
                if change is not None:
                    self._tell(dependent, of, found, status_only=change == 'status', name=name)
        return version

    def _tell(self, dependent: Dependent, kind: str, found: Iterable[OwnerKey], *,
              status_only: bool, name: str = '') -> None:
        for owner in found:
            self._changed(Change(owner, dependent.group, dependent.version, kind, status_only,
                                 name))
