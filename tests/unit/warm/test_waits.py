"""
How a warm run's controller waits for its tasks (warm.waits): the poll's sleep ends when
a result is appended under the strategy's condition, other sleeps are real ones, and
ansible-core's strategy gets the notifying results when installed. Warm and cold runs
giving the same events and results is test_pool's test_warm_and_cold_runs_agree.
"""
import collections
import threading
from typing import Any

import pytest

from ansible_kopf.warm import waits

POLL = 0.001


def clock_with_results() -> tuple[waits.Clock, waits.Results]:
    clock = waits.Clock(lambda: POLL)
    clock.results = waits.Results([], threading.Condition(threading.Lock()))
    return clock, clock.results


def test_a_result_ends_the_poll_s_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(waits, 'WAIT_CAP', 600.0)  # only the result can end the wait
    clock, results = clock_with_results()
    waiting = threading.Event()
    done = threading.Event()

    def poll() -> None:
        waiting.set()
        clock.sleep(POLL)
        done.set()

    thread = threading.Thread(target=poll, daemon=True)
    thread.start()
    assert waiting.wait(10)
    with results.condition:  # as ansible's results thread appends
        results.append('result')
    assert done.wait(30), 'the append did not wake the poll'
    thread.join(10)


def test_a_result_already_there_does_not_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(waits, 'WAIT_CAP', 600.0)
    clock, results = clock_with_results()
    with results.condition:
        results.append('result')
    clock.sleep(POLL)  # returns: there is a result to process
    assert list(results) == ['result']


def test_other_sleeps_and_appends_without_the_lock_are_untouched(
        monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []
    monkeypatch.setattr(waits.time, 'sleep', slept.append)
    clock, results = clock_with_results()
    clock.sleep(0.0001)  # ansible's wait for a free worker
    assert slept == [0.0001]
    results.append('unlocked')  # no lock held: no notify, no error
    assert list(results) == ['unlocked']
    assert clock.monotonic is waits.time.monotonic  # the rest of the time module


def test_the_strategy_gets_notifying_results_and_the_clock(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from ansible.plugins import strategy

    def stand_in(self: Any, *_: Any) -> None:  # ansible's needs a task queue manager
        self._results = collections.deque(['early'])
        self._results_lock = threading.Condition(threading.Lock())

    monkeypatch.setattr(strategy.StrategyBase, '__init__', stand_in)
    undo = waits.install()
    assert undo is not None
    try:
        assert isinstance(strategy.time, waits.Clock)
        assert waits.install() is None  # once only: the module's time is no longer time
        instance = object.__new__(strategy.StrategyBase)
        strategy.StrategyBase.__init__(instance)
        assert isinstance(instance._results, waits.Results)
        assert list(instance._results) == ['early']
        assert strategy.time.results is instance._results
    finally:
        undo()
    assert strategy.time is waits.time
    assert strategy.StrategyBase.__init__ is stand_in
