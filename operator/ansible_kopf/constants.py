"""
Names and defaults shared by all modules: environment variables, annotation and
finalizer names, status condition vocabulary. No logic lives here.
"""
from typing import Final, Literal, get_args

# --- Environment variables (the Operator SDK's names where one exists). ---
ENV_WATCHES_FILE: Final = 'WATCHES_FILE'
ENV_WATCH_NAMESPACE: Final = 'WATCH_NAMESPACE'
ENV_ANSIBLE_VERBOSITY: Final = 'ANSIBLE_VERBOSITY'
ENV_LOG_EVENTS: Final = 'ANSIBLE_LOG_EVENTS'  # the SDK's --ansible-log-events values
ENV_WORKDIR: Final = 'ANSIBLE_KOPF_WORKDIR'
ENV_MAX_RUNS: Final = 'ANSIBLE_KOPF_MAX_RUNS'
ENV_MAX_RUNNER_ARTIFACTS: Final = 'MAX_RUNNER_ARTIFACTS'
ENV_HEALTH_PROBE: Final = 'HEALTH_PROBE_BIND_ADDRESS'
ENV_METRICS: Final = 'METRICS_BIND_ADDRESS'  # the SDK's --metrics-bind-address
# The SDK's default for it (ansible-operator-plugins' flags: ':8443', plain HTTP unless
# --metrics-secure); '0' turns the endpoint off.
DEFAULT_METRICS_ADDRESS: Final = ':8443'
# the SDK's --max-concurrent-reconciles, --reconcile-period, --inject-owner-ref, --ansible-args
ENV_MAX_CONCURRENT_RECONCILES: Final = 'ANSIBLE_KOPF_MAX_CONCURRENT_RECONCILES'
ENV_RECONCILE_PERIOD: Final = 'ANSIBLE_KOPF_RECONCILE_PERIOD'
ENV_INJECT_OWNER_REF: Final = 'ANSIBLE_KOPF_INJECT_OWNER_REF'
ENV_ANSIBLE_ARGS: Final = 'ANSIBLE_KOPF_ANSIBLE_ARGS'  # shell words added to every run
ENV_KUBECONFIG: Final = 'KUBECONFIG'
ENV_WARM: Final = 'ANSIBLE_KOPF_WARM'  # false: every run starts a cold ansible-playbook
ENV_WARM_IDLE: Final = 'ANSIBLE_KOPF_WARM_IDLE'  # Go duration; warm servers stop after it unused
# the SDK's --leader-elect and its companions (see leader.py); OPERATOR_NAME is the SDK's
# deprecated fallback for the Lease's name
ENV_LEADER_ELECT: Final = 'ANSIBLE_KOPF_LEADER_ELECT'
ENV_LEADER_ELECTION_ID: Final = 'ANSIBLE_KOPF_LEADER_ELECTION_ID'
ENV_LEADER_ELECTION_NAMESPACE: Final = 'ANSIBLE_KOPF_LEADER_ELECTION_NAMESPACE'
ENV_LEASE_DURATION: Final = 'ANSIBLE_KOPF_LEADER_ELECT_LEASE_DURATION'
ENV_RENEW_DEADLINE: Final = 'ANSIBLE_KOPF_LEADER_ELECT_RENEW_DEADLINE'
ENV_RETRY_PERIOD: Final = 'ANSIBLE_KOPF_LEADER_ELECT_RETRY_PERIOD'
# --leader-elect's durations, seconds: controller-runtime's defaults
LEASE_DURATION: Final = 15.0
RENEW_DEADLINE: Final = 10.0
RETRY_PERIOD: Final = 2.0
ENV_OPERATOR_NAME: Final = 'OPERATOR_NAME'

# --- Defaults. ---
DEFAULT_WATCHES_FILE: Final = './watches.yaml'
DEFAULT_WORKDIR_NAME: Final = 'ansible-kopf'  # under the system temp dir
DEFAULT_MAX_RUNS: Final = 4
DEFAULT_MAX_RUNNER_ARTIFACTS: Final = 20
DEFAULT_WARM_IDLE: Final = 300.0  # seconds; 0: never stop (longer than any reconcilePeriod we ship)
LogEvents = Literal['Nothing', 'Tasks', 'Everything']  # what a run's events log (events.py)
DEFAULT_LOG_EVENTS: Final[LogEvents] = 'Tasks'
LOG_EVENTS_CHOICES: Final[tuple[LogEvents, ...]] = get_args(LogEvents)
HEALTH_PATH: Final = '/healthz'
METRICS_PATH: Final = '/metrics'

# --- Names this operator puts on objects. ---
# kopf's progress and diff-base annotations: <prefix>/<key>. A DNS-label prefix is valid.
ANNOTATION_PREFIX: Final = 'ansible-kopf'
# Used as kopf's finalizer when no watches entry declares one (kopf wants a name).
DEFAULT_FINALIZER: Final = 'ansible-kopf/finalizer'

# The SDK's per-object annotations: a run's verbosity, its artifacts kept, its own period.
ANNOTATION_VERBOSITY: Final = 'ansible.sdk.operatorframework.io/verbosity'
ANNOTATION_MAX_RUNNER_ARTIFACTS: Final = 'ansible.sdk.operatorframework.io/max-runner-artifacts'
ANNOTATION_RECONCILE_PERIOD: Final = 'ansible.sdk.operatorframework.io/reconcile-period'

# Object fields never handed to Ansible: large, and may hold a copy of secrets.
LAST_APPLIED_ANNOTATION: Final = 'kubectl.kubernetes.io/last-applied-configuration'

# --- Status vocabulary (the Operator SDK's). ---
CONDITION_RUNNING: Final = 'Running'
CONDITION_SUCCESSFUL: Final = 'Successful'
CONDITION_FAILURE: Final = 'Failure'
# The conditions the shim owns; a role's reported conditions cannot set these types.
SHIM_CONDITIONS: Final = frozenset({CONDITION_RUNNING, CONDITION_SUCCESSFUL, CONDITION_FAILURE})
REASON_RUNNING: Final = 'Running'
REASON_SUCCESSFUL: Final = 'Successful'
REASON_FAILED: Final = 'Failed'
MESSAGE_RUNNING: Final = 'Running reconciliation'
MESSAGE_AWAITING: Final = 'Awaiting next reconciliation'
MESSAGE_SUCCESSFUL: Final = 'Last reconciliation succeeded'
# Keys of .status that the operator owns; a role's custom stats cannot overwrite them.
STATUS_RESERVED_KEYS: Final = frozenset({'conditions', 'observedGeneration', 'ansibleResult'})

# --- Retry backoff for failed runs (seconds): base * 2**retry, capped. ---
BACKOFF_BASE: Final = 5.0
BACKOFF_CAP: Final = 300.0

# Bounds on messages copied from Ansible into the API (Events are capped at 1 KiB).
STATUS_MESSAGE_LIMIT: Final = 4096
EVENT_MESSAGE_LIMIT: Final = 1000
