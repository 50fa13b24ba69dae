"""
What the integration tests and the benchmark (``bench/``) both drive, one class each: the
cluster (:class:`Cluster`), an operator process and its log (:class:`Operator`), and the
local cluster's audit log (:class:`AuditLog`).

The cluster is reached two ways, both methods of :class:`Cluster`: ``kubectl``, for what
tests do as a user would (``kubectl`` output, ``exec``, ``logs``, ``rollout status``), and
the ``kubernetes`` client, for many calls and watches without a process each (the
benchmark's objects, namespaces, CRDs). An operator's runs are read from its log with
:mod:`ansible_kopf.run.summary` (the ``reconcile-summary`` line), never with a pattern here.

What only one side needs stays there: tests/kube.py (server images, Job manifests),
tests/integration/operator_harness.py (the operator tests' MySQL objects and helpers),
bench/harness.py (the benchmark's workload and /proc readings).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import datetime
import functools
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import kubernetes
import urllib3
import yaml

from ansible_kopf.run import summary
from tests import api_warnings, reads

REPO = Path(__file__).resolve().parents[1]
# The local cluster's (cluster/lib/control_plane.sh): write requests only, one JSON event a line.
AUDIT_LOG = Path("/var/lib/otus-cluster/logs/audit.log")
# The labels of every namespace the tests create: Pod Security "restricted" enforced (a pod
# that breaks it is refused) and warned of (kubectl and the operator's API calls are told
# when a workload's pod template breaks it).
RESTRICTED = {"pod-security.kubernetes.io/enforce": "restricted",
              "pod-security.kubernetes.io/warn": "restricted"}
# On every namespace the tests create: the process that created it (owner_of_this_process),
# so that a later run removes the namespaces of a run that was killed (owner_alive).
OWNER_LABEL = "otus.homework/test-owner"
# User agents of the cluster's own components, whose writes are not an operator's.
SYSTEM_AGENTS = ("kubelet/", "kube-controller-manager/", "kube-scheduler/", "kube-apiserver/")
# What kubectl says when its request never reached the API server: the fault test freezes the
# shared cluster's API server (SIGSTOP, 30 s) while other workers run, so a test's kubectl
# call tries again, as a user would, for up to UNREACHABLE_FOR seconds.
UNREACHABLE = re.compile(r"Unable to connect to the server|TLS handshake timeout|connect: connection refused")
UNREACHABLE_FOR = 120.0


def start_time(pid: int) -> str | None:
    """When process `pid` started (clock ticks since boot, /proc/<pid>/stat), None when it is
    gone: with the pid, it names one process, never a later one given the same pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8")
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", os.uname().nodename).strip("-")[:30] or "host"


def owner_of_this_process() -> str:
    """The value of OWNER_LABEL for what this process creates: `<host>.<pid>.<start time>`."""
    return f"{_host()}.{os.getpid()}.{start_time(os.getpid())}"


def owner_alive(owner: str) -> bool:
    """Whether the process an OWNER_LABEL value names still runs; True for another host's
    (or a value this harness did not write), whose processes it cannot see."""
    parts = owner.split(".")
    if len(parts) != 3 or parts[0] != _host() or not parts[1].isdigit():
        return True
    return start_time(int(parts[1])) == parts[2]


def now_utc() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


@dataclasses.dataclass(frozen=True)
class Resource:
    """A custom resource's API: ``group``/``version``, objects under ``plural``."""

    group: str
    version: str
    plural: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"


def leading_number(text: str) -> int:
    """The number a version field starts with: ``"34"`` and ``"28+"`` are 34 and 28."""
    match = re.match(r"\d+", text)
    if match is None:
        raise ValueError(f"not a version number: {text!r}")
    return int(match.group())


def is_successful(obj: Mapping[str, Any]) -> bool:
    """Status of the object's current generation, with a ``Successful`` condition that is True."""
    status = obj.get("status") or {}
    if status.get("observedGeneration") != obj["metadata"].get("generation"):
        return False
    return any(c.get("type") == "Successful" and c.get("status") == "True"
               for c in status.get("conditions") or [])


@dataclasses.dataclass(frozen=True)
class Cluster:
    """
    A reachable cluster: its kubeconfig, the kubectl to use, and whether it is the local one
    (cluster/cluster.sh: its node is this host, its audit log is :data:`AUDIT_LOG`).
    """

    kubeconfig: str
    kubectl_bin: str = "kubectl"
    local: bool = False

    # --- kubectl ---

    def kubectl(self, *args: str, check: bool = True, stdin: str | None = None,
                timeout: float = 300) -> subprocess.CompletedProcess[str]:
        give_up = time.monotonic() + UNREACHABLE_FOR
        while True:
            done = subprocess.run(
                [self.kubectl_bin, "--kubeconfig", self.kubeconfig, *args],
                input=stdin, capture_output=True, text=True, timeout=timeout,
            )
            if done.returncode == 0 or not UNREACHABLE.search(done.stderr) or time.monotonic() > give_up:
                break
            print("  the API server did not answer a kubectl call; trying again", flush=True)
            time.sleep(2)
        api_warnings.from_kubectl(args, done.stderr)  # they fail the session (tests/api_warnings.py)
        if check and done.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
        return done

    def apply(self, manifest: str, namespace: str | None = None) -> None:
        args = ["apply", "-f", "-"] + (["-n", namespace] if namespace else [])
        self.kubectl(*args, stdin=manifest)

    def get(self, *args: str) -> Any:
        """``kubectl get <args> -o json``, parsed; the simple forms read in-process (:mod:`tests.reads`)."""
        request = reads.parse(args)
        if request is not None:
            found = self.reader.get(request)
            if found is not None:
                return found
        return json.loads(self.kubectl("get", *args, "-o", "json").stdout)

    def wait_ready(self) -> None:
        """Wait for the nodes, all Ready."""
        def node_ready() -> bool:
            done = self.kubectl("get", "nodes", "-o", "json", check=False)
            if done.returncode != 0:
                return False
            nodes = json.loads(done.stdout)["items"]
            return bool(nodes) and all(
                c["status"] == "True" for n in nodes for c in n["status"]["conditions"] if c["type"] == "Ready"
            )
        self.wait_for(node_ready, timeout=180, what="a Ready node")

    def job_logs(self, namespace: str, job: str) -> str:
        return self.kubectl("-n", namespace, "logs", f"job/{job}", check=False).stdout

    def wait_job(self, namespace: str, job: str, timeout: float = 300) -> None:
        def finished() -> bool:
            status = self.get("-n", namespace, "job", job).get("status", {})
            if status.get("failed", 0) > 0 and not status.get("active"):
                raise AssertionError(f"job {job} failed:\n{self.job_logs(namespace, job)}")
            return bool(status.get("succeeded"))
        self.wait_for(finished, timeout=timeout, what=f"job {namespace}/{job} to complete")

    # --- the kubernetes client ---

    @functools.cached_property
    def api(self) -> kubernetes.client.ApiClient:
        configuration = kubernetes.client.Configuration()
        kubernetes.config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=self.kubeconfig, client_configuration=configuration)
        configuration.connection_pool_maxsize = 32  # the benchmark creates from 16 threads
        return kubernetes.client.ApiClient(configuration)

    @functools.cached_property
    def reader(self) -> reads.Reader:
        return reads.Reader(self.api)

    @functools.cached_property
    def core(self) -> kubernetes.client.CoreV1Api:
        return kubernetes.client.CoreV1Api(self.api)

    @functools.cached_property
    def custom(self) -> kubernetes.client.CustomObjectsApi:
        return kubernetes.client.CustomObjectsApi(self.api)

    @functools.cached_property
    def extensions(self) -> kubernetes.client.ApiextensionsV1Api:
        return kubernetes.client.ApiextensionsV1Api(self.api)

    def server_git_version(self) -> str:
        """The API server's version as it names itself (``v1.34.4``), from ``/version``."""
        return str(kubernetes.client.VersionApi(self.api).get_code().git_version)

    @functools.cached_property
    def server_version(self) -> tuple[int, int]:
        """The API server's version as (major, minor), from ``/version``: ``(1, 34)``. A
        provider's minor such as ``"28+"`` counts as its number."""
        info = kubernetes.client.VersionApi(self.api).get_code()
        return leading_number(info.major), leading_number(info.minor)

    def install_crd(self, path: Path, timeout: float = 60) -> None:
        """Create each CustomResourceDefinition in ``path`` (one or more YAML documents), or
        patch the existing one with it (as ``kubectl apply`` would: nothing is written if
        nothing differs), and wait until each is Established."""
        for body in yaml.safe_load_all(path.read_text()):
            if body:
                self._install_one_crd(body, timeout)

    def _install_one_crd(self, body: Any, timeout: float) -> None:
        name = body["metadata"]["name"]
        try:
            self.extensions.create_custom_resource_definition(body)
        except kubernetes.client.ApiException as e:
            if e.status != 409:
                raise
            self.extensions.patch_custom_resource_definition(
                name, body, _content_type="application/merge-patch+json")

        def established() -> bool:
            crd = self.extensions.read_custom_resource_definition(name)
            return any(c.type == "Established" and c.status == "True"
                       for c in (crd.status.conditions if crd.status else None) or [])
        self.wait_for(established, timeout=timeout, what=f"crd/{name} to be Established", interval=0.2)

    def create_namespace(self, name: str, labels: Mapping[str, str] | None = None) -> str:
        """Create namespace ``name`` at Pod Security "restricted" (:data:`RESTRICTED`), labelled
        with its owner (:data:`OWNER_LABEL`), and wait for its default ServiceAccount (pods
        need it)."""
        owned = {**RESTRICTED, OWNER_LABEL: owner_of_this_process(), **(labels or {})}
        self.core.create_namespace(kubernetes.client.V1Namespace(
            metadata=kubernetes.client.V1ObjectMeta(name=name, labels=owned)))

        def has_account() -> bool:
            try:
                self.core.read_namespaced_service_account("default", name)
            except kubernetes.client.ApiException as e:
                if e.status != 404:
                    raise
                return False
            return True
        self.wait_for(has_account, timeout=60, what=f"the default ServiceAccount of {name}", interval=0.2)
        return name

    def delete_namespace(self, name: str, *, drop_finalizers: Sequence[Resource] = ()) -> None:
        """Delete it, not waiting; first drop the finalizers of its objects of
        ``drop_finalizers`` (for when their operator is gone). Errors are ignored."""
        for resource in drop_finalizers:
            with contextlib.suppress(kubernetes.client.ApiException):
                for item in self.list_objects(resource, name)["items"]:
                    if item["metadata"].get("finalizers"):
                        with contextlib.suppress(kubernetes.client.ApiException):
                            self.custom.patch_namespaced_custom_object(
                                resource.group, resource.version, name, resource.plural,
                                item["metadata"]["name"], {"metadata": {"finalizers": None}})
        with contextlib.suppress(kubernetes.client.ApiException):
            self.core.delete_namespace(name)

    def wait_namespaces_gone(self, names: Iterable[str], timeout: float = 300) -> None:
        """Wait (at most ``timeout``, then return) until none of ``names`` exists."""
        deadline = time.monotonic() + timeout
        pending = set(names)
        while pending and time.monotonic() < deadline:
            pending &= {n.metadata.name for n in self.core.list_namespace().items if n.metadata}
            time.sleep(1)

    def delete_volumes(self, selector: str) -> int:
        """Delete the PersistentVolumes of label selector ``selector``; how many there were."""
        volumes = self.core.list_persistent_volume(label_selector=selector).items
        for name in (v.metadata.name for v in volumes if v.metadata and v.metadata.name):
            with contextlib.suppress(kubernetes.client.ApiException):
                self.core.delete_persistent_volume(name)
        return len(volumes)

    def list_objects(self, resource: Resource, namespace: str) -> dict[str, Any]:
        """The namespace's objects of ``resource``: a list (``items``, ``metadata``)."""
        return cast("dict[str, Any]", self.custom.list_namespaced_custom_object(
            resource.group, resource.version, namespace, resource.plural))

    def create_object(self, resource: Resource, namespace: str, body: Mapping[str, Any]) -> None:
        self.custom.create_namespaced_custom_object(resource.group, resource.version, namespace,
                                                    resource.plural, dict(body))

    def create_and_wait(self, resource: Resource, namespace: str, bodies: Sequence[Mapping[str, Any]],
                        timeout: float = 900) -> dict[str, float]:
        """
        Create all at once; seconds from the start until each was seen Successful
        (:func:`is_successful`), by name; the ones not seen in ``timeout`` are missing. The
        objects are watched, not polled: listing 100 objects every 50 ms would itself take a
        third of a core from the API server and this process, which is the machine the
        operator under test runs on.
        """
        names = {body["metadata"]["name"] for body in bodies}
        watcher = Watcher(self, resource, namespace, names)
        watcher.start()
        try:
            watcher.started = time.monotonic()  # the clock starts with the first create
            with concurrent.futures.ThreadPoolExecutor(min(16, len(bodies))) as pool:
                list(pool.map(lambda body: self.create_object(resource, namespace, body), bodies))
            watcher.done.wait(timeout)
        finally:
            watcher.stop()
        return dict(watcher.seen)

    # --- both ---

    def wait_for(self, probe: Callable[[], bool], timeout: float, what: str, interval: float = 1.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if probe():
                return
            time.sleep(interval)
        raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


class Watcher(threading.Thread):
    """
    Notes when each of ``names`` is first seen Successful, from a watch of the namespace's
    objects of ``resource`` (listed again, and watched from there, if the watch ends).
    """

    def __init__(self, cluster: Cluster, resource: Resource, namespace: str, names: set[str]) -> None:
        super().__init__(daemon=True)
        self.cluster, self.resource, self.namespace, self.names = cluster, resource, namespace, names
        self.started = time.monotonic()
        self.seen: dict[str, float] = {}
        self.done = threading.Event()
        self._stopping = threading.Event()
        self._watch = kubernetes.watch.Watch()  # type: ignore[no-untyped-call]
        self.listed = threading.Event()  # the first list is done: creations will be seen

    def run(self) -> None:
        r = self.resource
        while not self._stopping.is_set() and not self.done.is_set():
            try:
                listing = self.cluster.list_objects(r, self.namespace)
                for item in listing["items"]:
                    self._note(item)
                self.listed.set()
                for event in self._watch.stream(  # type: ignore[no-untyped-call]
                        self.cluster.custom.list_namespaced_custom_object, r.group, r.version,
                        self.namespace, r.plural, timeout_seconds=60,
                        resource_version=listing["metadata"]["resourceVersion"]):
                    self._note(event["object"])
                    if self._stopping.is_set() or self.done.is_set():
                        break
            except (kubernetes.client.ApiException, OSError, ValueError,
                    urllib3.exceptions.HTTPError):
                time.sleep(0.5)  # e.g. 410 Gone: list again

    def _note(self, item: Mapping[str, Any]) -> None:
        name = item.get("metadata", {}).get("name")
        if name in self.names and name not in self.seen and is_successful(item):
            self.seen[name] = time.monotonic() - self.started
            if len(self.seen) == len(self.names):
                self.done.set()

    def start(self) -> None:
        super().start()
        self.listed.wait(30)

    def stop(self) -> None:
        self._stopping.set()
        self._watch.stop()  # type: ignore[no-untyped-call]


@dataclasses.dataclass
class Operator:
    """
    An operator process (by default ``python -m ansible_kopf``; the benchmark's baselines
    are ``kopf run`` commands) started from the repository in a session of its own, its
    output appended to ``log_path``. ``name`` says which one in errors.
    """

    log_path: Path
    env: dict[str, str]
    command: list[str] = dataclasses.field(default_factory=lambda: [sys.executable, "-m", "ansible_kopf"])
    name: str = "the operator"
    stop_signal: signal.Signals = signal.SIGTERM  # then SIGKILL after 30 s
    process: subprocess.Popen[bytes] | None = None
    log_offset: int = 0  # the log's size at the last start: where this run's lines begin

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(self.command, cwd=REPO, env=self.env,
                                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, self.stop_signal)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)

    @property
    def pid(self) -> int:
        if self.process is None:
            raise RuntimeError(f"{self.name}: the process was not started")
        return self.process.pid

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def wait_ready(self, text: str, timeout: float = 120) -> None:
        """Wait until ``text`` is in the log (what the operator says once it is ready)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.log():
                return
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited:\n{self.log()[-3000:]}")
            time.sleep(0.2)
        raise RuntimeError(f"{self.name} not ready:\n{self.log()[-3000:]}")

    def log(self, since_start: bool = False) -> str:
        """The whole log, or what the process wrote since its last start."""
        try:
            text = self.log_path.read_bytes()
        except FileNotFoundError:
            return ""
        return (text[self.log_offset:] if since_start else text).decode(errors="replace")

    def summaries(self, since_start: bool = False) -> list[summary.Summary]:
        """Its runs, in order: the ``reconcile-summary`` lines of :meth:`log`."""
        return summary.parse_all(self.log(since_start))


@dataclasses.dataclass(frozen=True)
class AuditLog:
    """
    The local cluster's audit log: the write requests (create, update, patch, delete) the API
    server received, each a JSON event at ``Metadata`` level, from byte ``offset`` on.
    """

    path: Path = AUDIT_LOG
    offset: int = 0

    @classmethod
    def from_now(cls, path: Path = AUDIT_LOG) -> AuditLog:
        """The events logged from now on (not those logged so far)."""
        return cls(path, path.stat().st_size)

    def events(self) -> Iterator[dict[str, Any]]:
        """Every event from ``offset``, in order (a line cut short while written is skipped)."""
        with self.path.open("rb") as log:
            log.seek(self.offset)
            for raw in log:
                try:
                    event = json.loads(raw)
                except ValueError:
                    continue
                if isinstance(event, dict):
                    yield event

    def writes(self, namespace: str, *, start: datetime.datetime | None = None,
               end: datetime.datetime | None = None, volumes: str | None = None,
               system: bool = True, events: bool = True) -> list[dict[str, Any]]:
        """
        Write requests on objects in ``namespace`` (and on the PersistentVolumes whose names
        start with ``volumes``) received from ``start`` to ``end``; without those from the
        cluster's own components (:data:`SYSTEM_AGENTS`) unless ``system``, without those on
        Events unless ``events``.
        """
        found = []
        for event in self.events():
            ref = event.get("objectRef") or {}
            if ref.get("namespace") != namespace and not (
                    volumes is not None and ref.get("resource") == "persistentvolumes"
                    and str(ref.get("name", "")).startswith(volumes)):
                continue
            if not events and ref.get("resource") == "events":
                continue
            if not system and str(event.get("userAgent", "")).startswith(SYSTEM_AGENTS):
                continue
            if start is not None or end is not None:
                stamp = received(event)
                if stamp is None or (start is not None and stamp < start) or (end is not None and stamp > end):
                    continue
            found.append(event)
        return found


def received(event: Mapping[str, Any]) -> datetime.datetime | None:
    """When the API server received the request of an audit event."""
    stamp = event.get("requestReceivedTimestamp") or event.get("stageTimestamp")
    return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")) if stamp else None


def describe(event: Mapping[str, Any]) -> str:
    """``verb resource[/subresource] (client)`` of an audit event."""
    ref = event.get("objectRef") or {}
    resource = "/".join(filter(None, (ref.get("resource"), ref.get("subresource"))))
    client = str(event.get("userAgent", "")).split(" ")[0]
    return f"{event.get('verb')} {resource} ({client})"
