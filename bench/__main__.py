"""
``python -m bench`` (or ``bench/run.sh``): the operator against two baselines, same
workloads, same run, on the cluster in ``$KUBECONFIG``; prints a table and writes
``bench/out/results.json``, ``bench/out/results.md`` and ``bench/out/latency.png``.
From the repository, with operator/ on ``PYTHONPATH`` as bench/run.sh sets it: runs are
read with ``ansible_kopf.run.summary``, the cluster through tests/harness.py.

Designs: ``ours`` (``python -m ansible_kopf`` with bench/watches.yaml and the bench_mysql
role, which applies every out-of-sync object in one module call as roles/mysql does),
``ours-cold`` (the same with ``ANSIBLE_KOPF_WARM=false``: no warm servers),
``ours-pertask`` (the same role with one ``kubernetes.core.k8s`` task per object, the
straightforward way to write the role: bench/watches-pertask.yaml, bench/pertask.yml), ``a``
(bench/baselines/direct.py: kopf + direct API calls), ``b``
(bench/baselines/straightforward.py: a fresh ansible-runner run per event, one
``kubernetes.core.k8s`` task per object). ``ours``, ``ours-cold`` and ``b`` run at most 4
Ansible runs at once (``ANSIBLE_KOPF_MAX_RUNS=4``, ``BENCH_MAX_RUNS=4``).

The bench role applies what the mysql role applies (Secret, PV, PVC, Deployment, Service)
with the pause image instead of MariaDB and no waits on pods; the 100-object scenario
uses ``replicas: 0`` so that 100 pods do not fill the shared node (110 pods at most).
``--real`` also measures the real mysql role (a copy under bench/out/ whose owner
references and variable names use the bench group) for one object.
"""
import argparse
import contextlib
import json
import os
import pathlib
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from typing import Any

import yaml

from ansible_kopf.sdk import durations
from bench import harness, png
from bench.baselines import common
from tests import availability
from tests.harness import REPO, AuditLog, Cluster, Operator, describe, now_utc

OUT = harness.BENCH / 'out'
WORK = pathlib.Path(os.environ.get('BENCH_WORKDIR')
                    or pathlib.Path(tempfile.gettempdir()) / 'bench-otus-test')
PERIOD_ANNOTATION = 'ansible.sdk.operatorframework.io/reconcile-period'  # the SDK's
WARM_IDLE = 30.0  # ANSIBLE_KOPF_WARM_IDLE of `ours` (default 300 s); idle memory is read after it
SPEC = {'password': 'benchpassword', 'storage_size': '1Gi', 'replicas': 1}
LABELS = {'ours': 'ours (warm)', 'ours-cold': 'ours, cold (ANSIBLE_KOPF_WARM=false)',
          'ours-pertask': 'ours, role with 1 task per object',
          'a': '(a) kopf + direct API calls', 'b': '(b) fresh ansible-runner per event'}


def operator(design: str, namespace: str, *, period: float = 0,
             watches: pathlib.Path | None = None, warm_idle: bool = True) -> Operator:
    """``warm_idle``: the bench's short ANSIBLE_KOPF_WARM_IDLE (idle memory is read after
    it); False: the operator's default (the idle scenarios: runs minutes apart)."""
    env = dict(os.environ, BENCH_RECONCILE_PERIOD=f"{period:g}s" if design.startswith('ours')
               else f"{period:g}", PYTHONPATH=str(REPO / 'operator'))
    workdir = WORK / design / namespace
    if design.startswith('ours'):
        default = 'watches-pertask.yaml' if design == 'ours-pertask' else 'watches.yaml'
        env.update(WATCHES_FILE=str(watches or harness.BENCH / default),
                   WATCH_NAMESPACE=namespace, ANSIBLE_KOPF_WORKDIR=str(workdir),
                   ANSIBLE_KOPF_MAX_RUNS='4', ANSIBLE_KOPF_WARM=str(design != 'ours-cold').lower())
        if warm_idle:
            env['ANSIBLE_KOPF_WARM_IDLE'] = f"{WARM_IDLE:g}s"
        command = [harness.python(), '-m', 'ansible_kopf']
    else:
        module = {'a': 'direct', 'b': 'straightforward'}[design]
        env.update(BENCH_WORKDIR=str(workdir), BENCH_MAX_RUNS='4')
        command = [harness.python(), '-m', 'kopf', 'run', '--standalone', '--namespace',
                   namespace, '--module', f"bench.baselines.{module}"]
    return Operator(name=design, command=command, env=env, stop_signal=signal.SIGINT,
                    log_path=WORK / 'logs' / f"{design}-{namespace}.log")


def started(op: Operator) -> Operator:
    op.start()
    op.wait_ready("Watching " if op.name.startswith('ours') else "'configure' succeeded")
    time.sleep(1.0)  # kopf opens its watch streams after the start-up activities
    return op


def summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    def pick(q: float) -> float:
        return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]
    return {'n': len(ordered), 'p50': statistics.median(ordered), 'p95': pick(0.95),
            'min': ordered[0], 'max': ordered[-1]}


def latency_scenarios(cluster: Cluster, design: str, args: argparse.Namespace,
                      created: list[str]) -> dict[str, Any]:
    namespace = harness.namespace(cluster, design.replace('-', ''))
    created.append(namespace)
    op = started(operator(design, namespace))
    result: dict[str, Any] = {'namespace': namespace}
    try:
        first = harness.create_and_wait(cluster, namespace, ['warmup'], SPEC)
        result['first_after_start'] = first.get('warmup')
        singles = []
        for trial in range(args.trials):
            seen = harness.create_and_wait(cluster, namespace, [f"one-{trial}"], SPEC)
            singles.extend(seen.values())
        result['one'] = summary(singles)
        tens = []
        for trial in range(args.trials_10):
            seen = harness.create_and_wait(cluster, namespace,
                                           [f"ten-{trial}-{i}" for i in range(10)], SPEC)
            tens.append(max(seen.values()) if len(seen) == 10 else float('nan'))  # noqa: PLR2004
        result['ten_all'] = summary(tens)
        time.sleep(2)
        before = harness.memory(op.pid)
        result['memory_before_100'] = before
        names = [f"hundred-{i}" for i in range(args.many)]
        with harness.Sampler(op.pid) as sampler:
            seen = harness.create_and_wait(cluster, namespace, names, dict(SPEC, replicas=0))
        result['hundred_all'] = max(seen.values()) if len(seen) == len(names) else None
        result['hundred_done'] = len(seen)
        result['hundred_p50'] = statistics.median(seen.values()) if seen else None
        result['memory_peak'] = dict(sampler.peak)
        time.sleep(5)
        result['memory_idle'] = harness.memory(op.pid)
        if design.startswith('ours') and design != 'ours-cold':  # the warm servers' idle stop
            time.sleep(WARM_IDLE + 5)
            result['memory_idle_stopped'] = harness.memory(op.pid)
        result['runs'] = len(harness.reconciled(op))
        result['disk_bytes'], result['disk_files'] = harness.disk(WORK / design / namespace)
    finally:
        op.stop()
    return result


def unchanged_scenario(cluster: Cluster, design: str, args: argparse.Namespace,
                       created: list[str]) -> dict[str, Any]:
    namespace = harness.namespace(cluster, f"{design.replace('-', '')}u")
    created.append(namespace)
    audit = AuditLog.from_now()
    op = started(operator(design, namespace, period=args.period))
    try:
        harness.create_and_wait(cluster, namespace, ['steady'], SPEC)
        deadline = time.monotonic() + args.period * (args.periodic + 3) + 60
        while len(harness.reconciled(op)) < args.periodic + 1 and time.monotonic() < deadline:
            time.sleep(0.5)
        time.sleep(1)
        idle = harness.memory(op.pid)
    finally:
        op.stop()
    runs = harness.reconciled(op)[1:]  # the periodic runs: the first is the create's
    found = []
    for run in runs:  # writes in the run's window (+-0.3 s), in the namespace or on its PVs
        start, end = harness.window(run, margin=0.3)
        found.append(audit.writes(namespace, start=start, end=end,
                                  volumes=f"bench-data-{namespace}-", system=False))
    per_run = [len(f) for f in found]
    what = sorted({describe(e) for f in found for e in f})
    return {'namespace': namespace, 'wall': summary([r.seconds for r in runs]) if runs
            else None, 'writes_per_run': per_run, 'memory_idle_periodic': idle,
            'counts': [dict(r.counts) for r in runs][:1], 'writes_seen': what}


def servers_rss(pid: int) -> int:
    """KB of VmRSS of the operator's warm servers (its forkserver children), between runs."""
    total = 0
    for child in harness.children(pid):
        try:
            cmdline = pathlib.Path(f"/proc/{child}/cmdline").read_text(errors='replace')
            if 'ansible_kopf.warm.forkserver' in cmdline:
                total += harness.memory(child)['rss']
        except (OSError, KeyError):
            continue
    return total


def soak_scenario(cluster: Cluster, design: str, args: argparse.Namespace,
                  created: list[str]) -> dict[str, Any]:
    """
    Memory over thousands of runs: ``--soak-objects`` objects reconciled every second
    (each run an unchanged reconcile) until ``--soak-runs`` runs; every 10 s the operator
    process's RSS, its warm servers' RSS and the tree's PSS, with the number of runs so far.
    """
    namespace = harness.namespace(cluster, f"{design.replace('-', '')}s")
    created.append(namespace)
    op = started(operator(design, namespace, period=1))
    samples = []
    try:
        harness.create_and_wait(cluster, namespace,
                                [f"soak-{i}" for i in range(args.soak_objects)],
                                dict(SPEC, replicas=0))
        deadline = time.monotonic() + args.soak_minutes * 60
        while time.monotonic() < deadline:
            runs = len(harness.reconciled(op))
            tree = harness.memory(op.pid)
            samples.append({'runs': runs, 'operator_rss': tree['rss'],
                            'servers_rss': servers_rss(op.pid), 'tree_pss': tree['tree_pss'],
                            'procs': tree['procs']})
            print(f"   soak: {samples[-1]}", flush=True)
            if runs >= args.soak_runs:
                break
            time.sleep(10)
    finally:
        op.stop()
    return {'namespace': namespace, 'objects': args.soak_objects, 'samples': samples}


def real_role_copy(shipped: bool = False) -> pathlib.Path:
    """roles/mysql (and mysql_common, which it depends on) with the bench group in owner
    references and variable names. Its watches entry has no period (``shipped``: the shipped
    watches.yaml's MySQL entry, period and dependent watches included, without its
    finalizer)."""
    target = OUT / 'real'
    shutil.rmtree(target, ignore_errors=True)
    for role in ('mysql', 'mysql_common'):  # the role and the one it depends on
        shutil.copytree(REPO / 'roles' / role, target / 'roles' / role)
    for path in (target / 'roles').rglob('*'):
        if path.is_file() and path.suffix in ('.yml', '.yaml', '.j2', '.py'):
            text = path.read_text()
            path.write_text(text.replace('_otus_homework_mysql', '_bench_otus_test_mysql')
                            .replace('apiVersion: otus.homework/v1',
                                     f"apiVersion: {harness.GROUP}/{harness.VERSION}")
                            .replace('MySQL.otus.homework', f"MySQL.{harness.GROUP}"))
    entry: dict[str, Any] = {
        'version': 'v1', 'group': 'bench.otus.test', 'kind': 'MySQL', 'role': 'roles/mysql',
        'reconcilePeriod': '0', 'manageStatus': True, 'snakeCaseParameters': True,
        'markUnsafe': True}
    if shipped:
        entry = dict(shipped_mysql_entry(), group=harness.GROUP, role='roles/mysql')
        entry.pop('finalizer', None)
    watches = target / 'watches.yaml'
    watches.write_text(json.dumps([entry]))
    return watches


def shipped_mysql_entry() -> dict[str, Any]:
    """The MySQL entry of the repository's watches.yaml."""
    entries = yaml.safe_load((REPO / 'watches.yaml').read_text())
    return dict(next(e for e in entries if e['kind'] == 'MySQL'))


def real_scenario(cluster: Cluster, design: str, args: argparse.Namespace,
                  created: list[str]) -> dict[str, Any]:
    namespace = harness.namespace(cluster, f"{design.replace('-', '')}r")
    created.append(namespace)
    op = started(operator(design, namespace, watches=real_role_copy()))
    spec = {'image': 'localhost/mariadb:10.11-bookworm', 'database': 'benchdb',
            'password': 'benchpassword', 'storage_size': '1Gi'}
    try:
        first = harness.create_and_wait(cluster, namespace, ['real-warmup'], spec)
        values = []
        for trial in range(args.trials_real):
            seen = harness.create_and_wait(cluster, namespace, [f"real-{trial}"], spec)
            values.extend(seen.values())
    finally:
        op.stop()
    return {'namespace': namespace, 'first_after_start': first.get('real-warmup'),
            'one': summary(values) if values else None}


def settle(op: Operator, quiet: float = 20, limit: float = 600) -> int:
    """Wait until the operator has logged no run for ``quiet`` s; the number of runs."""
    deadline, last, since = time.monotonic() + limit, -1, time.monotonic()
    while time.monotonic() < deadline:
        runs = len(op.summaries())
        if runs != last:
            last, since = runs, time.monotonic()
        elif time.monotonic() - since >= quiet:
            break
        time.sleep(1)
    return last


def idle_cpu(op: Operator, objects: int, window: float) -> dict[str, Any]:
    """CPU of the operator's process tree over ``window`` s with nothing changing."""
    runs_before, cpu_before = len(op.summaries()), harness.cpu_seconds(op.pid)
    start = time.monotonic()
    time.sleep(window)
    cpu, elapsed = harness.cpu_seconds(op.pid) - cpu_before, time.monotonic() - start
    return {'objects': objects, 'window_s': round(elapsed, 1), 'cpu_s': round(cpu, 2),
            'runs': len(op.summaries()) - runs_before,
            'cpu_s_per_object_min': cpu / objects / (elapsed / 60)}


def drift_trial(cluster: Cluster, namespace: str, name: str, how: str) -> float | None:
    """Seconds from a hand change of the instance's Service (``delete`` it, or ``edit`` its
    selector) until a watch sees it back as it was; None if not back in 60 s. Raw JSON
    throughout (this client's models cannot read every answer of a 1.20 API server)."""
    core = cluster.core
    before = json.loads(core.read_namespaced_service(name, namespace, _preload_content=False).data)
    selector, uid = before['spec']['selector'], before['metadata']['uid']
    back = threading.Event()
    repaired: list[float] = []
    response = core.list_namespaced_service(
        namespace, field_selector=f"metadata.name={name}", watch=True, timeout_seconds=60,
        resource_version=before['metadata']['resourceVersion'], _preload_content=False)

    def follow() -> None:
        with contextlib.suppress(Exception):  # the stream closed below ends the thread
            for line in response:
                event = json.loads(line)
                svc = event.get('object') or {}
                if event.get('type') in ('ADDED', 'MODIFIED') and (
                        svc['metadata']['uid'] != uid if how == 'delete'
                        else svc['spec'].get('selector') == selector):
                    repaired.append(time.monotonic())
                    back.set()
                    return

    thread = threading.Thread(target=follow, daemon=True)
    thread.start()
    started = time.monotonic()
    if how == 'delete':
        core.delete_namespaced_service(name, namespace, _preload_content=False)
    else:
        key = sorted(selector)[0]  # a value the role sets, changed (a new key would be extra)
        core.patch_namespaced_service(name, namespace,
                                      {'spec': {'selector': dict(selector, **{key: 'drifted'})}},
                                      _preload_content=False)
    back.wait(60)
    response.close()
    return repaired[0] - started if repaired else None


def idle_scenario(cluster: Cluster, design: str, args: argparse.Namespace,
                  created: list[str]) -> dict[str, Any]:
    """
    The real mysql role with the shipped watches.yaml entry (its period, dependent watches
    with status), ``--idle-objects`` MariaDB instances: CPU of the whole tree while nothing
    changes; drift repair (a Service deleted or its selector edited by hand, time until a
    watch sees it put back); then the CPU of one unchanged periodic run (the same objects
    with a 20 s per-object period). Per idle object per minute at the shipped period =
    idle rate + run CPU / period.
    """
    namespace = harness.namespace(cluster, f"{design.replace('-', '')}i")
    created.append(namespace)
    period = durations.parse(str(shipped_mysql_entry().get('reconcilePeriod', '0')))
    op = started(operator(design, namespace, watches=real_role_copy(shipped=True),
                          warm_idle=False))
    spec = {'image': 'localhost/mariadb:10.11-bookworm', 'database': 'benchdb',
            'password': 'benchpassword', 'storage_size': '1Gi'}
    names = [f"idle-{i}" for i in range(args.idle_objects)]
    result: dict[str, Any] = {'namespace': namespace, 'period_s': period}
    try:
        seen = {}
        for batch in range(0, len(names), 5):  # 5 at a time: each waits for its server
            seen.update(harness.create_and_wait(cluster, namespace, names[batch:batch + 5], spec))
        result['created'] = len(seen)
        print(f"   idle: {len(seen)} instances Successful; settling", flush=True)
        settle(op)
        result['idle'] = idle_cpu(op, len(names), args.idle_window)
        print(f"   idle: {result['idle']}", flush=True)
        trials = []
        for trial in range(args.drift_trials):
            name = names[trial % len(names)]
            how = 'delete' if trial % 2 == 0 else 'edit'
            trials.append({'how': how, 'seconds': drift_trial(cluster, namespace, name, how)})
            settle(op, quiet=3, limit=60)
        repaired = [t['seconds'] for t in trials if t['seconds'] is not None]
        result['drift'] = {'trials': trials, 'repaired': summary(repaired) if repaired else None,
                           'not_repaired': len(trials) - len(repaired)}
        print(f"   drift: {result['drift']['repaired']}", flush=True)
        for name in names:  # the next run of each is then followed by one every 20 s
            cluster.custom.patch_namespaced_custom_object(
                harness.GROUP, harness.VERSION, namespace, harness.PLURAL, name,
                {'metadata': {'annotations': {PERIOD_ANNOTATION: '20s'}}})
            core_name = f"{name}-direct"
            selector = json.loads(cluster.core.read_namespaced_service(
                core_name, namespace, _preload_content=False).data)['spec']['selector']
            # an edit of a field the role sets runs it once (a new label would run nothing:
            # no run wrote it), and that run puts the selector back
            cluster.core.patch_namespaced_service(
                core_name, namespace,
                {'spec': {'selector': dict(selector, **{sorted(selector)[0]: 'touched'})}},
                _preload_content=False)
        settle(op, quiet=5, limit=120)
        time.sleep(25)  # every object is on its 20 s cycle now
        runs = idle_cpu(op, len(names), args.idle_window)
        per_run = ((runs['cpu_s'] - result['idle']['cpu_s_per_object_min'] * len(names)
                    * runs['window_s'] / 60) / runs['runs']) if runs['runs'] else None
        result['periodic'] = dict(runs, cpu_s_per_run=per_run)
        if per_run is not None and period:
            result['per_object_min_at_period'] = (result['idle']['cpu_s_per_object_min']
                                                  + per_run * 60 / period)
        print(f"   periodic: {result['periodic']}", flush=True)
    finally:
        op.stop()
    return result


def idle_many_scenario(cluster: Cluster, design: str, args: argparse.Namespace,
                       created: list[str]) -> dict[str, Any]:
    """
    ``--idle-many`` objects of the stand-in role (pause image, replicas 0: the node runs at
    most 110 pods) with the shipped MySQL entry's period and dependent watches: CPU of the
    whole tree while nothing changes.
    """
    namespace = harness.namespace(cluster, f"{design.replace('-', '')}m")
    created.append(namespace)
    shipped = shipped_mysql_entry()
    entry = {key: shipped[key] for key in ('reconcilePeriod', 'watchDependentResources',
                                           'watchDependentStatus') if key in shipped}
    watches = OUT / 'watches-idle.yaml'
    stand_in = yaml.safe_load((harness.BENCH / 'watches.yaml').read_text())[0]
    watches.write_text(json.dumps([dict(stand_in, role=str(harness.BENCH / stand_in['role']),
                                        **entry)]))
    op = started(operator(design, namespace, watches=watches, warm_idle=False))
    names = [f"many-{i}" for i in range(args.idle_many)]
    result: dict[str, Any] = {'namespace': namespace}
    try:
        seen = {}
        for batch in range(0, len(names), 100):
            seen.update(harness.create_and_wait(cluster, namespace, names[batch:batch + 100],
                                                dict(SPEC, replicas=0)))
            print(f"   idle-many: {len(seen)} Successful", flush=True)
        result['created'] = len(seen)
        settle(op)
        result['memory'] = harness.memory(op.pid)
        result['idle'] = idle_cpu(op, len(names), args.idle_window)
        print(f"   idle-many: {result['idle']}", flush=True)
    finally:
        op.stop()
    return result


def fmt(value: Any, unit: str = 's') -> str:
    if value is None:
        return '-'
    if isinstance(value, dict):
        return (f"{value['p50']:.2f}/{value['p95']:.2f}{unit}"
                f" ({value['min']:.2f}-{value['max']:.2f})")
    return f"{value:.2f}{unit}"


def outages(r: dict[str, Any]) -> str:
    """The availability scenario's cell: each image's longest outage per operation."""
    def one(label: str, f: dict[str, Any]) -> str:
        ops = ', '.join(f"{op} {s:.1f} s" for op, s in f['outage_s'].items())
        image = label.partition(' ')[0]
        return f"{image}: {ops} ({f['failed']}/{f['writes']} writes failed)"
    return '; '.join(one(label, f) for label, f in r['availability']['images'].items())


def report(results: dict[str, Any], context: dict[str, Any], many: int = 100) -> str:
    designs = [d for d in LABELS if d in results]
    rows: list[tuple[str, list[str]]] = []

    def row(title: str, get: Any) -> None:
        cells = []
        for d in designs:
            try:
                cells.append(get(results[d]))
            except (KeyError, TypeError):
                cells.append('-')
        rows.append((title, cells))

    mb = lambda kb: f"{kb / 1024:.0f} MB"  # noqa: E731
    row('1 object: create -> Successful p50/p95 (min-max)', lambda r: fmt(r['latency']['one']))
    row('first object after operator start', lambda r: fmt(r['latency']['first_after_start']))
    row('10 at once: all Successful p50/p95 (min-max)', lambda r: fmt(r['latency']['ten_all']))
    row(f'{many} at once: all Successful', lambda r: fmt(r['latency']['hundred_all']))
    row(f'{many} at once: median object', lambda r: fmt(r['latency']['hundred_p50']))
    row('unchanged reconcile wall p50/p95 (min-max)',
        lambda r: fmt(r['unchanged']['wall']))
    row('unchanged reconcile: writes per run', lambda r: str(r['unchanged']['writes_per_run']))
    row('RSS idle: operator process', lambda r: mb(r['latency']['memory_idle']['rss']))
    row('RSS idle: whole tree (PSS)', lambda r: f"{mb(r['latency']['memory_idle']['tree_rss'])}"
        f" ({mb(r['latency']['memory_idle']['tree_pss'])})")
    row(f'RSS idle {WARM_IDLE:g} s later (ANSIBLE_KOPF_WARM_IDLE): tree (PSS)',
        lambda r: f"{mb(r['latency']['memory_idle_stopped']['tree_rss'])}"
                  f" ({mb(r['latency']['memory_idle_stopped']['tree_pss'])}), "
                  f"{r['latency']['memory_idle_stopped']['procs']} procs")
    row(f'RSS peak, {many} objects / 4 runs: tree (PSS)',
        lambda r: f"{mb(r['latency']['memory_peak']['tree_rss'])} "
                  f"({mb(r['latency']['memory_peak']['tree_pss'])}), "
                  f"{r['latency']['memory_peak']['procs']} procs")
    row('VmHWM of the operator process', lambda r: mb(r['latency']['memory_idle']['hwm']))
    row(f'disk after the {many}+ reconciles (files)',
        lambda r: f"{r['latency']['disk_bytes'] / 1e6:.1f} MB ({r['latency']['disk_files']})"
                  f" / {r['latency']['runs']} runs")
    if any('real' in r for r in results.values()):
        row('real mysql role, 1 object p50/p95 (min-max)', lambda r: fmt(r['real']['one']))
    if any('idle' in r for r in results.values()):
        cps = lambda v: f"{v:.4f} CPU-s"  # noqa: E731
        row('drift repair, real role: Service deleted/edited p50/p95 (min-max)',
            lambda r: fmt(r['idle']['drift']['repaired'])
            + (f", {r['idle']['drift']['not_repaired']} not repaired"
               if r['idle']['drift']['not_repaired'] else ''))
        row('idle, real role: CPU per object per minute, no run due',
            lambda r: f"{cps(r['idle']['idle']['cpu_s_per_object_min'])} "
                      f"({r['idle']['idle']['objects']} objects, {r['idle']['idle']['runs']} runs "
                      f"in {r['idle']['idle']['window_s']:g} s)")
        row('idle, real role: CPU of one unchanged periodic run',
            lambda r: f"{r['idle']['periodic']['cpu_s_per_run']:.2f} CPU-s "
                      f"({r['idle']['periodic']['runs']} runs)")
        row('idle, real role: CPU per object per minute at the shipped period',
            lambda r: f"{cps(r['idle']['per_object_min_at_period'])} "
                      f"(period {r['idle']['period_s']:g} s)")
        row('idle, stand-in role: CPU per object per minute, no run due',
            lambda r: f"{cps(r['idle_many']['idle']['cpu_s_per_object_min'])} "
                      f"({r['idle_many']['idle']['objects']} objects, "
                      f"{r['idle_many']['idle']['runs']} runs in "
                      f"{r['idle_many']['idle']['window_s']:g} s)")
        row('idle, stand-in role + real run per period: CPU per object per minute',
            lambda r: cps(r['idle_many']['idle']['cpu_s_per_object_min']
                          + r['idle']['periodic']['cpu_s_per_run'] * 60 / r['idle']['period_s']))
    if any('availability' in r for r in results.values()):
        row('availability: longest outage of a writing client per operation', outages)
    if any('bucket' in r for r in results.values()):
        row('bucket: backup and restore through an S3-compatible bucket',
            lambda r: ' | '.join(r['bucket']['lines']))
    if any('soak' in r for r in results.values()):
        def soak(r: dict[str, Any]) -> str:
            samples = r['soak']['samples']
            first, last = samples[min(1, len(samples) - 1)], samples[-1]  # [1]: warmed up
            return (f"{first['runs']} -> {last['runs']} runs: operator {mb(first['operator_rss'])}"
                    f" -> {mb(last['operator_rss'])}, servers {mb(first['servers_rss'])} -> "
                    f"{mb(last['servers_rss'])}")
        row('soak: RSS over thousands of runs', soak)
    if any('error' in v for r in results.values() for v in r.values()):
        row('failed scenarios (see results.json)',
            lambda r: ', '.join(k for k, v in r.items() if 'error' in v) or '-')
    widths = [max(len(t) for t, _ in rows)] + [
        max(len(LABELS[d]), *(len(c[i]) for _, c in rows)) for i, d in enumerate(designs)]
    lines = ['| ' + ' | '.join(['scenario'.ljust(widths[0])]
                               + [LABELS[d].ljust(w) for d, w in zip(designs, widths[1:],
                                                                     strict=True)]) + ' |',
             '|' + '|'.join('-' * (w + 2) for w in widths) + '|']
    for title, cells in rows:
        lines.append('| ' + ' | '.join([title.ljust(widths[0])]
                                       + [c.ljust(w) for c, w in zip(cells, widths[1:],
                                                                     strict=True)]) + ' |')
    notes = [
        '',
        'Bench role: Secret, PV, PVC, Deployment, Service as the mysql role applies them, with',
        'the pause image instead of MariaDB and no waits on pods; 100-object scenario with',
        'replicas: 0 (the shared node runs at most 110 pods). Times are seconds from the',
        'create request until a watch saw the object Successful.',
        f"Context: {json.dumps(context)}",
    ]
    return '\n'.join(lines + notes)


def run_test_module(module: str, **env_vars: str) -> subprocess.CompletedProcess[str]:
    """A test module run as ``make test`` runs it (its own namespace and operator, which it
    removes), its output captured. The local cluster is the test's own (no KUBECONFIG);
    another cluster is passed on."""
    env = dict(os.environ, **env_vars)
    if env.get('KUBECONFIG') == str(harness.LOCAL_KUBECONFIG):
        env.pop('KUBECONFIG')
    command = [sys.executable, '-m', 'pytest', '-p', 'no:cacheprovider', '-q', '-s', module]
    return subprocess.run(command, cwd=REPO, env=env,  # noqa: S603 - the repository's own tests
                          capture_output=True, text=True, timeout=3600, check=False)


def availability_scenario(cluster: Cluster, design: str, args: argparse.Namespace,
                          created: list[str]) -> dict[str, Any]:
    """What an application writing to the database sees during day-2 operations: the
    availability test (tests/integration/test_availability.py, both server images), its
    figures lines read back: each operation's longest run of failed writes, writes and
    failed ones."""
    done = run_test_module('tests/integration/test_availability.py')
    figures = availability.read_figures(done.stdout)
    if done.returncode != 0 or not figures:
        raise RuntimeError(f"the availability test failed ({done.returncode}):\n"
                           f"{done.stdout[-3000:]}")
    return {'images': figures, 'passed': True}


def bucket_scenario(cluster: Cluster, design: str, args: argparse.Namespace,
                    created: list[str]) -> dict[str, Any]:
    """Backups in an S3-compatible bucket at a stated size: the object-storage test
    (tests/integration/test_object_storage.py, both server images, the local cluster's
    SeaweedFS) run with a table of ``--bucket-rows`` rows, its figures lines read back: each
    image's on-demand backup (size, bytes in the bucket, time to dump, ship and read back)
    and its restore after the loss of the node (time to fetch and load); and how far the
    binary-log archive trails the server under a steady write load of
    ``--pitr-load-seconds`` with ``--pitr-archive-seconds`` (the RPO of point-in-time
    recovery)."""
    done = run_test_module('tests/integration/test_object_storage.py',
                           OBJECT_STORAGE_ROWS=str(args.bucket_rows),
                           PITR_ARCHIVE_SECONDS=str(args.pitr_archive_seconds),
                           PITR_LOAD_SECONDS=str(args.pitr_load_seconds))
    # each line twice: as the test printed it, and in the summary's measured figures
    lines = list(dict.fromkeys(line.strip().removeprefix('>> ') for line in done.stdout.splitlines()
                               if line.strip().removeprefix('>> ').startswith('bucket ')))
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"the object-storage test failed ({done.returncode}):\n"
                           f"{done.stdout[-3000:]}")
    return {'lines': lines, 'rows': args.bucket_rows, 'passed': True}


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument('--designs', default=','.join(LABELS),
                        help='comma-separated, of: ' + ','.join(LABELS))
    parser.add_argument('--trials', type=int, default=5, help='1-object trials')
    parser.add_argument('--trials-10', type=int, default=2)
    parser.add_argument('--many', type=int, default=100)
    parser.add_argument('--period', type=float, default=5, help='reconcilePeriod, unchanged runs')
    parser.add_argument('--periodic', type=int, default=5, help='unchanged runs to measure')
    parser.add_argument('--real', action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument('--trials-real', type=int, default=3)
    parser.add_argument('--keep', action='store_true', help='keep namespaces and volumes')
    parser.add_argument('--scenarios', default='latency,unchanged,real,idle,availability',
                        help='comma-separated, of: latency, unchanged, real, idle (ours only: '
                             'idle CPU per object, drift repair), availability (ours only: '
                             'longest outage of a writing client per day-2 operation, the '
                             'availability test\'s figures), bucket (ours only, not in the '
                             'default: backup and restore times through an S3-compatible '
                             'bucket at --bucket-rows), soak (memory over thousands of '
                             'runs; ours only, not in the default)')
    parser.add_argument('--bucket-rows', type=int, default=1 << 18,
                        help='rows (about 200 bytes each) of the bucket scenario\'s table')
    parser.add_argument('--pitr-archive-seconds', type=int, default=30,
                        help='archiveSeconds of the bucket scenario\'s archiving instance')
    parser.add_argument('--pitr-load-seconds', type=int, default=120,
                        help='seconds of the bucket scenario\'s steady write load (RPO figure)')
    parser.add_argument('--idle-objects', type=int, default=20,
                        help='real instances for idle CPU and drift repair')
    parser.add_argument('--idle-many', type=int, default=500,
                        help='stand-in objects for idle CPU at scale (0: skip)')
    parser.add_argument('--idle-window', type=float, default=120, help='seconds of each CPU window')
    parser.add_argument('--drift-trials', type=int, default=20)
    parser.add_argument('--soak-objects', type=int, default=20)
    parser.add_argument('--soak-runs', type=int, default=3000)
    parser.add_argument('--soak-minutes', type=float, default=20)
    args = parser.parse_args()
    args.designs = args.designs.split(',')
    args.scenarios = args.scenarios.split(',')
    if unknown := set(args.scenarios) - {'latency', 'unchanged', 'real', 'idle', 'soak',
                                         'availability', 'bucket'}:
        parser.error(f"unknown scenarios: {', '.join(sorted(unknown))}")
    if unknown := set(args.designs) - set(LABELS):
        parser.error(f"unknown designs: {', '.join(sorted(unknown))}")
    return args


def measure(cluster: Cluster, design: str, args: argparse.Namespace,
            created: list[str]) -> dict[str, Any]:
    """All scenarios of one design; a scenario that fails is recorded, not fatal."""
    print(f"== {LABELS[design]}", flush=True)
    scenarios = [(key, run) for key, run in (('latency', latency_scenarios),
                                              ('unchanged', unchanged_scenario))
                 if key in args.scenarios]
    if args.real and 'real' in args.scenarios and design in ('ours', 'ours-cold'):
        scenarios.append(('real', real_scenario))
    if 'soak' in args.scenarios and design == 'ours':
        scenarios.append(('soak', soak_scenario))
    if 'idle' in args.scenarios and design == 'ours':
        scenarios.append(('idle', idle_scenario))
        if args.idle_many:
            scenarios.append(('idle_many', idle_many_scenario))
    if 'availability' in args.scenarios and design == 'ours':
        scenarios.append(('availability', availability_scenario))
    if 'bucket' in args.scenarios and design == 'ours':
        scenarios.append(('bucket', bucket_scenario))
    result: dict[str, Any] = {}
    for key, scenario in scenarios:
        try:
            result[key] = scenario(cluster, design, args, created)
        except Exception as e:  # one broken design must not hide the others' figures
            traceback.print_exc()
            result[key] = {'error': f"{type(e).__name__}: {e}"}
        print(f"   {key}: {json.dumps(result[key], default=str)}", flush=True)
    return result


def clean_up(cluster: Cluster, created: list[str]) -> None:
    for namespace in created:
        harness.delete_namespace(cluster, namespace)
    cluster.wait_namespaces_gone(created)
    cluster.delete_volumes(harness.OWNER_LABEL)
    for namespace in created:
        cluster.delete_volumes(f"otus.homework/mysql-namespace={namespace}")
        for sub in ('data', 'backups'):
            harness.remove(pathlib.Path('/var/lib/mysql-operator') / sub / namespace)
    harness.remove(pathlib.Path(common.ROLE_DEFAULTS['bench_mysql_hostpath_base']))
    # its kind is also called MySQL: left installed, `kubectl get/explain mysql` may pick it
    cluster.kubectl('delete', 'crd', 'mysqls.bench.otus.test', '--ignore-not-found', check=False)
    for design in LABELS:  # the operators' work directories (runner artifacts); logs stay
        for namespace in created:
            harness.remove(WORK / design / namespace)


def save(results: dict[str, Any], context: dict[str, Any]) -> None:
    (OUT / 'results.json').write_text(json.dumps(dict(results, context=context), indent=2,
                                                 default=str))


def write_outputs(results: dict[str, Any], context: dict[str, Any], many: int) -> None:
    text = report(results, context, many)
    print(text)
    (OUT / 'results.md').write_text(text + '\n')
    series = {LABELS[d]: [(r['latency'].get('one') or {}).get('p50'),
                          (r['latency'].get('ten_all') or {}).get('p50'),
                          r['latency'].get('hundred_all')]
              for d, r in results.items() if 'latency' in r}
    if not any(v is not None for values in series.values() for v in values):
        print(f"wrote {OUT / 'results.md'}, {OUT / 'results.json'} (no latency figures to plot)")
        return
    png.plot(str(OUT / 'latency.png'), [1, 10, many], series, title='create -> all Successful',
             xlabel='objects created at once', ylabel='seconds (log)')
    print(f"wrote {OUT / 'results.md'}, {OUT / 'results.json'}, {OUT / 'latency.png'}")


def main() -> int:
    args = arguments()
    if not os.environ.get('KUBECONFIG'):
        print('KUBECONFIG is not set', file=sys.stderr)
        return 2
    OUT.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # clean up on kill, too
    cluster = Cluster(kubeconfig=os.environ['KUBECONFIG'])
    cluster.install_crd(harness.BENCH / 'crd.yaml')
    # the real role reads and writes the otus.homework kinds (MySQLBackup, MySQLRestore);
    # on a fresh cluster nothing else has installed them
    cluster.install_crd(REPO / 'deploy' / 'crd.yml')
    context = {'started': now_utc().isoformat(timespec='seconds'),
               'loadavg_at_start': harness.loadavg(), 'cpus': os.cpu_count(),
               'calibration_at_start': harness.calibration(),
               'other_python_processes': harness.count_processes(
                   'pytest|ansible-playbook|ansible_kopf')}
    results: dict[str, Any] = {}
    created: list[str] = []
    try:
        for design in args.designs:
            results[design] = measure(cluster, design, args, created)
            save(results, context)
    finally:
        if not args.keep:
            clean_up(cluster, created)
    context['loadavg_at_end'] = harness.loadavg()
    context['calibration_at_end'] = harness.calibration()
    save(results, context)
    write_outputs(results, context, args.many)
    return 0


if __name__ == '__main__':
    sys.exit(main())
