"""
Warm Ansible servers, owned by the operator process: a :class:`Pool` starts them (see
:mod:`zygote`), points runs at them, and stops them.

Where a cold run spends its time, and what the pool removes (figures: bench/README.md):

* ``ansible-playbook`` start-up, mostly imports (~1 s): ansible-runner still spawns a
  command per run, but the command is :mod:`launch`, which hands the run to a *playbook
  server* that forks an already-imported ``ansible-playbook``. ansible-runner keeps its
  whole role: pseudo-terminal, event stream, artifacts, status, rc, cancellation.
* the ``kubernetes`` import in every task's worker that runs kubernetes.core lookups
  (~0.6 s per such task): the playbook server has imported it, workers are forks.
* one fresh ``python`` per module call, importing ansible's module_utils, the
  ``kubernetes`` client and kubernetes.core (~1 s per ``kubernetes.core.k8s`` task):
  the inventory's ``ansible_python_interpreter`` is a script that hands pipelined
  payloads to the *module server*, which forks a child that runs the payload.
* plugin loading in every run and every task's worker (collection loader, connection,
  shell, callback, filter and test plugins, the kubernetes.core lookup and its
  module_utils, their documentation's YAML): the playbook server loads them once
  (:func:`preloads.load_playbook_plugins`). Plugins next to a role or playbook are still
  loaded by each run, so edits to roles show at the next run; a collection or
  ansible-core upgraded in place is seen after the operator restarts (as a new image).
* a Python start-up with ``socket``, ``json`` and ``subprocess`` for each run's and each
  module call's client (~40 ms of CPU): :mod:`launch` and :mod:`wire` import C modules.

Playbook servers are keyed by the run's environment (ansible-core reads its
configuration at import): one per distinct environment, normally one per operator,
at most :data:`MAX_SERVERS` (an evicted one finishes its runs first). There is one
module server. A server that died is started again on the next run; a run whose server
cannot start (nor be reached) runs cold, and so do the runs of the next
:data:`RETRY_AFTER` seconds. Servers exit with the operator (they watch their parent)
and on :meth:`Pool.close`; a run's process dies with its server. With ``idle_timeout``,
servers that served no run for that long stop (the operator then holds only its own
memory); the next run starts them again and waits for their imports (~2 s), as the
first run after the operator started.
"""
import contextlib
import dataclasses
import hashlib
import logging
import os
import pathlib
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import IO, Final

from ansible_kopf.children import PER_RUN  # variables that may differ between runs of one server

logger = logging.getLogger(__name__)

HERE: Final = pathlib.Path(__file__).resolve().parent
ZYGOTE: Final = HERE / 'zygote.py'
LAUNCH: Final = HERE / 'launch.py'
MAX_SERVERS: Final = 4  # playbook servers; the least recently used one is stopped beyond
START_TIMEOUT: Final = 120.0  # seconds for a server to import and report ready
RETRY_AFTER: Final = 60.0  # seconds of cold runs after a server failed to start
STOP_TIMEOUT: Final = 10.0
SOCKET_PATH_MAX: Final = 107  # bytes: sockaddr_un.sun_path is 108 with the final NUL
SHEBANG_MAX: Final = 127  # bytes of "#!interpreter arg" that every Linux kernel reads
_LONGEST_SOCKET: Final = 'playbook-0123456789abcdef.sock'


@dataclasses.dataclass
class Server:
    role: str
    socket: pathlib.Path
    process: subprocess.Popen[bytes]
    last_used: float = 0.0
    ready: bool = False
    waited: bool = False  # for its ready line (see Pool._wait_ready)
    starting: threading.Lock = dataclasses.field(default_factory=threading.Lock)

    @property
    def alive(self) -> bool:
        return self.process.poll() is None


def _key(env: Mapping[str, str]) -> str:
    items = sorted((k, v) for k, v in env.items() if k not in PER_RUN)
    return hashlib.sha256(repr(items).encode()).hexdigest()[:16]


def _fits(directory: pathlib.Path) -> bool:
    return len(os.fsencode(directory / _LONGEST_SOCKET)) <= SOCKET_PATH_MAX


def _noexec(directory: pathlib.Path) -> bool:
    return bool(os.statvfs(directory).f_flag & os.ST_NOEXEC)


def _ready(process: subprocess.Popen[bytes], deadline: float) -> bool:
    """Wait for the server's ``ready`` line on its stdout."""
    stdout: IO[bytes] | None = process.stdout
    if stdout is None:
        return False
    while (remaining := deadline - time.monotonic()) > 0:
        readable, _, _ = select.select([stdout], [], [], min(remaining, 1.0))
        if readable:
            line = stdout.readline()
            if not line:
                return False
            if line.startswith(b'ready'):
                text = line.decode(errors='replace').strip()
                if 'missing=-' not in text:
                    logger.info(f"Warm Ansible server: some preloads failed: {text}")
                return True
        elif process.poll() is not None:
            return False
    return False


class Pool:
    """
    The warm servers of one operator process (thread-safe: runs call it from threads).

    ``directory`` holds the servers' logs (``*.log``: their stderr, never a run's output)
    and the interpreter script; the sockets too, unless their paths would be too long for
    ``AF_UNIX`` there: then they go to a private directory under the temporary directory.
    The pool makes ``directory`` private to the user (mode 0700): whoever can reach a
    socket can have ansible-playbook run as the operator.
    """

    def __init__(self, directory: pathlib.Path, *, python: str = sys.executable,
                 idle_timeout: float = 0.0) -> None:
        self.directory = directory
        self.python = python
        self.idle_timeout = idle_timeout  # seconds without runs before servers stop; 0: never
        self._lock = threading.Lock()
        self._active = 0  # runs under way (see in_use)
        self._last_run = time.monotonic()
        self._reaper: threading.Thread | None = None
        self._stop_reaper = threading.Event()
        self._playbook: dict[str, Server] = {}
        self._module: Server | None = None
        self._retired: list[Server] = []  # stopped by eviction, finishing their runs
        self._retry_at: dict[pathlib.Path, float] = {}  # socket -> no start before
        self._sockets: pathlib.Path | None = None
        self._own_sockets = False  # True: self._sockets is ours to delete
        self._noexec: bool | None = None  # whether scripts cannot run from self.directory
        self._closed = False

    # --- what runs use ---

    @contextlib.contextmanager
    def in_use(self) -> Iterator[None]:
        """Around a run: no server stops as idle while a run is under way."""
        with self._lock:
            self._active += 1
        try:
            yield
        finally:
            with self._lock:
                self._active -= 1
                self._last_run = time.monotonic()

    def interpreter(self) -> str:
        """
        The ``ansible_python_interpreter`` that sends pipelined modules to the module
        server; the real interpreter if the pool is closed, has nowhere to write, or
        its directory does not allow running the script (``noexec``).
        """
        try:
            with self._lock:
                if self._closed:
                    return self.python
                sockets = self._socket_directory()
                if self._noexec is None:  # e.g. a hardened /tmp: the script could not run
                    self._noexec = _noexec(self.directory)
                    if self._noexec:
                        logger.warning(f"Warm Ansible servers: {self.directory} is mounted "
                                       f"noexec; modules run cold")
                if self._noexec:
                    return self.python
            return self._write_interpreter(sockets / 'module.sock')
        except OSError as e:
            logger.warning(f"Warm Ansible servers: cannot write the interpreter script ({e}); "
                           f"modules run cold")
            return self.python

    def command(self, command: Sequence[str], env: Mapping[str, str]) -> list[str]:
        """ansible-runner's command, handed to a warm server when there is one."""
        if not command or os.path.basename(command[0]) != 'ansible-playbook':
            return list(command)
        try:
            server = self._playbook_server(env)
        except (OSError, subprocess.SubprocessError) as e:
            logger.warning(f"Warm Ansible server could not start ({e}); the run goes cold")
            server = None
        if server is None:
            return list(command)
        return [self.python, '-IS', str(LAUNCH), 'playbook', str(server.socket), '--',
                *command]

    def close(self) -> None:
        """Stop every server (idle ones at once; busy ones after :data:`STOP_TIMEOUT`)."""
        self._stop_reaper.set()
        with self._lock:
            self._closed = True
            servers = [*self._playbook.values(), *([self._module] if self._module else []),
                       *self._retired]
            self._playbook.clear()
            self._module = None
            self._retired = []
            sockets, own = self._sockets, self._own_sockets
        for server in servers:
            if server.alive:
                server.process.terminate()
        deadline = time.monotonic() + STOP_TIMEOUT
        for server in servers:
            self._wait_stopped(server, deadline)
            with server.starting:  # not under a thread that waits for its ready line
                if server.process.stdout is not None:
                    server.process.stdout.close()
        if own and sockets is not None:
            shutil.rmtree(sockets, ignore_errors=True)

    @property
    def pids(self) -> list[int]:
        """Process ids of the servers that serve runs (not of those being retired)."""
        with self._lock:
            servers = [*self._playbook.values(), *([self._module] if self._module else [])]
        return [s.process.pid for s in servers if s.alive]

    # --- files ---

    def _socket_directory(self) -> pathlib.Path:
        """Where the sockets go (called with the lock held); created on first use."""
        if self._sockets is None:
            self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            self.directory.chmod(0o700)
            if _fits(self.directory.resolve()):
                self._sockets = self.directory.resolve()
            else:
                for base in dict.fromkeys([tempfile.gettempdir(), '/tmp']):  # noqa: S108
                    if _fits(pathlib.Path(base) / 'ansible-kopf-01234567'):
                        self._sockets = pathlib.Path(
                            tempfile.mkdtemp(prefix='ansible-kopf-', dir=base))
                        self._own_sockets = True
                        break
                else:
                    raise OSError(f"no directory short enough for sockets ({self.directory})")
        return self._sockets

    def _write_interpreter(self, socket: pathlib.Path) -> str:
        path = self.directory / 'python'
        shebang = f"#!{self.python} -IS"
        if len(os.fsencode(shebang)) <= SHEBANG_MAX:
            content = (f"{shebang}\n"
                       f"import sys\nsys.path.insert(0, {str(HERE.parent)!r})\n"
                       f"from ansible_kopf import launch\n"
                       f"launch.python({str(socket)!r}, {self.python!r}, sys.argv[1:])\n")
        else:  # the kernel would cut the interpreter's path: let the shell start it
            words = [self.python, '-IS', str(LAUNCH), 'python', str(socket), self.python]
            quoted = ' '.join("'" + w.replace("'", "'\\''") + "'" for w in words)
            content = f"#!/bin/sh\nexec {quoted} \"$@\"\n"
        try:
            if path.read_text() == content:
                return str(path)
        except FileNotFoundError:
            pass
        temporary = path.with_name(f".python.{os.getpid()}.{threading.get_ident()}")
        temporary.write_text(content)
        temporary.chmod(0o700)
        os.replace(temporary, path)
        return str(path)

    # --- servers ---

    def _start(self, role: str, socket: pathlib.Path, env: Mapping[str, str]) -> Server:
        log = (self.directory / f"{socket.stem}.log").open('ab')
        try:
            process = subprocess.Popen(  # noqa: S603
                [self.python, str(ZYGOTE), '--role', role, '--socket', str(socket),
                 '--parent', str(os.getpid())],
                env=dict(env), cwd=self.directory, stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=log, start_new_session=True)
        finally:
            log.close()
        return Server(role=role, socket=socket, process=process, last_used=time.monotonic())

    def _wait_ready(self, server: Server) -> bool:
        """Wait (outside the pool's lock) until the server is ready; stop it if it fails."""
        with server.starting:
            if server.waited:
                return server.ready and server.alive
            server.waited = True
            server.ready = _ready(server.process, time.monotonic() + START_TIMEOUT)
            if server.process.stdout is not None:
                server.process.stdout.close()
            if not server.ready:
                logger.warning(f"Warm Ansible {server.role} server did not start; runs go "
                               f"cold for {RETRY_AFTER:.0f}s (see {self.directory})")
                with self._lock:
                    self._retry_at[server.socket] = time.monotonic() + RETRY_AFTER
                if server.alive:
                    server.process.terminate()
                self._wait_stopped(server, time.monotonic() + STOP_TIMEOUT)
            return server.ready

    def _needs_start(self, server: Server | None, socket: pathlib.Path) -> bool:
        """
        Whether a slot needs a new server (called with the lock held). A server whose
        socket is gone (a cleaner of old files in /tmp) is alive but unreachable: it is
        retired and replaced.
        """
        if server is not None and server.alive and server.ready and not socket.exists():
            logger.warning(f"Warm Ansible {server.role} server lost its socket {socket}; "
                           f"starting another")
            self._retire(server)
        elif server is not None and server.alive:
            return False
        return time.monotonic() >= self._retry_at.get(socket, 0.0)

    def _playbook_server(self, env: Mapping[str, str]) -> Server | None:
        key = _key(env)
        with self._lock:
            if self._closed:
                return None
            self._retired = [s for s in self._retired if s.alive]
            sockets = self._socket_directory()
            if self._needs_start(self._module, sockets / 'module.sock'):
                self._module = self._start('module', sockets / 'module.sock', os.environ)
            socket = sockets / f"playbook-{key}.sock"
            if self._needs_start(self._playbook.get(key), socket):
                self._playbook[key] = self._start(
                    'playbook', socket, {k: v for k, v in env.items() if k not in PER_RUN})
                self._evict(keep=key)
            server, module = self._playbook.get(key), self._module
            self._watch_idleness()
        for each in (module, server):  # both import in parallel; wait for both
            if each is not None:
                self._wait_ready(each)
        if server is None or not server.ready or not server.alive:
            return None
        server.last_used = time.monotonic()
        return server

    def _watch_idleness(self) -> None:
        """Start the thread that stops idle servers (called with the lock held), once."""
        if self.idle_timeout > 0 and self._reaper is None:
            self._reaper = threading.Thread(target=self._stop_when_idle, name='warm-idle',
                                            daemon=True)
            self._reaper.start()

    def _stop_when_idle(self) -> None:
        """Retire every server once no run has been under way for :attr:`idle_timeout`."""
        interval = min(max(self.idle_timeout / 4, 0.1), 30.0)
        while not self._stop_reaper.wait(interval):
            with self._lock:
                self._retired = [s for s in self._retired if s.alive]  # reaps the exited
                servers = [*self._playbook.values(), *([self._module] if self._module else [])]
                if self._closed or self._active or not servers or \
                        time.monotonic() - self._last_run < self.idle_timeout:
                    continue
                for server in servers:
                    self._retire(server)
                self._playbook.clear()
                self._module = None
            logger.info(f"Warm Ansible servers stopped: no run for {self.idle_timeout:g}s "
                        f"(the next run starts them again)")

    def _evict(self, keep: str) -> None:
        """Beyond :data:`MAX_SERVERS`, retire the least recently used playbook servers."""
        while len(self._playbook) > max(MAX_SERVERS, 1):
            key = min((k for k in self._playbook if k != keep),
                      key=lambda k: self._playbook[k].last_used)
            self._retire(self._playbook.pop(key))

    def _retire(self, server: Server) -> None:
        """Stop a server gracefully (called with the lock held): it finishes its runs."""
        if server.alive:
            server.process.terminate()
        self._retired.append(server)

    def _wait_stopped(self, server: Server, deadline: float) -> None:
        try:
            server.process.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            server.process.kill()  # its children get SIGTERM (PR_SET_PDEATHSIG)
            server.process.wait()
