"""
The forked child of a warm server (:mod:`forkserver`) once it has been set up: what it does
to become ``ansible-playbook`` (``playbook`` role) or to run an AnsiballZ payload as
``python`` would (``module`` role), falling back to ``exec`` of the real program when
the request does not match what the server preloaded, and how it exits (exit handlers,
flush, status) without returning into the server's loop. Standard library plus
:mod:`preloads` and :mod:`wire`.
"""
import atexit
import contextlib
import importlib
import os
import sys
import tempfile
import traceback
import types
from collections.abc import Callable
from typing import Any

from ansible_kopf.warm.preloads import module_mismatch
from ansible_kopf.warm.wire import server_env


def _finish(code: object) -> None:
    """Leave the child as an interpreter would: exit handlers, flush, status."""
    with contextlib.suppress(Exception):
        atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    status = code if isinstance(code, int) else (0 if code is None else 1)
    if not isinstance(code, int) and code is not None:
        with contextlib.suppress(Exception):
            print(code, file=sys.stderr, flush=True)
    os._exit(status)


def _take_stdio(fds: list[int]) -> None:
    for target, fd in enumerate(fds[:3]):
        os.dup2(fd, target)
    for fd in fds:
        if fd > 2:  # noqa: PLR2004
            os.close(fd)


def playbook_child(request: dict[str, Any], fds: list[int], base_env: dict[str, str],
                   config_file: str | None) -> None:
    """In the child: become ``ansible-playbook`` for this request (never returns)."""
    os.setsid()  # its own session and process group, like a spawned ansible-playbook
    _take_stdio(fds)
    argv = [str(a) for a in request['argv']]
    env = {str(k): str(v) for k, v in request['env'].items()}
    same = server_env(env) == server_env(base_env)
    manager = importlib.import_module('ansible.config.manager')
    if not same or manager.find_ini_config_file() != config_file:
        os.execvpe(argv[0], argv, env)  # noqa: S606  (configuration differs: the real, cold program)
    cli = importlib.import_module('ansible.cli.playbook')
    display = importlib.import_module('ansible.utils.display')
    display.Display()._set_column_width()  # the terminal of this run
    sys.argv = argv
    _run_then_finish(lambda: cli.main(argv))


def _run_then_finish(work: Callable[[], object]) -> None:
    """In a child: run ``work`` as a program's main, then exit with its status (never returns)."""
    atexit._clear()
    try:
        work()
        code: object = 0
    except SystemExit as e:
        code = e.code
    except BaseException:
        traceback.print_exc()
        code = 1
    _finish(code)


def module_child(request: dict[str, Any], fds: list[int], crcs: dict[str, int],
                 python: str) -> None:
    """In the child: run the AnsiballZ payload as ``python`` would (never returns)."""
    os.setpgid(0, 0)  # a group of its own: stopping the run stops the module's commands too
    devnull = os.open(os.devnull, os.O_RDONLY)
    _take_stdio([devnull, *fds[:2]])
    payload = str(request['payload'])
    try:
        payload.encode('utf-8')
        reason = module_mismatch(payload, crcs)
    except UnicodeEncodeError:
        reason = 'the payload is not UTF-8'
    if reason is not None:  # a fresh interpreter with the payload on stdin, as pipelining
        with tempfile.TemporaryFile() as script:
            script.write(payload.encode('utf-8', 'surrogateescape'))
            script.seek(0)
            os.dup2(script.fileno(), 0)
        os.execv(python, [python])  # noqa: S606  (the real program, unchanged)
    main = types.ModuleType('__main__')
    sys.modules['__main__'] = main
    sys.argv = ['']
    _run_then_finish(lambda: exec(compile(payload, '<stdin>', 'exec'), main.__dict__))  # noqa: S102
