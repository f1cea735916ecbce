"""train.py and data/: short configurator-driven runs on CPU, each test named after what it proves.

train.py runs on a tiny model as a user runs it (`python train.py --key=value`): in the test's process
(conftest.run_script), or in a process of its own where the property needs one (a fault injected into the
interpreter, a kill, a crash, torchrun, memory), and for good_run, the run the others start from.
The default corpus (data/stdlib) is prepared once, by the first run that needs it, and then reused.
"""
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

from conftest import final_bindings, run_script
from data.prepare import HEADER_BYTES, TokenFileError, load_tokens, write_tokens
from data.synthetic import accuracy_counts, distinct, FILLER, NONE, evict, mqar, reassign, vocab_halves

ROOT = os.path.dirname(os.path.abspath(__file__))
# a 2-layer hybrid (one EDA layer, one attention layer) that takes a fraction of a second per step
TINY = ['--n_layer=2', '--attn_every=2', '--n_embd=32', '--ffn_hidden=64', '--block_size=32', '--batch_size=4',
        '--eval_iters=2', '--la_chunk_size=16', '--log_interval=1', '--warmup_iters=2', '--progress=False']


def train(out_dir, *args, check=True, timeout=300, prelude=None, process=False):
    """`python train.py <TINY> <args> --out_dir=<out_dir>` -> its CompletedProcess; in this process (run_script)
    unless process=True or a prelude: Python code run first in the run's own interpreter (a fault injected there),
    then train.py as if run directly. timeout: a process's."""
    cmd = [sys.executable, os.path.join(ROOT, 'train.py'), *TINY, f'--out_dir={out_dir}', *args]
    if prelude is None and not process:
        p = run_script(*cmd[1:])
    else:
        if prelude is not None:
            cmd[1:1] = ['-c', prelude + '\nimport runpy, sys\nsys.argv = sys.argv[1:]  # [train.py, settings...]\n'
                                        'runpy.run_path(sys.argv[0], run_name="__main__")\n']
        env = dict(os.environ, OMP_NUM_THREADS=os.environ.get('OMP_NUM_THREADS', '2'))
        p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env)
    if check and p.returncode != 0:
        raise AssertionError(f'train.py failed ({p.returncode}):\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}')
    return p


def records(out_dir):
    with open(os.path.join(out_dir, 'log.jsonl')) as f:
        return [json.loads(line) for line in f]


def step_losses(out_dir):
    return {r['step']: r['loss'] for r in records(out_dir) if 'loss' in r}


# ----------------------------------------------------------------------------------------------------
# Training


def test_loss_decreases_on_default_corpus(tmp_path):
    train(tmp_path, '--max_iters=40', '--eval_interval=40', '--learning_rate=3e-3')
    losses = step_losses(tmp_path)
    first, last = np.mean([losses[i] for i in range(3)]), np.mean([losses[i] for i in range(37, 40)])
    assert last < first - 1.0, (first, last)
    evals = [r for r in records(tmp_path) if r.get('eval')]
    assert evals[-1]['val_loss'] < evals[0]['val_loss'] - 1.0


def test_resume_gives_the_same_losses_as_an_uninterrupted_run(tmp_path):
    common = ['--eval_interval=3', '--lr_decay_iters=6', '--always_save_checkpoint=True']
    train(tmp_path / 'full', '--max_iters=6', *common)
    train(tmp_path / 'split', '--max_iters=3', *common)
    train(tmp_path / 'split', '--max_iters=6', '--init_from=resume', *common)
    full, split = step_losses(tmp_path / 'full'), step_losses(tmp_path / 'split')
    assert sorted(full) == sorted(split) == list(range(6))
    assert full == split  # bit-identical: same weights, optimizer state, learning rates and batches


@pytest.fixture(scope='module')
def crashed_run(tmp_path_factory):
    """A run that dies writing its step-4 checkpoint (its 2nd save), halfway through the temp file, after logging
    steps 0-3 and the step-4 evaluation: (its CompletedProcess, its out_dir); tests copy it."""
    out = tmp_path_factory.mktemp('crashed')
    return train(out, '--max_iters=4', '--eval_interval=2', '--debug_crash_on_save=2', check=False,
                 process=True), out  # (it dies by os._exit)


def test_interrupted_checkpoint_write_leaves_previous_checkpoint_loadable(tmp_path, crashed_run):
    p, run = crashed_run[0], copy_run(crashed_run[1], tmp_path / 'run')
    assert p.returncode == 3, p.stderr
    [tmp] = run.glob('ckpt.pt.tmp*')
    with pytest.raises(Exception):
        torch.load(tmp, weights_only=True)
    ckpt = torch.load(run / 'ckpt.pt', weights_only=True)
    assert ckpt['iter_num'] == 2
    train(run, '--max_iters=4', '--eval_interval=2', '--init_from=resume')  # and training goes on from it
    assert max(step_losses(run)) == 3


def test_nan_loss_stops_the_run_naming_the_step_and_keeps_last_good_checkpoint(tmp_path):
    p = train(tmp_path, '--max_iters=8', '--eval_interval=2', '--debug_nan_at=3', check=False)
    assert p.returncode != 0
    assert 'non-finite loss at step 3' in p.stderr
    ckpt = torch.load(tmp_path / 'ckpt.pt', weights_only=True)
    assert ckpt['iter_num'] == 2
    assert all(torch.isfinite(t).all() for t in ckpt['model'].values())
    assert max(step_losses(tmp_path)) == 2  # step 3 never logged: its update never happened


@pytest.fixture(scope='module')
def good_run(tmp_path_factory):
    """A finished 2-step run with its checkpoint at step 2; tests copy it before changing anything."""
    out = tmp_path_factory.mktemp('good')
    train(out, '--max_iters=2', '--eval_interval=2', process=True)  # as a user runs it
    return out


def copy_run(src, dst):
    shutil.copytree(src, dst)
    return dst


def test_non_finite_eval_loss_never_replaces_the_good_checkpoint_and_the_stop_message_is_true(tmp_path, good_run):
    # a fresh run: the step-1 weights give a NaN evaluation; nothing is saved and the message says so
    p = train(tmp_path / 'fresh', '--learning_rate=1e6', '--eval_interval=1', '--max_iters=4', check=False)
    assert p.returncode != 0 and 'non-finite loss at the evaluation of step 1' in p.stderr, p.stderr
    assert 'no checkpoint was written' in p.stderr and 'unchanged' not in p.stderr
    assert not os.path.exists(tmp_path / 'fresh' / 'ckpt.pt')
    # resuming a good checkpoint with a hopeless learning rate leaves that checkpoint as it was
    run = copy_run(good_run, tmp_path / 'run')
    before = torch.load(run / 'ckpt.pt', weights_only=True)
    p = train(run, '--init_from=resume', '--learning_rate=1e6', '--eval_interval=1', '--max_iters=6', check=False)
    assert p.returncode != 0 and 'non-finite loss' in p.stderr, p.stderr
    assert f'the last good checkpoint {run / "ckpt.pt"} (step 2) is unchanged' in p.stderr
    after = torch.load(run / 'ckpt.pt', weights_only=True)
    assert after['iter_num'] == 2 and math.isfinite(after['best_val_loss'])
    assert all(torch.equal(before['model'][k], after['model'][k]) for k in before['model'])


def test_scratch_run_refuses_to_replace_an_earlier_runs_checkpoint_unless_told_to(tmp_path, good_run):
    run = copy_run(good_run, tmp_path / 'run')
    ckpt, log = (run / 'ckpt.pt').read_bytes(), (run / 'log.jsonl').read_bytes()
    p = train(run, '--max_iters=1', check=False)
    assert p.returncode != 0 and '--init_from=resume' in p.stderr and '--overwrite=True' in p.stderr, p.stderr
    assert 'Traceback' not in p.stderr
    assert (run / 'ckpt.pt').read_bytes() == ckpt and (run / 'log.jsonl').read_bytes() == log
    # a run that saves no checkpoint may use the folder; the earlier log is kept under another name
    p = train(run, '--max_iters=1', '--save_ckpt=False')
    assert (run / 'ckpt.pt').read_bytes() == ckpt and (run / 'log.1.jsonl').read_bytes() == log
    assert sorted(step_losses(run)) == [0] and 'kept as' in p.stdout
    # --overwrite=True starts over
    train(run, '--max_iters=1', '--eval_interval=1', '--overwrite=True')
    assert torch.load(run / 'ckpt.pt', weights_only=True)['iter_num'] == 1


class Payload:
    """Unpickling this makes a folder: what a crafted ckpt.pt could do with a full unpickler."""
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return os.mkdir, (self.path,)


def test_checkpoint_with_a_pickle_payload_is_refused_without_running_it(tmp_path):
    os.makedirs(tmp_path / 'run')
    marker = tmp_path / 'payload_ran'
    torch.save({'model': Payload(str(marker)), 'model_args': {}}, tmp_path / 'run' / 'ckpt.pt')
    p = train(tmp_path / 'run', '--init_from=resume', check=False)
    s = run_script('sample.py', f'--out_dir={tmp_path / "run"}', '--device=cpu')
    for r in (p, s):
        assert r.returncode != 0 and 'other than tensors and plain values, so it is not loaded' in r.stderr, r.stderr
        assert str(tmp_path / 'run' / 'ckpt.pt') in r.stderr and 'Traceback' not in r.stderr
    assert not marker.exists()


TRAIN_KEYS = ('model', 'optimizer', 'model_args', 'iter_num', 'best_val_loss', 'rng', 'data_position')


def _set(d, key, value):
    d[key] = value


@pytest.mark.parametrize('change, message', [
    (lambda c: c['model_args'].update(n_embd=48), 'the weights do not fit its model_args: wte.weight is [256, 32] '
                                                  'in the file, model_args make [256, 48]'),
    (lambda c: c['model']['norm_f.weight'].__setitem__(0, float('nan')), 'the weight norm_f.weight holds NaN or inf'),
    (lambda c: _set(c['model'], 'extra.weight', torch.zeros(2)), "do not fit its model_args: unexpected weight 'extra."),
    (lambda c: _set(c, 'model_args', [1, 2]), "its field 'model_args' (list) is not a dict of GPTConfig fields"),
    (lambda c: _set(c['rng'], 'python', 'garbage'), "its field 'rng' (dict) is not the random-number states"),
    (lambda c: _set(c['rng'], 'numpy', ('MT19937', [1, 2], 0, 0, 0.0)), "its field 'rng' (dict) is not the random-n"),
    (lambda c: _set(c, 'iter_num', '5'), "its field 'iter_num' (str) is not a step count >= 0"),
    (lambda c: _set(c, 'data_position', {}), "its field 'data_position' (dict) is not a dict with the dataset's"),
    (lambda c: _set(c, 'encoding', 5), "its field 'encoding' (int) is not a tokenizer name"),
], ids=['shapes', 'nan', 'extra weight', 'model_args', 'python rng', 'numpy rng', 'iter_num', 'data_position',
        'encoding'])
def test_a_checkpoint_field_of_the_wrong_kind_is_named_before_any_model_is_built(tmp_path, good_run, monkeypatch,
                                                                                change, message):
    import model as M
    ckpt = torch.load(good_run / 'ckpt.pt', weights_only=True)
    change(ckpt)
    path = tmp_path / 'ckpt.pt'
    torch.save(ckpt, path)
    built, real = [], M.GPT.__init__

    def init(self, *a, **k):  # where each GPT is built: the meta device allocates nothing
        real(self, *a, **k)
        built.append(self.wte.weight.device.type)
    monkeypatch.setattr(M.GPT, '__init__', init)
    for load in (lambda: M.load_checkpoint(path, keys=TRAIN_KEYS), lambda: M.model_from_checkpoint(path, 'chunk')):
        with pytest.raises(M.CheckpointError) as err:
            load()
        assert str(err.value).startswith(f'{path}: ') and message in str(err.value), str(err.value)
    assert set(built) <= {'meta'}, built


def test_a_checkpoint_with_non_finite_weights_is_named_by_resume_and_sample(tmp_path, good_run):
    run = copy_run(good_run, tmp_path / 'run')
    ckpt = torch.load(run / 'ckpt.pt', weights_only=True)
    ckpt['model']['lm_head.weight'][3, 1] = float('inf')
    torch.save(ckpt, run / 'ckpt.pt')
    resume = train(run, '--init_from=resume', '--max_iters=4', check=False)
    for p in (resume, run_script('sample.py', f'--out_dir={run}', '--device=cpu')):
        assert p.returncode != 0 and p.stderr.strip().endswith(
            f'{run / "ckpt.pt"}: the weight lm_head.weight holds NaN or inf values: the model cannot be used'), p.stderr
        assert len(p.stderr.strip().splitlines()) == 1 and 'last good checkpoint' not in p.stderr


def test_resume_with_max_iters_below_the_checkpoint_step_is_a_clear_error(tmp_path, good_run):
    p = train(copy_run(good_run, tmp_path / 'run'), '--init_from=resume', '--max_iters=1', check=False)
    assert p.returncode != 0 and 'max_iters=1 is below the step 2' in p.stderr, p.stderr
    assert '--max_iters=2 or more' in p.stderr and 'Traceback' not in p.stderr


def test_truncated_checkpoint_is_a_clear_error_naming_the_file(tmp_path, good_run):
    run = copy_run(good_run, tmp_path / 'run')
    with open(run / 'ckpt.pt', 'r+b') as f:
        f.truncate(os.path.getsize(run / 'ckpt.pt') // 2)
    p = train(run, '--init_from=resume', '--max_iters=4', check=False)
    s = run_script('sample.py', f'--out_dir={run}', '--device=cpu')
    for r in (p, s):
        assert r.returncode != 0 and f'cannot read the checkpoint {run / "ckpt.pt"} (truncated' in r.stderr, r.stderr
        assert 'Traceback' not in r.stderr


def test_out_dir_that_cannot_be_created_fails_before_the_model_is_built(tmp_path):
    (tmp_path / 'a_file').write_text('not a folder')
    p = train(tmp_path / 'a_file' / 'out', '--max_iters=1', check=False)
    assert p.returncode != 0 and f"cannot create out_dir '{tmp_path / 'a_file' / 'out'}'" in p.stderr, p.stderr
    assert 'model:' not in p.stdout and 'Traceback' not in p.stderr


# torch.save fails on the 2nd checkpoint as on a full disk: half a file written, then torch's own error (no
# errno), and 4 KiB left on the disk
FULL_DISK = '''
import shutil, types, torch
real, calls = torch.save, []
def save(obj, f, *a, **k):
    calls.append(f)
    if len(calls) < 2:
        return real(obj, f, *a, **k)
    f.write(b"half a checkpoint")
    shutil.disk_usage = lambda path: types.SimpleNamespace(total=2**30, used=2**30 - 4096, free=4096)
    raise RuntimeError("[enforce fail at inline_container.cc:672] . PytorchStreamWriter failed writing file "
                       "data/0: file write failed")
torch.save = save
'''


def test_full_disk_while_saving_says_so_removes_the_temp_file_and_keeps_the_last_checkpoint(tmp_path):
    p = train(tmp_path, '--max_iters=4', '--eval_interval=2', check=False, prelude=FULL_DISK)
    assert p.returncode != 0 and 'could not write the checkpoint' in p.stderr, p.stderr[-3000:]
    assert 'the disk is full (0.0 MiB free, the checkpoint takes' in p.stderr and 'Traceback' not in p.stderr
    assert 'enforce fail' not in p.stderr
    assert f'the last good checkpoint {tmp_path / "ckpt.pt"} (step 2) is unchanged' in p.stderr
    assert not list(tmp_path.glob('ckpt.pt.tmp*'))
    assert torch.load(tmp_path / 'ckpt.pt', weights_only=True)['iter_num'] == 2


def test_resuming_into_another_runs_out_dir_refuses_to_replace_it_unless_told_to(tmp_path, good_run):
    a, b = copy_run(good_run, tmp_path / 'a'), copy_run(good_run, tmp_path / 'b')  # b: another run
    before = {f: (b / f).read_bytes() for f in os.listdir(b) if f != 'lock'}  # (the lock names its last holder)
    p = train(b, '--init_from=resume', f'--resume_dir={a}', '--max_iters=4', check=False)
    assert p.returncode != 0 and f'{b / "ckpt.pt"} holds an earlier run' in p.stderr, p.stderr
    assert f'--resume_dir={b}' in p.stderr and '--overwrite=True' in p.stderr and 'Traceback' not in p.stderr
    assert {f: (b / f).read_bytes() for f in os.listdir(b) if f != 'lock'} == before


def test_resuming_does_not_rewrite_the_checkpoint_before_a_step_is_trained(tmp_path, good_run):
    run = copy_run(good_run, tmp_path / 'run')
    before = (run / 'ckpt.pt').read_bytes()
    train(run, '--init_from=resume', '--max_iters=2', '--eval_interval=2', '--learning_rate=0.5')
    assert [r['step'] for r in records(run) if r.get('eval')] == [0, 2]  # it evaluated at step 2 again
    assert (run / 'ckpt.pt').read_bytes() == before  # and left step 2's weights with the config that made them


def test_eval_only_scores_the_checkpoint_and_writes_nothing(tmp_path, good_run):
    run = copy_run(good_run, tmp_path / 'run')
    before = {f: (run / f).read_bytes() for f in os.listdir(run)}
    p = train(run, '--eval_only=True', check=False)  # a checkpoint to score is named, or nothing is scored
    assert p.returncode != 0 and '--init_from=resume' in p.stderr and 'Traceback' not in p.stderr, p.stderr
    assert 'eval step' not in p.stdout
    p = train(run, '--eval_only=True', '--init_from=resume')
    final = [r for r in records(run) if r.get('eval')][-1]  # the run's own evaluation of the same weights
    assert f'eval step 2: train loss {final["train_loss"]:.4f} | val loss {final["val_loss"]:.4f}' in p.stdout
    assert {f: (run / f).read_bytes() for f in os.listdir(run)} == before


# out_dir read-only: creating, writing, renaming or removing anything in RO fails with EACCES (as for a
# user without write permission; the tests may run as root, whom a chmod does not stop)
READ_ONLY = '''
import builtins, errno, os, torch
def _inside(p):
    try:
        p = os.path.abspath(os.fspath(p))
    except TypeError:  # a file descriptor
        return False
    return p == RO or p.startswith(RO + os.sep)
def _deny(p):
    raise PermissionError(errno.EACCES, "Permission denied", os.fspath(p))
_open, _os_open, _save = builtins.open, os.open, torch.save
def _open_ro(file, mode="r", *a, **k):
    if _inside(file) and set(mode) & set("wax+"):
        _deny(file)
    return _open(file, mode, *a, **k)
def _os_open_ro(path, flags, *a, **k):
    if _inside(path) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
        _deny(path)
    return _os_open(path, flags, *a, **k)
def _save_ro(obj, f, *a, **k):
    if _inside(f):
        _deny(f)
    return _save(obj, f, *a, **k)
def _change_ro(real):
    def change(p, *a, **k):
        if _inside(p):
            _deny(p)
        return real(p, *a, **k)
    return change
builtins.open, os.open, torch.save = _open_ro, _os_open_ro, _save_ro
for _name in ("replace", "rename", "remove", "unlink", "mkdir", "rmdir"):
    setattr(os, _name, _change_ro(getattr(os, _name)))
'''


def test_a_read_only_out_dir_is_one_line_naming_it_scratch_or_resume(tmp_path, good_run):
    os.makedirs(tmp_path / 'empty')
    for run, args in ((tmp_path / 'empty', ()), (copy_run(good_run, tmp_path / 'run'), ('--init_from=resume',))):
        before = {f: (run / f).read_bytes() for f in os.listdir(run)}
        p = train(run, *args, '--max_iters=4', check=False, prelude=f'RO = {str(run)!r}\n' + READ_ONLY)
        assert p.returncode != 0 and f"cannot write in out_dir '{run}': Permission denied" in p.stderr, p.stderr
        assert 'Traceback' not in p.stderr and 'model:' not in p.stdout  # before anything is built
        assert {f: (run / f).read_bytes() for f in os.listdir(run)} == before


# Ctrl-C (a real SIGINT, to itself) while the 2nd checkpoint is being written
CTRL_C_WHILE_SAVING = '''
import os, signal, torch
real, calls = torch.save, []
def save(obj, f, *a, **k):
    calls.append(f)
    if len(calls) == 2:
        os.kill(os.getpid(), signal.SIGINT)
    return real(obj, f, *a, **k)
torch.save = save
'''


def test_ctrl_c_finishes_the_checkpoint_being_written_then_stops_with_one_line_naming_the_step(tmp_path):
    p = train(tmp_path, '--max_iters=8', '--eval_interval=2', check=False, prelude=CTRL_C_WHILE_SAVING)
    assert p.returncode == 130, p.stderr  # the shell's code for a SIGINT
    assert p.stderr.strip() == (f'train: interrupted (Ctrl-C) at step 4; the last good checkpoint '
                                f'{tmp_path / "ckpt.pt"} (step 4) is unchanged'), p.stderr
    assert torch.load(tmp_path / 'ckpt.pt', weights_only=True)['iter_num'] == 4
    assert not list(tmp_path.glob('ckpt.pt.tmp*')) and max(step_losses(tmp_path)) == 3


def test_sigterm_finishes_the_checkpoint_being_written_then_stops_as_ctrl_c_does(tmp_path):
    p = train(tmp_path, '--max_iters=8', '--eval_interval=2', check=False,
              prelude=CTRL_C_WHILE_SAVING.replace('SIGINT', 'SIGTERM'))  # what a scheduler sends
    assert p.returncode == 143, p.stderr  # the shell's code for a SIGTERM
    assert p.stderr.strip() == (f'train: terminated (SIGTERM) at step 4; the last good checkpoint '
                                f'{tmp_path / "ckpt.pt"} (step 4) is unchanged'), p.stderr
    assert torch.load(tmp_path / 'ckpt.pt', weights_only=True)['iter_num'] == 4
    assert not list(tmp_path.glob('ckpt.pt.tmp*')) and max(step_losses(tmp_path)) == 3


def test_resumed_run_logs_each_step_once(tmp_path, crashed_run):
    p, run = crashed_run[0], copy_run(crashed_run[1], tmp_path / 'run')
    assert p.returncode == 3 and max(step_losses(run)) == 3
    ckpt = torch.load(run / 'ckpt.pt', weights_only=True)  # as older checkpoints were: grad_checkpoint
    ckpt['model_args']['grad_checkpoint'] = False           # among the model's fields (no longer one)
    torch.save(ckpt, run / 'ckpt.pt')
    train(run, '--max_iters=4', '--eval_interval=2', '--init_from=resume')  # from step 2
    keys = [(r['step'], bool(r.get('eval')), bool(r.get('start'))) for r in records(run)]
    assert sorted(keys) == sorted(set(keys)), keys  # nothing logged twice (each start writes its first record)
    assert sorted(step_losses(run)) == [0, 1, 2, 3]
    assert [r['step'] for r in records(run) if r.get('eval')] == [0, 2, 4]


def test_synthetic_task_run_reports_accuracy(tmp_path):
    train(tmp_path, '--dataset=mqar', '--vocab_size=64', '--block_size=64', '--num_kv_pairs=4', '--max_iters=2',
          '--eval_interval=2')
    evals = [r for r in records(tmp_path) if r.get('eval')]
    assert 0.0 <= evals[-1]['val_acc'] <= 1.0 and 0.0 <= evals[-1]['train_acc'] <= 1.0


def test_midtraining_resumes_with_longer_block_size_and_another_dataset(tmp_path, good_run):
    ds = tiny_dataset(tmp_path / 'long_docs')
    copy_run(good_run, tmp_path / 'pre')  # 2 steps of TINY, its checkpoint at step 2
    before = (tmp_path / 'pre' / 'ckpt.pt').read_bytes()
    p = train(tmp_path / 'mid', '--init_from=resume', f'--resume_dir={tmp_path / "pre"}', f'--dataset={ds}',
              '--block_size=64', '--max_iters=4', '--eval_interval=2', '--lr_schedule_start=2')
    assert 'new stage from step 2' in p.stdout and 'block_size 32 -> 64' in p.stdout
    assert sorted(step_losses(tmp_path / 'mid')) == [2, 3]
    assert torch.load(tmp_path / 'mid' / 'ckpt.pt', weights_only=True)['data_position'] == {
        'dataset': str(ds), 'block_size': 64, 'iter': 4}
    assert (tmp_path / 'pre' / 'ckpt.pt').read_bytes() == before  # the pretraining run is left as it was


@pytest.fixture(scope='module')
def single_process_run(tmp_path_factory):
    out = tmp_path_factory.mktemp('one')
    train(out, '--max_iters=3', '--eval_interval=3', '--gradient_accumulation_steps=2')
    return out


@pytest.mark.parametrize('parallel', ['ddp', 'fsdp'])
def test_torchrun_ddp_and_fsdp_match_single_process_for_the_same_global_batch(parallel, single_process_run, tmp_path):
    """2 CPU ranks (gloo) with 1 micro-step each = 1 process with 2 micro-steps: same batches, same losses;
    the checkpoint written by the 2-rank run resumes in a single process."""
    common = ['--max_iters=3', '--eval_interval=3', '--gradient_accumulation_steps=2']
    cmd = [sys.executable, '-m', 'torch.distributed.run', '--standalone', '--nproc_per_node=2',
           os.path.join(ROOT, 'train.py'), *TINY, f'--out_dir={tmp_path}', *common, f'--parallel={parallel}']
    env = dict(os.environ, OMP_NUM_THREADS='1')
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]  # stdout: how far the ranks got
    one, two = step_losses(single_process_run), step_losses(tmp_path)
    assert sorted(one) == sorted(two) == [0, 1, 2]
    for step in one:  # the logged loss is the global batch's mean; float32 sums in another order
        assert math.isclose(one[step], two[step], rel_tol=1e-5), (step, one[step], two[step])
    evals = [[r for r in records(d) if r.get('eval')][-1] for d in (single_process_run, tmp_path)]
    assert math.isclose(evals[0]['val_loss'], evals[1]['val_loss'], rel_tol=1e-5), evals
    train(tmp_path, '--max_iters=4', '--eval_interval=3', '--gradient_accumulation_steps=2', '--init_from=resume')
    assert max(step_losses(tmp_path)) == 3


# ----------------------------------------------------------------------------------------------------
# Data files


def tiny_dataset(path, vocab=256):
    os.makedirs(path, exist_ok=True)
    rng = np.random.default_rng(0)
    for split, n in (('train', 5000), ('val', 1000)):
        write_tokens(os.path.join(path, f'{split}.bin'), [rng.integers(0, vocab, n)], vocab)
    return path


def test_missing_data_file_names_the_file_and_the_rebuild_command(tmp_path):
    ds = tiny_dataset(tmp_path / 'ds')
    os.remove(ds / 'val.bin')
    p = train(tmp_path / 'out', f'--dataset={ds}', '--max_iters=1', check=False)
    assert p.returncode != 0
    assert f'token file {ds / "val.bin"} is missing' in p.stderr
    assert 'rebuild it with: python data/prepare.py' in p.stderr


def test_truncated_data_file_names_the_file_and_the_rebuild_command(tmp_path):
    ds = tiny_dataset(tmp_path / 'ds')
    with open(ds / 'train.bin', 'r+b') as f:
        f.truncate(1000)
    p = train(tmp_path / 'out', f'--dataset={ds}', '--max_iters=1', check=False)
    assert p.returncode != 0
    assert f'token file {ds / "train.bin"} is truncated' in p.stderr
    assert 'rebuild it with: python data/prepare.py' in p.stderr


def test_corrupt_or_mismatched_token_files_are_rejected(tmp_path):
    ds = tiny_dataset(tmp_path / 'ds')
    assert len(load_tokens(str(ds / 'train.bin'), vocab_size=256)[0]) == 5000
    with pytest.raises(TokenFileError, match='vocab size 256, expected 50257'):
        load_tokens(str(ds / 'train.bin'), vocab_size=50257)
    with open(ds / 'train.bin', 'r+b') as f:
        f.write(b'garbage!')
    with pytest.raises(TokenFileError, match=r'train.bin is not a nanoEDA token file.*rebuild it with'):
        load_tokens(str(ds / 'train.bin'))
    with open(ds / 'val.bin', 'ab') as f:
        f.write(b'\0\0\0')
    with pytest.raises(TokenFileError, match='longer than its header says'):
        load_tokens(str(ds / 'val.bin'))
    # the stdlib corpus names its own command
    with pytest.raises(TokenFileError, match='rebuild it with: python data/prepare.py stdlib'):
        load_tokens(str(tmp_path / 'stdlib' / 'train.bin'))


def test_token_ids_outside_the_header_vocab_are_rejected(tmp_path):
    ds = tiny_dataset(tmp_path / 'ds', vocab=300)  # uint16 tokens: room for ids >= 300
    with open(ds / 'train.bin', 'r+b') as f:  # one id past the vocab, the header left as it is
        f.seek(HEADER_BYTES + 2 * 1234)
        f.write(np.array([1000], np.uint16).tobytes())
    with pytest.raises(TokenFileError, match=r'train.bin holds token id 1000, outside its header.s vocab size 300'):
        load_tokens(str(ds / 'train.bin'))
    assert len(load_tokens(str(ds / 'val.bin'), vocab_size=300)[0]) == 1000  # in-vocab files still load


def offline_env(tmp_path):
    """The environment of a machine without network: no tiktoken files cached, every download refused at once."""
    os.makedirs(tmp_path / 'empty_cache', exist_ok=True)
    proxy = 'http://127.0.0.1:9'  # the discard port: nothing listens, a connection fails at once
    return dict(os.environ, TIKTOKEN_CACHE_DIR=str(tmp_path / 'empty_cache'), HTTP_PROXY=proxy, HTTPS_PROXY=proxy,
                http_proxy=proxy, https_proxy=proxy, HF_HUB_OFFLINE='1', HF_DATASETS_OFFLINE='1')


def test_prepare_local_text_files_as_bytes_by_default_and_offline(tmp_path):
    src = tmp_path / 'texts'
    os.makedirs(src / 'sub')
    docs = {f'doc{i}.txt': f'document {i}: ' + 'the quick brown fox. ' * (i + 1) for i in range(20)}
    for name, text in docs.items():
        (src / name).write_text(text)
    (src / 'sub' / 'notes.md').write_text('# héllo\n')  # folders are walked; utf-8 is kept byte for byte
    # the user's-guide command, with --out for --name: no --encoding, and no network
    p = subprocess.run([sys.executable, 'data/prepare.py', 'text', f'--input={src}/', f'--out={tmp_path / "ds"}',
                        '--num_proc=1'], cwd=ROOT, capture_output=True, text=True, timeout=120,
                       env=offline_env(tmp_path))
    assert p.returncode == 0, p.stderr[-3000:]
    train_toks, val_toks = (load_tokens(str(tmp_path / 'ds' / f'{s}.bin'), vocab_size=256)[0] for s in ('train', 'val'))
    # byte 0 ends each document; so few files: each file's head is in train and its tail in val, in file order
    heads, tails = (bytes(t).split(b'\0')[:-1] for t in (train_toks, val_toks))
    assert sorted((h + t).decode() for h, t in zip(heads, tails)) == sorted([*docs.values(), '# héllo\n'])
    assert len(val_toks) > 0
    meta = json.loads((tmp_path / 'ds' / 'meta.json').read_text())
    assert meta['command'].startswith('python data/prepare.py text') and meta['vocab_size'] == 256
    train(tmp_path / 'out', f'--dataset={tmp_path / "ds"}', '--max_iters=1', '--block_size=16')


def test_a_binary_file_given_as_text_is_one_line_naming_it(tmp_path):
    (tmp_path / 'good.txt').write_text('hello world\n' * 20)
    (tmp_path / 'image.txt').write_bytes(bytes(range(256)) * 4)  # binary bytes under a .txt name
    (tmp_path / 'latin1.txt').write_bytes('café\n'.encode('latin-1'))
    for bad, why in (('image.txt', 'a NUL byte at byte 0'),
                     ('latin1.txt', 'not UTF-8 text: invalid continuation byte at byte 3')):
        p = subprocess.run([sys.executable, 'data/prepare.py', 'text', f'--input={tmp_path / "good.txt"}',
                            f'--input={tmp_path / bad}', f'--out={tmp_path / "ds"}', '--encoding=bytes'],
                           cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert p.returncode != 0 and p.stderr.strip().startswith(f'prepare: {tmp_path / bad}: {why}'), p.stderr
        assert len(p.stderr.strip().splitlines()) == 1 and not os.path.exists(tmp_path / 'ds')


def test_prepare_local_text_files_with_tiktoken(tmp_path):
    import tiktoken
    try:
        enc = tiktoken.get_encoding('gpt2')
    except Exception as err:
        pytest.skip(f'the gpt2 encoding is not cached locally and cannot be downloaded ({type(err).__name__})')
    (tmp_path / 'a.txt').write_text('hello world, ' * 50)
    (tmp_path / 'b.txt').write_text('goodbye moon. ' * 50)
    p = subprocess.run([sys.executable, 'data/prepare.py', 'text', f'--input={tmp_path}/*.txt',
                        f'--out={tmp_path / "ds"}', '--encoding=gpt2', '--num_proc=1'],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-3000:]
    toks = np.concatenate([load_tokens(str(tmp_path / 'ds' / f'{s}.bin'), vocab_size=enc.n_vocab)[0] for s in ('train', 'val')])
    assert (toks == enc.eot_token).sum() == 2


def test_tiktoken_failure_is_a_clear_message(tmp_path):
    (tmp_path / 'a.txt').write_text('hello')
    p = subprocess.run([sys.executable, 'data/prepare.py', 'text', f'--input={tmp_path / "a.txt"}',
                        f'--out={tmp_path / "ds"}', '--encoding=no_such_encoding'],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode != 0
    assert "could not load the encoding 'no_such_encoding'" in p.stderr and '--encoding=bytes' in p.stderr


def test_hub_corpus_failure_is_a_clear_message(tmp_path):
    env = dict(os.environ, HF_HUB_OFFLINE='1')  # offline, as here: fail at once instead of retrying
    p = subprocess.run([sys.executable, 'data/prepare.py', 'fineweb_edu', f'--out={tmp_path / "ds"}'],
                       cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode != 0
    assert 'could not load HuggingFaceFW/fineweb-edu' in p.stderr and 'python data/prepare.py text' in p.stderr


def test_ci_installs_exactly_the_readme_install_steps_and_they_include_pytest():
    def pip_installs(lines):  # 'pip install X' commands, comments and pip's own options dropped
        return [' '.join(w for w in line.split('#')[0].replace('python -m pip', 'pip').split() if w != '-q')
                for line in lines if 'pip install' in line and '--upgrade pip' not in line]
    readme = open(os.path.join(ROOT, 'README.md')).read()
    install = readme.split('## Install', 1)[1].split('```sh', 1)[1].split('```', 1)[0]
    ci = open(os.path.join(ROOT, '.ci', 'run')).read()
    assert pip_installs(install.splitlines()) == pip_installs(ci.splitlines())
    assert 'pip install pytest pytest-xdist' in pip_installs(install.splitlines())  # what the Test section runs
    test = 'python -m pytest -q -rs -n auto'
    assert test in readme.split('## Test', 1)[1] and ci.rstrip().endswith(test)


# ----------------------------------------------------------------------------------------------------
# Synthetic tasks: what the docstrings promise


def test_mqar_every_query_is_answerable_with_its_context_value():
    rng = np.random.default_rng(0)
    x, y = mqar(rng, batch_size=64, seq_len=128, vocab_size=100, num_kv_pairs=12)
    (klo, khi), (vlo, vhi) = vocab_halves(100)
    gaps = []
    for b in range(64):
        context = final_bindings(x[b])
        assert len(context) == 12 and all(klo <= k < khi and vlo <= v < vhi for k, v in context.items())
        answers = np.flatnonzero(y[b] != -1)
        assert len(answers) == 12  # every key is queried once, after the context
        assert all(pos >= 24 and context[int(x[b, pos])] == y[b, pos] for pos in answers)
        gaps += list(answers - 24)
    assert np.median(gaps) < (128 - 24) / 4  # power-law placement: short gaps dominate


def test_reassign_answers_are_final_bindings_reassigned_new_value_moved_old_key_none():
    rng = np.random.default_rng(1)
    x, y = reassign(rng, batch_size=64, seq_len=160, vocab_size=128, num_kv_pairs=8, num_updates=8)
    n_reassigned = n_moved = 0
    for b in range(64):
        stream = []
        for i in range(0, 160, 2):
            if FILLER in (x[b, i], x[b, i + 1]):
                break
            stream.append((int(x[b, i]), int(x[b, i + 1])))
        final = final_bindings(x[b])
        answers = {int(x[b, p]): int(y[b, p]) for p in np.flatnonzero(y[b] != -1)}
        assert answers == final  # every key of the stream is queried and answers its final binding
        seen = {}
        for k, v in stream:
            if k in seen and v != NONE:        # a reassignment: the newest value wins
                n_reassigned += 1
                assert v != seen[k]
            if v == NONE:                      # a move's unbinding: the old address answers nothing
                n_moved += 1
                assert answers[k] == NONE
            seen[k] = v
        for k, v in final.items():  # answers are the last write of each key
            assert v == [w for kk, w in stream if kk == k][-1]
    assert n_reassigned > 50 and n_moved > 50


def test_evict_old_owner_reads_none_new_owner_reads_the_value_and_no_none_is_written():
    rng = np.random.default_rng(3)
    kv, updates = 6, 8
    x, y = evict(rng, batch_size=64, seq_len=4 * (kv + updates) + 8, vocab_size=128, num_kv_pairs=kv,
                 num_updates=updates)
    n_evicted = 0
    for b in range(64):
        stream = x[b, :2 * (kv + updates)]
        assert NONE not in stream and FILLER not in stream    # the removal is implied, never written
        owner, answer = {}, {}                                # replayed here, independently of final_bindings
        for k, v in stream.reshape(-1, 2).tolist():
            if v in owner:
                answer[owner[v]] = NONE
                n_evicted += 1
            owner[v], answer[k] = k, v
        assert len(answer) == kv + updates                    # every update brings a fresh key
        queries = {int(x[b, p]): int(y[b, p]) for p in np.flatnonzero(y[b] != -1)}
        assert queries == answer                              # every key asked once, with its final binding
        assert final_bindings(x[b], unique_values=True) == answer
    assert n_evicted == 64 * updates


def test_accuracy_counts_split_none_answers_from_values():
    """A model answering NONE everywhere scores the floor: every NONE answer right, no value right; one
    answering every target scores 1 on both."""
    _, y = evict(np.random.default_rng(4), batch_size=8, seq_len=64, vocab_size=64, num_kv_pairs=4, num_updates=6)
    y = torch.from_numpy(y)
    always_none = torch.zeros(*y.shape, 64)  # logits at every position, as GPT.forward gives them
    always_none[..., NONE] = 1.0
    correct, total, correct_none, n_none = (int(c) for c in accuracy_counts(always_none, y))
    assert total == 8 * 10 and n_none == 8 * 6 and correct == correct_none == n_none
    oracle = torch.nn.functional.one_hot(y.clamp(min=0), 64).float()
    assert [int(c) for c in accuracy_counts(oracle, y)] == [80, 80, 48, 48]


def test_reassign_move_frac_one_only_moves_and_keeps_the_live_count():
    rng = np.random.default_rng(4)
    kv, updates = 8, 8
    x, y = reassign(rng, 32, 160, 128, kv, updates, move_frac=1.0)
    for b in range(32):
        pairs = x[b, :2 * (kv + 2 * updates)].reshape(-1, 2)
        assert (pairs[kv::2, 1] == NONE).all() and (pairs[kv + 1::2, 1] != NONE).all()  # unbind, then rebind
        final = final_bindings(x[b])
        assert len(final) == kv + updates                                     # keys ever written
        assert sum(v != NONE for v in final.values()) == kv                   # live bindings
    x0, _ = reassign(np.random.default_rng(4), 32, 160, 128, kv, updates, move_frac=0.0)
    assert not (x0[:, :2 * (kv + updates)] == NONE).any()                     # no moves at all
    with pytest.raises(ValueError, match="move_frac"):
        reassign(rng, 1, 160, 128, kv, updates, move_frac=1.5)


def test_synthetic_task_that_does_not_fit_block_size_is_a_clear_error(tmp_path):
    p = train(tmp_path, '--dataset=evict', '--num_kv_pairs=16', '--num_updates=16', '--block_size=64',
              '--max_iters=1', check=False)
    assert p.returncode != 0 and 'evict: seq_len=64 < 128: the stream takes 64 tokens and the queries 64' in p.stderr
    assert 'Traceback' not in p.stderr


def test_distinct_rows_hold_distinct_numbers_in_range_sparse_and_dense():
    rng = np.random.default_rng(5)
    for lo, hi, n in ((2, 4000, 40), (10, 30, 20), (0, 8, 8)):   # redraw-repeats branch, permutation branch
        d = distinct(rng, lo, hi, 200, n)
        assert d.shape == (200, n) and d.min() >= lo and d.max() < hi
        assert all(len(set(row)) == n for row in d.tolist())
    first = distinct(rng, 0, 8, 4000, 8)[:, 0]                    # the order within a row is random too
    assert np.bincount(first, minlength=8).min() > 350


def test_synthetic_batches_are_a_function_of_the_seed():
    a = reassign(np.random.default_rng([7, 1]), 4, 96, 64, 6, 6)
    b = reassign(np.random.default_rng([7, 1]), 4, 96, 64, 6, 6)
    c = reassign(np.random.default_rng([7, 2]), 4, 96, 64, 6, 6)
    assert all((u == v).all() for u, v in zip(a, b)) and not (a[0] == c[0]).all()


# ----------------------------------------------------------------------------------------------------
# Configurator and dry run


def test_configurator_rejects_unknown_key_with_close_match(tmp_path):
    p = train(tmp_path, '--n_layr=2', check=False)
    assert p.returncode != 0 and "unknown setting 'n_layr'" in p.stderr and 'did you mean n_layer' in p.stderr


def test_configurator_rejects_wrong_type(tmp_path):
    p = train(tmp_path, '--max_iters=lots', check=False)
    assert p.returncode != 0 and "setting 'max_iters'" in p.stderr and 'expects int, got str' in p.stderr


def test_configurator_rejects_unknown_key_in_config_file(tmp_path):
    cfg = tmp_path / 'bad.py'
    cfg.write_text('learning_rat = 1e-3\n')
    p = train(tmp_path, str(cfg), check=False)
    assert p.returncode != 0 and "unknown setting 'learning_rat'" in p.stderr and 'learning_rate' in p.stderr


def test_none_default_settings_reject_a_value_of_the_wrong_type(tmp_path):
    for arg, key in (('--lr_decay_iters=abc', 'lr_decay_iters'), ('--vocab_size=abc', 'vocab_size')):
        p = train(tmp_path, arg, '--max_iters=1', check=False)
        assert p.returncode != 0 and f"setting '{key}'" in p.stderr and 'expects int or None, got str' in p.stderr, p.stderr
        assert 'Traceback' not in p.stderr


CONFIGS = sorted(f for f in os.listdir(os.path.join(ROOT, 'config')) if f.endswith('.py'))


@pytest.mark.parametrize('config', CONFIGS)
def test_every_config_file_dry_runs_and_ends_with_the_params_line(config):
    p = run_script('train.py', os.path.join('config', config), '--dry_run=True')  # the meta device: no weights
    assert p.returncode == 0, p.stderr[-3000:]
    last = p.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r'params total=\d+ active=\d+', last), last


def test_attn_every_above_n_layer_notes_that_no_layer_is_full_attention():
    def dry(*args):
        p = run_script('train.py', '--dry_run=True', *args)
        assert p.returncode == 0, p.stderr[-3000:]
        return p.stdout
    # config/mqar.py means it (attn_every=100: pure linear attention), and still runs
    assert 'note: attn_every=100 > n_layer=2: no full-attention layer, every layer is eda' in dry('config/mqar.py')
    assert 'no full-attention layer' not in dry('--n_layer=4', '--attn_every=4')


@pytest.mark.parametrize('args,message', [
    (('--mixer=foo',), "unknown mixer 'foo'"),
    (('--dtype=float64',), "dtype must be 'auto'"),
    (('--batch_size=0',), 'batch_size must be >= 1'),
    (('--device=tpu',), "device must be 'auto', 'cpu'"),
    (('--la_n_head=2', '--la_n_v_head=3'), 'must be a multiple of la_n_head=2'),
])
def test_bad_settings_stop_before_any_work_with_a_message_naming_them(tmp_path, args, message):
    p = train(tmp_path, *args, check=False)
    assert p.returncode != 0 and message in p.stderr, p.stderr
    assert 'Traceback' not in p.stderr


def test_numeric_settings_no_run_can_use_are_named_one_line_each_before_anything_is_built(tmp_path):
    bad = dict(learning_rate='-1', min_lr='1e999', weight_decay='-0.1', grad_clip='-1', beta1='1.0', beta2='-0.5',
               warmup_iters='-1', lr_schedule_start='-1', lr_decay_iters='-1', seed='-1', init_from='resum')
    p = train(tmp_path / 'out', *(f'--{k}={v}' for k, v in bad.items()), check=False)
    lines = p.stderr.strip().splitlines()
    assert p.returncode != 0 and [line.split()[:2] for line in lines] == [['train:', k] for k in bad], p.stderr
    assert not os.path.exists(tmp_path / 'out')  # nothing made


def test_trains_model_settings_are_gptconfigs_fields_at_its_defaults():
    """One source of the model defaults: train.py's settings are every GPTConfig field at GPTConfig's default (the
    vocab the dataset's: 256 bytes), so the toy model plain `python train.py` trains is GPTConfig(), the model
    `sample.py --init_from=scratch` builds (the same parameter count)."""
    import dataclasses
    from model import GPT, GPTConfig
    p = run_script('train.py', '--dry_run=True')
    assert p.returncode == 0, p.stderr
    printed = dict(re.findall(r'^  (\w+) = (.*)$', p.stdout, re.M))
    for f in dataclasses.fields(GPTConfig):
        assert printed.get(f.name) == repr(f.default), (f.name, printed.get(f.name), f.default)
    assert int(re.search(r'params total=(\d+)', p.stdout).group(1)) == GPT(GPTConfig()).param_summary()['total']



CTRL_C_WHILE_BUILDING = '''
import os, signal, model
built = model.GPT.__init__
def init(self, *a, **k):
    built(self, *a, **k)
    os.kill(os.getpid(), signal.SIGINT)
model.GPT.__init__ = init
'''


def test_ctrl_c_before_the_first_step_is_one_line_and_exit_130(tmp_path):
    p = train(tmp_path, '--max_iters=2', check=False, prelude=CTRL_C_WHILE_BUILDING)
    assert p.returncode == 130, p.stderr
    assert p.stderr.strip() == 'train: interrupted (Ctrl-C) before the first step; no checkpoint written', p.stderr


def on_log_write(body):
    """A prelude for train.py: each write of `text` to log.jsonl runs `body` (indented for write_) around the
    real `write`, which body calls and returns."""
    return f'''
import builtins, errno, time
real_open = builtins.open
def open_(path, mode='r', *a, **k):
    f = real_open(path, mode, *a, **k)
    if str(path).endswith('log.jsonl') and set(mode) & set('awx'):
        write = f.write
        def write_(text):
{body}
        f.write = write_
    return f
builtins.open = open_
'''


LOG_DISK_FULL_AT_STEP_3 = on_log_write('''            if '"step": 3,' in text and '"loss"' in text:
                raise OSError(errno.ENOSPC, 'No space left on device')
            return write(text)''')


def test_a_full_disk_while_logging_stops_with_one_line_and_keeps_the_last_checkpoint(tmp_path):
    p = train(tmp_path, '--max_iters=6', '--eval_interval=2', '--log_interval=1', check=False,
              prelude=LOG_DISK_FULL_AT_STEP_3)
    assert p.returncode == 1 and 'Traceback' not in p.stderr, p.stderr
    assert p.stderr.strip() == (f'train: cannot write the log {tmp_path / "log.jsonl"}: No space left on device '
                                f'(the disk is full); the last good checkpoint {tmp_path / "ckpt.pt"} (step 2) is '
                                f'unchanged'), p.stderr
    assert torch.load(tmp_path / 'ckpt.pt', weights_only=True)['iter_num'] == 2


# every model forward, (training?, the token ids), saved to the path SEEN at exit; and a first run of train.py
# with the same settings and --seed=1 in the same interpreter (one start-up less than a second process)
RECORD_BATCHES = '''
import atexit, runpy, sys, torch, model
_forward, _seen = model.GPT.forward, []
def _record(self, idx, *a, **k):
    _seen.append((self.training, idx.clone()))
    return _forward(self, idx, *a, **k)
model.GPT.forward = _record
atexit.register(lambda: torch.save(_seen, SEEN))
_argv, sys.argv = sys.argv, sys.argv[1:] + ['--seed=1', '--out_dir=' + SEEN + '.run1']
try:
    runpy.run_path(sys.argv[0], run_name='__main__')
except SystemExit as stop:
    assert not stop.code, stop.code
sys.argv = _argv
'''


def test_runs_of_any_seed_score_the_same_validation_batches_and_train_on_their_own(tmp_path):
    """The validation batches come from eval_seed, not the run's seed: two seeds are scored on the same sample.
    The training batches (and the train split's evaluation) still follow the seed."""
    path = tmp_path / 'seen.pt'
    train(tmp_path / 'run2', '--seed=2', '--max_iters=1', '--eval_interval=1', '--save_ckpt=False',
          prelude=f'SEEN = {str(path)!r}' + RECORD_BATCHES)
    seen = torch.load(path)
    a, b = seen[:len(seen) // 2], seen[len(seen) // 2:]  # seed 1's run, then seed 2's
    assert [t for t, _ in a] == [t for t, _ in b] == [False] * 4 + [True] + [False] * 4  # eval, a step, eval
    for evaluation in (0, 5):  # eval_iters=2 batches of the train split, then 2 of val
        train_split, val = slice(evaluation, evaluation + 2), slice(evaluation + 2, evaluation + 4)
        assert all(torch.equal(x, y) for (_, x), (_, y) in zip(a[val], b[val]))
        assert not any(torch.equal(x, y) for (_, x), (_, y) in zip(a[train_split], b[train_split]))
    assert not torch.equal(a[4][1], b[4][1])  # the training step's batch


# ----------------------------------------------------------------------------------------------------
# Run folders: one live run each, one run's checkpoint with that run's log, no write through a link

# HOLD() (replaced by the test) at the run's first training-step log record
HOLD_AT_FIRST_STEP = on_log_write('''            out = write(text)
            if '"loss"' in text:
                f.flush()
                HOLD()
            return out''')


def start_train(out_dir, *args, prelude):
    cmd = [sys.executable, '-c', prelude + '\nimport runpy, sys\nsys.argv = sys.argv[1:]\n'
           'runpy.run_path(sys.argv[0], run_name="__main__")\n', os.path.join(ROOT, 'train.py'), *TINY,
           f'--out_dir={out_dir}', *args]
    return subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for_lock(proc, out_dir, timeout=240):
    """Until proc holds out_dir's lock (its pid in the lock file, written once the flock is taken)."""
    for _ in range(timeout * 10):
        if (out_dir / 'lock').exists() and (out_dir / 'lock').read_text().strip() == str(proc.pid):
            return
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    raise AssertionError('the holding run never took the lock')


def test_a_second_run_into_a_folder_in_use_is_refused_naming_the_holders_pid(tmp_path, good_run):
    run = copy_run(good_run, tmp_path / 'run')
    holder = start_train(run, '--init_from=resume', '--max_iters=6', '--eval_interval=1',
                         prelude=HOLD_AT_FIRST_STEP.replace('HOLD()', 'time.sleep(600)'))
    try:
        wait_for_lock(holder, run)
        before = {f: (run / f).read_bytes() for f in ('ckpt.pt', 'lock')}
        others = [train(run, '--max_iters=2', *a, check=False)  # scratch, overwrite and resume: each refused
                  for a in [(), ('--overwrite=True',), ('--init_from=resume', '--max_iters=6')]]
    finally:
        holder.kill()
        holder.communicate()
    for p in others:
        assert p.returncode != 0 and f"out_dir '{run}' is in use by another run (pid {holder.pid})" in p.stderr, p.stderr
        assert 'Traceback' not in p.stderr and 'model:' not in p.stdout
    assert {f: (run / f).read_bytes() for f in before} == before
    train(run, '--init_from=resume', '--max_iters=3')  # the holder gone (killed), its folder is free again


# a kill -9 at the new run's first step log record, before its first checkpoint
KILL_AT_FIRST_STEP = HOLD_AT_FIRST_STEP.replace('HOLD()', 'import os, signal; os.kill(os.getpid(), signal.SIGKILL)')


def test_overwrite_killed_before_its_first_checkpoint_leaves_no_earlier_weights_beside_its_log(tmp_path, good_run):
    run = copy_run(good_run, tmp_path / 'run')
    p = train(run, '--overwrite=True', '--max_iters=4', '--eval_interval=4', check=False, prelude=KILL_AT_FIRST_STEP)
    assert p.returncode == -9, p.stderr
    assert not (run / 'ckpt.pt').exists()  # the earlier run's weights went before this run's log began
    assert [r['step'] for r in records(run)][:2] == [0, 0] and len(records(run)) == 3  # start, eval 0, step 0
    p = train(run, '--init_from=resume', '--max_iters=4', check=False)
    assert p.returncode != 0 and f'no checkpoint at {run / "ckpt.pt"}' in p.stderr, p.stderr


def test_links_planted_in_out_dir_are_never_written_through(tmp_path, good_run):
    victim = tmp_path / 'victim.txt'
    victim.write_text('not yours')
    fresh = tmp_path / 'fresh'
    os.makedirs(fresh)
    for name in ('ckpt.pt.tmp', 'log.jsonl.tmp', 'lock.tmp'):  # the temp names an older train.py used
        os.symlink(victim, fresh / name)
    linked = copy_run(good_run, tmp_path / 'linked')
    os.remove(linked / 'log.jsonl')
    os.symlink(victim, linked / 'log.jsonl')
    a = train(fresh, '--max_iters=2', '--eval_interval=1', check=False)
    b = train(linked, '--overwrite=True', '--max_iters=1', check=False)
    assert a.returncode == 0, a.stderr
    assert not (fresh / 'ckpt.pt').is_symlink() and torch.load(fresh / 'ckpt.pt', weights_only=True)['iter_num'] == 2
    assert b.returncode != 0 and f'{linked / "log.jsonl"} is a symbolic link' in b.stderr, b.stderr
    assert victim.read_text() == 'not yours'


@pytest.fixture(scope='module')
def early_refusals(tmp_path_factory):
    """train.py on out_dirs and datasets that no run can use: {case: CompletedProcess}."""
    tmp = tmp_path_factory.mktemp('refusals')
    for name in ('ckpt_dir', 'log_dir'):
        os.makedirs(tmp / name / ('ckpt.pt' if name == 'ckpt_dir' else 'log.jsonl'))
    os.symlink(tmp / 'nowhere', tmp / 'dangling')
    os.symlink(tmp / 'loop', tmp / 'loop')
    short = tiny_dataset(tmp / 'short')
    write_tokens(str(short / 'val.bin'), [np.arange(33) % 256], 256)  # block_size 32: 33 tokens, one window
    huge = tiny_dataset(tmp / 'huge')
    from data.prepare import HEADER, MAGIC, VERSION
    for split in ('train', 'val'):  # a header claiming a vocab of 10**9 over 4-byte tokens
        with open(huge / f'{split}.bin', 'wb') as f:
            f.write(HEADER.pack(MAGIC, VERSION, 4, 10**9, 100).ljust(HEADER_BYTES, b'\0'))
            f.write(np.arange(100, dtype=np.uint32).tobytes())
    metas = {'entropy': {'unigram_entropy': 'n/a'}, 'encoding': {'encoding': 5}}
    for name, meta in metas.items():
        (tiny_dataset(tmp / name) / 'meta.json').write_text(json.dumps(meta))
    cases = {'wandb': ('--wandb_log=True', f'--out_dir={tmp / "wandb"}'),
             'ckpt_dir': (f'--out_dir={tmp / "ckpt_dir"}',), 'log_dir': (f'--out_dir={tmp / "log_dir"}',),
             'dangling': (f'--out_dir={tmp / "dangling"}',), 'loop': (f'--out_dir={tmp / "loop"}',),
             'short': (f'--dataset={short}',), 'huge': (f'--dataset={huge}',),
             **{name: (f'--dataset={tmp / name}',) for name in metas}}
    return tmp, {c: train(tmp / f'out_{c}', '--max_iters=1', *cases[c], check=False) for c in cases}


@pytest.mark.parametrize('case, message', [
    ('wandb', 'train: wandb_log=True needs wandb, which is not installed: pip install wandb'),
    ('ckpt_dir', 'ckpt_dir/ckpt.pt is a directory, where this run writes its checkpoint file'),
    ('log_dir', 'log_dir/log.jsonl is a directory, where this run writes its log file'),
    ('dangling', "dangling' is a symbolic link that points to"),
    ('loop', "loop' is a symbolic link that loops"),
    ('short', "the val split of '{tmp}/short' has 33 tokens; block_size=32 needs at least 34"),
    ('huge', "huge/train.bin claims vocab size 1,000,000,000, outside [1, 4,194,304]"),
    ('entropy', "entropy/meta.json: unigram_entropy is 'n/a', not a number"),
    ('encoding', "encoding/meta.json: encoding is 5, not a string"),
])
def test_an_out_dir_or_dataset_no_run_can_use_is_one_line_before_the_model_is_built(early_refusals, case, message):
    tmp, runs = early_refusals
    p = runs[case]
    assert p.returncode != 0 and message.format(tmp=tmp) in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and 'model:' not in p.stdout
    if case == 'wandb':
        assert not (tmp / 'wandb').exists()  # refused before out_dir is made


def test_a_batch_too_large_for_memory_is_one_line_naming_the_setting(tmp_path):
    p = train(tmp_path, '--max_iters=1', f'--batch_size={10**12}', check=False, process=True)
    assert p.returncode == 1 and 'Traceback' not in p.stderr, p.stderr
    assert p.stderr.strip().startswith('train: out of memory at step 0 (') and 'lower --batch_size' in p.stderr
    assert 'no checkpoint was written' in p.stderr and 'warning: this CPU run needs roughly' in p.stdout


FAKE_MEMINFO = '''
import builtins, io
real_open = builtins.open
def open_(path, *a, **k):
    return io.StringIO('MemTotal: 4096 kB\\nMemAvailable: 1024 kB\\n') if path == '/proc/meminfo' else real_open(path, *a, **k)
builtins.open = open_
'''


def test_a_cpu_run_warns_before_the_first_step_when_it_will_not_fit_in_memory(tmp_path):
    p = train(tmp_path, '--max_iters=0', prelude=FAKE_MEMINFO)  # 1 MiB available
    warning = re.search(r'warning: this CPU run needs roughly ([\d.]+) GiB \(weights, gradients and AdamW state '
                        r'[\d.]+ GiB \+ activations [\d.]+ GiB\), more than the 0.0 GiB of memory available', p.stdout)
    assert warning and p.stdout.index('warning:') < p.stdout.index('model:'), p.stdout
    assert 'warning' not in train(tmp_path / 'plain', '--max_iters=0').stdout  # the toy fits any machine


SLOW_FIRST_STEP = '''
import time, torch
real, calls = torch.nn.utils.clip_grad_norm_, []
def clip(*a, **k):
    calls.append(1)
    if len(calls) == 1:
        time.sleep(8)  # as torch.compile's first step
    return real(*a, **k)
torch.nn.utils.clip_grad_norm_ = clip
'''


def test_the_eta_leaves_out_the_first_steps_compilation(tmp_path):
    p = train(tmp_path, '--max_iters=4', '--eval_interval=4', prelude=SLOW_FIRST_STEP)
    etas = re.findall(r'^step +(\d+) .*\| eta (.*)$', p.stdout, re.M)
    assert etas[0] == ('0', '    n/a'), etas
    # after step 1, 2 steps left: with the first step's 8 s in the average the ETA would be over 14 s; without it,
    # 2 x a tiny model's step, under 12 s even on a loaded 2-core machine (up to ~3 s a step seen)
    assert all(int(e.split(':')[-1]) < 12 for _, e in etas[1:]), etas


def test_every_config_file_names_its_own_out_dir():
    named = {}
    for config in CONFIGS:
        with open(os.path.join(ROOT, 'config', config)) as f:
            m = re.search(r"^out_dir = '([^']+)'", f.read(), re.M)
        assert m and m.group(1) != 'out', config  # the toy run's folder
        named[config] = m.group(1)
    assert len(set(named.values())) == len(named), named
