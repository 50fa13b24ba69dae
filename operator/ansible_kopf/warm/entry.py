"""
How a fresh Python finds this package: the one place that sets ``sys.path`` for the
processes the pool starts (servers, per-run clients, the module interpreter script).

Each runs ``python -c CODE ARGS...``, where CODE puts the directory that holds
``ansible_kopf`` first on ``sys.path``, imports one module of this subpackage and calls
one of its functions with ``sys.argv[1:]``. Neither the script's directory (whose modules
``config``, ``events`` ... would shadow top-level modules of the same names in a run) nor
the current directory (which a forked run changes) is on the path: clients run with
``-I -S`` (isolated, no site: C modules and this package only), servers with ``-P``
(the environment's site-packages, where Ansible is).
"""
import pathlib
from typing import Final

ROOT: Final = str(pathlib.Path(__file__).resolve().parents[2])  # holds ansible_kopf/


def code(module: str, call: str) -> str:
    """Python source: import ``ansible_kopf.warm.<module>`` as ``entry``, then ``call``."""
    return (f"import sys\nsys.path.insert(0, {ROOT!r})\n"
            f"import ansible_kopf.warm.{module} as entry\n{call}\n")


def command(python: str, module: str, call: str, *, isolated: bool) -> list[str]:
    """The argv that runs ``call`` of ``module`` in a fresh ``python`` (arguments follow)."""
    return [python, '-IS' if isolated else '-P', '-c', code(module, call)]


def server(python: str) -> list[str]:
    """A warm server (:mod:`forkserver`); its options follow."""
    return command(python, 'forkserver', 'sys.exit(entry.main(sys.argv[1:]))', isolated=False)


def client(python: str) -> list[str]:
    """The per-run client (:mod:`client`); its mode and arguments follow."""
    return command(python, 'client', 'entry.main(sys.argv[1:])', isolated=True)
