"""config: the operator's configuration from the environment, as the SDK's flags and variables set it."""
import os
import pathlib

import pytest

from ansible_kopf import config
from ansible_kopf.kube import leader_election


def test_defaults_from_an_empty_environment() -> None:
    cfg = config.from_env({})
    assert cfg.watches_file == pathlib.Path('./watches.yaml').absolute()
    assert cfg.namespaces == ()
    assert cfg.clusterwide
    assert cfg.max_runs == 4
    assert cfg.max_runner_artifacts == 20
    assert cfg.verbosity == 0
    assert cfg.log_events == 'Tasks'
    assert cfg.liveness_endpoint is None
    assert cfg.kubeconfig is None
    assert cfg.workdir.name == 'ansible-kopf'
    assert cfg.warm
    assert cfg.warm_idle == 300
    assert cfg.metrics_address == ('0.0.0.0', 8443)  # noqa: S104  (the SDK's default)
    assert config.from_env({'METRICS_BIND_ADDRESS': '0'}).metrics_address is None
    # runs of a kind at once: the SDK's --max-concurrent-reconciles default, the usable CPUs
    assert cfg.defaults.max_concurrent_reconciles == len(os.sched_getaffinity(0)) >= 1


def test_values_from_the_environment(tmp_path: pathlib.Path) -> None:
    cfg = config.from_env({
        'WATCHES_FILE': str(tmp_path / 'w.yaml'),
        'WATCH_NAMESPACE': ' db , apps,,',
        'ANSIBLE_KOPF_WORKDIR': str(tmp_path / 'work'),
        'ANSIBLE_KOPF_MAX_RUNS': '8',
        'MAX_RUNNER_ARTIFACTS': '3',
        'ANSIBLE_VERBOSITY': '2',
        'ANSIBLE_LOG_EVENTS': 'everything',
        'HEALTH_PROBE_BIND_ADDRESS': ':8081',
        'KUBECONFIG': '/k/config',
    })
    assert cfg.watches_file == tmp_path / 'w.yaml'
    assert cfg.namespaces == ('db', 'apps')
    assert not cfg.clusterwide
    assert cfg.workdir == tmp_path / 'work'
    assert cfg.max_runs == 8
    assert cfg.max_runner_artifacts == 3
    assert cfg.verbosity == 2
    assert cfg.log_events == 'Everything'
    assert cfg.liveness_endpoint == 'http://0.0.0.0:8081/healthz'
    assert cfg.kubeconfig == '/k/config'


@pytest.mark.parametrize(('address', 'endpoint'), [
    (':8080', 'http://0.0.0.0:8080/healthz'),
    ('127.0.0.1:9000', 'http://127.0.0.1:9000/healthz'),
    ('http://0.0.0.0:8080/healthz', 'http://0.0.0.0:8080/healthz'),
    ('', None),
    ('0', None),
])
def test_liveness_endpoint(address: str, endpoint: str | None) -> None:
    assert config.liveness_endpoint(address) == endpoint


@pytest.mark.parametrize(('env', 'message'), [
    ({'ANSIBLE_KOPF_MAX_RUNS': 'four'}, 'ANSIBLE_KOPF_MAX_RUNS'),
    ({'ANSIBLE_KOPF_MAX_RUNS': '0'}, '>= 1'),
    ({'MAX_RUNNER_ARTIFACTS': '0'}, 'MAX_RUNNER_ARTIFACTS'),
    ({'ANSIBLE_LOG_EVENTS': 'Some'}, 'ANSIBLE_LOG_EVENTS'),
    ({'HEALTH_PROBE_BIND_ADDRESS': 'localhost'}, 'HEALTH_PROBE_BIND_ADDRESS'),
    ({'ANSIBLE_KOPF_WARM': 'maybe'}, 'ANSIBLE_KOPF_WARM'),
    ({'ANSIBLE_KOPF_WARM_IDLE': '5 minutes'}, 'ANSIBLE_KOPF_WARM_IDLE'),
    ({'ANSIBLE_KOPF_WARM_IDLE': '-1s'}, 'ANSIBLE_KOPF_WARM_IDLE'),
])
def test_bad_values_name_the_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(config.ConfigError, match=message):
        config.from_env(env)


@pytest.mark.parametrize(('value', 'warm'), [
    ('false', False), ('0', False), (' No ', False), ('off', False),
    ('true', True), ('1', True), ('yes', True), ('', True),
])
def test_warm_servers_can_be_turned_off(value: str, warm: bool) -> None:
    assert config.from_env({'ANSIBLE_KOPF_WARM': value}).warm is warm


@pytest.mark.parametrize(('value', 'seconds'), [('90s', 90), ('1h', 3600), ('0', 0), ('', 300)])
def test_how_long_warm_servers_stay_without_runs(value: str, seconds: float) -> None:
    assert config.from_env({'ANSIBLE_KOPF_WARM_IDLE': value}).warm_idle == seconds


def test_metrics_bind_address_in_the_sdk_form() -> None:
    assert config.bind_address('X', ':8383') == ('0.0.0.0', 8383)  # noqa: S104
    assert config.bind_address('X', '127.0.0.1:9') == ('127.0.0.1', 9)
    assert config.bind_address('X', '0') is None
    assert config.bind_address('X', '') is None
    with pytest.raises(config.ConfigError, match='METRICS_BIND_ADDRESS'):
        config.bind_address('METRICS_BIND_ADDRESS', 'localhost')


def test_leader_election_settings_as_the_sdk_reads_them(monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path) -> None:
    assert config.from_env({}).election is None
    monkeypatch.setattr(leader_election, 'NAMESPACE_FILE', str(tmp_path / 'namespace'))
    with pytest.raises(config.ConfigError, match='--leader-election-namespace'):  # not in a pod
        config.from_env({'ANSIBLE_KOPF_LEADER_ELECT': 'true', 'OPERATOR_NAME': 'legacy'})
    (tmp_path / 'namespace').write_text('pods-ns\n')
    election = config.from_env({'ANSIBLE_KOPF_LEADER_ELECT': 'true', 'OPERATOR_NAME': 'legacy'}).election
    assert election == leader_election.LeaseSettings(name='legacy', namespace='pods-ns')  # the SDK's old fallback
    election = config.from_env({
        'ANSIBLE_KOPF_LEADER_ELECT': 'true', 'OPERATOR_NAME': 'legacy',
        'ANSIBLE_KOPF_LEADER_ELECTION_ID': 'op', 'ANSIBLE_KOPF_LEADER_ELECTION_NAMESPACE': 'ops',
        'ANSIBLE_KOPF_LEADER_ELECT_LEASE_DURATION': '1m', 'ANSIBLE_KOPF_LEADER_ELECT_RETRY_PERIOD': '1s',
    }).election
    assert election == leader_election.LeaseSettings(name='op', namespace='ops', lease_duration=60.0,
                                       renew_deadline=10.0, retry_period=1.0)
    with pytest.raises(config.ConfigError, match='--leader-election-id'):
        config.from_env({'ANSIBLE_KOPF_LEADER_ELECT': 'true'})
