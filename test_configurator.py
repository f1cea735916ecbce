"""configurator.py: overrides apply in order, typed; every rejection names the key."""
import runpy

import pytest

from configurator import configure
from conftest import run_script


def settings():
    return dict(learning_rate=3e-3, max_iters=100, compile=False, out_dir="out", resume_dir=None,
                shapes=[(1, 2)], _private=1)


def test_overrides_are_parsed_as_literals_and_applied_in_order(tmp_path):
    cfg = tmp_path / "small.py"
    cfg.write_text("import math\nmax_iters = 7\nlearning_rate = math.pi / 1000\n")
    s = settings()
    applied = configure(s, [str(cfg), "--max_iters=9", "--compile=True", "--shapes=[(3, 4)]"])
    assert s["max_iters"] == 9 and s["compile"] is True and s["shapes"] == [(3, 4)]
    assert abs(s["learning_rate"] - 0.0031415926) < 1e-9
    assert applied == {"max_iters": 9, "learning_rate": s["learning_rate"], "compile": True, "shapes": [(3, 4)]}


def test_an_int_is_accepted_for_a_float():
    s = settings()
    configure(s, ["--learning_rate=1"])
    assert s["learning_rate"] == 1.0 and isinstance(s["learning_rate"], float)


def test_a_none_default_takes_any_value():
    s = settings()
    configure(s, ["--resume_dir=out/pretrain"])
    assert s["resume_dir"] == "out/pretrain"
    s = settings()
    configure(s, ["--resume_dir=(1, 2)"])
    assert s["resume_dir"] == (1, 2)


def test_values_containing_equals_signs_are_kept_whole():
    s = settings()
    configure(s, ["--out_dir=runs/lr=3e-3,bs=8"])
    assert s["out_dir"] == "runs/lr=3e-3,bs=8"


@pytest.mark.parametrize("argv,message", [
    (["--max_iter=5"], r"unknown setting 'max_iter' .*did you mean max_iters"),
    (["--max_iters=0.5"], r"setting 'max_iters' .* expects int, got float 0.5"),
    (["--compile=1"], r"setting 'compile' .* expects bool, got int"),
    (["--_private=2"], r"unknown setting '_private'"),
    (["--max_iters"], r"'--max_iters' needs a value"),
    (["max_iters=3"], r"expected a config file \(\*.py\) or --key=value"),
    (["missing_config.py"], r"cannot read config file 'missing_config.py'"),
])
def test_bad_arguments_stop_with_a_message_naming_the_problem(argv, message):
    with pytest.raises(SystemExit, match=message):
        configure(settings(), argv)


def test_unknown_key_in_a_config_file_names_the_file(tmp_path):
    cfg = tmp_path / "typo.py"
    cfg.write_text("learnin_rate = 1e-3\n")
    with pytest.raises(SystemExit, match=r"unknown setting 'learnin_rate' \(from config file .*typo.py\).*learning_rate"):
        configure(settings(), [str(cfg)])


def test_annotated_none_default_rejects_a_value_of_another_type():
    def annotated():
        return dict(lr_decay_iters=None, top_p=None, __annotations__={"lr_decay_iters": int | None,
                                                                         "top_p": float | None})
    s = annotated()
    configure(s, ["--lr_decay_iters=500", "--top_p=1"])
    assert s["lr_decay_iters"] == 500 and s["top_p"] == 1.0 and isinstance(s["top_p"], float)
    configure(s, ["--lr_decay_iters=None"])
    assert s["lr_decay_iters"] is None
    for arg, message in [("--lr_decay_iters=abc", r"setting 'lr_decay_iters' .* expects int or None, got str 'abc'"),
                         ("--lr_decay_iters=True", r"setting 'lr_decay_iters' .* expects int or None, got bool"),
                         ("--top_p=high", r"setting 'top_p' .* expects float or None, got str")]:
        with pytest.raises(SystemExit, match=message):
            configure(annotated(), [arg])


@pytest.mark.parametrize("text,message", [
    ("max_iters = 7\nlearning_rate = 3e-3\nout_dir = 'out\n", r"'.*broken.py', line 3 is not valid Python: "),
    ("max_iters = 7\n  learning_rate = 3e-3\n", r"'.*broken.py', line 2 is not valid Python: unexpected indent"),
    ("max_iters = 7\nlearning_rate = 3e-3 / zero\n", r"'.*broken.py', line 2 failed: NameError: name 'zero'"),
    ("max_iters = 7\0\n", r"'.*broken.py' is not valid Python: .*null bytes"),
    ("max_iters = 7\nimport sys\nsys.exit(0)\n", r"'.*broken.py', line 3 calls sys.exit\(0\): a config file only"),
], ids=["syntax error", "indentation", "error when run", "NUL byte", "sys.exit"])
def test_a_config_file_that_does_not_run_is_one_line_naming_the_file_and_line(tmp_path, text, message):
    cfg = tmp_path / "broken.py"
    cfg.write_text(text)
    with pytest.raises(SystemExit, match=message) as err:
        configure(settings(), [str(cfg)])
    assert "\n" not in str(err.value.code)


def test_a_config_file_that_is_not_utf8_is_named(tmp_path):
    cfg = tmp_path / "latin1.py"
    cfg.write_bytes(b"out_dir = 'caf\xe9'\n")
    with pytest.raises(SystemExit, match=r"config file '.*latin1.py' is not UTF-8 text"):
        configure(settings(), [str(cfg)])


def test_a_string_setting_takes_the_text_of_a_value_that_reads_as_another_literal():
    s = dict(settings(), start="\n", encoding=None, __annotations__={"encoding": str | None})
    configure(s, ["--out_dir=2024", "--start=42", "--encoding=5", "--max_iters=3"])
    assert (s["out_dir"], s["start"], s["encoding"], s["max_iters"]) == ("2024", "42", "5", 3)
    configure(s, ["--encoding=None"])  # a literal of a type the setting takes stays that literal
    assert s["encoding"] is None


SCRIPT = '''"""A script; its docstring mentions lr=3e-3 # and a comment, not a setting."""
from dataclasses import dataclass


@dataclass
class Config:
    width: int = 8      # the model's width
    depth: int = 2


lr = 3e-3               # the learning rate,
                        # peak value
out_dir = 'out'
steps: int | None = None  # None: until stopped
globals().update(width=Config.width, depth=Config.depth)
'''


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_prints_every_setting_with_its_default_and_comment_and_exits_0(tmp_path, capsys, flag):
    path = tmp_path / "script.py"
    path.write_text(SCRIPT)
    config = runpy.run_path(str(path))
    with pytest.raises(SystemExit) as err:
        configure(config, ["--max_iters=oops", flag])  # help wins over anything else on the line
    assert err.value.code in (0, None)
    out = capsys.readouterr().out
    lines = [line.split() for line in out.splitlines()[2:]]
    assert [ln[0] for ln in lines] == ["lr", "out_dir", "steps", "width", "depth"], out
    assert "= 0.003  # the learning rate, peak value" in out and "= 'out'\n" in out
    assert "steps   = None  # None: until stopped" in out and "width   = 8  # the model's width" in out
    assert "Config" not in out and "dataclass" not in out


def test_help_of_train_py_lists_its_settings_and_the_models_with_their_comments():
    p = run_script("train.py", "--help")
    assert p.returncode == 0 and not p.stderr, p.stderr
    assert "  max_iters" in p.stdout and "= 400  # total optimizer steps" in p.stdout
    assert "= 'eda'  # eda | kda | gdn | gdn2 | transformer" in p.stdout  # model.GPTConfig's field
