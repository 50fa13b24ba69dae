"""
Compiled Jinja templates kept between the runs of a warm playbook server (runs in the
server, its runs and their task workers, all forked from it).

ansible-core compiles a template string (a task's argument, a condition, a template file)
each time it renders one: parse, generate Python source, ``compile``. Every task runs in a
worker process forked for it, so nothing compiled there outlives the task; in the bench
role's runs compiling was about a third of the workers' CPU (profiled 2026-11-26).
:func:`install` makes ``jinja2.Environment.compile`` look the code up in a directory
first, under a digest of everything the code depends on (the source, its name and file
name, the environment's class and its syntax and code-generation settings, the Python,
Jinja and ansible-core versions), and store there what it had to compile.

Never stored, so compiled as before on every render:
- a template in which a filter or a test has no variable among its operands: Jinja may call
  it while compiling (constant folding), and what it returned (``random``, a
  ``password_hash`` salt, a file read by a filter) must not be kept from one render to the
  next. That finding is stored, so such a template is parsed once more only the first time;
- a template that does not compile (the error is raised as before);
- anything once the directory holds :data:`MAX_FILES` entries.

A file that cannot be read, decoded or written is a miss, never an error. Files are
replaced atomically. The directory is the pool's, private to the operator's user: what is
stored there is code that runs, as the pool's interpreter script is.
Standard library only at import; jinja2 is imported by :func:`install`.
"""
import contextlib
import hashlib
import importlib
import importlib.util
import json
import marshal
import os
import sys
import tempfile
import types
from collections.abc import Callable
from typing import Any, Final

MAX_FILES: Final = 4096
NOT_STORED: Final = b'-'  # the file of a template that is compiled every time
CODE: Final = b'c'  # followed by the marshalled code object
# what Jinja's lexer and code generator read from the environment
SETTINGS: Final = (
    'block_start_string', 'block_end_string', 'variable_start_string',
    'variable_end_string', 'comment_start_string', 'comment_end_string',
    'line_statement_prefix', 'line_comment_prefix', 'trim_blocks', 'lstrip_blocks',
    'newline_sequence', 'keep_trailing_newline', 'optimized', 'is_async',
)


def _qualified(value: object) -> str | None:
    if value is None:
        return None
    kind = value if isinstance(value, type) else type(value)
    owner = getattr(value, '__module__', None) or kind.__module__
    return f"{owner}.{getattr(value, '__qualname__', kind.__qualname__)}"


class Store:
    """The directory of compiled templates, and the keys of its files."""

    def __init__(self, directory: str, stamp: str) -> None:
        self.directory = directory
        self.stamp = stamp  # the versions the code is valid for

    def key(self, environment: Any, source: str, name: str | None, filename: str | None,
            defer_init: bool) -> str | None:
        """The file name of this compilation; None when it is not to be stored."""
        autoescape = environment.autoescape
        if not isinstance(autoescape, bool):  # a function of the name: left alone
            return None
        described = [
            self.stamp, _qualified(type(environment)),
            _qualified(environment.code_generator_class), _qualified(environment.finalize),
            sorted(environment.extensions), autoescape,
            [getattr(environment, setting, None) for setting in SETTINGS],
            name, filename, defer_init, source,
        ]
        try:
            text = json.dumps(described)
        except (TypeError, ValueError):
            return None
        return hashlib.sha256(text.encode('utf-8', 'surrogatepass')).hexdigest()

    def get(self, key: str) -> types.CodeType | bytes | None:
        """The stored code, :data:`NOT_STORED`, or None (not there, or unreadable)."""
        try:
            with open(os.path.join(self.directory, key), 'rb') as f:
                data = f.read()
        except OSError:
            return None
        if data == NOT_STORED:
            return NOT_STORED
        if data[:1] != CODE:
            return None
        try:
            code = marshal.loads(data[1:])  # noqa: S302  (our own files, in a private directory)
        except (EOFError, ValueError, TypeError):
            return None
        return code if isinstance(code, types.CodeType) else None

    def put(self, key: str, data: bytes) -> None:
        """Store ``data`` under ``key`` unless the directory is full; errors are ignored."""
        try:
            if len(os.listdir(self.directory)) >= MAX_FILES:
                return
            fd, temporary = tempfile.mkstemp(dir=self.directory, prefix='.new-')
        except OSError:
            return
        try:
            with os.fdopen(fd, 'wb') as f:
                f.write(data)
            os.replace(temporary, os.path.join(self.directory, key))
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(temporary)


def may_fold(tree: Any, nodes: Any) -> bool:
    """Whether Jinja may call a filter or test of ``tree`` while compiling it: one of them
    has no variable (no ``Name``) among its operands."""
    for node in tree.find_all((nodes.Filter, nodes.Test)):
        if next(node.find_all(nodes.Name), None) is None:
            return True
    return False


def install(directory: str) -> Callable[[], None] | None:
    """
    Route ``jinja2.Environment.compile`` of this process (and the processes it forks)
    through ``directory`` (created private if missing); return what undoes it, or None
    (nothing installed) when jinja2 or ansible-core cannot be imported or the directory
    cannot be made.
    """
    try:
        jinja2 = importlib.import_module('jinja2')
        nodes = importlib.import_module('jinja2.nodes')
        release = importlib.import_module('ansible.release')
        os.makedirs(directory, mode=0o700, exist_ok=True)
    except (ImportError, OSError):
        return None
    stamp = ' '.join((sys.version, importlib.util.MAGIC_NUMBER.hex(), jinja2.__version__,
                      str(release.__version__)))
    store = Store(directory, stamp)
    environment_class = jinja2.Environment
    original = environment_class.compile

    def compile(self: Any, source: Any, name: str | None = None,  # noqa: PLR0917  (jinja2's)
                filename: str | None = None, raw: bool = False,
                defer_init: bool = False) -> Any:
        if raw or not isinstance(source, str):
            return original(self, source, name, filename, raw, defer_init)
        key = store.key(self, source, name, filename, defer_init)
        found = None if key is None else store.get(key)
        if isinstance(found, types.CodeType):
            return found
        code = original(self, source, name, filename, raw, defer_init)
        if key is not None and found is None:
            if may_fold(self.parse(source, name, filename), nodes):
                store.put(key, NOT_STORED)
            else:
                store.put(key, CODE + marshal.dumps(code))
        return code

    environment_class.compile = compile

    def undo() -> None:
        environment_class.compile = original

    return undo
