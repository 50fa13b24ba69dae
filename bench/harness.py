"""
The benchmark's tools: the cluster (namespaces, objects, waiting for ``Successful``),
operator processes (start, stop, log lines), the API server's audit log (write requests)
and /proc (memory of a process tree, disk of a directory).
"""
import concurrent.futures
import contextlib
import dataclasses
import datetime
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

import kubernetes
import urllib3
import yaml

REPO = pathlib.Path(__file__).resolve().parents[1]
BENCH = REPO / 'bench'
AUDIT_LOG = pathlib.Path('/var/lib/otus-cluster/logs/audit.log')
GROUP, VERSION, PLURAL = 'bench.otus.test', 'v1', 'mysqls'
OWNER_LABEL = 'bench.otus.test/owner=bench'
RECONCILED = re.compile(r"^\[(?P<stamp>[0-9-]+ [0-9:,]+)\].*Reconciled (?P<ns>[^/\s]+)/"
                        r"(?P<name>\S+): successful (?P<counts>.*) in (?P<seconds>[0-9.]+)s")


def now_utc() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class Cluster:
    """Calls of the ``kubernetes`` client the benchmark makes."""

    def __init__(self) -> None:
        configuration = kubernetes.client.Configuration()
        kubernetes.config.load_kube_config(client_configuration=configuration)
        configuration.connection_pool_maxsize = 32
        self.api = kubernetes.client.ApiClient(configuration)
        self.core = kubernetes.client.CoreV1Api(self.api)
        self.custom = kubernetes.client.CustomObjectsApi(self.api)
        self.extensions = kubernetes.client.ApiextensionsV1Api(self.api)

    def install_crd(self) -> None:
        body = yaml.safe_load((BENCH / 'crd.yaml').read_text())
        try:
            self.extensions.create_custom_resource_definition(body)
        except kubernetes.client.ApiException as e:
            if e.status != 409:  # noqa: PLR2004
                raise
        for _ in range(100):
            crd = self.extensions.read_custom_resource_definition(body['metadata']['name'])
            if any(c.type == 'Established' and c.status == 'True'
                   for c in crd.status.conditions or []):
                return
            time.sleep(0.2)

    def namespace(self, prefix: str) -> str:
        name = f"bench-{prefix}-{uuid.uuid4().hex[:6]}"
        self.core.create_namespace({'metadata': {'name': name,
                                                 'labels': {'bench.otus.test/owner': 'bench'}}})
        return name

    def create(self, namespace: str, name: str, spec: Mapping[str, Any]) -> None:
        self.custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, {
            'apiVersion': f"{GROUP}/{VERSION}", 'kind': 'MySQL',
            'metadata': {'name': name, 'namespace': namespace}, 'spec': dict(spec)})

    def create_and_wait(self, namespace: str, names: list[str], spec: Mapping[str, Any],
                        timeout: float = 900) -> dict[str, float]:
        """
        Create all at once; seconds from the start until each was seen Successful. The
        objects are watched, not polled: listing 100 objects every 50 ms would itself
        take a third of a core from the API server and this process, which is the
        machine the operator under test runs on.
        """
        watcher = Watcher(self, namespace, set(names))
        watcher.start()
        try:
            watcher.started = time.monotonic()  # the clock starts with the first create
            with concurrent.futures.ThreadPoolExecutor(min(16, len(names))) as pool:
                list(pool.map(lambda n: self.create(namespace, n, spec), names))
            watcher.done.wait(timeout)
        finally:
            watcher.stop()
        return dict(watcher.seen)

    def delete_namespace(self, namespace: str) -> None:
        """Delete it, first dropping finalizers of benchmark objects (their operator is gone)."""
        with contextlib.suppress(kubernetes.client.ApiException):
            items = self.custom.list_namespaced_custom_object(GROUP, VERSION, namespace,
                                                              PLURAL)['items']
            for item in items:
                if item['metadata'].get('finalizers'):
                    with contextlib.suppress(kubernetes.client.ApiException):
                        self.custom.patch_namespaced_custom_object(
                            GROUP, VERSION, namespace, PLURAL, item['metadata']['name'],
                            {'metadata': {'finalizers': None}})
        with contextlib.suppress(kubernetes.client.ApiException):
            self.core.delete_namespace(namespace)

    def delete_volumes(self, selector: str) -> int:
        volumes = self.core.list_persistent_volume(label_selector=selector).items
        for volume in volumes:
            with contextlib.suppress(kubernetes.client.ApiException):
                self.core.delete_persistent_volume(volume.metadata.name)
        return len(volumes)

    def wait_namespaces_gone(self, names: Iterable[str], timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        pending = set(names)
        while pending and time.monotonic() < deadline:
            existing = {n.metadata.name for n in self.core.list_namespace(
                label_selector=OWNER_LABEL).items}
            pending &= existing
            time.sleep(1)


def is_successful(item: Mapping[str, Any]) -> bool:
    """Status of this generation, with a Successful condition that is True."""
    status = item.get('status') or {}
    if status.get('observedGeneration') != item['metadata'].get('generation'):
        return False
    return any(c.get('type') == 'Successful' and c.get('status') == 'True'
               for c in status.get('conditions') or [])


class Watcher(threading.Thread):
    """
    Notes when each of ``names`` is first seen Successful, from a watch of the
    namespace's objects (listed again, and watched from there, if the watch ends).
    """

    def __init__(self, cluster: Cluster, namespace: str, names: set[str]) -> None:
        super().__init__(daemon=True)
        self.cluster, self.namespace, self.names = cluster, namespace, names
        self.started = time.monotonic()
        self.seen: dict[str, float] = {}
        self.done = threading.Event()
        self._stopping = threading.Event()
        self._watch = kubernetes.watch.Watch()
        self.listed = threading.Event()  # the first list is done: creations will be seen

    def run(self) -> None:
        while not self._stopping.is_set() and not self.done.is_set():
            try:
                listing = self.cluster.custom.list_namespaced_custom_object(
                    GROUP, VERSION, self.namespace, PLURAL)
                for item in listing['items']:
                    self._note(item)
                self.listed.set()
                for event in self._watch.stream(
                        self.cluster.custom.list_namespaced_custom_object, GROUP, VERSION,
                        self.namespace, PLURAL, timeout_seconds=60,
                        resource_version=listing['metadata']['resourceVersion']):
                    self._note(event['object'])
                    if self._stopping.is_set() or self.done.is_set():
                        break
            except (kubernetes.client.ApiException, OSError, ValueError,
                    urllib3.exceptions.HTTPError):
                time.sleep(0.5)  # e.g. 410 Gone: list again

    def _note(self, item: Mapping[str, Any]) -> None:
        name = item.get('metadata', {}).get('name')
        if name in self.names and name not in self.seen and is_successful(item):
            self.seen[name] = time.monotonic() - self.started
            if len(self.seen) == len(self.names):
                self.done.set()

    def start(self) -> None:
        super().start()
        self.listed.wait(30)

    def stop(self) -> None:
        self._stopping.set()
        self._watch.stop()


@dataclasses.dataclass
class Operator:
    """One operator process (ours or a baseline) watching one namespace."""
    design: str
    command: list[str]
    env: dict[str, str]
    log_path: pathlib.Path
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open('ab') as log:
            self.process = subprocess.Popen(self.command, cwd=REPO, env=self.env,  # noqa: S603
                                            stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True)

    @property
    def pid(self) -> int:
        if self.process is None:
            raise RuntimeError(f"{self.design}: the operator process was not started")
        return self.process.pid

    def wait_ready(self, text: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.log():
                return
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"{self.design} exited:\n{self.log()[-3000:]}")
            time.sleep(0.2)
        raise RuntimeError(f"{self.design} not ready:\n{self.log()[-3000:]}")

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors='replace')
        except FileNotFoundError:
            return ''

    def reconciled(self) -> list[dict[str, Any]]:
        lines = []
        for line in self.log().splitlines():
            match = RECONCILED.search(line)
            if match:
                end = datetime.datetime.strptime(match['stamp'], '%Y-%m-%d %H:%M:%S,%f')
                end = end.replace(tzinfo=datetime.UTC)
                seconds = float(match['seconds'])
                lines.append({'name': match['name'], 'ns': match['ns'], 'seconds': seconds,
                              'end': end, 'start': end - datetime.timedelta(seconds=seconds),
                              'counts': match['counts']})
        return lines

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGINT)
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)


# --- audit log ---

def audit_offset() -> int:
    return AUDIT_LOG.stat().st_size


SYSTEM_AGENTS = ('kubelet/', 'kube-controller-manager/', 'kube-scheduler/', 'kube-apiserver/')


def writes(offset: int, namespace: str, start: datetime.datetime,
           end: datetime.datetime) -> list[dict[str, Any]]:
    """Write requests the API server received in the window, for the namespace (and its
    benchmark PersistentVolumes), from clients other than the cluster's own components."""
    found = []
    with AUDIT_LOG.open('rb') as log:
        log.seek(offset)
        for raw in log:
            try:
                event = json.loads(raw)
            except ValueError:
                continue
            ref = event.get('objectRef') or {}
            if ref.get('namespace') != namespace and not (
                    ref.get('resource') == 'persistentvolumes'
                    and str(ref.get('name', '')).startswith(f"bench-data-{namespace}-")):
                continue
            if str(event.get('userAgent', '')).startswith(SYSTEM_AGENTS):
                continue
            stamp = datetime.datetime.fromisoformat(
                event['requestReceivedTimestamp'].replace('Z', '+00:00'))
            if start <= stamp <= end:
                found.append(event)
    return found


def describe(event: Mapping[str, Any]) -> str:
    """``verb resource[/subresource] (client)`` of an audit event."""
    ref = event.get('objectRef') or {}
    resource = '/'.join(filter(None, (ref.get('resource'), ref.get('subresource'))))
    client = str(event.get('userAgent', '')).split(' ')[0]
    return f"{event.get('verb')} {resource} ({client})"


# --- /proc ---

def count_processes(pattern: str) -> int:
    """Processes whose command line matches ``pattern`` (as ``pgrep -c -f``)."""
    regex, count = re.compile(pattern), 0
    for entry in pathlib.Path('/proc').iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):  # the process may end while we look
            command = (entry / 'cmdline').read_bytes().replace(b'\0', b' ')
            count += bool(regex.search(command.decode(errors='replace')))
    return count


def children(pid: int) -> list[int]:
    found: list[int] = []
    with contextlib.suppress(OSError):  # the process may end while we look
        for task in pathlib.Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError):
                found += [int(c) for c in (task / 'children').read_text().split()]
    return found


def tree(pid: int) -> list[int]:
    pids, todo = [], [pid]
    while todo:
        current = todo.pop()
        pids.append(current)
        todo += children(current)
    return pids


def _kb(text: str, field: str) -> int:
    match = re.search(rf"^{field}:\s+(\d+) kB", text, re.MULTILINE)
    return int(match.group(1)) if match else 0


def memory(pid: int) -> dict[str, int]:
    """kB: RSS and PSS of the whole tree, RSS and VmHWM of the process itself."""
    result = {'tree_rss': 0, 'tree_pss': 0, 'procs': 0, 'rss': 0, 'hwm': 0}
    for each in tree(pid):
        try:
            status = pathlib.Path(f"/proc/{each}/status").read_text()
            rollup = pathlib.Path(f"/proc/{each}/smaps_rollup").read_text()
        except OSError:
            continue
        result['tree_rss'] += _kb(status, 'VmRSS')
        result['tree_pss'] += _kb(rollup, 'Pss')
        result['procs'] += 1
        if each == pid:
            result['rss'], result['hwm'] = _kb(status, 'VmRSS'), _kb(status, 'VmHWM')
    return result


class Sampler:
    """Samples :func:`memory` in a thread; keeps the peaks."""

    def __init__(self, pid: int, interval: float = 0.1) -> None:
        import threading  # noqa: PLC0415
        self.pid, self.interval = pid, interval
        self.peak = {'tree_rss': 0, 'tree_pss': 0, 'procs': 0}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                sample = memory(self.pid)
            except (OSError, ValueError):
                continue
            for key in self.peak:
                self.peak[key] = max(self.peak[key], sample[key])
            self._stop.wait(self.interval)

    def __enter__(self) -> 'Sampler':
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


def disk(path: pathlib.Path) -> tuple[int, int]:
    """Bytes (allocated) and files under ``path``."""
    total = files = 0
    for root, _, names in os.walk(path):
        for name in names:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
                files += 1
    return total, files


def loadavg() -> list[str]:
    """The 1, 5 and 15 minute load averages."""
    return pathlib.Path('/proc/loadavg').read_text().split()[:3]


def python() -> str:
    return sys.executable


def remove(path: pathlib.Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
