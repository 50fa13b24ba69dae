"""
A warm Ansible server: a process that has imported, once, what every run would import,
and forks one child per request. Started and stopped by :mod:`warm`; reached through
:mod:`launch`; speaks :mod:`wire`. Run as a script (``python zygote.py --role ...``):
it imports no operator code besides :mod:`wire`, :mod:`preloads` (what it imports before
forking) and :mod:`children` (what a child does), and no kopf.

Two roles:

``playbook``
    Imports ansible-core's controller (``ansible.cli.playbook``) and the ``kubernetes``
    client that kubernetes.core's lookups load in every task's worker. A request carries
    argv, environment and working directory, plus the client's stdin/stdout/stderr (the
    pseudo-terminal of ansible-runner). The child becomes that ``ansible-playbook``: it
    takes the descriptors, environment and directory, starts its own session and calls
    ``ansible.cli.playbook.main``. ansible-core reads its configuration when it is
    imported, so a server only serves requests whose environment equals the one it was
    started with, apart from :data:`children.PER_RUN` variables (``AWX_ISOLATED_DATA_DIR``),
    and whose configuration file is the same; any other request's child ``exec``\\ s the
    real ``ansible-playbook`` (correct, just not faster).

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
children's groups and exits at once.
"""
import argparse
import contextlib
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

if __name__ == '__main__':
    # Run as a script, sys.path[0] is this directory, whose modules (config, events,
    # status ...) would shadow top-level modules of the same names in the runs: the
    # package's parent replaces it, for `ansible_kopf.wire`, `.preloads`, `.children`.
    _here = os.path.dirname(os.path.realpath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.realpath(p or os.curdir) != _here]
    sys.path.insert(0, os.path.dirname(_here))
from ansible_kopf import children, preloads, wire

KILL_GRACE: Final = 10.0
RECEIVE_TIMEOUT: Final = 30.0  # for a request's bytes once its connection is readable
PR_SET_PDEATHSIG: Final = 1


def _child_setup(server: 'Server', connection: socket.socket, env: dict[str, str],
                 cwd: str) -> None:
    """
    Common to both roles: die with the server, default signals, none of the server's
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


def _valid(role: str, request: dict[str, Any], fds: list[int]) -> bool:
    """
    The shape a request of this role must have before anything is forked for it: with
    fewer descriptors, the child would write to the server's stdout or log.
    """
    common = isinstance(request.get('env'), dict) and isinstance(request.get('cwd'), str)
    if role == 'module':
        return common and isinstance(request.get('payload'), str) and len(fds) == 2  # noqa: PLR2004
    argv = request.get('argv')
    return common and isinstance(argv, list) and bool(argv) and len(fds) == 3  # noqa: PLR2004


class Server:
    """The accept/fork/reap loop; single-threaded, so forking is safe."""

    def __init__(self, path: str, role: str) -> None:
        self.role = role
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
        self.selector.register(self.wakeup_r, selectors.EVENT_READ, ('signal', None))
        self.stopping = False
        self.sock: socket.socket | None = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        self.sock.bind(path)
        self.inode = os.stat(path).st_ino  # to remove our socket, never a successor's
        self.sock.listen(64)
        self.selector.register(self.sock, selectors.EVENT_READ, ('accept', None))
        self.children: dict[int, tuple[socket.socket, int, float | None]] = {}
        self.crcs: dict[str, int] = {}
        self.config_file: str | None = None

    def warm_up(self) -> list[str]:
        if self.role == 'module':
            roots = preloads.collection_roots(dict(os.environ))
            sys.path.extend(p for p in roots if p not in sys.path)
            missing = preloads.preload(preloads.MODULE_PRELOAD)
            self.crcs = preloads.preloaded_sources()
        else:
            missing = preloads.preload(preloads.PLAYBOOK_PRELOAD)
            missing += preloads.load_playbook_plugins()
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
                    if not self.children:
                        return
                for key, _ in self.selector.select(timeout=1.0):
                    what, data = key.data
                    if what == 'accept' and self.sock is not None:
                        try:
                            connection, _ = self.sock.accept()
                        except OSError:  # e.g. out of descriptors: that client goes cold
                            continue
                        self.selector.register(connection, selectors.EVENT_READ,
                                               ('request', None))
                    elif what == 'request':
                        self._request(key.fileobj)  # type: ignore[arg-type]
                    elif what == 'client' and data in self.children:  # EOF: the client left
                        self._client_gone(data)
                    elif what == 'exit':
                        self._reap(data)
                    elif what == 'signal':
                        with contextlib.suppress(BlockingIOError):
                            os.read(self.wakeup_r, 512)
                self._kill_overdue()
        finally:
            self._stop_listening()
            for pid in self.children:  # left unsupervised otherwise
                _signal_run(pid, signal.SIGTERM)

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
        for other, pidfd, _ in self.children.values():
            other.close()
            with contextlib.suppress(OSError):
                os.close(pidfd)

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
        if request is None or not _valid(self.role, request, fds):
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
                if self.role == 'module':
                    children.module_child(request, fds, self.crcs, sys.executable)
                else:
                    children.playbook_child(request, fds, self.base_env, self.config_file)
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
        self.children[pid] = (connection, pidfd, None)
        self.selector.register(pidfd, selectors.EVENT_READ, ('exit', pid))
        self.selector.register(connection, selectors.EVENT_READ, ('client', pid))
        with contextlib.suppress(OSError):
            wire.send(connection, {'pid': pid})

    def _client_gone(self, pid: int) -> None:
        connection, pidfd, deadline = self.children[pid]
        self.selector.unregister(connection)
        if deadline is None:
            _signal_run(pid, signal.SIGTERM)
            self.children[pid] = (connection, pidfd, time.monotonic() + KILL_GRACE)

    def _kill_overdue(self) -> None:
        now = time.monotonic()
        for pid, (_, _, deadline) in self.children.items():
            if deadline is not None and now > deadline:
                _signal_run(pid, signal.SIGKILL)

    def _reap(self, pid: int) -> None:
        connection, pidfd, deadline = self.children.pop(pid)
        self.selector.unregister(pidfd)
        os.close(pidfd)
        _, status = os.waitpid(pid, 0)
        if deadline is None:
            self.selector.unregister(connection)
            with contextlib.suppress(OSError):
                wire.send(connection, {'status': status})
        connection.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument('--socket', required=True)
    parser.add_argument('--role', choices=('playbook', 'module'), required=True)
    parser.add_argument('--parent', type=int, default=os.getppid())
    args = parser.parse_args(argv)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the operator's Ctrl-C stops us through it
    server = Server(args.socket, args.role)
    signal.signal(signal.SIGTERM, server.stop)
    missing = server.warm_up()
    print(f"ready {os.getpid()} missing={','.join(missing) or '-'}", flush=True)
    server.serve(args.parent)
    return 0


if __name__ == '__main__':
    sys.exit(main())
