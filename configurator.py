"""
nanoGPT's configurator, strict: override a script's module-level settings, then run it.

A script calls `configure(globals())` after its block of settings. Each argument is a config file (a .py path,
run as Python: every public name it binds is an override) or `--key=value`: a Python literal (`3`, `1e-3`, `True`,
`None`, `(1, 2)`), else plain text (`--out_dir=out/run=1`); a string setting takes the text as written
(`--out_dir=2024`, `--start=42`). `--help` or `-h` prints the settings, their defaults and comments, and exits.
Settings are the script's public globals of type bool/int/float/str/tuple/list/dict or None. An unknown key or a
value of the wrong type stops the script naming the key; an int is accepted for a float (never a bool for an int).
A None default has no type to check: annotate it (`lr_decay_iters: int | None = None`) to accept only those types
(or None); an unannotated None default takes any value.
"""
import ast
import contextlib
import dataclasses
import difflib
import fcntl
import inspect
import io
import os
import sys
import tokenize
import traceback
import typing

SETTING_TYPES = (bool, int, float, str, tuple, list, dict, type(None))


def settings_of(scope):
    """The settings among a script's (or config file's) names: the public ones of a SETTING_TYPES type."""
    return {k: v for k, v in scope.items() if not k.startswith("_") and isinstance(v, SETTING_TYPES)}


def _fail(msg):
    raise SystemExit(f"configurator: {msg}")


def _allowed(key, settings, annotations):
    """The types setting `key` takes, or None for any (an unannotated None default)."""
    if key in annotations:  # `int | None` accepts an int or None
        return typing.get_args(annotations[key]) or (annotations[key],)
    return None if settings[key] is None else (type(settings[key]),)


def _check(key, value, settings, annotations, source):
    if key not in settings:
        close = difflib.get_close_matches(key, settings, n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        _fail(f"unknown setting '{key}' (from {source}){hint}")
    allowed = _allowed(key, settings, annotations)
    if allowed is None:
        return value
    for want in allowed:
        if type(value) is want:  # (None's type is type(None))
            return value
        if want is float and type(value) is int:
            return float(value)
    names = " or ".join("None" if t is type(None) else t.__name__ for t in allowed)
    _fail(f"setting '{key}' (from {source}) expects {names}, got {type(value).__name__} {value!r}")


def _comments(source):
    """{name: the comment beside it ('' if none)} for each assignment at the top level of `source` or of a class
    in it, the comment with the lines below that hold only a comment starting in the same column."""
    lines = source.splitlines()
    marks = {t.start[0]: (t.start[1], t.string[1:].strip())  # line: (column, text)
             for t in tokenize.generate_tokens(io.StringIO(source).readline) if t.type == tokenize.COMMENT}
    tree = ast.parse(source)
    out = {}
    for node in tree.body + [n for c in tree.body if isinstance(c, ast.ClassDef) for n in c.body]:
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        if len(targets) != 1 or not isinstance(targets[0], ast.Name) or targets[0].id in out:
            continue
        line, text = node.end_lineno, []
        col = marks.get(line, (None,))[0]
        while line in marks and marks[line][0] == col and (not text or lines[line - 1].lstrip().startswith("#")):
            text.append(marks[line][1])
            line += 1
        out[targets[0].id] = " ".join(text)
    return out


def _help(config, settings):
    """Print the script's settings, each with its default and the comment beside it in the script's source
    (or in a dataclass among its globals whose fields are settings too, as train.py takes GPTConfig's)."""
    comments = {}
    for cls in [v for v in config.values() if isinstance(v, type) and dataclasses.is_dataclass(v)]:
        with contextlib.suppress(OSError, TypeError):  # a class of the script itself (no module): read below
            comments.update(_comments(inspect.getsource(cls)))
    if script := config.get("__file__"):
        with open(script, encoding="utf-8") as f:
            comments.update(_comments(f.read()))
    print(f"usage: python {script and script.rsplit('/', 1)[-1] or 'SCRIPT'} [config/FILE.py ...] [--key=value ...]  "
          f"(applied in order; a value is a Python literal or plain text)\nsettings, with their defaults:")
    width = max(map(len, settings), default=0)
    for key, value in settings.items():
        if key in comments:  # (not a name the script imported)
            print(f"  {key:<{width}} = {value!r}" + (f"  # {comments[key]}" if comments[key] else ""))
    raise SystemExit(0)


def configure(config, argv=None):
    """Apply config files and --key=value overrides from argv (default sys.argv[1:]) to the dict
    `config` (a script's globals()), in order. Returns the dict of applied overrides."""
    argv = sys.argv[1:] if argv is None else argv
    settings = settings_of(config)
    annotations = config.get("__annotations__", {})  # a script's `name: type = value` lines
    if "--help" in argv or "-h" in argv:
        _help(config, settings)
    applied = {}
    for arg in argv:
        if arg.startswith("--"):
            if "=" not in arg:
                _fail(f"'{arg}' needs a value: write --key=value")
            key, text = arg[2:].split("=", 1)
            try:
                value = ast.literal_eval(text)
            except (ValueError, SyntaxError):
                value = text  # a bare word is a string: --mixer=eda
            allowed = _allowed(key, settings, annotations) if key in settings else None
            if allowed and str in allowed and type(value) not in allowed:
                value = text  # a string setting takes the text: --out_dir=2024
            updates = {key: (value, f"'{arg}'")}
        elif arg.endswith(".py"):
            try:
                with open(arg, encoding="utf-8") as f:
                    source = f.read()
            except OSError as err:
                _fail(f"cannot read config file '{arg}': {err.strerror}")
            except UnicodeDecodeError as err:
                _fail(f"config file '{arg}' is not UTF-8 text ({err.reason} at byte {err.start})")
            scope = {}
            try:
                exec(compile(source, arg, "exec"), scope)
            except (SyntaxError, ValueError) as err:  # (ValueError: a NUL byte in the source)
                where = f", line {err.lineno}" if getattr(err, "lineno", None) else ""
                _fail(f"config file '{arg}'{where} is not valid Python: {getattr(err, 'msg', err)}")
            except (Exception, SystemExit) as err:  # the file runs, and fails (or exits) on a line of its own
                lines = [f.lineno for f in traceback.extract_tb(err.__traceback__) if f.filename == arg]
                where = f", line {lines[-1]}" if lines else ""
                if isinstance(err, SystemExit):  # a silent exit 0 would look like a finished run
                    _fail(f"config file '{arg}'{where} calls sys.exit({err.code!r}): a config file only sets values")
                _fail(f"config file '{arg}'{where} failed: {type(err).__name__}: {err}")
            updates = {k: (v, f"config file {arg}") for k, v in settings_of(scope).items()}
        else:
            _fail(f"cannot read argument '{arg}': expected a config file (*.py) or --key=value")
        for key, (value, src) in updates.items():
            config[key] = applied[key] = _check(key, value, settings, annotations, src)
    return applied


def file_text(value, what):
    """A string setting's text: value itself, or for 'FILE:path' the UTF-8 contents of path (nanoGPT's
    convention for long values such as a prompt). A ValueError naming `what` when the file cannot be read."""
    if not value.startswith('FILE:'):
        return value
    path = value[5:]
    try:
        with open(path, encoding='utf-8') as f:
            return f.read()
    except OSError as err:
        raise ValueError(f"cannot read {what} {path}: {err.strerror}") from None
    except UnicodeDecodeError as err:
        raise ValueError(f"{what} {path} is not valid UTF-8 text ({err.reason} at byte {err.start})") from None


def hold_lock(path):
    """Lock the file `path` for this process's life (the kernel lets go however it ends), writing the pid in it: one
    live process per file (train.py's out_dir, sweep.py's results). Returns (fd, None), or (fd, the holder's pid)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return fd, os.pread(fd, 32, 0).decode(errors='replace').strip() or 'not yet written'
    os.ftruncate(fd, 0)
    os.pwrite(fd, f'{os.getpid()}\n'.encode(), 0)
    return fd, None


def fmt_time(s):
    """Seconds as h:mm:ss (train.py's and sweep.py's ETAs)."""
    s = int(s)
    return f'{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}'
