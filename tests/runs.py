"""
What the tests that really run ansible-runner need: a tree of roles and playbooks on
disk, the watch and job that run them, and looks at the processes a run leaves (or
goes through). Used by tests/unit/test_runner.py (cold and warm) and tests/unit/warm/test_pool.py.
"""
import dataclasses
import json
import os
import pathlib
import sys
import textwrap
import time
import zlib
from collections.abc import Callable
from typing import Any

from ansible_kopf.run import runner
from ansible_kopf.sdk import extravars, watches
from ansible_kopf.warm.pool import Pool

PASSWORD = 'Pa55-w0rd-not-for-disk'
INJECTION = "{{ lookup('pipe', 'id') }}"

# Writes the process chain above it as JSON: [{pid, ppid, cmdline}, ...], parent first.
ANCESTRY = """
import json, sys
def status(pid):
    with open(f'/proc/{pid}/status') as file:
        return int(next(line.split()[1] for line in file if line.startswith('PPid:')))
def cmdline(pid):
    with open(f'/proc/{pid}/cmdline', 'rb') as file:
        return file.read().replace(b'\\0', b' ').decode(errors='replace').strip()
chain, pid = [], status('self')
while pid > 1:
    ppid = status(pid)
    chain.append({'pid': pid, 'ppid': ppid, 'cmdline': cmdline(pid)})
    pid = ppid
with open(sys.argv[1], 'w') as file:
    json.dump(chain, file)
print('written')
"""


def write(path: pathlib.Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))


def slow_command(tree: pathlib.Path) -> str:
    """The command line of ``tree``'s slow playbook: a sleep of 60 s and a fraction that is
    the tree's own, so that a test finds its run's process and never another test's (the
    two pytest workers run such tests at once)."""
    return f"sleep 60.{zlib.crc32(str(tree.resolve()).encode()):010d}"


def make_tree(root: pathlib.Path) -> pathlib.Path:
    """Roles and playbooks under ``root``; ``root/out`` is where they write."""
    write(root / 'roles' / 'demo' / 'tasks' / 'main.yml', """
        - name: Write the database name as given in the spec
          ansible.builtin.copy:
            content: "{{ database }}"
            dest: "{{ out_dir }}/database.txt"
            mode: "0600"
        - name: Record the types the role sees
          ansible.builtin.copy:
            content: "{{ {'server_id': server_id | type_debug,
                          'port_string': port_string | type_debug,
                          'port_string_value': port_string,
                          'empty': empty | type_debug,
                          'name': ansible_operator_meta.name} | to_json }}"
            dest: "{{ out_dir }}/types.json"
            mode: "0600"
        - name: Use the password where only no_log tasks can see it
          ansible.builtin.copy:
            content: "{{ password }}"
            dest: "{{ out_dir }}/password.txt"
            mode: "0600"
          no_log: true
        - name: Publish custom stats
          ansible.builtin.set_stats:
            data:
              endpoint: "{{ ansible_operator_meta.name }}.{{ ansible_operator_meta.namespace }}"
        - name: Publish more custom stats
          ansible.builtin.set_stats:
            data:
              replicas: 3
    """)
    write(root / 'roles' / 'failing' / 'tasks' / 'main.yml', """
        - name: Succeed first
          ansible.builtin.debug:
            msg: fine
        - name: Fail loudly
          ansible.builtin.fail:
            msg: "backup of {{ ansible_operator_meta.name }} failed"
    """)
    write(root / 'roles' / 'secretfail' / 'tasks' / 'main.yml', """
        - name: Fail with a secret in the message
          ansible.builtin.fail:
            msg: "cannot log in with {{ password }}"
          no_log: true
    """)
    write(root / 'playbooks' / 'quick.yml', """
        - name: Quick
          hosts: localhost
          gather_facts: false
          tasks:
            - name: Say hello
              ansible.builtin.debug:
                msg: hello
    """)
    write(root / 'playbooks' / 'slow.yml', f"""
        - name: Slow
          hosts: localhost
          gather_facts: false
          tasks:
            - name: Take a long time
              ansible.builtin.command: {slow_command(root)}  # a command line of this tree's own
              changed_when: false
    """)
    write(root / 'playbooks' / 'gate.yml', """
        - name: Gate
          hosts: localhost
          gather_facts: false
          tasks:
            - name: Wait until the test opens the gate
              ansible.builtin.wait_for:
                path: "{{ out_dir }}/gate"
                timeout: 120
    """)
    # Modules of several kinds (command, file, copy, stat, a failure), their results kept.
    write(root / 'playbooks' / 'modules.yml', """
        - name: Modules
          hosts: localhost
          gather_facts: false
          tasks:
            - name: Run a command
              ansible.builtin.command: echo "out $HOME"
              register: command
              changed_when: false
            - name: Run a failing command
              ansible.builtin.shell: echo oops >&2; exit 3
              register: failing
              ignore_errors: true
            - name: Make a directory
              ansible.builtin.file:
                path: "{{ out_dir }}/dir"
                state: directory
                mode: "0700"
              register: directory
            - name: Copy a file
              ansible.builtin.copy:
                content: "{{ password }}"
                dest: "{{ out_dir }}/dir/secret"
                mode: "0600"
              register: copied
              no_log: true
            - name: Copy it again
              ansible.builtin.copy:
                content: "{{ password }}"
                dest: "{{ out_dir }}/dir/secret"
                mode: "0600"
              register: again
              no_log: true
            - name: Look at it
              ansible.builtin.stat:
                path: "{{ out_dir }}/dir/secret"
                get_checksum: true
              register: looked
            - name: Keep the results
              ansible.builtin.copy:
                content: "{{ {'command': command, 'failing': failing, 'directory': directory,
                              'copied': copied, 'again': again, 'looked': looked} | to_json }}"
                dest: "{{ out_dir }}/results-{{ label }}.json"
                mode: "0600"
    """)
    # Where the controller and a module ran: the process chains above them.
    (root / 'ancestry.py').write_text(ANCESTRY)
    write(root / 'playbooks' / 'whoami.yml', f"""
        - name: Who runs me
          hosts: localhost
          gather_facts: false
          tasks:
            - name: Record the controller's ancestry (lookups run in its workers)
              ansible.builtin.debug:
                msg: "{{{{ lookup('pipe', '{sys.executable} {root / 'ancestry.py'} '
                                  ~ out_dir ~ '/controller-' ~ label ~ '.json') }}}}"
            - name: Record a module's ancestry
              ansible.builtin.command:
                argv: ["{sys.executable}", "{root / 'ancestry.py'}",
                       "{{{{ out_dir }}}}/module-{{{{ label }}}}.json"]
              changed_when: false
    """)
    (root / 'out').mkdir()
    return root


def make_watch(tree: pathlib.Path, target: watches.Runnable, **changes: Any) -> watches.Watch:
    watch = watches.Watch(
        group='otus.homework', version='v1', kind='MySQL', target=target,
        vars={'out_dir': str(tree / 'out')}, reconcile_period=0.0, manage_status=True,
        finalizer=None, snake_case_parameters=True, mark_unsafe=True,
        max_concurrent_reconciles=1, max_runner_artifacts=20, match_labels={},
        roles_path=(tree / 'roles',),
    )
    return dataclasses.replace(watch, **changes)


def role(tree: pathlib.Path, name: str, **changes: Any) -> watches.Watch:
    return make_watch(tree, watches.Runnable(type='role', path=tree / 'roles' / name), **changes)


def playbook(tree: pathlib.Path, name: str, **changes: Any) -> watches.Watch:
    return make_watch(tree, watches.Runnable(type='playbook',
                                           path=tree / 'playbooks' / f"{name}.yml"), **changes)


def make_body() -> dict[str, Any]:
    return {
        'apiVersion': 'otus.homework/v1', 'kind': 'MySQL',
        'metadata': {'name': 'db1', 'namespace': 'apps', 'uid': 'u-1', 'generation': 1},
        'spec': {'database': INJECTION, 'password': PASSWORD, 'serverID': 7,
                 'portString': '0123', 'empty': ''},
    }


def make_job(tree: pathlib.Path, watch: watches.Watch, *, max_artifacts: int = 20,
             workdir: pathlib.Path | None = None, label: str = 'run',
             name: str = 'db1') -> runner.Job:
    variables = dict(extravars.build(make_body(), watch, finalizing=False))
    variables['label'] = label  # for the playbooks that write files per run
    return runner.Job(
        target=watch.target, roles_path=watch.roles_path,
        private_data_dir=runner.private_data_dir(workdir or tree / 'work', group=watch.group,
                                                 kind=watch.kind, namespace='apps', name=name),
        extravars=variables,
        max_artifacts=max_artifacts, label='otus.homework/v1/MySQL apps/db1',
    )


def files_under(path: pathlib.Path) -> list[pathlib.Path]:
    return [p for p in path.rglob('*') if p.is_file()]


def processes_mentioning(text: str) -> list[str]:
    found = []
    for proc in pathlib.Path('/proc').iterdir():
        if proc.name == str(os.getpid()):
            continue
        try:
            cmdline = (proc / 'cmdline').read_bytes().replace(b'\0', b' ').decode()
        except OSError:
            continue
        if text in cmdline:
            found.append(f"{proc.name}: {cmdline}")
    return found


def ancestry(tree: pathlib.Path, what: str, label: str) -> list[dict[str, Any]]:
    """The chain written by playbooks/whoami.yml: ``what`` is controller or module."""
    chain: list[dict[str, Any]] = json.loads((tree / 'out' / f"{what}-{label}.json").read_text())
    return chain


def cmdline(pid: int) -> str:
    """A process's command line, words joined by spaces; '' once it is gone."""
    try:
        return (pathlib.Path('/proc') / str(pid) / 'cmdline').read_bytes().replace(b'\0', b' ').decode(
            errors='replace')
    except OSError:
        return ''


def children(pid: int) -> list[int]:
    """Live (not zombie) processes whose parent is ``pid``."""
    found = []
    for proc in pathlib.Path('/proc').iterdir():
        try:
            fields = (proc / 'stat').read_text().rsplit(')', 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[1] == str(pid) and fields[0] != 'Z':
            found.append(int(proc.name))
    return found


def exited(pid: int) -> bool:
    """Gone, or a zombie nobody has reaped yet."""
    try:
        return (pathlib.Path('/proc') / str(pid) / 'stat').read_text() \
            .rsplit(')', 1)[1].split()[0] == 'Z'
    except OSError:
        return True


def _option(pid: int, name: bytes) -> bytes:
    """The value after option ``name`` on a server's command line."""
    cmdline = (pathlib.Path('/proc') / str(pid) / 'cmdline').read_bytes().split(b'\0')
    return cmdline[cmdline.index(name) + 1]


def servers(pool: Pool) -> dict[str, list[int]]:
    """The pool's live servers by flavour (``playbook``, ``module``), from their command lines."""
    found: dict[str, list[int]] = {'playbook': [], 'module': []}
    for pid in pool.pids:
        found[_option(pid, b'--flavour').decode()].append(pid)
    return found


def socket_of(pid: int) -> pathlib.Path:
    """The socket a server listens on, from its command line."""
    return pathlib.Path(os.fsdecode(_option(pid, b'--socket')))


def eventually(condition: Callable[[], bool], timeout: float = 30.0) -> bool:
    """Poll until ``condition`` holds (a liveness bound, not a speed check)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True
