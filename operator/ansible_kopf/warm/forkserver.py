"""
A warm Ansible server, in a process of its own: it has imported, once, what every run
would import, and forks one child per request. Started and stopped by :mod:`pool`
(``python -P -c <entry> --flavour ...``, see :mod:`entry`); reached through
:mod:`client`; speaks :mod:`wire`. It imports no operator code besides :mod:`wire`,
:mod:`preloads` (what it imports before forking), :mod:`templates` (compiled templates
kept between runs), :mod:`waits` (how a run waits for its tasks) and :mod:`child` (what a
child does), and no kopf.

Two flavours (:data:`wire.FLAVOURS`):

``playbook``
    Imports ansible-core's controller (``ansible.cli.playbook``) and the ``kubernetes``
    client that kubernetes.core's lookups load in every task's worker. A request carries
    argv, environment and working directory, plus the client's stdin/stdout/stderr (the
    pseudo-terminal of ansible-runner). The child becomes that ``ansible-playbook``: it
    takes the descriptors, environment and directory, starts its own session and calls
    ``ansible.cli.playbook.main``. ansible-core reads its configuration when it is
    imported, so a server only serves requests whose environment equals the one it was
    started with, apart from :data:`wire.PER_RUN` variables (``AWX_ISOLATED_DATA_DIR``,
    ``K8S_AUTH_KUBECONFIG``), and whose configuration file is the same; any other
    request's child ``exec``\\ s the real ``ansible-playbook`` (correct, just not faster).
    Its runs wait for their tasks' results without polling (:mod:`waits`); with
    ``--templates DIR`` they keep compiled Jinja templates there (:mod:`templates`).

``module``
    Imports what a kubernetes.core module imports (``ansible.module_utils.basic``,
    the ``kubernetes`` client, kubernetes.core's module_utils), and never the controller
    (``ansible.module_utils._internal.is_controller`` stays false, as in a module
    process). A request carries an AnsiballZ payload (what pipelining feeds to
    ``python`` on stdin), environment, directory and the caller's stdout/stderr. The
    child runs the payload as ``__main__``, exactly as ``python`` would. Only payloads of
    modules from packages the server preloaded are run so, and only if every preloaded
    file the payload also ships is byte-identical (zip CRC); anything else runs in a
    fresh ``python`` (same result, old speed).

The parent tells each client its child's pid, then the child's exit status. Each child
leads a process group of its own. If a client goes away first (ansible-runner, or a
task's worker, killed it on cancellation), the child's group gets SIGTERM, and SIGKILL
after :data:`KILL_GRACE` seconds. A child gets SIGTERM when its server dies, however it
dies (``PR_SET_PDEATHSIG``): no run goes on unsupervised after its client lost the server.
A server holds no per-run state after the run: memory stays flat however many runs.
A request of the wrong shape, or without all of the client's descriptors, is refused (no
child would write into the server's own stdout or log), and so is one the server cannot
fork for (out of processes or descriptors): the client, told no pid, runs cold.

Life: the server prints ``ready`` on stdout once imported. SIGTERM stops it gracefully:
it stops listening (removes its socket) and exits when its last child has ended. When
the process given as ``--parent`` (the operator) is gone, it sends SIGTERM to its
children's groups, SIGKILL to those still there :data:`KILL_GRACE` seconds later, and
exits once they are reaped.
"""
import argparse
import contextlib
import dataclasses
import enum
import gc
import importlib
import os
import selectors
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any, Final

from ansible_kopf.warm import child, preloads, templates, waits, wire

KILL_GRACE: Final = 10.0
RECEIVE_TIMEOUT: Final = 30.0  # for a request's bytes once its connection is readable
PR_SET_PDEATHSIG: Final = 1


class Ready(enum.Enum):
    """What became readable in the server's loop (the selector's tag of each descriptor)."""
    ACCEPT = enum.auto()  # the listening socket: a client connects
    REQUEST = enum.auto()  # a new connection: its request
    CLIENT = enum.auto()  # the connection of a running child's client: it went away
    EXIT = enum.auto()  # a child's pidfd: the child exited
    SIGNAL = enum.auto()  # the wakeup pipe: a signal arrived


@dataclasses.dataclass
class Run:
    """A forked child and its client, from the fork until the child is reaped."""
    connection: socket.socket  # to the client: the child's pid, later its exit status
    pidfd: int
    kill_at: float | None = None  # set when the client went away: SIGKILL after then

    @property
    def client_gone(self) -> bool:
        return self.kill_at is not None


def _child_setup(server: 'ForkServer', connection: socket.socket, env: dict[str, str],
                 cwd: str) -> None:
    """
    Common to both flavours: die with the server, default signals, none of the server's
    descriptors (listening socket, other runs' connections), the request's env and cwd.
    """
    if server.prctl is not None:
        server.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != server.pid:  # the server died before prctl: so does the child
        os._exit(70)
    signal.set_wakeup_fd(-1)
    for number in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD, signal.SIGHUP):
        signal.signal(number, signal.SIG_DFL)
    server.close_in_child(connection)
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    tempfile.tempdir = None  # recomputed from TMPDIR of this request


def _signal_run(pid: int, number: int) -> None:
    """
    Signal a child's process group (it leads one: setsid/setpgid), or the child itself
    if it has not got that far yet.
    """
    with contextlib.suppress(ProcessLookupError, PermissionError):
        try:
            os.killpg(pid, number)
        except ProcessLookupError:
            os.kill(pid, number)


def _valid(flavour: 'wire.Flavour', request: dict[str, Any], fds: list[int]) -> bool:
    """
    The shape a request of this flavour must have before anything is forked for it: with
    fewer descriptors, the child would write to the server's stdout or log.
    """
    common = isinstance(request.get('env'), dict) and isinstance(request.get('cwd'), str)
    if flavour == wire.MODULE:
        return common and isinstance(request.get('payload'), str) and len(fds) == 2  # noqa: PLR2004
    argv = request.get('argv')
    return common and isinstance(argv, list) and bool(argv) and len(fds) == 3  # noqa: PLR2004


class ForkServer:
    """The accept/fork/reap loop; single-threaded, so forking is safe."""

    def __init__(self, path: str, flavour: 'wire.Flavour', templates: str | None = None) -> None:
        self.flavour = flavour
        self.templates = templates  # where compiled Jinja templates are kept (playbook)
        self.path = path
        self.pid = os.getpid()
        self.base_env = dict(os.environ)
        self.prctl: Callable[..., int] | None = None  # children die with us if we have it
        with contextlib.suppress(ImportError, OSError, AttributeError):
            import ctypes  # noqa: PLC0415
            self.prctl = ctypes.CDLL(None, use_errno=True).prctl
        os.close(os.pidfd_open(self.pid))  # children are awaited with pidfds (Linux 5.3+)
        self.selector = selectors.DefaultSelector()
        self.wakeup_r, self.wakeup_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(self.wakeup_w)
        self.selector.register(self.wakeup_r, selectors.EVENT_READ, (Ready.SIGNAL, 0))
        self.stopping = False
        self.sock: socket.socket | None = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        self.sock.bind(path)
        self.inode = os.stat(path).st_ino  # to remove our socket, never a successor's
        self.sock.listen(64)
        self.selector.register(self.sock, selectors.EVENT_READ, (Ready.ACCEPT, 0))
        self.runs: dict[int, Run] = {}  # by the child's pid
        self.crcs: dict[str, int] = {}
        self.config_file: str | None = None

    def warm_up(self) -> list[str]:
        if self.flavour == wire.MODULE:
            roots = preloads.collection_roots(dict(os.environ))
            sys.path.extend(p for p in roots if p not in sys.path)
            missing = preloads.preload(preloads.MODULE_PRELOAD)
            self.crcs = preloads.preloaded_sources()
        else:
            missing = preloads.preload(preloads.PLAYBOOK_PRELOAD)
            missing += preloads.load_playbook_plugins()
            if waits.install() is None:
                missing.append('waits')  # ansible.plugins.strategy is not of the expected shape
            if self.templates is not None and templates.install(self.templates) is None:
                missing.append('templates')  # no jinja2, or the directory cannot be made
            manager = importlib.import_module('ansible.config.manager')
            self.config_file = manager.find_ini_config_file()
        gc.collect()
        gc.freeze()  # keep the collector from touching (and copying) inherited pages
        return missing

    def stop(self, *_: object) -> None:
        """SIGTERM: finish the runs under way, accept no more."""
        self.stopping = True

    def serve(self, parent: int) -> None:
        try:
            while os.getppid() == parent:  # the operator is gone: so are we
                if self.stopping:
                    self._stop_listening()
                    if not self.runs:
                        return
                for key, _ in self.selector.select(timeout=1.0):
                    what, pid = key.data
                    if what is Ready.ACCEPT and self.sock is not None:
                        try:
                            connection, _ = self.sock.accept()
                        except OSError:  # e.g. out of descriptors: that client goes cold
                            continue
                        self.selector.register(connection, selectors.EVENT_READ,
                                               (Ready.REQUEST, 0))
                    elif what is Ready.REQUEST:
                        self._request(key.fileobj)  # type: ignore[arg-type]
                    elif what is Ready.CLIENT and pid in self.runs:  # EOF: the client left
                        self._client_gone(pid)
                    elif what is Ready.EXIT:
                        self._reap(pid)
                    elif what is Ready.SIGNAL:
                        with contextlib.suppress(BlockingIOError):
                            os.read(self.wakeup_r, 512)
                self._kill_overdue()
        finally:
            self._stop_listening()
            self._end_runs()

    def _end_runs(self) -> None:
        """
        Leaving with runs under way (the operator is gone): SIGTERM their groups, reap
        them for up to :data:`KILL_GRACE` seconds, then SIGKILL and reap what is left. A
        run that survived SIGTERM (ansible-playbook stuck flushing its queues at exit,
        say) would otherwise outlive its server, an orphan of init holding its pipes.
        """
        for pid in self.runs:
            _signal_run(pid, signal.SIGTERM)
        deadline = time.monotonic() + KILL_GRACE
        while self.runs and time.monotonic() < deadline:
            for key, _ in self.selector.select(timeout=max(0.0, deadline - time.monotonic())):
                what, pid = key.data
                if what is Ready.EXIT and pid in self.runs:
                    self._reap(pid)
                elif what is Ready.CLIENT and pid in self.runs:
                    self._client_gone(pid)
                elif what is Ready.REQUEST:  # accepted before we stopped: it runs cold
                    self.selector.unregister(key.fileobj)
                    key.fileobj.close()  # type: ignore[union-attr]
                elif what is Ready.SIGNAL:
                    with contextlib.suppress(BlockingIOError):
                        os.read(self.wakeup_r, 512)
        for pid in list(self.runs):
            _signal_run(pid, signal.SIGKILL)
            self._reap(pid)

    def close_in_child(self, connection: socket.socket) -> None:
        """In a child: close what belongs to the server and to the other runs."""
        with contextlib.suppress(Exception):
            self.selector.close()
        for fd in (self.wakeup_r, self.wakeup_w):
            with contextlib.suppress(OSError):
                os.close(fd)
        if self.sock is not None:
            self.sock.close()
        connection.close()
        for run in self.runs.values():
            run.connection.close()
            with contextlib.suppress(OSError):
                os.close(run.pidfd)

    def _stop_listening(self) -> None:
        if self.sock is None:
            return
        self.selector.unregister(self.sock)
        self.sock.close()
        self.sock = None
        with contextlib.suppress(OSError):
            if os.stat(self.path).st_ino == self.inode:
                os.unlink(self.path)

    def _request(self, connection: socket.socket) -> None:
        self.selector.unregister(connection)
        request: dict[str, Any] | None
        try:
            connection.settimeout(RECEIVE_TIMEOUT)
            request, fds = wire.receive(connection)
            connection.settimeout(None)
        except (OSError, ValueError):
            request, fds = None, []
        if request is None or not _valid(self.flavour, request, fds):
            connection.close()
            for fd in fds:
                os.close(fd)
            return
        try:
            pid = os.fork()
        except OSError:  # out of processes or memory: the client runs it cold
            connection.close()
            for fd in fds:
                os.close(fd)
            return
        if pid == 0:
            try:
                _child_setup(self, connection, {str(k): str(v) for k, v in request['env'].items()},
                             str(request['cwd']))
                if self.flavour == wire.MODULE:
                    child.module_child(request, fds, self.crcs, sys.executable)
                else:
                    child.playbook_child(request, fds, self.base_env, self.config_file)
            finally:
                os._exit(70)
        for fd in fds:
            os.close(fd)
        try:
            pidfd = os.pidfd_open(pid)
        except OSError:  # out of descriptors: stop the child before it does anything
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            connection.close()  # the client, told no pid, runs it cold
            return
        self.runs[pid] = Run(connection=connection, pidfd=pidfd)
        self.selector.register(pidfd, selectors.EVENT_READ, (Ready.EXIT, pid))
        self.selector.register(connection, selectors.EVENT_READ, (Ready.CLIENT, pid))
        with contextlib.suppress(OSError):
            wire.send(connection, {'pid': pid})

    def _client_gone(self, pid: int) -> None:
        run = self.runs[pid]
        self.selector.unregister(run.connection)
        if not run.client_gone:
            _signal_run(pid, signal.SIGTERM)
            run.kill_at = time.monotonic() + KILL_GRACE

    def _kill_overdue(self) -> None:
        now = time.monotonic()
        for pid, run in self.runs.items():
            if run.kill_at is not None and now > run.kill_at:
                _signal_run(pid, signal.SIGKILL)

    def _reap(self, pid: int) -> None:
        run = self.runs.pop(pid)
        self.selector.unregister(run.pidfd)
        os.close(run.pidfd)
        _, status = os.waitpid(pid, 0)
        if not run.client_gone:
            self.selector.unregister(run.connection)
            with contextlib.suppress(OSError):
                wire.send(run.connection, {'status': status})
        run.connection.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or '').strip().splitlines()[0])
    parser.add_argument('--socket', required=True)
    parser.add_argument('--flavour', choices=wire.FLAVOURS, required=True)
    parser.add_argument('--parent', type=int, default=os.getppid())
    parser.add_argument('--templates', help='directory of compiled Jinja templates (playbook)')
    args = parser.parse_args(argv)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the operator's Ctrl-C stops us through it
    server = ForkServer(args.socket, args.flavour, args.templates)
    signal.signal(signal.SIGTERM, server.stop)
    missing = server.warm_up()
    print(f"ready {os.getpid()} missing={','.join(missing) or '-'}", flush=True)
    server.serve(args.parent)
    return 0
