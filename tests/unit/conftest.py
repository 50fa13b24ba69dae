"""
Fixtures of the tests that really run Ansible: the tree of roles and playbooks, and the
runner settings, once cold (a fresh ansible-playbook per run) and once warm (forked by
the servers of a :class:`ansible_kopf.warm.pool.Pool`, closed when the test ends).
"""
import pathlib
from collections.abc import Iterator

import pytest

from ansible_kopf.run import launchers, runner
from ansible_kopf.warm.pool import Pool
from tests import runs


@pytest.fixture
def tree(tmp_path: pathlib.Path) -> pathlib.Path:
    return runs.make_tree(tmp_path)


@pytest.fixture
def pool(tree: pathlib.Path) -> Iterator[Pool]:
    pool = Pool(tree / 'work' / 'warm')
    try:
        yield pool
    finally:
        pool.close()


@pytest.fixture(params=['cold', 'warm'])
def settings(request: pytest.FixtureRequest, tree: pathlib.Path) -> Iterator[runner.RunSettings]:
    if request.param == 'cold':
        yield runner.RunSettings(workdir=tree / 'work')
        return
    pool = request.getfixturevalue('pool')
    yield runner.RunSettings(workdir=tree / 'work', launcher=launchers.Warm(pool))
    assert pool.pids, 'the runs did not go through warm servers'
