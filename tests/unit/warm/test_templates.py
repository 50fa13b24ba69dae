"""
Compiled Jinja templates kept in files (warm.templates): a template compiled once is
read back in a fresh environment and renders the same; what Jinja may fold while
compiling (a filter or test on constants) is compiled every time; other syntax settings,
bad templates, unreadable files and a full directory behave as without the store.
"""
import os
import pathlib
from collections.abc import Iterator
from typing import Any

import jinja2
import pytest

from ansible_kopf.warm import templates


@pytest.fixture
def store(tmp_path: pathlib.Path) -> Iterator[pathlib.Path]:
    directory = tmp_path / 'templates'
    undo = templates.install(str(directory))
    assert undo is not None
    try:
        yield directory
    finally:
        undo()


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The sources Jinja parsed (compiled, or looked at by the store)."""
    seen: list[str] = []
    original = jinja2.Environment._parse

    def counted(self: jinja2.Environment, source: str, name: str | None,
                filename: str | None) -> Any:
        seen.append(source)
        return original(self, source, name, filename)

    monkeypatch.setattr(jinja2.Environment, '_parse', counted)
    return seen


def stored(directory: pathlib.Path) -> list[bytes]:
    return [p.read_bytes() for p in sorted(directory.iterdir()) if not p.name.startswith('.')]


def text_environment(**settings: Any) -> jinja2.Environment:
    """An environment for text, as ansible-core's is (no HTML escaping)."""
    return jinja2.Environment(autoescape=False, **settings)  # noqa: S701


def render(source: str, environment: jinja2.Environment | None = None, **values: Any) -> str:
    return (environment or text_environment()).from_string(source).render(**values)


def test_a_template_is_compiled_once_and_read_back_in_a_fresh_environment(
        store: pathlib.Path, parses: list[str]) -> None:
    source = '{% for x in items %}{{ x | upper }}-{% endfor %}{{ name | default("none") }}'
    assert render(source, items=['a', 'b'], name='n') == 'A-B-n'
    assert len(parses) == 2  # compiled, then looked at for filters on constants
    assert [data[:1] for data in stored(store)] == [templates.CODE]
    assert render(source, items=['c'], name=None) == 'C-None'  # another environment
    assert render(source, items=[]) == 'none'
    assert len(parses) == 2  # both from the store


def test_the_ansible_templar_renders_the_same_from_the_store(
        store: pathlib.Path, parses: list[str]) -> None:
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar

    variables = {'who': 'world', 'n': 3, 'items': ['x', 'y']}
    expressions = ['hello {{ who }}', '{{ n * 2 }}', '{{ items | join(",") }}',
                   '{{ {"a": n} }}', '{{ items | length > 1 }}']
    first = [Templar(DataLoader(), variables).template(e) for e in expressions]
    compiled = len(parses)
    again = [Templar(DataLoader(), variables).template(e) for e in expressions]
    assert first == again == ['hello world', '6', 'x,y', {'a': 3}, True]
    assert len(parses) == compiled  # the second Templar compiled nothing
    assert len(stored(store)) >= len(expressions)  # and what ansible-core compiles itself


def test_a_filter_on_constants_is_called_on_every_render(store: pathlib.Path) -> None:
    calls: list[str] = []

    def tick(value: str) -> str:  # Jinja folds it at compile time: its operand is constant
        calls.append(value)
        return f"{value}{len(calls)}"

    environments = []
    for _ in range(3):
        environment = text_environment()
        environment.filters['tick'] = tick
        environments.append(environment)
    outputs = [render("{{ 'x' | tick }}", e) for e in environments]
    assert outputs == ['x1', 'x2', 'x3']  # a stored fold would repeat 'x1'
    assert stored(store) == [templates.NOT_STORED]
    # with a variable among its operands it runs at render time, and the code is stored
    assert [render('{{ v | tick }}', e, v='y') for e in environments] == ['y4', 'y5', 'y6']
    assert sorted(data[:1] for data in stored(store)) == [templates.NOT_STORED, templates.CODE]


def test_other_delimiters_are_another_template(store: pathlib.Path) -> None:
    source = '[[ a ]]{{ a }}'
    brackets = text_environment(variable_start_string='[[', variable_end_string=']]')
    assert render(source, a=1) == '[[ a ]]1'
    assert render(source, brackets, a=1) == '1{{ a }}'
    assert render(source, a=2) == '[[ a ]]2'
    assert len(stored(store)) == 2


def test_a_bad_template_fails_as_before_and_is_not_stored(store: pathlib.Path) -> None:
    for _ in range(2):
        with pytest.raises(jinja2.TemplateSyntaxError):
            text_environment().from_string('{{ a ')
    assert stored(store) == []


def test_an_unreadable_file_is_compiled_again(store: pathlib.Path, parses: list[str]) -> None:
    assert render('{{ a }}+', a=1) == '1+'
    (entry,) = [p for p in store.iterdir() if not p.name.startswith('.')]
    entry.write_bytes(templates.CODE + b'not marshal data')
    assert render('{{ a }}+', a=2) == '2+'
    entry.write_bytes(b'?')
    assert render('{{ a }}+', a=3) == '3+'
    assert len(parses) == 3 * 2  # each time compiled, looked at, and written again
    assert entry.read_bytes()[:1] == templates.CODE
    assert render('{{ a }}+', a=4) == '4+'
    assert len(parses) == 3 * 2


def test_a_full_directory_takes_no_more(store: pathlib.Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(templates, 'MAX_FILES', 2)
    for i in range(4):
        assert render(f"{{{{ a }}}}{i}", a='v') == f"v{i}"
    assert len(stored(store)) == 2


def test_the_directory_is_private_and_undo_restores_compile(tmp_path: pathlib.Path) -> None:
    original = jinja2.Environment.compile
    undo = templates.install(str(tmp_path / 'private'))
    assert undo is not None
    try:
        assert jinja2.Environment.compile is not original
        assert (os.stat(tmp_path / 'private').st_mode & 0o777) == 0o700
    finally:
        undo()
    assert jinja2.Environment.compile is original
