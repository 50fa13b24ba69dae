"""The /metrics text: the operator's reconcile metrics and what osdk_metric tasks ask for."""

from ansible_kopf.sdk import metrics


def values(registry: metrics.Registry) -> dict[str, str]:
    return {line.rpartition(' ')[0]: line.rpartition(' ')[2]
            for line in registry.render().splitlines() if not line.startswith('#')}


def test_runs_are_counted_and_timed_by_kind_and_result() -> None:
    registry = metrics.Registry()
    registry.reconciled(gvk='g/v1/K', successful=True, seconds=0.7)
    registry.reconciled(gvk='g/v1/K', successful=False, seconds=42.0)
    got = values(registry)
    assert got['ansible_operator_reconcile_total{GVK="g/v1/K",result="succeeded"}'] == '1.0'
    assert got['ansible_operator_reconcile_total{GVK="g/v1/K",result="failed"}'] == '1.0'
    assert got['ansible_operator_reconciles_bucket{GVK="g/v1/K",result="succeeded",le="1.0"}'] == '1'
    assert got['ansible_operator_reconciles_bucket{GVK="g/v1/K",result="failed",le="30.0"}'] == '0'
    assert got['ansible_operator_reconciles_bucket{GVK="g/v1/K",result="failed",le="+Inf"}'] == '1'
    assert got['ansible_operator_reconciles_sum{GVK="g/v1/K",result="failed"}'] == '42.0'


def test_user_metrics_of_each_type() -> None:
    registry = metrics.Registry()
    registry.user_metric({'name': 'jobs', 'description': 'd', 'counter': {'increment': True}})
    registry.user_metric({'name': 'jobs', 'description': 'd', 'counter': {'add': 2.5}})
    registry.user_metric({'name': 'depth', 'description': 'd', 'gauge': {'set': 7}})
    registry.user_metric({'name': 'depth', 'description': 'd', 'gauge': {'decrement': True}})
    registry.user_metric({'name': 'size', 'description': 'd', 'histogram': {'observe': 3}})
    registry.user_metric({'name': 'lag', 'description': 'd', 'summary': {'observe': 2}})
    got = values(registry)
    assert got['jobs'] == '3.5'
    assert got['depth'] == '6.0'
    assert got['size_count'] == '1'
    assert got['size_bucket{le="5.0"}'] == '1'
    assert (got['lag_sum'], got['lag_count']) == ('2.0', '1')
    assert '# TYPE lag summary' in registry.render()


def test_a_name_reused_with_another_type_or_invalid_is_ignored() -> None:
    registry = metrics.Registry()
    registry.user_metric({'name': 'jobs', 'description': 'd', 'counter': {'increment': True}})
    registry.user_metric({'name': 'jobs', 'description': 'd', 'gauge': {'set': 100}})
    registry.user_metric({'name': 'bad name', 'description': 'd', 'gauge': {'set': 1}})
    assert values(registry) == {'jobs': '1.0'}


def test_a_new_histogram_or_summary_shows_zero_counts() -> None:
    registry = metrics.Registry()
    registry.user_metric({'name': 'empty_histogram', 'description': 'd', 'histogram': {}})
    registry.user_metric({'name': 'empty_summary', 'description': 'd', 'summary': {}})
    registry.user_metric({'name': 'empty_counter', 'description': 'd', 'counter': {}})
    got = values(registry)
    assert got['empty_histogram_bucket{le="+Inf"}'] == got['empty_histogram_count'] == '0'
    assert (got['empty_summary_sum'], got['empty_summary_count']) == ('0.0', '0')
    assert got['empty_counter'] == '0.0'
