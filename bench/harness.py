"""
The benchmark's own tools: its workload (the CRD ``mysqls.bench.otus.test``, its namespaces
and objects), its operators' runs (their reconcile summaries) and /proc (memory of a
process tree, disk of a directory). The cluster, the operator processes and the audit log
are tests/harness.py's, which the integration tests use too.
"""
import contextlib
import datetime
import os
import pathlib
import re
import shutil
import sys
import time
import uuid
from collections.abc import Mapping
from typing import Any

from ansible_kopf.run import summary
from tests.harness import REPO, Cluster, Operator, Resource

BENCH = REPO / 'bench'
# the local cluster's (cluster/cluster.sh), which bench/run.sh uses when KUBECONFIG is unset
LOCAL_KUBECONFIG = pathlib.Path('/var/lib/otus-cluster/kubeconfig')
GROUP, VERSION, PLURAL = 'bench.otus.test', 'v1', 'mysqls'
MYSQL = Resource(GROUP, VERSION, PLURAL)
OWNER_LABEL = 'bench.otus.test/owner=bench'


def namespace(cluster: Cluster, prefix: str) -> str:
    """A new namespace ``bench-<prefix>-<random>``, labelled :data:`OWNER_LABEL`."""
    key, value = OWNER_LABEL.split('=')
    return cluster.create_namespace(f"bench-{prefix}-{uuid.uuid4().hex[:6]}", {key: value})


def create_and_wait(cluster: Cluster, namespace: str, names: list[str], spec: Mapping[str, Any],
                    timeout: float = 900) -> dict[str, float]:
    """Create MySQL objects ``names`` of ``spec`` at once; seconds until each was Successful."""
    bodies = [{'apiVersion': MYSQL.api_version, 'kind': 'MySQL',
               'metadata': {'name': name, 'namespace': namespace}, 'spec': dict(spec)}
              for name in names]
    return cluster.create_and_wait(MYSQL, namespace, bodies, timeout)


def delete_namespace(cluster: Cluster, namespace: str) -> None:
    """Delete it, first dropping finalizers of benchmark objects (their operator is gone)."""
    cluster.delete_namespace(namespace, drop_finalizers=[MYSQL])


def reconciled(operator: Operator) -> list[summary.Summary]:
    """The successful reconcile runs in the operator's log, in order: ours and the
    baselines' alike (bench/baselines/common.py logs the same summary line)."""
    return [s for s in operator.summaries()
            if s.action == 'reconcile' and s.status == 'successful']


def window(run: summary.Summary, margin: float = 0) -> tuple[datetime.datetime, datetime.datetime]:
    """When a run started and finished (by its ``finished`` and ``seconds``), +- ``margin`` s."""
    pad = datetime.timedelta(seconds=margin)
    return run.finished_at - datetime.timedelta(seconds=run.seconds) - pad, run.finished_at + pad


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


def calibration(rounds: int = 10_000_000) -> float:
    """CPU seconds of a fixed pure-Python loop: the machine's speed at the moment. Figures of
    runs at different times compare only next to it (on 2026-11-26 this VM's loop took from
    1.13 to 1.49 s within ten minutes)."""
    started = time.process_time()
    total = 0
    for i in range(rounds):
        total += i
    return round(time.process_time() - started, 3)


def python() -> str:
    return sys.executable


def remove(path: pathlib.Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system) of the process tree under ``pid``: each live process's own
    and that of its children it has reaped (a run's processes, once they exit, are counted in
    their parent's; a warm server and its runs stay descendants of the operator)."""
    ticks = 0
    for each in tree(pid):
        try:
            stat = pathlib.Path(f"/proc/{each}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(')') + 2:].split()  # after "pid (comm) "
        ticks += sum(int(value) for value in fields[11:15])  # utime stime cutime cstime
    return ticks / os.sysconf('SC_CLK_TCK')
