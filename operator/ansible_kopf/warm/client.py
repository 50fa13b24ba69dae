"""
The per-run client of a warm server (:mod:`forkserver`), in a process of its own: a
Python started with ``-I -S`` (:func:`entry.client`), which imports nothing but C modules
of the standard library, ``os`` and :mod:`wire` (~10 ms of CPU, as ``python -c pass``;
``signal``, ``socket`` and ``subprocess`` would add ~40 ms to every run and every module
call).

``playbook SOCKET -- ansible-playbook ARGS...``
    The command ansible-runner spawns instead of ``ansible-playbook`` (see
    :meth:`pool.Pool.command`). Hands its stdin/stdout/stderr (ansible-runner's
    pseudo-terminal), argv, environment and directory to the server, forwards
    SIGTERM/SIGINT/SIGHUP to the run, and exits as the run did. When ansible-runner kills
    it, the server stops the run.

``python SOCKET REAL_PYTHON [ARGS...]``
    Behind the ``ansible_python_interpreter`` script that :meth:`pool.Pool.interpreter`
    writes. With no arguments (pipelining: an AnsiballZ payload on stdin) the payload
    runs in a child of the module server; with arguments it is the real interpreter
    (``exec``).

If the server cannot be reached, both ``exec`` the real program: a run is never lost,
it only runs cold.
"""
import os
import sys

from ansible_kopf.warm import wire

TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal
    import socket
    from typing import Any, NoReturn
else:  # the C modules behind them: same calls and constants, without enum and selectors
    import _signal as signal
    import _socket as socket

STARTED_TIMEOUT = 30.0  # seconds for a server to fork the run and report its pid


def _connect(path: str) -> 'socket.socket | None':
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError:
        sock.close()
        return None
    return sock


def _exit_as(status: int) -> 'NoReturn':
    """Exit with the wait status of the run: its code, or the signal that ended it."""
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        signal.signal(number, signal.SIG_DFL)
        os.kill(os.getpid(), number)
    sys.exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1)


def _wait(sock: 'socket.socket') -> 'dict[str, Any] | None':
    """The server's final message (``status``), or ``None`` if it went away."""
    try:
        message, _ = wire.receive(sock)
    except (OSError, ValueError):
        return None
    return message


def _started(sock: 'socket.socket') -> 'dict[str, Any] | None':
    """
    The server's ``pid`` message, or ``None`` if it does not come within
    :data:`STARTED_TIMEOUT` (a hung server): the caller then runs the program itself. Its
    socket is not inherited, so the server sees this client gone and stops a late child.
    """
    sock.settimeout(STARTED_TIMEOUT)
    try:
        return _wait(sock)
    finally:
        sock.settimeout(None)


def playbook(path: str, argv: list[str]) -> 'NoReturn':
    sock = _connect(path)
    if sock is None:
        os.execvp(argv[0], argv)  # noqa: S606  (the real program, unchanged)
    try:
        wire.send(sock, {'argv': argv, 'env': dict(os.environ), 'cwd': os.getcwd()},
                  [0, 1, 2])
        started = _started(sock)
    except OSError:
        started = None
    if not started or 'pid' not in started:
        os.execvp(argv[0], argv)  # noqa: S606  (the real program, unchanged)
    pid = int(started['pid'])

    def forward(number: int, _: object) -> None:
        try:  # noqa: SIM105  (contextlib: ~8 ms more per run)
            os.kill(pid, number)
        except ProcessLookupError:
            pass

    for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(number, forward)
    while True:
        finished = _wait(sock)
        if finished is None:
            sys.exit(1)
        if 'status' in finished:
            _exit_as(int(finished['status']))


def python(path: str, real: str, args: list[str]) -> 'NoReturn':
    if args:
        os.execv(real, [real, *args])  # noqa: S606  (the real program, unchanged)
    sock = _connect(path)
    if sock is None:
        os.execv(real, [real])  # noqa: S606  (the real program, unchanged)
    payload = sys.stdin.buffer.read()
    try:
        wire.send(sock, {'payload': payload.decode('utf-8', 'surrogateescape'),
                         'env': dict(os.environ), 'cwd': os.getcwd()}, [1, 2])
        started = _started(sock)
    except OSError:
        started = None
    if not started or 'pid' not in started:  # nothing ran: run it here instead
        import subprocess  # noqa: PLC0415  (rare: not worth its import on every call)
        sys.exit(subprocess.run([real], input=payload, check=False).returncode)  # noqa: S603
    finished = _wait(sock)
    if finished is None or 'status' not in finished:  # it ran, but its end is unknown
        print('ansible-kopf: the warm module server went away during the module',
              file=sys.stderr)
        sys.exit(1)
    _exit_as(int(finished['status']))


def main(argv: list[str]) -> 'NoReturn':
    if len(argv) >= 4 and argv[0] == 'playbook' and argv[2] == '--':  # noqa: PLR2004
        playbook(argv[1], argv[3:])
    if len(argv) >= 3 and argv[0] == 'python':  # noqa: PLR2004
        python(argv[1], argv[2], argv[3:])
    print(f"usage: {__doc__}", file=sys.stderr)
    sys.exit(2)


if __name__ == '__main__':
    main(sys.argv[1:])
