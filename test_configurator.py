"""configurator.py: overrides apply in order, typed; every rejection names the key."""
import pytest

from configurator import configure


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
], ids=["syntax error", "indentation", "error when run", "NUL byte"])
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
