"""The reconcile summary: the sentence for people, and the line programs read back."""
import pytest

from ansible_kopf.run import summary

COUNTS = {'ok': 5, 'changed': 1, 'failures': 0, 'skipped': 2, 'unreachable': 0}


def record(**changes: object) -> summary.Summary:
    fields: dict[str, object] = {
        'action': 'reconcile', 'kind': 'otus.homework/v1/MySQL', 'namespace': 'ns',
        'name': 'db', 'status': 'successful', 'counts': COUNTS, 'seconds': 1.234,
        'finished': '2026-11-24T07:00:00.123+00:00'}
    return summary.Summary(**(fields | changes))  # type: ignore[arg-type]


def test_the_sentence_stays_what_people_read() -> None:
    assert record().sentence() == ("Reconciled ns/db: successful ok=5 changed=1 failures=0 "
                                   "skipped=2 unreachable=0 in 1.23s")
    assert record(action='finalize', namespace=None).sentence().startswith('Finalized db: ')


@pytest.mark.parametrize('prefix', [
    '',
    '[2026-11-24 07:00:00,123] ansible_kopf.reconci [INFO    ] ',  # kopf's full log format
])
def test_a_line_reads_back_whatever_the_log_format_puts_before_it(prefix: str) -> None:
    original = record(namespace=None)
    assert summary.parse(prefix + original.line()) == original
    assert summary.parse(prefix + original.sentence()) is None


def test_lines_that_are_not_summaries_are_skipped() -> None:
    text = '\n'.join([
        record(name='a').line(),
        'reconcile-summary {not json',
        'reconcile-summary ["a list"]',
        'reconcile-summary {"name": "missing fields"}',
        record(name='b').sentence(),
        record(name='c').line(),
    ])
    assert [s.name for s in summary.parse_all(text)] == ['a', 'c']


def test_the_finish_stamp_is_utc_and_comparable() -> None:
    stamp = summary.now()
    assert stamp.endswith('+00:00')
    assert record(finished=stamp).finished_at.utcoffset() is not None

