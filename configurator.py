"""
nanoGPT's configurator, strict: override a script's module-level settings, then run it.

    python train.py config/dense_2p5b.py --mixer=kda --batch_size=4

A script calls `configure(globals())` after its block of settings. Each argument is either
- a config file (a path ending in .py), run as Python; every public name it binds is an override, or
- `--key=value`: the value is read as a Python literal (`3`, `1e-3`, `True`, `None`, `(1, 2)`) and
  otherwise taken as a plain string, so `--out_dir=out/run=1` works.
Settings are the script's public globals of type bool/int/float/str/tuple/list/dict or None.
An unknown key, or a value of the wrong type, stops the script with a message that names the key;
an int is accepted for a float (never a bool for an int). A setting whose default is None has no type
to check against: annotate it (`lr_decay_iters: int | None = None`) and only those types (or None) are
accepted; an unannotated None default takes any value.
"""
import ast
import difflib
import sys
import traceback
import typing

SETTING_TYPES = (bool, int, float, str, tuple, list, dict, type(None))


def _fail(msg):
    raise SystemExit(f"configurator: {msg}")


def _check(key, value, settings, annotations, source):
    if key not in settings:
        close = difflib.get_close_matches(key, settings, n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        _fail(f"unknown setting '{key}' (from {source}){hint}")
    if key in annotations:  # `int | None` accepts an int or None
        allowed = typing.get_args(annotations[key]) or (annotations[key],)
    elif settings[key] is None:
        return value
    else:
        allowed = (type(settings[key]),)
    for want in allowed:
        if type(value) is want or (want is type(None) and value is None):
            return value
        if want is float and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
    names = " or ".join("None" if t is type(None) else t.__name__ for t in allowed)
    _fail(f"setting '{key}' (from {source}) expects {names}, got {type(value).__name__} {value!r}")


def configure(config, argv=None):
    """Apply config files and --key=value overrides from argv (default sys.argv[1:]) to the dict
    `config` (a script's globals()), in order. Returns the dict of applied overrides."""
    argv = sys.argv[1:] if argv is None else argv
    settings = {k: v for k, v in config.items()
                if not k.startswith("_") and isinstance(v, SETTING_TYPES)}
    annotations = config.get("__annotations__", {})  # a script's `name: type = value` lines
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
            except Exception as err:  # the file runs, and fails on a line of its own
                lines = [f.lineno for f in traceback.extract_tb(err.__traceback__) if f.filename == arg]
                where = f", line {lines[-1]}" if lines else ""
                _fail(f"config file '{arg}'{where} failed: {type(err).__name__}: {err}")
            updates = {k: (v, f"config file {arg}") for k, v in scope.items()
                       if not k.startswith("_") and isinstance(v, SETTING_TYPES)}
        else:
            _fail(f"cannot read argument '{arg}': expected a config file (*.py) or --key=value")
        for key, (value, src) in updates.items():
            value = _check(key, value, settings, annotations, src)
            config[key] = value
            applied[key] = value
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
