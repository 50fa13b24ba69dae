"""
``kubectl get ... -o json`` in-process: the simple forms the tests poll with, answered
through the ``kubernetes`` client's connection pool instead of a kubectl process each.

Why: tests wait by polling (``Cluster.wait_for``), and a kubectl process costs about
0.08 CPU-s a call; on the two-core test machine the suite's kubectl calls took about an
eighth of all CPU. What is read is the same: the API server's JSON for one object, or a
list whose items carry ``apiVersion`` and ``kind`` as kubectl prints them.

The forms served (:func:`parse`): ``[-n NS] RESOURCE [NAME] [-l SELECTOR]
[--field-selector SELECTOR]``, RESOURCE as kubectl accepts it for one kind (plural,
singular, kind, short name, each optionally ``.group``). Anything else is ``None``, and
the caller runs kubectl. Resources are found by discovery, re-read when a name is not
found (a CRD installed since). A failed read raises :class:`AssertionError` naming the
arguments, as a failed kubectl call does.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Sequence
from typing import Any

import kubernetes


@dataclasses.dataclass(frozen=True)
class Get:
    """One parsed ``kubectl get``."""

    resource: str
    name: str | None = None
    namespace: str | None = None
    labels: str | None = None
    fields: str | None = None
    args: tuple[str, ...] = ()  # as given, for messages


def parse(args: Sequence[str]) -> Get | None:
    """The request ``args`` (kubectl get's arguments, without ``-o``) make, if simple."""
    positional: list[str] = []
    options: dict[str, str] = {}
    flags = {"-n": "namespace", "--namespace": "namespace", "-l": "labels", "--selector": "labels",
             "--field-selector": "fields"}
    items = iter(args)
    for arg in items:
        if arg in flags:
            value = next(items, None)
            if value is None or flags[arg] in options:
                return None
            options[flags[arg]] = value
        elif arg.startswith("-") or "," in arg or "/" in arg:
            return None
        else:
            positional.append(arg)
    if not 1 <= len(positional) <= 2:
        return None
    return Get(resource=positional[0].lower(), name=positional[1] if len(positional) == 2 else None,
               args=tuple(args), **options)


@dataclasses.dataclass(frozen=True)
class Kind:
    """A resource the API server serves: where, and what kubectl calls it."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    names: frozenset[str]

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None, name: str | None) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        return f"{base}/{self.plural}" + (f"/{name}" if name else "")


class Reader:
    """Answers :class:`Get` requests through ``api``; discovery is read once and on a miss."""

    def __init__(self, api: kubernetes.client.ApiClient) -> None:
        self.api = api
        self.lock = threading.Lock()
        self.kinds: list[Kind] | None = None

    def _json(self, path: str, query: list[tuple[str, str]] | None = None) -> Any:
        request = self.api.param_serialize("GET", path, query_params=query or [], auth_settings=["BearerToken"],
                                           header_params={"Accept": "application/json"})
        response = self.api.call_api(*request)
        data = response.read()  # type: ignore[no-untyped-call]
        if not 200 <= response.status < 300:
            raise LookupError(f"{response.status} {response.reason}: {data.decode(errors='replace')}")
        return json.loads(data)

    def _discover(self) -> list[Kind]:
        """Every resource, core first, then each group's versions, preferred first (kubectl's order)."""
        kinds: list[Kind] = []
        versions = [("", "v1")]
        for group in self._json("/apis")["groups"]:
            preferred = group["preferredVersion"]["version"]
            ordered = [preferred] + [v["version"] for v in group["versions"] if v["version"] != preferred]
            versions += [(group["name"], v) for v in ordered]
        for group, version in versions:
            path = f"/apis/{group}/{version}" if group else f"/api/{version}"
            for r in self._json(path)["resources"]:
                if "/" in r["name"]:
                    continue  # a subresource
                names = {r["name"], r.get("singularName") or r["kind"].lower(), r["kind"].lower(),
                         *r.get("shortNames", [])}
                kinds.append(Kind(group, version, r["name"], r["kind"], r["namespaced"],
                                  frozenset(n.lower() for n in names)))
        return kinds

    def kind(self, resource: str) -> Kind | None:
        """What kubectl would take ``resource`` (``name`` or ``name.group``) to mean."""
        discovered = False
        while True:
            with self.lock:
                if self.kinds is None:
                    self.kinds, discovered = self._discover(), True
                kinds = self.kinds
            for kind in kinds:
                if resource in kind.names or any(
                        resource == f"{n}.{kind.group}" for n in kind.names if kind.group):
                    return kind
            if discovered:  # what the server serves now: kubectl will say what it says
                return None
            with self.lock:
                self.kinds = None  # a miss on an older discovery: read it again, once

    def get(self, request: Get) -> Any | None:
        """The JSON kubectl would print for ``request``; ``None`` when kubectl should answer."""
        kind = self.kind(request.resource)
        if kind is None or (request.name and (request.labels or request.fields)) or (
                kind.namespaced and request.namespace is None):  # kubectl's context namespace
            return None
        query = [(k, v) for k, v in (("labelSelector", request.labels), ("fieldSelector", request.fields)) if v]
        path = kind.path(request.namespace, request.name)
        try:
            found = self._json(path, query)
        except LookupError as e:
            raise AssertionError(f"kubectl get {' '.join(request.args)} failed (read in-process): {e}") from None
        if request.name:
            return found
        for item in found.get("items", []):
            item.setdefault("apiVersion", kind.api_version)
            item.setdefault("kind", kind.kind)
        return {"apiVersion": "v1", "kind": "List", "items": found.get("items", []),
                "metadata": {"resourceVersion": "", "selfLink": ""}}
