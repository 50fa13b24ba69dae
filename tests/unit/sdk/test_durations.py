"""sdk.durations: Go duration strings parsed to seconds, and the ones refused."""
import pytest

from ansible_kopf.sdk import durations


@pytest.mark.parametrize(('text', 'seconds'), [
    ('0', 0.0),
    ('30s', 30.0),
    ('1m30s', 90.0),
    ('1h', 3600.0),
    ('1.5h', 5400.0),
    ('2h45m', 9900.0),
    ('500ms', 0.5),
    ('1us', 1e-6),
    ('1µs', 1e-6),
    ('100ns', 1e-7),
    ('+10s', 10.0),
    (' 10s ', 10.0),
    ('.5s', 0.5),
    ('0s', 0.0),
])
def test_valid_durations(text: str, seconds: float) -> None:
    assert durations.parse(text) == pytest.approx(seconds)


@pytest.mark.parametrize('text', [
    '', '30', '10x', 's', '1m30', '-5s', 'ten seconds', '1d', '5 s', '1h-1m',
])
def test_invalid_durations(text: str) -> None:
    with pytest.raises(durations.DurationError):
        durations.parse(text)


def test_error_message_names_the_text() -> None:
    with pytest.raises(durations.DurationError, match="'10x'"):
        durations.parse('10x')
