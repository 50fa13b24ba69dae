"""
The operator's process-wide configuration, read once from environment variables.

Names follow the Operator SDK where it has one (``WATCHES_FILE``, ``WATCH_NAMESPACE``,
``ANSIBLE_VERBOSITY``, ``MAX_RUNNER_ARTIFACTS``, ``HEALTH_PROBE_BIND_ADDRESS``,
``METRICS_BIND_ADDRESS`` (unset: ``:8443``, the SDK's default; ``0``: no ``/metrics``
endpoint),
``ANSIBLE_LOG_EVENTS`` for the SDK's ``--ansible-log-events``); the rest are
prefixed ``ANSIBLE_KOPF_`` (``ANSIBLE_KOPF_WARM=false`` turns the warm servers of
:mod:`warm` off; ``ANSIBLE_KOPF_WARM_IDLE``, a Go duration, is how long they stay without
runs before they stop, ``0`` for never). Behaviour per kind lives in ``watches.yaml``, not here.
"""
import dataclasses
import os
import pathlib
import shlex
import tempfile
from collections.abc import Mapping

from ansible_kopf import constants
from ansible_kopf.kube import leader_election
from ansible_kopf.sdk import durations, watches


class ConfigError(ValueError):
    """An environment variable has a value the operator cannot use."""


@dataclasses.dataclass(frozen=True)
class Config:
    watches_file: pathlib.Path
    namespaces: tuple[str, ...]  # empty: cluster-wide
    workdir: pathlib.Path  # private data dirs of ansible-runner go below it
    max_runs: int  # concurrent ansible runs in the whole process
    max_runner_artifacts: int  # default for watches entries that do not set it
    verbosity: int  # ansible-playbook -v count
    log_events: constants.LogEvents
    liveness_endpoint: str | None  # e.g. http://0.0.0.0:8080/healthz
    kubeconfig: str | None  # handed to kubernetes.core as K8S_AUTH_KUBECONFIG
    warm: bool = True  # runs fork from warm Ansible servers (see warm/)
    warm_idle: float = constants.DEFAULT_WARM_IDLE  # seconds unused before they stop; 0: never
    metrics_address: tuple[str, int] | None = None  # host, port of /metrics; None: off
    defaults: watches.Defaults = dataclasses.field(default_factory=watches.Defaults)
    ansible_args: tuple[str, ...] = ()  # added to every ansible-playbook command line
    # None: no leader election (this process reconciles)
    election: leader_election.LeaseSettings | None = None

    @property
    def clusterwide(self) -> bool:
        return not self.namespaces


def cpu_count() -> int:
    """The CPUs this process may run on: the SDK's default of --max-concurrent-reconciles
    (Go's runtime.NumCPU, which also counts the affinity mask, not the host's CPUs)."""
    return max(1, len(os.sched_getaffinity(0)))


def _integer(env: Mapping[str, str], name: str, default: int, minimum: int) -> int:
    raw = env.get(name, '').strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r}: not an integer") from None
    if value < minimum:
        raise ConfigError(f"{name}={raw!r}: must be >= {minimum}")
    return value


def liveness_endpoint(address: str) -> str | None:
    """
    Turn a bind address into kopf's liveness URL.

    Accepts the SDK's Go form (``:8081``, ``0.0.0.0:8081``) or a full URL; an empty value
    or ``0`` (the SDK's "disabled") gives ``None``.
    """
    address = address.strip()
    if not address or address == '0':
        return None
    if '://' in address:
        return address
    host, sep, port = address.rpartition(':')
    if not sep or not port.isdigit():
        raise ConfigError(f"{constants.ENV_HEALTH_PROBE}={address!r}: expected [host]:port or URL")
    return f"http://{host or '0.0.0.0'}:{port}{constants.HEALTH_PATH}"  # noqa: S104


def bind_address(name: str, address: str) -> tuple[str, int] | None:
    """The SDK's Go form (``:8383``, ``127.0.0.1:8383``); empty or ``0``: ``None``."""
    address = address.strip()
    if not address or address == '0':
        return None
    host, sep, port = address.rpartition(':')
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:  # noqa: PLR2004
        raise ConfigError(f"{name}={address!r}: expected [host]:port")
    return host or '0.0.0.0', int(port)  # noqa: S104


def _boolean(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = env.get(name, '').strip().lower()
    if not raw:
        return default
    if raw in ('1', 'true', 'yes', 'on'):
        return True
    if raw in ('0', 'false', 'no', 'off'):
        return False
    raise ConfigError(f"{name}={raw!r}: expected true or false")


def _words(env: Mapping[str, str], name: str) -> tuple[str, ...]:
    try:
        return tuple(shlex.split(env.get(name, '')))
    except ValueError as e:
        raise ConfigError(f"{name}: {e}") from None


def _duration(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name, '').strip()
    if not raw:
        return default
    try:
        return durations.parse(raw)
    except durations.DurationError as e:
        raise ConfigError(f"{name}={raw!r}: {e}") from None


def election(env: Mapping[str, str]) -> leader_election.LeaseSettings | None:
    """The leader-election settings, checked as controller-runtime checks them. The Lease
    lives in --leader-election-namespace, else in the namespace of the pod this runs in."""
    if not _boolean(env, constants.ENV_LEADER_ELECT, False):
        return None
    name = (env.get(constants.ENV_LEADER_ELECTION_ID, '').strip()
            or env.get(constants.ENV_OPERATOR_NAME, '').strip())
    if not name:
        raise ConfigError(f"{constants.ENV_LEADER_ELECT}: leader election needs the Lease's name: "
                          f"--leader-election-id ({constants.ENV_LEADER_ELECTION_ID})")
    lease = _duration(env, constants.ENV_LEASE_DURATION, constants.LEASE_DURATION)
    renew = _duration(env, constants.ENV_RENEW_DEADLINE, constants.RENEW_DEADLINE)
    retry = _duration(env, constants.ENV_RETRY_PERIOD, constants.RETRY_PERIOD)
    if not lease > renew > retry * 1.2 > 0:
        raise ConfigError(f"{constants.ENV_LEASE_DURATION}, {constants.ENV_RENEW_DEADLINE}, "
                          f"{constants.ENV_RETRY_PERIOD}: the lease duration must exceed the "
                          "renew deadline, and the renew deadline 1.2 retry periods")
    namespace = (env.get(constants.ENV_LEADER_ELECTION_NAMESPACE, '').strip()
                 or leader_election.pod_namespace())
    if namespace is None:
        raise ConfigError(f"{constants.ENV_LEADER_ELECT}: outside a pod, leader election "
                          "needs --leader-election-namespace "
                          f"({constants.ENV_LEADER_ELECTION_NAMESPACE})")
    result = leader_election.LeaseSettings(name=name, namespace=namespace, lease_duration=lease,
                             renew_deadline=renew, retry_period=retry)
    return result


def from_env(env: Mapping[str, str] | None = None) -> Config:
    """Read the configuration; raise :class:`ConfigError` naming the bad variable."""
    env = os.environ if env is None else env
    log_events = env.get(constants.ENV_LOG_EVENTS, '').strip() or constants.DEFAULT_LOG_EVENTS
    matching = [c for c in constants.LOG_EVENTS_CHOICES if c.lower() == log_events.lower()]
    if not matching:
        raise ConfigError(f"{constants.ENV_LOG_EVENTS}={log_events!r}: "
                          f"expected one of {', '.join(constants.LOG_EVENTS_CHOICES)}")
    workdir = env.get(constants.ENV_WORKDIR, '').strip() or os.path.join(
        tempfile.gettempdir(), constants.DEFAULT_WORKDIR_NAME)
    namespaces = env.get(constants.ENV_WATCH_NAMESPACE, '')
    return Config(
        watches_file=pathlib.Path(
            env.get(constants.ENV_WATCHES_FILE, '').strip() or constants.DEFAULT_WATCHES_FILE,
        ).absolute(),
        namespaces=tuple(ns.strip() for ns in namespaces.split(',') if ns.strip()),
        workdir=pathlib.Path(workdir).absolute(),
        max_runs=_integer(env, constants.ENV_MAX_RUNS, constants.DEFAULT_MAX_RUNS, 1),
        max_runner_artifacts=_integer(env, constants.ENV_MAX_RUNNER_ARTIFACTS,
                                      constants.DEFAULT_MAX_RUNNER_ARTIFACTS, 1),
        verbosity=_integer(env, constants.ENV_ANSIBLE_VERBOSITY, 0, 0),
        log_events=matching[0],
        liveness_endpoint=liveness_endpoint(env.get(constants.ENV_HEALTH_PROBE, '')),
        kubeconfig=env.get(constants.ENV_KUBECONFIG, '').strip() or None,
        warm=_boolean(env, constants.ENV_WARM, True),
        warm_idle=_duration(env, constants.ENV_WARM_IDLE, constants.DEFAULT_WARM_IDLE),
        metrics_address=bind_address(
            constants.ENV_METRICS,
            env.get(constants.ENV_METRICS) or constants.DEFAULT_METRICS_ADDRESS),
        defaults=watches.Defaults(
            max_concurrent_reconciles=_integer(
                env, constants.ENV_MAX_CONCURRENT_RECONCILES, cpu_count(), 1),
            reconcile_period=_duration(env, constants.ENV_RECONCILE_PERIOD, 0.0),
            inject_owner_ref=_boolean(env, constants.ENV_INJECT_OWNER_REF, True),
        ),
        ansible_args=_words(env, constants.ENV_ANSIBLE_ARGS),
        election=election(env),
    )
