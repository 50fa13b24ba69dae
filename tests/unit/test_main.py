"""__main__: the entry point checks its configuration and flags before kopf starts."""
import os
import pathlib
import subprocess
import sys

OPERATOR = pathlib.Path(__file__).resolve().parents[2] / 'operator'


def run_main(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, '-m', 'ansible_kopf'],
        env={**os.environ, 'PYTHONPATH': str(OPERATOR), **env},
        capture_output=True, text=True, timeout=60, check=False,
    )


def test_bad_watches_file_stops_the_start_with_one_clear_line(tmp_path: pathlib.Path) -> None:
    (tmp_path / 'roles' / 'mysql').mkdir(parents=True)
    watches_file = tmp_path / 'watches.yaml'
    watches_file.write_text('- {group: otus.homework, version: v1, kind: MySQL, rol: mysql}\n')
    result = run_main({'WATCHES_FILE': str(watches_file)})
    assert result.returncode == 2
    assert result.stderr.startswith(
        f"ansible-kopf: {watches_file} entry otus.homework/v1/MySQL: unknown key 'rol'")
    assert result.stderr.count('\n') == 1


def test_bad_environment_stops_the_start(tmp_path: pathlib.Path) -> None:
    result = run_main({'WATCHES_FILE': str(tmp_path / 'absent.yaml')})
    assert result.returncode == 2
    assert 'cannot read the watches file' in result.stderr
    result = run_main({'ANSIBLE_KOPF_MAX_RUNS': 'many'})
    assert result.returncode == 2
    assert 'ANSIBLE_KOPF_MAX_RUNS' in result.stderr


def test_the_sdk_flags_set_their_environment_variables() -> None:
    from ansible_kopf import __main__ as entry
    assert entry.flags_to_env([
        '--watches-file', '/w.yaml', '--max-concurrent-reconciles=3', '--reconcile-period', '10h',
        '--ansible-args', '--vault-password-file /v', '--ansible-verbosity=2',
        '--ansible-log-events', 'Everything', '--metrics-bind-address=:8383',
        '--health-probe-bind-address', ':6789', '--inject-owner-ref', '--max-runner-artifacts=5',
    ]) == {
        'WATCHES_FILE': '/w.yaml', 'ANSIBLE_KOPF_MAX_CONCURRENT_RECONCILES': '3',
        'ANSIBLE_KOPF_RECONCILE_PERIOD': '10h', 'ANSIBLE_KOPF_ANSIBLE_ARGS': '--vault-password-file /v',
        'ANSIBLE_VERBOSITY': '2', 'ANSIBLE_LOG_EVENTS': 'Everything', 'METRICS_BIND_ADDRESS': ':8383',
        'HEALTH_PROBE_BIND_ADDRESS': ':6789', 'ANSIBLE_KOPF_INJECT_OWNER_REF': 'true',
        'MAX_RUNNER_ARTIFACTS': '5',
    }
    assert entry.flags_to_env(['--inject-owner-ref=false']) == {'ANSIBLE_KOPF_INJECT_OWNER_REF': 'false'}


def test_an_unknown_or_bad_flag_stops_the_start_naming_it() -> None:
    def start(*flags: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, '-m', 'ansible_kopf', *flags],
                              env={**os.environ, 'PYTHONPATH': str(OPERATOR)},
                              capture_output=True, text=True, timeout=60, check=False)

    result = start('--reconcile-perod', '1m')
    assert result.returncode == 2
    assert result.stderr.startswith('ansible-kopf: unknown flag --reconcile-perod')
    result = start('--reconcile-period=soon')
    assert result.returncode == 2
    assert 'ANSIBLE_KOPF_RECONCILE_PERIOD' in result.stderr
    result = start('--leader-elect')  # and no --leader-election-id
    assert result.returncode == 2
    assert '--leader-election-id' in result.stderr
    result = start('--leader-elect', '--leader-election-id=x', '--leader-elect-lease-duration=5s',
                   '--leader-elect-renew-deadline=5s')
    assert result.returncode == 2
    assert 'ANSIBLE_KOPF_LEADER_ELECT_RENEW_DEADLINE' in result.stderr
    result = start('--leader-elect', '--leader-election-id', 'x')  # no namespace, not in a pod
    assert result.returncode == 2
    assert '--leader-election-namespace' in result.stderr


def test_the_sdk_leader_election_flags_set_their_environment_variables() -> None:
    from ansible_kopf import __main__ as entry
    assert entry.flags_to_env([
        '--leader-elect', '--leader-election-id=op', '--leader-election-namespace', 'ops',
        '--leader-elect-lease-duration=20s', '--leader-elect-renew-deadline', '15s',
        '--leader-elect-retry-period=3s', '--leader-elect-resource-lock', 'leases',
    ]) == {
        'ANSIBLE_KOPF_LEADER_ELECT': 'true', 'ANSIBLE_KOPF_LEADER_ELECTION_ID': 'op',
        'ANSIBLE_KOPF_LEADER_ELECTION_NAMESPACE': 'ops',
        'ANSIBLE_KOPF_LEADER_ELECT_LEASE_DURATION': '20s',
        'ANSIBLE_KOPF_LEADER_ELECT_RENEW_DEADLINE': '15s',
        'ANSIBLE_KOPF_LEADER_ELECT_RETRY_PERIOD': '3s',
    }
    # the SDK's deprecated spelling
    assert entry.flags_to_env(['--enable-leader-election']) == {'ANSIBLE_KOPF_LEADER_ELECT': 'true'}
