"""
``watches.yaml``: which role or playbook reconciles which group/version/kind.

The file is a YAML list; each entry uses the Operator SDK's keys with the SDK's meanings,
so that users can move between the two tools:

``group``, ``version``, ``kind``
    Required. ``group`` may be empty (the core API group).
``role`` | ``playbook``
    Exactly one. A role is a directory: a path relative to the watches file (or absolute),
    or a name looked up in ``roles/`` next to the watches file and in ``ANSIBLE_ROLES_PATH``,
    or a collection's role by its FQCN (``namespace.collection.role``), looked up as Ansible
    does: ``ANSIBLE_COLLECTIONS_PATH`` (default ``~/.ansible/collections`` and
    ``/usr/share/ansible/collections``), then Python's path; the playbook names it by FQCN,
    so its tasks find the collection's own modules by their short names.
    A playbook is a file, relative to the watches file (or absolute).
``vars``
    A mapping added to the role's variables (trusted: not marked unsafe).
``reconcilePeriod``
    A Go duration (``30s``, ``1m30s``); ``0`` or absent: the operator's
    ``--reconcile-period`` (default none: no periodic re-runs; the SDK's is 10h).
``manageStatus``
    Default true: the operator writes ``.status``. False: the role owns ``.status``.
``finalizer``
    ``{name, role | playbook | vars}``. Runs on deletion before the object goes away.
    With only ``vars``, the main role/playbook runs again with those variables added.
``snakeCaseParameters``
    Default true: spec keys reach the role in snake_case (the SDK's algorithm).
``markUnsafe``
    Default **true** here (the SDK defaults to false): every string from the object reaches
    Ansible as an unsafe value, so that ``{{ ... }}`` typed into a spec is never templated.
``maxConcurrentReconciles``
    Runs of this kind at the same time (default ``--max-concurrent-reconciles``, else 1); the
    process-wide bound still applies.
``maxRunnerArtifacts``
    Artifact directories kept per object (default ``MAX_RUNNER_ARTIFACTS``, else 20).
``selector``
    ``matchLabels`` (a kopf label filter) and ``matchExpressions`` (``key``, ``operator`` one
    of ``In``, ``NotIn``, ``Exists``, ``DoesNotExist``, ``values``: as in a Kubernetes label
    selector, ``NotIn`` also matches an object without the label); both must match.

``watchDependentResources``
    Default true (as in the SDK): a change to an object that a run created or read and that
    this kind's object owns (its controller owner reference; the SDK's annotations for a
    cluster-scoped one) runs the role for the owner again. What counts as a change follows
    the SDK: a deletion, or an update of anything but ``status`` (creations are the run's
    own doing). See :mod:`ansible_kopf.kube.dependents`.
``watchClusterScopedResources``
    Default false (as in the SDK): also follow cluster-scoped objects a run created.
``watchDependentStatus``
    Not an SDK key: default false. True: a change to a dependent's ``status`` alone also
    runs the role (a Deployment whose pod stops being ready, a Job that completes), for a
    role that reports what its children's status says instead of polling for it.
``injectOwnerRef``
    Not an SDK key: default ``--inject-owner-ref`` (true). False: objects this kind's runs
    create get no injected owner reference (for a role that sets its own, and creates
    objects that must outlive the owner, such as a backup volume). See
    :mod:`ansible_kopf.kube.proxy`.

``blacklist``
    A list of ``group``/``version``/``kind`` (as in the SDK): objects of these kinds are
    never followed as this kind's dependents (no watch is started for them, and a change
    of one seen by a watch another kind started does not run this kind's role).

``watchAnnotationsChanges``
    As in the SDK (default false): true also runs the role when only the watched object's
    annotations change (kopf's own and ``kubectl``'s last-applied one excepted). A role
    that writes annotations on its own object would run again for them: leave it false.

Any other key is an error at start-up, as are wrong types, missing paths and duplicate GVKs.
``${VAR}`` references are replaced by environment variables before parsing (as in the SDK).
"""
import dataclasses
import logging
import os
import pathlib
import re
import sys
from collections.abc import Callable, Mapping
from typing import Any, Final, Literal

import yaml

from ansible_kopf import constants
from ansible_kopf.sdk import durations

logger = logging.getLogger(__name__)

KNOWN_KEYS: Final = (
    'group', 'version', 'kind', 'role', 'playbook', 'vars', 'reconcilePeriod',
    'manageStatus', 'finalizer', 'snakeCaseParameters', 'markUnsafe',
    'maxConcurrentReconciles', 'maxRunnerArtifacts', 'selector',
    'watchDependentResources', 'watchClusterScopedResources', 'injectOwnerRef',
    'watchDependentStatus', 'blacklist', 'watchAnnotationsChanges',
)
IGNORED_KEYS: Final[tuple[str, ...]] = ()  # accepted, ignored with a warning
FINALIZER_KEYS: Final = ('name', 'role', 'playbook', 'vars')
_ENV_REFERENCE: Final = re.compile(r'\$\{([^}]+)\}')


class WatchesError(ValueError):
    """The watches file cannot be used; the message names the file, the entry and the key."""


_Fail = Callable[[str], WatchesError]


@dataclasses.dataclass(frozen=True)
class Runnable:
    """What to run: a role directory or a playbook file (absolute paths)."""
    type: Literal['role', 'playbook']
    path: pathlib.Path
    fqcn: str = ''  # a collection's role: how the generated playbook names it


@dataclasses.dataclass(frozen=True)
class Finalizer:
    name: str
    target: Runnable  # the entry's own target when the finalizer declares only vars
    vars: Mapping[str, Any]


@dataclasses.dataclass(frozen=True)
class Requirement:
    """One entry of ``selector.matchExpressions``."""

    key: str
    operator: str  # one of OPERATORS
    values: frozenset[str]

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.operator == 'In':
            return self.key in labels and labels[self.key] in self.values
        if self.operator == 'NotIn':
            return self.key not in labels or labels[self.key] not in self.values
        if self.operator == 'Exists':
            return self.key in labels
        return self.key not in labels  # DoesNotExist


OPERATORS: Final = ('In', 'NotIn', 'Exists', 'DoesNotExist')
_FQCN: Final = re.compile(r'^[A-Za-z_]\w*\.[A-Za-z_]\w*\.[A-Za-z_]\w*$')


@dataclasses.dataclass(frozen=True)
class Watch:
    group: str
    version: str
    kind: str
    target: Runnable
    vars: Mapping[str, Any]
    reconcile_period: float  # seconds; 0 disables periodic re-runs
    manage_status: bool
    finalizer: Finalizer | None
    snake_case_parameters: bool
    mark_unsafe: bool
    max_concurrent_reconciles: int
    max_runner_artifacts: int
    match_labels: Mapping[str, str]
    roles_path: tuple[pathlib.Path, ...]  # for ANSIBLE_ROLES_PATH: dependencies, include_role
    match_expressions: tuple[Requirement, ...] = ()
    watch_dependents: bool = True
    watch_cluster_scoped: bool = False
    inject_owner_ref: bool = True
    watch_dependent_status: bool = False
    blacklist: frozenset[tuple[str, str, str]] = frozenset()  # (group, version, kind)
    verbosity: int | None = None  # ANSIBLE_VERBOSITY_<KIND>_<GROUP>; None: the operator's
    watch_annotations: bool = False  # watchAnnotationsChanges

    def matches_expressions(self, labels: Mapping[str, str]) -> bool:
        """Whether an object with these labels matches ``selector.matchExpressions``."""
        return all(requirement.matches(labels) for requirement in self.match_expressions)

    def selects(self, labels: Mapping[str, str]) -> bool:
        """Whether an object with these labels matches the whole ``selector``."""
        return (all(labels.get(key) == value for key, value in self.match_labels.items())
                and self.matches_expressions(labels))

    @property
    def gvk(self) -> str:
        return f"{self.group}/{self.version}/{self.kind}"


@dataclasses.dataclass(frozen=True)
class Defaults:
    """Values for the keys an entry leaves out (the operator's flags and environment)."""
    max_concurrent_reconciles: int = 1  # the operator's configuration gives the CPU count
    reconcile_period: float = 0.0  # absent or 0 in an entry: this (0: no periodic runs)
    inject_owner_ref: bool = True


def load(
        path: pathlib.Path,
        *,
        default_max_runner_artifacts: int = constants.DEFAULT_MAX_RUNNER_ARTIFACTS,
        env: Mapping[str, str] | None = None,
        defaults: Defaults | None = None,
) -> tuple[Watch, ...]:
    """Read and validate the watches file; raise :class:`WatchesError` on any problem."""
    env = os.environ if env is None else env
    path = path.absolute()
    try:
        text = path.read_text(encoding='utf-8')
    except OSError as e:
        raise WatchesError(f"{path}: cannot read the watches file: {e.strerror}") from None
    text = _ENV_REFERENCE.sub(lambda m: env.get(m.group(1), m.group(0)), text)
    try:
        entries = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise WatchesError(f"{path}: not valid YAML: {e}") from None
    if not isinstance(entries, list) or not entries:
        raise WatchesError(f"{path}: expected a non-empty YAML list of entries")

    parser = _Parser(path=path, env=env, default_max_runner_artifacts=default_max_runner_artifacts,
                     defaults=defaults or Defaults())
    result = tuple(parser.entry(index, entry) for index, entry in enumerate(entries, start=1))
    seen: set[tuple[str, str, str]] = set()
    for watch in result:
        key = (watch.group, watch.version, watch.kind)
        if key in seen:
            raise WatchesError(f"{path}: duplicate entry for {watch.gvk}")
        seen.add(key)
    return result


@dataclasses.dataclass(frozen=True)
class _Parser:
    path: pathlib.Path
    env: Mapping[str, str]
    default_max_runner_artifacts: int
    defaults: Defaults

    @property
    def base(self) -> pathlib.Path:
        return self.path.parent

    def entry(self, index: int, raw: Any) -> Watch:
        if not isinstance(raw, Mapping):
            raise WatchesError(f"{self.path} entry #{index}: expected a mapping, "
                               f"got {type(raw).__name__}")
        where = self._where(index, raw)

        def fail(message: str) -> WatchesError:
            return WatchesError(f"{self.path} entry {where}: {message}")

        for key in raw:
            if key in IGNORED_KEYS:
                logger.warning(f"{self.path} entry {where}: {key!r} is not supported "
                               f"by this operator and is ignored")
            elif key not in KNOWN_KEYS:
                raise fail(f"unknown key {key!r} (known: {', '.join(KNOWN_KEYS)})")

        group = self._string(raw, 'group', fail, required=True, empty=True)
        version = self._string(raw, 'version', fail, required=True)
        kind = self._string(raw, 'kind', fail, required=True)
        target = self._target(raw, fail)
        if target is None:
            raise fail("one of 'role' or 'playbook' is required")
        return Watch(
            group=group, version=version, kind=kind,
            target=target,
            vars=self._vars(raw, fail),
            reconcile_period=self._period(raw, fail) or self.defaults.reconcile_period,
            manage_status=self._bool(raw, 'manageStatus', fail, default=True),
            finalizer=self._finalizer(raw, fail, target),
            snake_case_parameters=self._bool(raw, 'snakeCaseParameters', fail, default=True),
            mark_unsafe=self._bool(raw, 'markUnsafe', fail, default=True),
            max_concurrent_reconciles=self._kind_env(
                'MAX_CONCURRENT_RECONCILES', group, kind, minimum=1, maximum=None,
                deprecated='WORKER') or self._int(
                raw, 'maxConcurrentReconciles', fail,
                default=self.defaults.max_concurrent_reconciles),
            max_runner_artifacts=self._int(
                raw, 'maxRunnerArtifacts', fail, default=self.default_max_runner_artifacts),
            match_labels=self._selector(raw, fail),
            roles_path=self._roles_path(),
            match_expressions=self._expressions(raw, fail),
            watch_dependents=self._bool(raw, 'watchDependentResources', fail, default=True),
            watch_cluster_scoped=self._bool(raw, 'watchClusterScopedResources', fail,
                                            default=False),
            inject_owner_ref=self._bool(raw, 'injectOwnerRef', fail,
                                        default=self.defaults.inject_owner_ref),
            watch_dependent_status=self._bool(raw, 'watchDependentStatus', fail, default=False),
            blacklist=self._blacklist(raw, fail),
            verbosity=self._kind_env('ANSIBLE_VERBOSITY', group, kind, minimum=0, maximum=7),
            watch_annotations=self._bool(raw, 'watchAnnotationsChanges', fail, default=False),
        )

    def _kind_env(self, prefix: str, group: str, kind: str, *, minimum: int,
                  maximum: int | None, deprecated: str = '') -> int | None:
        """The SDK's per-kind environment variable ``<PREFIX>_<KIND>_<GROUP>`` (upper case,
        dots as underscores; ``deprecated`` names the SDK's older prefix, read when the
        first is unset), or None when neither is set."""
        names = [f"{p}_{kind}_{group}".upper().replace('.', '_') for p in (prefix, deprecated) if p]
        name = next((n for n in names if self.env.get(n, '').strip()), None)
        if name is None:
            return None
        if name != names[0]:
            logger.warning(f"{name} is deprecated (the SDK's name); use {names[0]}")
        raw = self.env[name].strip()
        try:
            value = int(raw)
        except ValueError:
            value = minimum - 1
        if value < minimum or (maximum is not None and value > maximum):
            bound = f"{minimum}..{maximum}" if maximum is not None else f">= {minimum}"
            raise WatchesError(f"{name}={raw!r}: expected a whole number {bound}")
        return value

    @staticmethod
    def _where(index: int, raw: Mapping[str, Any]) -> str:
        parts = [raw.get('group'), raw.get('version'), raw.get('kind')]
        if all(isinstance(part, str) for part in parts):
            return '/'.join(str(part) for part in parts)
        shown = '/'.join(part if isinstance(part, str) else '?' for part in parts)
        return f"#{index} ({shown})"

    @staticmethod
    def _string(raw: Mapping[str, Any], key: str, fail: _Fail, *,
                required: bool = False, empty: bool = False) -> str:
        if key not in raw:
            if required:
                raise fail(f"missing required key {key!r}")
            return ''
        value = raw[key]
        if value is None and empty:
            return ''
        if not isinstance(value, str):
            raise fail(f"{key!r} must be a string, got {type(value).__name__}")
        if not value and not empty:
            raise fail(f"{key!r} must not be empty")
        return value

    @staticmethod
    def _bool(raw: Mapping[str, Any], key: str, fail: _Fail, *, default: bool) -> bool:
        value = raw.get(key, default)
        if not isinstance(value, bool):
            raise fail(f"{key!r} must be true or false, got {value!r}")
        return value

    @staticmethod
    def _int(raw: Mapping[str, Any], key: str, fail: _Fail, *, default: int) -> int:
        value = raw.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise fail(f"{key!r} must be an integer >= 1, got {value!r}")
        return value

    @staticmethod
    def _vars(raw: Mapping[str, Any], fail: _Fail, label: str = 'vars') -> Mapping[str, Any]:
        value = raw.get('vars') or {}
        if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
            raise fail(f"{label!r} must be a mapping with string keys")
        return dict(value)

    @staticmethod
    def _period(raw: Mapping[str, Any], fail: _Fail) -> float:
        value = raw.get('reconcilePeriod', '0')
        if value == 0 and not isinstance(value, bool):
            return 0.0
        if not isinstance(value, str):
            raise fail(f"'reconcilePeriod' must be a duration string like '30s' or '1m30s', "
                       f"got {value!r}")
        try:
            return durations.parse(value)
        except durations.DurationError as e:
            raise fail(f"'reconcilePeriod': {e}") from None

    @staticmethod
    def _blacklist(raw: Mapping[str, Any], fail: _Fail) -> frozenset[tuple[str, str, str]]:
        value = raw.get('blacklist') or []
        if not isinstance(value, list):
            raise fail("'blacklist' must be a list of group/version/kind")
        found = set()
        for index, entry in enumerate(value):
            if (not isinstance(entry, Mapping) or set(entry) - {'group', 'version', 'kind'}
                    or not all(isinstance(entry.get(k), str) for k in ('version', 'kind'))
                    or not isinstance(entry.get('group', ''), str)):
                raise fail(f"'blacklist[{index}]' must be a mapping of 'group' (a string, "
                           f"\"\" for the core group), 'version' and 'kind'")
            found.add((entry.get('group', ''), entry['version'], entry['kind']))
        return frozenset(found)

    @staticmethod
    def _selector(raw: Mapping[str, Any], fail: _Fail) -> Mapping[str, str]:
        value = raw.get('selector') or {}
        if not isinstance(value, Mapping):
            raise fail("'selector' must be a mapping")
        unsupported = [key for key in value if key not in ('matchLabels', 'matchExpressions')]
        if unsupported:
            raise fail(f"'selector': only 'matchLabels' and 'matchExpressions' are supported, "
                       f"got {unsupported[0]!r}")
        labels = value.get('matchLabels') or {}
        if not isinstance(labels, Mapping) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in labels.items()):
            raise fail("'selector.matchLabels' must map strings to strings")
        return dict(labels)

    @staticmethod
    def _expressions(raw: Mapping[str, Any], fail: _Fail) -> tuple[Requirement, ...]:
        value = raw.get('selector') or {}
        entries = value.get('matchExpressions') if isinstance(value, Mapping) else None
        if entries is None:
            return ()
        if not isinstance(entries, list):
            raise fail("'selector.matchExpressions' must be a list")
        found = []
        for index, entry in enumerate(entries):
            where = f"'selector.matchExpressions[{index}]'"
            if not isinstance(entry, Mapping) or set(entry) - {'key', 'operator', 'values'}:
                raise fail(f"{where} must be a mapping of 'key', 'operator' and 'values'")
            key, operator, values = entry.get('key'), entry.get('operator'), entry.get('values')
            if not isinstance(key, str) or not key:
                raise fail(f"{where}: 'key' must be a non-empty string")
            if operator not in OPERATORS:
                raise fail(f"{where}: 'operator' must be one of {', '.join(OPERATORS)}, "
                           f"got {operator!r}")
            needs_values = operator in ('In', 'NotIn')
            if needs_values and not (isinstance(values, list) and values
                                     and all(isinstance(v, str) for v in values)):
                raise fail(f"{where}: {operator} needs 'values', a non-empty list of strings")
            if not needs_values and values:
                raise fail(f"{where}: {operator} takes no 'values'")
            found.append(Requirement(key, str(operator), frozenset(values or ())))
        return tuple(found)

    def _target(self, raw: Mapping[str, Any], fail: _Fail, where: str = '') -> Runnable | None:
        role = self._string(raw, 'role', fail)
        playbook = self._string(raw, 'playbook', fail)
        if role and playbook:
            raise fail(f"{where}'role' and 'playbook' are mutually exclusive; set one")
        if playbook:
            path = (self.base / playbook).absolute()
            if not path.is_file():
                raise fail(f"{where}playbook {playbook!r} not found (looked for {path})")
            return Runnable(type='playbook', path=path)
        if role:
            candidates = self._role_candidates(role)
            for candidate in candidates:
                if candidate.is_dir():
                    return Runnable(type='role', path=candidate.absolute())
            collection = self._collection_role_candidates(role) if _FQCN.match(role) else []
            for candidate in collection:
                if candidate.is_dir():
                    return Runnable(type='role', path=candidate.absolute(), fqcn=role)
            looked = ', '.join(str(c) for c in [*candidates, *collection])
            raise fail(f"{where}role {role!r} not found (looked in: {looked})")
        return None

    def _role_candidates(self, role: str) -> list[pathlib.Path]:
        if os.path.isabs(role):
            return [pathlib.Path(role)]
        candidates = [self.base / role, self.base / 'roles' / role]
        for entry in self.env.get('ANSIBLE_ROLES_PATH', '').split(':'):
            if entry:
                candidates.append(pathlib.Path(entry) / role)
        return candidates

    def _collection_role_candidates(self, fqcn: str) -> list[pathlib.Path]:
        namespace, collection, role = fqcn.split('.')
        raw = self.env.get('ANSIBLE_COLLECTIONS_PATH') or self.env.get('ANSIBLE_COLLECTIONS_PATHS')
        home = self.env.get('HOME') or os.path.expanduser('~')
        roots = raw.split(os.pathsep) if raw else [
            f"{home}/.ansible/collections", '/usr/share/ansible/collections']
        roots += sys.path  # ANSIBLE_COLLECTIONS_SCAN_SYS_PATH, true by default: pip-installed ones
        return [pathlib.Path(root.replace('~', home, 1) if root.startswith('~') else root)
                / 'ansible_collections' / namespace / collection / 'roles' / role
                for root in dict.fromkeys(roots) if root]

    def _roles_path(self) -> tuple[pathlib.Path, ...]:
        return (self.base / 'roles',)

    def _finalizer(self, raw: Mapping[str, Any], fail: _Fail, main: Runnable) -> Finalizer | None:
        if 'finalizer' not in raw:
            return None
        value = raw['finalizer']
        if not isinstance(value, Mapping):
            raise fail("'finalizer' must be a mapping with 'name' and one of "
                       "'role', 'playbook' or 'vars'")
        for key in value:
            if key not in FINALIZER_KEYS:
                raise fail(f"unknown key 'finalizer.{key}' (known: {', '.join(FINALIZER_KEYS)})")
        name = self._string(value, 'name', lambda m: fail(f"finalizer: {m}"), required=True)
        variables = self._vars(value, fail, label='finalizer.vars')
        target = self._target(value, fail, where='finalizer: ')
        if target is None and not variables:
            raise fail("finalizer: one of 'role', 'playbook' or 'vars' is required")
        return Finalizer(name=name, target=target or main, vars=variables)
