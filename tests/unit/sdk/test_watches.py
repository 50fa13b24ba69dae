"""sdk.watches: watches.yaml's keys, defaults and errors, and the selector's matching."""
import logging
import pathlib
import textwrap

import pytest

from ansible_kopf.sdk import watches


@pytest.fixture
def tree(tmp_path: pathlib.Path) -> pathlib.Path:
    """A directory laid out like the repository: roles/ and playbooks/ next to the file."""
    (tmp_path / 'roles' / 'mysql' / 'tasks').mkdir(parents=True)
    (tmp_path / 'roles' / 'mysql_backup' / 'tasks').mkdir(parents=True)
    (tmp_path / 'playbooks').mkdir()
    (tmp_path / 'playbooks' / 'mysql.yml').write_text('- hosts: localhost\n')
    return tmp_path


def write(tree: pathlib.Path, text: str) -> pathlib.Path:
    path = tree / 'watches.yaml'
    path.write_text(textwrap.dedent(text))
    return path


def test_minimal_entry_gets_the_documented_defaults(tree: pathlib.Path) -> None:
    path = write(tree, """
        - version: v1
          group: otus.homework
          kind: MySQL
          role: mysql
    """)
    (watch,) = watches.load(path)
    assert watch.gvk == 'otus.homework/v1/MySQL'
    assert watch.target == watches.Runnable(type='role', path=tree / 'roles' / 'mysql')
    assert watch.vars == {}
    assert watch.reconcile_period == 0.0
    assert watch.manage_status is True
    assert watch.finalizer is None
    assert watch.snake_case_parameters is True
    assert watch.mark_unsafe is True  # the SDK's default is false; ours is true
    assert watch.max_concurrent_reconciles == 1
    assert watch.max_runner_artifacts == 20
    assert watch.match_labels == {}
    assert watch.roles_path == (tree / 'roles',)


def test_full_entry(tree: pathlib.Path) -> None:
    path = write(tree, """
        - group: otus.homework
          version: v1
          kind: MySQL
          playbook: playbooks/mysql.yml
          vars: {mysql_image: 'mysql:8.0'}
          reconcilePeriod: 1m30s
          manageStatus: false
          snakeCaseParameters: false
          markUnsafe: false
          maxConcurrentReconciles: 3
          maxRunnerArtifacts: 5
          selector: {matchLabels: {tier: db}}
          finalizer:
            name: otus.homework/finalizer
            role: roles/mysql_backup
            vars: {backup: true}
    """)
    (watch,) = watches.load(path)
    assert watch.target == watches.Runnable(type='playbook', path=tree / 'playbooks' / 'mysql.yml')
    assert watch.vars == {'mysql_image': 'mysql:8.0'}
    assert watch.reconcile_period == 90.0
    assert watch.manage_status is False
    assert watch.snake_case_parameters is False
    assert watch.mark_unsafe is False
    assert watch.max_concurrent_reconciles == 3
    assert watch.max_runner_artifacts == 5
    assert watch.match_labels == {'tier': 'db'}
    assert watch.finalizer == watches.Finalizer(
        name='otus.homework/finalizer',
        target=watches.Runnable(type='role', path=tree / 'roles' / 'mysql_backup'),
        vars={'backup': True},
    )


def test_finalizer_with_only_vars_reruns_the_main_target(tree: pathlib.Path) -> None:
    path = write(tree, """
        - {group: g.io, version: v1, kind: K, role: mysql,
           finalizer: {name: g.io/cleanup, vars: {state: absent}}}
    """)
    (watch,) = watches.load(path)
    assert watch.finalizer is not None
    assert watch.finalizer.target == watch.target
    assert watch.finalizer.vars == {'state': 'absent'}


def test_finalizer_with_a_playbook(tree: pathlib.Path) -> None:
    path = write(tree, """
        - {group: g.io, version: v1, kind: K, role: mysql,
           finalizer: {name: g.io/cleanup, playbook: playbooks/mysql.yml}}
    """)
    (watch,) = watches.load(path)
    assert watch.finalizer is not None
    assert watch.finalizer.target.type == 'playbook'
    assert watch.finalizer.vars == {}


def test_paths_are_relative_to_the_watches_file_not_the_cwd(
        tree: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tree, "- {group: g.io, version: v1, kind: K, role: roles/mysql}\n")
    monkeypatch.chdir('/')
    (watch,) = watches.load(path)
    assert watch.target.path == tree / 'roles' / 'mysql'


def test_role_is_also_found_in_ansible_roles_path(
        tree: pathlib.Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    elsewhere = tmp_path_factory.mktemp('shared')
    (elsewhere / 'common').mkdir()
    path = write(tree, "- {group: g.io, version: v1, kind: K, role: common}\n")
    (watch,) = watches.load(path, env={'ANSIBLE_ROLES_PATH': str(elsewhere)})
    assert watch.target.path == elsewhere / 'common'


def test_a_collection_role_is_found_by_its_fqcn_in_the_collections_path(
        tree: pathlib.Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    collections = tmp_path_factory.mktemp('collections')
    role = collections / 'ansible_collections' / 'acme' / 'tools' / 'roles' / 'dummy'
    role.mkdir(parents=True)
    path = write(tree, "- {group: g.io, version: v1, kind: K, role: acme.tools.dummy}\n")
    (watch,) = watches.load(path, env={'ANSIBLE_COLLECTIONS_PATH': f"/nowhere:{collections}"})
    assert watch.target == watches.Runnable(type='role', path=role, fqcn='acme.tools.dummy')


def test_a_missing_collection_role_names_where_it_was_looked_for(tree: pathlib.Path) -> None:
    path = write(tree, "- {group: g.io, version: v1, kind: K, role: acme.tools.absent}\n")
    with pytest.raises(watches.WatchesError, match=r"role 'acme\.tools\.absent' not found") as failed:
        watches.load(path, env={'ANSIBLE_COLLECTIONS_PATH': '/nowhere'})
    assert '/nowhere/ansible_collections/acme/tools/roles/absent' in str(failed.value)


def test_env_references_are_expanded_and_unknown_ones_kept(tree: pathlib.Path) -> None:
    path = write(tree, """
        - group: g.io
          version: v1
          kind: K
          role: ${ROLE_NAME}
          vars: {left_alone: '${NOT_SET_ANYWHERE}'}
    """)
    (watch,) = watches.load(path, env={'ROLE_NAME': 'mysql'})
    assert watch.target.path == tree / 'roles' / 'mysql'
    assert watch.vars == {'left_alone': '${NOT_SET_ANYWHERE}'}


def test_default_max_runner_artifacts_comes_from_the_caller(tree: pathlib.Path) -> None:
    path = write(tree, "- {group: g.io, version: v1, kind: K, role: mysql}\n")
    (watch,) = watches.load(path, default_max_runner_artifacts=7)
    assert watch.max_runner_artifacts == 7


def test_empty_group_is_the_core_group(tree: pathlib.Path) -> None:
    path = write(tree, "- {group: '', version: v1, kind: ConfigMap, role: mysql}\n")
    (watch,) = watches.load(path)
    assert watch.gvk == '/v1/ConfigMap'


def test_per_kind_environment_variables_as_in_the_sdk(
        tree: pathlib.Path, caplog: pytest.LogCaptureFixture) -> None:
    """MAX_CONCURRENT_RECONCILES_<KIND>_<GROUP> (else the SDK's deprecated WORKER_...) and
    ANSIBLE_VERBOSITY_<KIND>_<GROUP>: upper case, dots as underscores; they win over the
    entry and the operator's defaults, for their kind only."""
    path = write(tree, """
        - {group: otus.homework, version: v1, kind: MySQL, role: mysql, maxConcurrentReconciles: 2}
        - {group: otus.homework, version: v1, kind: MySQLBackup, role: mysql}
        - {group: '', version: v1, kind: Secret, role: mysql}
    """)
    mysql, backup, secret = watches.load(path, env={
        'MAX_CONCURRENT_RECONCILES_MYSQL_OTUS_HOMEWORK': '5',
        'ANSIBLE_VERBOSITY_MYSQL_OTUS_HOMEWORK': '3'})
    assert (mysql.max_concurrent_reconciles, mysql.verbosity) == (5, 3)
    assert (backup.max_concurrent_reconciles, backup.verbosity) == (1, None)
    assert secret.max_concurrent_reconciles == 1
    for name, value in (('MAX_CONCURRENT_RECONCILES_MYSQL_OTUS_HOMEWORK', '0'),
                        ('ANSIBLE_VERBOSITY_MYSQL_OTUS_HOMEWORK', '8'),
                        ('ANSIBLE_VERBOSITY_MYSQL_OTUS_HOMEWORK', 'lots')):
        with pytest.raises(watches.WatchesError, match=f"{name}='{value}'"):
            watches.load(path, env={name: value})
    with caplog.at_level(logging.WARNING):
        (*_, secret) = watches.load(path, env={'WORKER_SECRET_': '4'})
    assert secret.max_concurrent_reconciles == 4
    assert any('WORKER_SECRET_ is deprecated' in r.getMessage() for r in caplog.records)


def test_watch_annotations_changes_is_read(tree: pathlib.Path) -> None:
    path = write(tree, """
        - {group: g.io, version: v1, kind: K, role: mysql, watchAnnotationsChanges: true}
        - {group: g.io, version: v1, kind: L, role: mysql}
    """)
    annotated, plain = watches.load(path)
    assert annotated.watch_annotations and not plain.watch_annotations


def test_blacklist_names_kinds_never_followed(tree: pathlib.Path) -> None:
    path = write(tree, """
        - {group: g.io, version: v1, kind: K, role: mysql,
           blacklist: [{group: '', version: v1, kind: ConfigMap}, {group: apps, version: v1, kind: Deployment}]}
    """)
    (watch,) = watches.load(path)
    assert watch.blacklist == {('', 'v1', 'ConfigMap'), ('apps', 'v1', 'Deployment')}
    bad = write(tree, "- {group: g.io, version: v1, kind: K, role: mysql, blacklist: [{kind: 1}]}\n")
    with pytest.raises(watches.WatchesError, match=r"blacklist\[0\]"):
        watches.load(bad)


def test_dependent_watch_keys_default_as_in_the_sdk(tree: pathlib.Path) -> None:
    path = write(tree, """
        - {group: g.io, version: v1, kind: K, role: mysql}
        - {group: g.io, version: v1, kind: L, role: mysql, watchDependentResources: false,
           watchClusterScopedResources: true, injectOwnerRef: false, watchDependentStatus: true}
    """)
    default, changed = watches.load(path)
    assert (default.watch_dependents, default.watch_cluster_scoped,
            default.inject_owner_ref, default.watch_dependent_status) == (True, False, True, False)
    assert (changed.watch_dependents, changed.watch_cluster_scoped,
            changed.inject_owner_ref, changed.watch_dependent_status) == (False, True, False, True)
    bad = write(tree, "- {group: g.io, version: v1, kind: K, role: mysql, "
                      "watchDependentResources: 'yes'}\n")
    with pytest.raises(watches.WatchesError, match='watchDependentResources'):
        watches.load(bad)


def test_unknown_key_names_the_file_the_entry_and_the_key(tree: pathlib.Path) -> None:
    path = write(tree, "- {group: otus.homework, version: v1, kind: MySQL, rol: mysql}\n")
    with pytest.raises(watches.WatchesError) as e:
        watches.load(path)
    message = str(e.value)
    assert message.startswith(f"{path} entry otus.homework/v1/MySQL: unknown key 'rol' (known: ")
    assert 'role' in message
    assert 'playbook' in message


@pytest.mark.parametrize(('text', 'expected'), [
    ("- {group: g.io, version: v1, role: mysql}",
     "entry #1 (g.io/v1/?): missing required key 'kind'"),
    ("- {group: g.io, kind: K, role: mysql}",
     "entry #1 (g.io/?/K): missing required key 'version'"),
    ("- {version: v1, kind: K, role: mysql}",
     "entry #1 (?/v1/K): missing required key 'group'"),
    ("- {group: g.io, version: v1, kind: 5, role: mysql}",
     "'kind' must be a string, got int"),
    ("- {group: g.io, version: v1, kind: '', role: mysql}",
     "'kind' must not be empty"),
    ("- {group: g.io, version: v1, kind: K, role: mysql, playbook: playbooks/mysql.yml}",
     "entry g.io/v1/K: 'role' and 'playbook' are mutually exclusive"),
    ("- {group: g.io, version: v1, kind: K}",
     "entry g.io/v1/K: one of 'role' or 'playbook' is required"),
    ("- {group: g.io, version: v1, kind: K, role: nosuchrole}",
     "role 'nosuchrole' not found (looked in: "),
    ("- {group: g.io, version: v1, kind: K, playbook: nosuch.yml}",
     "playbook 'nosuch.yml' not found"),
    ("- {group: g.io, version: v1, kind: K, role: mysql, reconcilePeriod: 10x}",
     "'reconcilePeriod': unknown unit 'x' in duration '10x'"),
    ("- {group: g.io, version: v1, kind: K, role: mysql, reconcilePeriod: 30}",
     "'reconcilePeriod' must be a duration string like '30s'"),
    ("- {group: g.io, version: v1, kind: K, role: mysql, reconcilePeriod: -5s}",
     "negative duration"),
    ("- {group: g.io, version: v1, kind: K, role: mysql, manageStatus: 'yes'}",
     "'manageStatus' must be true or false, got 'yes'"),
    ("- {group: g.io, version: v1, kind: K, role: mysql, maxConcurrentReconciles: 0}",
     "'maxConcurrentReconciles' must be an integer >= 1, got 0"),
    ("- {group: g.io, version: v1, kind: K, role: mysql, maxRunnerArtifacts: true}",
     "'maxRunnerArtifacts' must be an integer >= 1, got True"),
    ("- {group: g.io, version: v1, kind: K, role: mysql, vars: [a, b]}",
     "'vars' must be a mapping with string keys"),
    ("- {group: g.io, version: v1, kind: K, role: mysql, selector: {matchFields: []}}",
     "only 'matchLabels' and 'matchExpressions' are supported, got 'matchFields'"),
    ("- {group: g.io, version: v1, kind: K, role: mysql, selector: {matchExpressions: {a: b}}}",
     "'selector.matchExpressions' must be a list"),
    ("- {group: g.io, version: v1, kind: K, role: mysql,"
     " selector: {matchExpressions: [{key: tier, operator: Like, values: [db]}]}}",
     "'selector.matchExpressions[0]': 'operator' must be one of In, NotIn, Exists, DoesNotExist"),
    ("- {group: g.io, version: v1, kind: K, role: mysql,"
     " selector: {matchExpressions: [{key: tier, operator: In, values: []}]}}",
     "In needs 'values', a non-empty list of strings"),
    ("- {group: g.io, version: v1, kind: K, role: mysql,"
     " selector: {matchExpressions: [{key: tier, operator: Exists, values: [db]}]}}",
     "Exists takes no 'values'"),
    ("- {group: g.io, version: v1, kind: K, role: mysql,"
     " selector: {matchExpressions: [{operator: Exists}]}}",
     "'key' must be a non-empty string"),
    ("- {group: g.io, version: v1, kind: K, role: mysql, finalizer: {role: mysql}}",
     "finalizer: missing required key 'name'"),
    ("- {group: g.io, version: v1, kind: K, role: mysql, finalizer: {name: x/y}}",
     "finalizer: one of 'role', 'playbook' or 'vars' is required"),
    ("- {group: g.io, version: v1, kind: K, role: mysql,"
     " finalizer: {name: x/y, role: mysql, playbook: playbooks/mysql.yml}}",
     "finalizer: 'role' and 'playbook' are mutually exclusive"),
    ("- {group: g.io, version: v1, kind: K, role: mysql, finalizer: {name: x/y, rol: mysql}}",
     "unknown key 'finalizer.rol'"),
    ("- {group: g.io, version: v1, kind: K, role: mysql, finalizer: {name: x/y, role: nope}}",
     "finalizer: role 'nope' not found"),
    ("- {group: g.io, version: v1, kind: K, role: mysql, finalizer: x/y}",
     "'finalizer' must be a mapping"),
    ("- {group: g.io, version: v1, kind: K, role: mysql}\n"
     "- {group: g.io, version: v1, kind: K, playbook: playbooks/mysql.yml}",
     "duplicate entry for g.io/v1/K"),
    ("- just a string", "entry #1: expected a mapping, got str"),
    ("{group: g.io}", "expected a non-empty YAML list of entries"),
    ("", "expected a non-empty YAML list of entries"),
    ("- {group: g.io, version: v1, kind: K, role: [unclosed", "not valid YAML"),
])
def test_errors_are_clear(tree: pathlib.Path, text: str, expected: str) -> None:
    path = write(tree, text + '\n')
    with pytest.raises(watches.WatchesError) as e:
        watches.load(path)
    assert expected in str(e.value)
    assert str(path) in str(e.value)


def test_missing_file_is_an_error(tmp_path: pathlib.Path) -> None:
    with pytest.raises(watches.WatchesError, match='cannot read the watches file'):
        watches.load(tmp_path / 'absent.yaml')


def test_match_expressions_select_as_a_kubernetes_label_selector(tmp_path: pathlib.Path) -> None:
    path = tmp_path / 'watches.yaml'
    path.write_text(
        "- {group: g.io, version: v1, kind: K, playbook: p.yml, selector: {matchExpressions: [\n"
        "    {key: tier, operator: In, values: [db, cache]},\n"
        "    {key: env, operator: NotIn, values: [dev]},\n"
        "    {key: owner, operator: Exists},\n"
        "    {key: paused, operator: DoesNotExist}]}}\n")
    (tmp_path / 'p.yml').write_text('[]\n')
    (watch,) = watches.load(path)
    assert watch.matches_expressions({'tier': 'db', 'owner': 'x'})
    assert watch.matches_expressions({'tier': 'cache', 'env': 'prod', 'owner': 'x'})
    assert not watch.matches_expressions({'tier': 'web', 'owner': 'x'})
    assert not watch.matches_expressions({'owner': 'x'})  # In needs the key
    assert not watch.matches_expressions({'tier': 'db', 'env': 'dev', 'owner': 'x'})
    assert not watch.matches_expressions({'tier': 'db'})
    assert not watch.matches_expressions({'tier': 'db', 'owner': 'x', 'paused': ''})
