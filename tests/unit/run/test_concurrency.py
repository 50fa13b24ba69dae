"""run.concurrency: the global, per-kind and per-object bounds on runs, released on errors."""
import asyncio
import collections
from collections.abc import Hashable

from ansible_kopf.run import concurrency


class Meter:
    """Counts how many holders are inside at once, overall and per key."""

    def __init__(self) -> None:
        self.current: collections.Counter[Hashable] = collections.Counter()
        self.peak: collections.Counter[Hashable] = collections.Counter()

    async def visit(self, throttle: concurrency.Throttle, *, obj: str, kind: str, limit: int) -> None:
        async with throttle.hold(obj=obj, kind=kind, kind_limit=limit):
            for key in ('all', kind, obj):
                self.current[key] += 1
                self.peak[key] = max(self.peak[key], self.current[key])
            await asyncio.sleep(0.01)
            for key in ('all', kind, obj):
                self.current[key] -= 1


def test_bounds_are_respected() -> None:
    async def main() -> tuple[Meter, concurrency.Throttle]:
        throttle = concurrency.Throttle(max_runs=3)
        meter = Meter()
        jobs = [meter.visit(throttle, obj=f"a{i % 4}", kind='A', limit=2) for i in range(12)]
        jobs += [meter.visit(throttle, obj=f"b{i}", kind='B', limit=5) for i in range(6)]
        await asyncio.gather(*jobs)
        return meter, throttle

    meter, throttle = asyncio.run(main())
    assert meter.peak['all'] == 3
    assert meter.peak['A'] == 2
    assert meter.peak['B'] == 3  # kind allows 5, the process only 3
    assert all(meter.peak[f"a{i}"] == 1 for i in range(4))  # one run per object
    assert throttle.objects_tracked == 0  # nothing left behind


def test_waiting_for_the_same_object_does_not_take_a_slot() -> None:
    async def main() -> list[str]:
        throttle = concurrency.Throttle(max_runs=1)
        order: list[str] = []
        release = asyncio.Event()

        async def long_run() -> None:
            async with throttle.hold(obj='x', kind='K', kind_limit=5):
                order.append('x1 start')
                await release.wait()
            order.append('x1 end')

        async def same_object() -> None:
            async with throttle.hold(obj='x', kind='K', kind_limit=5):
                order.append('x2 start')

        first = asyncio.create_task(long_run())
        await asyncio.sleep(0)
        second = asyncio.create_task(same_object())
        await asyncio.sleep(0.01)
        assert order == ['x1 start']  # the second run for x waits ...
        assert throttle.objects_tracked == 1
        release.set()
        await asyncio.gather(first, second)
        return order

    assert asyncio.run(main()) == ['x1 start', 'x1 end', 'x2 start']


def test_errors_release_everything() -> None:
    async def main() -> concurrency.Throttle:
        throttle = concurrency.Throttle(max_runs=1)
        for _ in range(3):
            try:
                async with throttle.hold(obj='x', kind='K', kind_limit=1):
                    raise RuntimeError('run failed')
            except RuntimeError:
                pass
        async with asyncio.timeout(1):
            async with throttle.hold(obj='x', kind='K', kind_limit=1):
                pass
        return throttle

    assert asyncio.run(main()).objects_tracked == 0
