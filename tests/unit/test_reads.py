"""Which ``kubectl get`` arguments the tests' in-process reader answers, and which it leaves to kubectl."""
import pytest

from tests import reads


@pytest.mark.parametrize(('args', 'expected'), [
    (('-n', 'ns', 'job', 'j'), reads.Get('job', 'j', namespace='ns')),
    (('pv',), reads.Get('pv')),
    (('Namespaces', '-l', 'a=b'), reads.Get('namespaces', labels='a=b')),
    (('-n', 'ns', 'events', '--field-selector', 'involvedObject.name=x'),
     reads.Get('events', namespace='ns', fields='involvedObject.name=x')),
    (('-n', 'ns', 'mysqls.otus.homework', 'db'), reads.Get('mysqls.otus.homework', 'db', namespace='ns')),
])
def test_the_simple_forms_are_read_in_process(args: tuple[str, ...], expected: reads.Get) -> None:
    parsed = reads.parse(args)
    assert parsed is not None
    assert parsed == reads.Get(**{**expected.__dict__, 'args': args})


@pytest.mark.parametrize('args', [
    ('-n', 'ns', 'secret,deploy', ),            # several kinds
    ('job/j',),                                  # kind/name
    ('-n', 'ns', 'pods', '--all-namespaces'),   # any other option
    ('-n', 'ns', 'pods', 'a', 'b'),             # several names
    ('-n', 'ns', '-n', 'other', 'pods'),        # an option twice
    ('-n',),                                     # an option without its value
    (),
])
def test_anything_else_is_left_to_kubectl(args: tuple[str, ...]) -> None:
    assert reads.parse(args) is None
