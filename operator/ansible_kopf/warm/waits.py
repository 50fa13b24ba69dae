"""
How a warm run's controller waits for its tasks' results (runs in a playbook server and
the runs it forks): woken by the result, instead of polling.

ansible-core's strategy waits for a task's result in a loop that checks for it, then
sleeps ``internal_poll_interval`` (1 ms by default) and checks again: about a thousand
rounds per second of task, each one a look at every worker and at the results. That was
about a third of a warm run controller's CPU in the bench role's runs (cProfile on the CPU
clock, 2026-11-26). Its results thread already appends each result under a
``threading.Condition`` that nobody waits on. :func:`install` makes that append notify the
condition, and makes the strategy module's sleep of exactly ``internal_poll_interval``
wait on it instead, for at most :data:`WAIT_CAP` seconds: a result ends the wait at once
(no later than the poll would have seen it), and without one the loop still comes round
to look for dead workers and for a stop request. Every other sleep is a real one.

Nothing is changed (and :func:`install` says so) unless ansible-core's strategy module
has the shape this relies on: a module-level ``time``, ``StrategyBase.__init__`` setting
``_results`` to a deque and ``_results_lock`` to a condition. Standard library only at
import; ansible is imported by :func:`install`.
"""
import collections
import contextlib
import importlib
import threading
import time
import types
from collections.abc import Callable
from typing import Any, Final

WAIT_CAP: Final = 0.05  # seconds without a result before the loop looks round again


class Results(collections.deque[Any]):
    """A strategy's results: an append (made under ``condition``) wakes its waiter."""

    def __init__(self, items: Any, condition: threading.Condition) -> None:
        super().__init__(items)
        self.condition = condition

    def append(self, item: Any) -> None:
        super().append(item)
        with contextlib.suppress(RuntimeError):  # appended without the lock: polled instead
            self.condition.notify_all()


class Clock(types.ModuleType):
    """The strategy module's ``time``: :mod:`time`, but for the poll's sleep."""

    def __init__(self, poll_interval: Callable[[], float]) -> None:
        super().__init__('time')
        self.poll_interval = poll_interval
        self.results: Results | None = None  # of the strategy that runs now

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)

    def sleep(self, seconds: float) -> None:
        results = self.results
        if results is None or seconds != self.poll_interval():
            time.sleep(seconds)
            return
        with results.condition:
            if not results:
                results.condition.wait(WAIT_CAP)


def install() -> Callable[[], None] | None:
    """Wake warm runs' strategies by their results; return what undoes it, or None
    (nothing changed) when ansible-core's strategy is not of the expected shape."""
    try:
        strategy = importlib.import_module('ansible.plugins.strategy')
        constants = importlib.import_module('ansible.constants')
    except ImportError:
        return None
    base = getattr(strategy, 'StrategyBase', None)
    if (getattr(strategy, 'time', None) is not time or base is None
            or not hasattr(constants, 'DEFAULT_INTERNAL_POLL_INTERVAL')):
        return None
    clock = Clock(lambda: float(constants.DEFAULT_INTERNAL_POLL_INTERVAL))
    original_init = base.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        results, condition = getattr(self, '_results', None), getattr(self, '_results_lock', None)
        if isinstance(results, collections.deque) and isinstance(condition, threading.Condition):
            with condition:
                self._results = Results(results, condition)
            clock.results = self._results
        else:
            clock.results = None

    base.__init__ = init
    setattr(strategy, 'time', clock)  # noqa: B010  (a module's global, not a declared attribute)

    def undo() -> None:
        base.__init__ = original_init
        setattr(strategy, 'time', time)  # noqa: B010

    return undo
