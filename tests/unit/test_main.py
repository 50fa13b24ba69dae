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
