"""sweep.py on a tiny grid, CPU: one row per run, a failing run recorded and the sweep going on, resume
past finished rows, the table from the results file."""
import json
import os
import signal
import subprocess
import sys
import time
from math import comb

import pytest
import torch

from conftest import load_script, run_script

ROOT = os.path.dirname(os.path.abspath(__file__))
TINY_TASK = ("--tasks={'mqar': {'config': 'config/mqar.py', 'x': 'num_kv_pairs', 'levels': [[4, ["
             "'--num_kv_pairs=4', '--vocab_size=64', '--block_size=32', '--n_embd=32', '--ffn_hidden=64', "
             "'--head_dim=16', '--la_head_dim=16', '--la_v_head_dim=16', '--la_gate_rank=4', '--la_erase_rank=4']]]}}")
# 'broken' asks train.py for a mixer that does not exist: a run that fails
MIXERS = "--mixers={'eda': ['--mixer=eda'], 'broken': ['--mixer=nonexistent']}"
EXTRA = "--extra=['--max_iters=3', '--eval_interval=3', '--eval_iters=1', '--batch_size=4', '--device=cpu']"


def sweep_cmd(tmp_path, *args):
    return [sys.executable, os.path.join(ROOT, 'sweep.py'), TINY_TASK, MIXERS, EXTRA, '--seeds=[0]', '--jobs=2',
            '--name=t', f'--results_dir={tmp_path}', f'--runs_dir={tmp_path / "runs"}', *args]


def run_sweep(tmp_path, *args, timeout=300):
    return subprocess.run(sweep_cmd(tmp_path, *args), cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, OMP_NUM_THREADS='1'))


def sweep(tmp_path, *args):
    p = run_sweep(tmp_path, *args)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    return p.stdout


def rows(tmp_path):
    with open(tmp_path / 't.jsonl') as f:
        return [json.loads(line) for line in f]


def test_sweep_records_every_run_a_failing_one_too_and_resumes_past_finished_rows(tmp_path):
    out = sweep(tmp_path, '--learning_rates=[1e-3, 3e-3]')
    first = rows(tmp_path)
    assert len(first) == 4 and '4 to run' in out
    by = {(r['mixer'], r['lr']): r for r in first}
    for lr in (1e-3, 3e-3):
        ok, bad = by['eda', lr], by['broken', lr]
        assert ok['status'] == 'ok' and ok['step'] == 3 and 0 <= ok['val_acc'] <= 1 and ok['params'] > 0
        assert bad['status'] == 'failed' and 'nonexistent' in bad['error'] and bad['returncode'] != 0
        assert ok['command'].startswith('python train.py config/mqar.py')
        assert [c[0] for c in ok['curve']] == [0, 3] and ok['curve'][-1][1] == ok['val_loss']  # every evaluation
        run_log = tmp_path / 'runs' / f"mqar_4_eda_lr{lr:g}_s0" / 'log.jsonl'
        last = [json.loads(line) for line in run_log.read_text().splitlines() if '"eval"' in line][-1]
        assert last['step'] == 3 and last['final'] is True  # train.py marks its last evaluation
    table = (tmp_path / 't.md').read_text()
    assert '| eda |' in table and '!1' in table  # the failed runs are marked in the table
    # resume: nothing finished is run again; failures too when retry_failed=False
    out = sweep(tmp_path, '--learning_rates=[1e-3, 3e-3]', '--retry_failed=False')
    assert '0 to run' in out and rows(tmp_path) == first
    # a deadline that the level's finished runs (a few seconds each) say no run can meet starts none
    out = sweep(tmp_path, '--learning_rates=[1e-3, 3e-3, 1e-2]', '--deadline=0.01')
    assert 'would end after deadline=0.01s; 4 runs left' in out and rows(tmp_path) == first
    # a grid that grows (a third lr) runs only its new rows; failed rows are retried by default
    out = sweep(tmp_path, '--learning_rates=[1e-3, 3e-3, 1e-2]', '--deadline=3600')  # (one they fit in)
    assert '2 already' in out and 'deadline' not in out  # the two finished eda rows; failed ones are not done
    new = rows(tmp_path)[len(first):]
    assert sorted((r['mixer'], r['lr']) for r in new) == sorted(
        [('eda', 1e-2), ('broken', 1e-3), ('broken', 3e-3), ('broken', 1e-2)])


def test_the_deadline_reads_only_runs_made_with_as_many_at_once(capsys):
    # runs at once share the GPU's time, so a run's seconds depend on how many ran beside it: the estimate of
    # whether the next run fits uses the finished runs made with the sweep's current number at once
    mod = load_script('sweep.py', ['sweep.py', '--deadline=100'])
    todo = [({'task': 'evict', 'x': 16}, [])]
    took = {('evict', 16): [(1200.0, 10), (1230.0, 10), (90.0, 1)]}
    t0 = time.time() - 50  # 50 s into the sweep: 50 s left before the deadline
    assert mod.past_time(todo, [], took, t0, at_once=10)  # ~1230 s at 10 at once: it does not fit
    assert 'took 10 at once' in capsys.readouterr().out
    assert not mod.past_time(todo, [], {('evict', 16): [(30.0, 1), (1200.0, 10)]}, t0, at_once=1)  # 30 s: fits
    assert not mod.past_time(todo, [], took, t0, at_once=4)  # no run made 4 at once: the level starts


def test_report_takes_each_mixers_best_learning_rate_by_mean_over_seeds(tmp_path):
    lines = []
    for lr, accs in ((1e-3, [0.9, 0.1]), (3e-3, [0.6, 0.5])):  # best single run at 1e-3, best mean at 3e-3
        for seed, acc in enumerate(accs):
            lines.append({'task': 'mqar', 'x': 4, 'mixer': 'eda', 'lr': lr, 'seed': seed, 'status': 'ok',
                          'val_acc': acc, 'params': 10})
    (tmp_path / 't.jsonl').write_text(''.join(json.dumps(r) + '\n' for r in lines))
    sweep(tmp_path, '--report_only=True', '--learning_rates=[1e-3, 3e-3]', '--seeds=[0, 1]')
    table = (tmp_path / 't.md').read_text()
    assert '| eda | 10 | 55.0 ± 7.1 [50.0, 60.0] lr 0.003 |' in table
    # a task's floor (a trivial answer's score) is a row of its table
    # runs that logged values and NONE answers apart get their own table
    for r in lines:
        r.update(val_acc_value=r['val_acc'] / 2, val_acc_none=1.0)
    (tmp_path / 't.jsonl').write_text(''.join(json.dumps(r) + '\n' for r in lines))
    sweep(tmp_path, '--report_only=True', '--learning_rates=[1e-3, 3e-3]', '--seeds=[0, 1]')
    assert '| mqar | 4 | eda | 27.5 | 100.0 |' in (tmp_path / 't.md').read_text()
    floor = TINY_TASK.replace("]]]}}", "]]], 'floor': ['NONE everywhere', {4: 0.25}]}}")
    sweep(tmp_path, '--report_only=True', '--learning_rates=[1e-3, 3e-3]', '--seeds=[0, 1]', floor)
    assert '| *NONE everywhere* | — | 25.0 |' in (tmp_path / 't.md').read_text()
    # rows that recorded their corpus: the table names it, and flags runs on different tokens
    for r, n in zip(lines, (100, 100, 100, 90)):
        r['data_tokens'] = [n, 10]
    (tmp_path / 't.jsonl').write_text(''.join(json.dumps(r) + '\n' for r in lines))
    sweep(tmp_path, '--report_only=True', '--learning_rates=[1e-3, 3e-3]', '--seeds=[0, 1]')
    assert '**Runs on different data** (90 train + 10 val tokens; 100 train + 10 val tokens)' in (
        tmp_path / 't.md').read_text()
    lines[-1]['data_tokens'] = [100, 10]
    del lines[0]['data_tokens']
    (tmp_path / 't.jsonl').write_text(''.join(json.dumps(r) + '\n' for r in lines))
    sweep(tmp_path, '--report_only=True', '--learning_rates=[1e-3, 3e-3]', '--seeds=[0, 1]')
    table = (tmp_path / 't.md').read_text()
    assert 'Data: 100 train + 10 val tokens (3 of 4 runs recorded it).' in table and 'different data' not in table


def test_a_runs_row_records_its_corpus_and_device_from_its_first_log_record_and_its_date_and_commit(tmp_path):
    task = TINY_TASK.replace("'--num_kv_pairs=4', '--vocab_size=64'", "'--dataset=stdlib', '--vocab_size=256'")
    sweep(tmp_path, task, "--mixers={'eda': ['--mixer=eda']}")
    [row] = rows(tmp_path)
    meta = json.load(open(os.path.join(ROOT, 'data', 'stdlib', 'meta.json')))
    assert row['status'] == 'ok' and row['data_tokens'] == [meta['train_tokens'], meta['val_tokens']], row
    start = json.loads((tmp_path / 'runs' / 'mqar_4_eda_lr0.001_s0' / 'log.jsonl').read_text().splitlines()[0])
    assert start['start'] is True and row['params'] == start['params'] > 0 and row['device'] == start['device'] == 'cpu'
    assert row['date'][:2] == '20' and row['commit']  # this repository's commit (a git checkout)


def test_report_leaves_runs_stopped_by_the_time_limit_out_of_the_mean_and_lists_them(tmp_path):
    base = {'task': 'mqar', 'x': 4, 'mixer': 'eda', 'lr': 1e-3, 'params': 10}
    lines = [dict(base, seed=0, status='ok', val_acc=0.8), dict(base, seed=1, status='failed', val_acc=None),
             dict(base, seed=2, status='timeout', val_acc=0.5, step=700)]
    (tmp_path / 't.jsonl').write_text(''.join(json.dumps(r) + '\n' for r in lines))
    sweep(tmp_path, '--report_only=True', '--learning_rates=[1e-3]', '--seeds=[0, 1, 2]')
    table = (tmp_path / 't.md').read_text()
    assert '| eda | 10 | 40.0 ± 56.6 [0.0, 80.0] lr 0.001 !1 +1 unfinished |' in table  # failed = 0, timeout out
    assert '| mqar | 4 | eda | 0.001 | 2 | 50.0 at step 700 |' in table


def test_sweep_starts_no_run_after_start_until_and_the_same_command_resumes_and_reports_loss(tmp_path):
    out = sweep(tmp_path, '--start_until=1e-9')  # past before the first run could start
    assert '2 runs left for the next invocation' in out and not (tmp_path / 't.jsonl').exists()
    out = sweep(tmp_path, '--metric=val_loss')  # (and a loss-metric sweep of real runs: progress line, table)
    assert '2 to run' in out and len(rows(tmp_path)) == 2
    ok = next(r for r in rows(tmp_path) if r['status'] == 'ok')
    assert f"val_loss {ok['val_loss']:.4f}" in out and f"| eda | {ok['params']:,} | {ok['val_loss']:.4f} (1 seed) lr" in (tmp_path / 't.md').read_text()


def test_loss_metric_takes_the_lowest_mean_loss_and_leaves_failed_runs_out_of_the_mean(tmp_path):
    lines = []
    for lr, losses in ((1e-3, [1.0, 3.0]), (3e-3, [1.5, 1.7, None])):  # best single run at 1e-3, best mean at 3e-3
        for seed, loss in enumerate(losses):
            lines.append({'task': 'lm', 'x': 'd', 'mixer': 'eda', 'lr': lr, 'seed': seed, 'params': 10,
                          'status': 'ok' if loss else 'diverged', 'val_loss': loss, 'val_acc': None,
                          'curve': [[0, 5.0, None], [10, 2.0, None], [20, loss, None]] if loss else None})
    (tmp_path / 't.jsonl').write_text(''.join(json.dumps(r) + '\n' for r in lines))
    sweep(tmp_path, '--report_only=True', '--learning_rates=[1e-3, 3e-3]', '--seeds=[0, 1, 2]', '--metric=val_loss',
          "--tasks={'lm': {'config': 'config/mqar.py', 'x': 'corpus', 'levels': [['d', []]]}}")
    table = (tmp_path / 't.md').read_text()
    assert '| eda | 10 | 1.6000 ± 0.1414 [1.5000, 1.7000] lr 0.003 !1 |' in table
    assert '| lm | d | eda | 2.0000 | 1.6000 |' in table  # every lr's mean


def test_a_run_stopped_by_the_time_limit_after_its_final_evaluation_counts_as_finished(tmp_path):
    mod = load_script('sweep.py')
    (tmp_path / 'run').mkdir()
    evals = [{'step': 0, 'eval': True, 'val_loss': 2.0, 'val_acc': 0.1},
             {'step': 100, 'eval': True, 'val_loss': 0.5, 'val_acc': 0.9}]
    for final, status in ((False, 'timeout'), (True, 'ok')):
        if final:
            evals[-1]['final'] = True
        (tmp_path / 'run' / 'log.jsonl').write_text(''.join(json.dumps(r) + '\n' for r in evals))
        res = mod.outcome(-9, str(tmp_path / 'run'), str(tmp_path / 'run.log'), 10.0, True)
        assert res['status'] == status and res['val_acc'] == 0.9


FAKE_TRAIN = """#!{python}
# A stand-in for `python train.py ... --out_dir=D`: the GPU holds one run; a run started while another holds it
# dies as torch does when the memory runs out.
import json, os, sys, time
out_dir = [a.split('=', 1)[1] for a in sys.argv if a.startswith('--out_dir=')][0]
lock = os.path.join(os.path.dirname(out_dir), 'gpu.lock')
try:
    fd = os.open(lock, os.O_CREAT | os.O_EXCL)
except FileExistsError:
    print('torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 5.00 GiB.')
    sys.exit(1)
time.sleep(1.0)
os.makedirs(out_dir, exist_ok=True)
with open(os.path.join(out_dir, 'log.jsonl'), 'w') as f:
    f.write(json.dumps({{'start': True, 'params': 1}}) + '\\n')
    f.write(json.dumps({{'eval': True, 'step': 3, 'val_loss': 1.0, 'val_acc': 0.5, 'final': True}}) + '\\n')
os.close(fd)
os.remove(lock)
"""


def test_runs_that_run_out_of_gpu_memory_beside_others_run_again_with_fewer_at_once(tmp_path):
    """Three runs at once on a GPU that holds one: those that run out of memory beside another are not recorded
    as failed but run again, the sweep lowering how many run at once, until every run has its result."""
    fake = tmp_path / 'fake_train.py'
    fake.write_text(FAKE_TRAIN.format(python=sys.executable))
    fake.chmod(0o755)
    out = sweep(tmp_path, f'--python={fake}', '--jobs=3', '--learning_rates=[1e-3, 2e-3, 3e-3]',
                "--mixers={'eda': ['--mixer=eda']}")
    assert 'ran out of GPU memory beside' in out, out
    assert sorted((r['lr'], r['status']) for r in rows(tmp_path)) == [(1e-3, 'ok'), (2e-3, 'ok'), (3e-3, 'ok')]


def test_a_failed_runs_error_is_its_exception_not_the_hints_after_it(tmp_path):
    mod = load_script('sweep.py')
    log = tmp_path / 'run.log'
    log.write_text('step 0\nTraceback (most recent call last):\n  File "train.py", line 1\n'
                   'torch.AcceleratorError: CUDA error: out of memory\n'
                   'CUDA kernel errors might be asynchronously reported at some other API call.\n'
                   'For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n'
                   'Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n\n')
    res = mod.outcome(1, str(tmp_path / 'run'), str(log), 3.0, False)
    assert res['status'] == 'failed' and res['error'] == 'torch.AcceleratorError: CUDA error: out of memory'
    log.write_text('killed by the machine\n')  # no exception line: the last line
    assert mod.outcome(1, str(tmp_path / 'run'), str(log), 3.0, False)['error'] == 'killed by the machine'
    log.write_text('')
    assert mod.outcome(1, str(tmp_path / 'run'), str(log), 3.0, False)['error'] == 'exit 1, no output'


def test_the_synthetic_grids_none_floors_are_what_answering_none_scores_on_the_generated_tasks():
    import numpy as np
    from configurator import configure
    from data import synthetic
    grid = {}
    exec(open(os.path.join(ROOT, 'config/sweep/synthetic.py')).read(), grid)
    checked = 0
    for task, spec in grid['tasks'].items():
        if 'floor' not in spec:
            continue
        base = {}
        exec(open(os.path.join(ROOT, spec['config'])).read(), base)
        for x, args in spec['levels']:
            s = dict(base, move_frac=0.5)  # train.py's default, which config/reassign.py does not set
            configure(s, args)             # the level's --key=value, read as train.py reads them
            rng = np.random.default_rng(0)
            common = (rng, 1024, s['block_size'], s['vocab_size'], s['num_kv_pairs'], s['num_updates'])
            if s['dataset'] == 'evict':
                _, y = synthetic.evict(*common)
            else:
                _, y = synthetic.reassign(*common, s['move_frac'])
            answers = y[y != -1]
            assert abs((answers == synthetic.NONE).mean() - spec['floor'][1][x]) < 0.005, (task, x)
            checked += 1
    assert checked == 6


def test_pairs_compare_two_mixers_seed_by_seed_at_each_ones_best_lr(tmp_path):
    rows_ = [{'task': 'mqar', 'x': 4, 'mixer': m, 'lr': 1e-3, 'seed': seed, 'status': 'ok', 'val_acc': acc, 'params': 1}
             for m, accs in (('eda', [0.9, 0.5, 0.7]), ('broken', [0.8, 0.6, 0.6])) for seed, acc in enumerate(accs)]
    (tmp_path / 't.jsonl').write_text(''.join(json.dumps(r) + '\n' for r in rows_))
    sweep(tmp_path, '--report_only=True', '--seeds=[0, 1, 2]', "--pairs=[['eda', 'broken']]")
    # seeds 0 and 2 ahead (+10, +10), seed 1 behind (-10): mean +3.3 points
    assert '| mqar | 4 | eda − broken | +3.3 [-25.4, +32.0] 2/3, p 1.00 |' in (tmp_path / 't.md').read_text()
    p = subprocess.run([sys.executable, os.path.join(ROOT, 'sweep.py'), TINY_TASK, MIXERS, f'--results_dir={tmp_path}',
                        '--name=t', '--report_only=True', "--pairs=[['eda', 'gdn']]"], cwd=ROOT, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode != 0 and "pairs must be two of the mixers ['eda', 'broken']" in p.stderr


@pytest.fixture(scope='module')
def stats():
    """sweep.py loaded on its default grid: its statistics (the verdict rule) need no runs."""
    return load_script('sweep.py')


def test_t_critical_values_hold_95_percent_of_students_t(stats):
    """Each tabulated t has 95% of Student's t with its degrees of freedom inside +-t (the density integrated)."""
    for dof, t in stats.T975.items():
        x = torch.linspace(-t, t, 20001, dtype=torch.float64)
        mass = torch.trapezoid(torch.distributions.StudentT(float(dof)).log_prob(x).exp(), x).item()
        assert abs(mass - 0.95) < 2e-4, (dof, mass)


def test_a_pair_is_ahead_only_where_its_interval_excludes_zero(stats):
    assert stats.paired([-0.010, -0.011, -0.009])[4] == 'A ahead'
    assert stats.paired([0.010, 0.011, 0.009])[4] == 'B ahead'
    assert stats.paired([0.010, 0.011, 0.009], higher_is_better=True)[4] == 'A ahead'
    assert stats.paired([-0.02, 0.001, -0.01])[4] == 'not resolved'  # wide, holding zero
    assert stats.paired([-0.0001, -0.0014, 0.0005])[4] == 'not resolved'  # narrow: still no verdict
    mu, (lo, hi), better, p, _ = stats.paired([1.0, 2.0, 3.0], higher_is_better=True)
    assert (mu, better) == (2.0, 3) and abs(hi - mu - 4.303 / 3 ** 0.5) < 1e-9 and p == 0.25
    assert stats.paired([0.5], higher_is_better=True)[2:] == (1, 1.0, 'not resolved')  # one seed: no interval


def test_a_pair_is_judged_on_the_seeds_both_mixers_have_and_not_run_without_one(stats, monkeypatch):
    monkeypatch.setattr(stats, 'pairs', [['a', 'b'], ['a', 'c']])
    values = {('a', 0): {'f': 1.0}, ('a', 1): {'f': 2.0}, ('a', 2): {'f': 3.0}, ('b', 1): {'f': 0.5},
              ('b', 2): {'f': 1.5}, ('c', 3): {'f': 0.0}}
    rows, said = stats.verdicts(values, {'f': (1, True)})  # a − b on seeds 1 and 2: +1.5 each
    assert rows == [['a − b', '**+1.5 [+1.5, +1.5] 2/2, p 0.50, a ahead**']]
    assert said == {'a, b, f': 'a ahead', 'a, c, f': 'not run'}


def test_sign_test_is_the_exact_binomial_tail(stats):
    sign_test = stats.sign_test
    assert sign_test(8, 8) == 2 / 256 and sign_test(4, 8) == 1.0
    assert abs(sign_test(1, 8) - 2 * (comb(8, 0) + comb(8, 1)) / 256) < 1e-12


def test_paired_from_pairs_a_mixer_with_another_sweeps_rows_of_the_same_task_and_lr(tmp_path):
    """A follow-up sweep runs one mixer; its pair's other mixer comes from an earlier sweep's results file (same
    task, level, lr and seed), for the Paired section only. Rows of another lr, or a mixer found nowhere, do not
    pair: the first is left out, the second is an error at the start."""
    mine = [{'task': 'mqar', 'x': 4, 'mixer': 'broken', 'lr': 1e-3, 'seed': s, 'status': 'ok', 'val_acc': a, 'params': 1}
            for s, a in enumerate([0.8, 0.6, 0.6])]
    theirs = [{'task': 'mqar', 'x': 4, 'mixer': 'eda', 'lr': lr, 'seed': s, 'status': 'ok', 'val_acc': a, 'params': 1}
              for lr, accs in ((1e-3, [0.9, 0.5, 0.7]), (3e-3, [1.0, 1.0, 1.0])) for s, a in enumerate(accs)]
    (tmp_path / 't.jsonl').write_text(''.join(json.dumps(r) + '\n' for r in mine))
    (tmp_path / 'grid.jsonl').write_text(''.join(json.dumps(r) + '\n' for r in theirs))
    only_broken = "--mixers={'broken': ['--mixer=nonexistent']}"
    sweep(tmp_path, '--report_only=True', '--seeds=[0, 1, 2]', only_broken, "--pairs=[['eda', 'broken']]",
          "--paired_from={'mqar': 'grid'}")
    md = (tmp_path / 't.md').read_text()
    # the lr 1e-3 rows: the 3e-3 ones would win 3 of 3
    assert '| mqar | 4 | eda − broken | +3.3 [-25.4, +32.0] 2/3, p 1.00 |' in md
    assert 'eda: the rows of' in md and 'grid.jsonl` (mqar)' in md
    p = subprocess.run([sys.executable, os.path.join(ROOT, 'sweep.py'), TINY_TASK, only_broken, '--name=t',
                        f'--results_dir={tmp_path}', '--report_only=True', "--pairs=[['gdn', 'broken']]",
                        "--paired_from={'mqar': 'grid'}"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert p.returncode != 0 and "pairs must be two of the mixers ['broken'] (or of the paired_from" in p.stderr


def test_same_seed_repeats_are_reported_as_run_to_run_spread_beside_the_spread_over_seeds(tmp_path):
    runs = [{'task': 'mqar', 'x': 4, 'mixer': 'eda', 'lr': 1e-3, 'seed': seed, 'repeat': rep, 'status': 'ok',
             'val_acc': acc, 'params': 1} for seed, accs in ((0, [0.70, 0.72]), (1, [0.80, 0.84]))
            for rep, acc in enumerate(accs)]
    (tmp_path / 't.jsonl').write_text(''.join(json.dumps(r) + '\n' for r in runs))
    sweep(tmp_path, '--report_only=True', '--seeds=[0, 1]', "--mixers={'eda': ['--mixer=eda']}")
    md = (tmp_path / 't.md').read_text()
    assert '| eda | 1 | 76.5 ± 7.8 [71.0, 82.0] lr 0.001 |' in md  # over seeds, a seed's repeats averaged
    # the seeds' means 71 and 82 (std 7.8) beside the spread of runs of one seed (pooled std 2.2)
    assert '| mqar | 4 | eda | 0.001 | 2 | 7.8 | 2.2 | seed 0: 70.0, 72.0; seed 1: 80.0, 84.0 |' in md
    assert '| mqar | 4 | eda | 0.001 | 0: 70.0, 72.0; 1: 80.0, 84.0 |' in md  # every run


# ----------------------------------------------------------------------------------------------------
# Bad settings and faults: one clear line, nothing lost, nothing left running


def test_jobs_below_one_is_refused_instead_of_waiting_forever(tmp_path):
    p = run_sweep(tmp_path, '--jobs=0', timeout=60)
    assert p.returncode != 0 and 'jobs' in p.stderr and 'Traceback' not in p.stderr, p.stdout + p.stderr
    assert not (tmp_path / 't.jsonl').exists()


def test_a_setting_train_py_rejects_stops_the_sweep_at_the_first_run_and_exits_non_zero(tmp_path):
    typo = EXTRA.replace("'--max_iters=3'", "'--max_iter=3'")
    p = run_sweep(tmp_path, typo, '--learning_rates=[1e-3, 3e-3]', '--jobs=1')
    assert p.returncode != 0 and "unknown setting 'max_iter'" in p.stderr and 'Traceback' not in p.stderr, p.stderr
    assert not (tmp_path / 't.jsonl').exists() and not (tmp_path / 't.md').exists()  # no table of failed cells
    assert len(list((tmp_path / 'runs').glob('*.log'))) == 1  # nothing started after the first rejection


def _children(pid):
    """Pids of the live processes whose parent is pid (from /proc)."""
    out = []
    for d in os.listdir('/proc'):
        try:
            with open(f'/proc/{d}/stat') as f:
                fields = f.read().rsplit(')', 1)[1].split()
        except (OSError, IndexError):
            continue
        if d.isdigit() and int(fields[1]) == pid and fields[0] != 'Z':
            out.append(int(d))
    return out


def _alive(pid):
    try:
        with open(f'/proc/{pid}/stat') as f:
            return f.read().rsplit(')', 1)[1].split()[0] != 'Z'
    except OSError:
        return False


@pytest.mark.skipif(not os.path.isdir('/proc'), reason='reads the process table from /proc (Linux)')
@pytest.mark.parametrize('sig', [signal.SIGTERM, signal.SIGKILL])
def test_a_killed_sweep_leaves_no_run_behind(tmp_path, sig):
    long_run = EXTRA.replace("'--max_iters=3', '--eval_interval=3'", "'--max_iters=100000', '--eval_interval=100000'")
    proc = subprocess.Popen(sweep_cmd(tmp_path, long_run, "--mixers={'eda': ['--mixer=eda']}", '--jobs=1'),
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=dict(os.environ, OMP_NUM_THREADS='1'))
    runs = []
    try:
        deadline = time.time() + 120
        while time.time() < deadline and not list((tmp_path / 'runs').glob('*/log.jsonl')):
            time.sleep(0.2)  # the run is training once its log exists
        runs = _children(proc.pid)
        assert runs, 'the sweep started no run'
        proc.send_signal(sig)
        proc.wait(timeout=30)
        deadline = time.time() + 30
        while time.time() < deadline and any(_alive(pid) for pid in runs):
            time.sleep(0.2)
        assert not any(_alive(pid) for pid in runs), 'a run of the killed sweep is still running'
    finally:
        proc.kill()
        for pid in runs:  # an orphan left by the bug under test must not outlive the test
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_a_results_file_whose_last_line_was_cut_keeps_the_next_row(tmp_path):
    (tmp_path / 't.jsonl').write_text('{"task": "mqar", "x": 4, "mixer": "eda", "lr": 0.0')  # no newline
    sweep(tmp_path, "--mixers={'eda': ['--mixer=eda']}")
    lines = (tmp_path / 't.jsonl').read_text().splitlines()
    assert len(lines) == 2 and json.loads(lines[1])['status'] == 'ok', lines


def test_a_row_without_the_keys_of_a_run_is_named_and_left_out_not_a_traceback(tmp_path):
    good = {'task': 'mqar', 'x': 4, 'mixer': 'eda', 'lr': 1e-3, 'seed': 0, 'status': 'ok', 'val_acc': 0.5, 'params': 1}
    (tmp_path / 't.jsonl').write_text(json.dumps({'task': 'mqar', 'seed': 0}) + '\n' + json.dumps(good) + '\n')
    p = run_sweep(tmp_path, '--report_only=True', "--mixers={'eda': ['--mixer=eda']}", '--learning_rates=[1e-3]')
    assert p.returncode == 0 and 'Traceback' not in p.stderr, p.stderr
    assert 't.jsonl:1' in p.stderr and "'lr'" in p.stderr and "'mixer'" in p.stderr
    assert '| eda | 1 | 50.0 (1 seed) lr 0.001 |' in (tmp_path / 't.md').read_text()


def test_best_seeds_and_repeats_run_at_each_mixers_best_lr_chosen_on_the_first_seeds(tmp_path):
    """Stage one: every lr on `seeds`; stage two, in the same invocation once a mixer's lrs are in: best_seeds
    and same-seed repeats at its best lr only. The best lr stays the one chosen on `seeds`, and the report
    shows the repeats as run-to-run noise."""
    sweep(tmp_path, '--learning_rates=[1e-3, 3e-2]', "--mixers={'eda': ['--mixer=eda']}", '--best_seeds=[1]',
          '--best_repeats=1', '--metric=val_loss')
    got = rows(tmp_path)
    first = {r['lr']: r['val_loss'] for r in got if r['seed'] == 0 and not r.get('repeat')}
    best = min(first, key=first.get)
    later = sorted((r['lr'], r['seed'], r.get('repeat', 0)) for r in got[2:])
    assert len(got) == 4 and sorted(first) == [1e-3, 3e-2] and later == sorted([(best, 1, 0), (best, 0, 1)])
    table = (tmp_path / 't.md').read_text()
    assert 'Same-seed repeats' in table and f'| mqar | 4 | eda | {best:g} |' in table
    # the repeat runs under its own name, with the same command: on a GPU it trains a little differently
    assert (tmp_path / 'runs' / f'mqar_4_eda_lr{best:g}_s0_r1').is_dir()
    same = {' '.join(w for w in r['command'].split() if not w.startswith('--out_dir=')) for r in got
            if r['lr'] == best and r['seed'] == 0}
    assert len(same) == 1
    # nothing left: a rerun of the command runs nothing
    assert '0 to run' in sweep(tmp_path, '--learning_rates=[1e-3, 3e-2]', "--mixers={'eda': ['--mixer=eda']}",
                               '--best_seeds=[1]', '--best_repeats=1', '--metric=val_loss')


def test_a_run_cut_off_resumes_from_its_checkpoint_with_checkpoints_on(tmp_path):
    """checkpoints=True: a run whose row is a timeout (its machine or sweep stopped) starts again from the
    checkpoint in its out_dir, not from step 0, and its curve keeps the evaluations before the cut."""
    args = ['--learning_rates=[1e-3]', "--mixers={'eda': ['--mixer=eda']}", '--checkpoints=True',
            "--extra=['--max_iters=6', '--eval_interval=3', '--eval_iters=1', '--batch_size=4', '--device=cpu']"]
    sweep(tmp_path, *args)
    done = rows(tmp_path)[-1]
    run = tmp_path / 'runs' / 'mqar_4_eda_lr0.001_s0'
    assert done['status'] == 'ok' and (run / 'ckpt.pt').exists()
    # cut it back to step 3, as a run stopped after its step-3 checkpoint would be
    p = run_script('train.py', *done['command'].split()[2:], '--max_iters=3', '--overwrite=True', '--eval_only=False')
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    with open(tmp_path / 't.jsonl', 'a') as f:
        f.write(json.dumps({**done, 'status': 'timeout', 'step': 3}) + '\n')
    sweep(tmp_path, *args)
    again = rows(tmp_path)[-1]
    assert again['status'] == 'ok' and again['step'] == 6 and [c[0] for c in again['curve']] == [0, 3, 6]
    assert '--init_from=resume' in again['command']


def test_mixer_jobs_caps_how_many_runs_of_a_mixer_run_at_once_and_rejects_unknown_mixers(tmp_path):
    """A mixer whose runs take more memory (GDN-2's chunked PyTorch rule) is capped: the next run to start is the
    first in grid order whose mixer is under its cap, and none when every waiting run's mixer is at it."""
    import importlib.util
    argv = sys.argv
    sys.argv = ['sweep.py', TINY_TASK, "--mixers={'eda': ['--mixer=eda'], 'kda': ['--mixer=kda']}",
                "--mixer_jobs={'eda': 1}", f'--results_dir={tmp_path}']
    try:
        spec = importlib.util.spec_from_file_location('sweep_capped', os.path.join(ROOT, 'sweep.py'))
        sw = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sw)
    finally:
        sys.argv = argv

    class Running:
        def __init__(self, mixer):
            self.row = {'mixer': mixer}

    todo = [({'mixer': m}, []) for m in ('eda', 'eda', 'kda')]
    assert sw.next_startable(todo, []) == 0
    assert sw.next_startable(todo, [Running('eda')]) == 2  # eda at its cap: kda, behind it, starts
    assert sw.next_startable(todo[:2], [Running('eda')]) is None
    p = subprocess.run(sweep_cmd(tmp_path, "--mixer_jobs={'gdn2': 1}"), cwd=ROOT, capture_output=True, text=True)
    assert p.returncode != 0 and 'mixer_jobs' in p.stderr and 'Traceback' not in p.stderr


def test_an_lr_whose_runs_all_failed_reads_failed_in_the_lr_table_and_one_seed_shows_no_spread(tmp_path):
    """A failed run has no loss: its lr's mean is no number (not 'inf'), and a mixer with one seed is not shown
    with a measured-looking '± 0' spread."""
    base = {'task': 'mqar', 'x': 4, 'mixer': 'eda', 'seed': 0, 'params': 1}
    (tmp_path / 't.jsonl').write_text(json.dumps({**base, 'lr': 1e-3, 'status': 'ok', 'val_loss': 1.5}) + '\n'
                                      + json.dumps({**base, 'lr': 2e-3, 'status': 'failed', 'val_loss': None}) + '\n')
    p = run_sweep(tmp_path, '--report_only=True', "--mixers={'eda': ['--mixer=eda']}", '--learning_rates=[1e-3, 2e-3]',
                  '--metric=val_loss')
    assert p.returncode == 0, p.stderr
    md = (tmp_path / 't.md').read_text()
    assert '| mqar | 4 | eda | 1.5000 | ! failed |' in md and 'inf' not in md, md
    assert '| eda | 1 | 1.5000 (1 seed) lr 0.001 |' in md, md


def test_a_second_sweep_on_a_held_results_file_is_refused_naming_the_holders_pid(tmp_path):
    # the holder: this process, through the sweep's own lock (as a running sweep holds it for its life)
    mod = load_script('sweep.py', ['sweep.py', '--name=t', f'--results_dir={tmp_path}',
                                   f'--runs_dir={tmp_path / "runs"}'])
    fd = mod.hold_results_file()
    try:
        p = run_sweep(tmp_path, "--mixers={'eda': ['--mixer=eda']}", timeout=60)
    finally:
        os.close(fd)
    assert p.returncode != 0 and p.stderr.strip() == (
        f'sweep: another sweep (pid {os.getpid()}) is running on {tmp_path / "t.jsonl"}; nothing was run: wait for '
        f'it to end, or give this one another --name or --results_dir'), p.stderr
    assert not (tmp_path / 't.jsonl').exists() and not list((tmp_path / 'runs').iterdir())


def test_a_row_is_ok_only_when_its_runs_log_holds_the_final_evaluation(tmp_path):
    mod = load_script('sweep.py')
    (tmp_path / 'run').mkdir()
    (tmp_path / 'run' / 'log.jsonl').write_text(json.dumps({'start': True, 'params': 1}) + '\n' + json.dumps(
        {'eval': True, 'step': 0, 'val_loss': 4.1, 'val_acc': 0.0}) + '\n')  # half-written: step 0 only
    res = mod.outcome(0, str(tmp_path / 'run'), str(tmp_path / 'run.log'), 3.0, False)
    assert res['status'] == 'failed' and res['error'] == (
        f"exit 0, but {tmp_path / 'run' / 'log.jsonl'} holds no final evaluation"), res


@pytest.mark.parametrize('setting,message', [
    ("--tasks={'mqar': {'config': 'config/mqar.py', 'x': 'n'}}", "tasks['mqar'] lacks 'levels'"),
    ("--tasks={'mqar': {'config': 'config/mqar.py', 'x': 'n', 'levels': [[4]]}}",
     r"tasks['mqar']['levels'][0] must be a pair [x, [train.py args]], got [4]"),
    ("--mixers={'eda': '--mixer=eda'}", "mixers['eda'] must be a list of train.py args"),
])
def test_a_malformed_grid_is_one_line_naming_the_key_before_anything_runs(tmp_path, setting, message):
    p = run_sweep(tmp_path, setting, timeout=60)
    assert p.returncode != 0 and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert p.stderr.startswith(f'sweep: {message}'), p.stderr
    assert not (tmp_path / 'runs').exists()


def test_seeds_or_learning_rates_listed_twice_run_once(capsys):
    mod = load_script('sweep.py', ['sweep.py', TINY_TASK, "--mixers={'eda': ['--mixer=eda']}", '--seeds=[0, 0]',
                                   '--learning_rates=[1e-3, 0.001]'])
    assert [(row['seed'], row['lr']) for row, _ in mod.grid()] == [(0, 1e-3)]
    assert 'seeds lists a value more than once, [0, 0]: each runs once' in capsys.readouterr().err


@pytest.mark.parametrize('where', ['results file', 'results folder'])
def test_an_unwritable_results_file_or_folder_is_found_before_the_first_run(tmp_path, where):
    args = []
    if where == 'results file':
        (tmp_path / 't.jsonl').mkdir()  # a folder where the file goes (permissions do not stop root)
    else:
        (tmp_path / 'file').write_text('')
        args = [f'--results_dir={tmp_path / "file"}']
    p = run_sweep(tmp_path, "--mixers={'eda': ['--mixer=eda']}", *args, timeout=60)
    assert p.returncode != 0 and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert p.stderr.startswith('sweep: cannot write') and 'nothing was run' in p.stderr, p.stderr
    assert not list((tmp_path / 'runs').glob('*.log'))


def test_a_row_with_a_non_numeric_value_is_named_and_left_out_and_each_bad_line_named_once(tmp_path, capsys):
    mod = load_script('sweep.py')
    good = {'task': 'mqar', 'x': 4, 'mixer': 'eda', 'lr': 1e-3, 'seed': 0, 'status': 'ok', 'val_acc': 0.5}
    (tmp_path / 't.jsonl').write_text(json.dumps(dict(good, seed=1, val_acc='0.5')) + '\n' + json.dumps(good)
                                      + '\n{"task": "mqar", "x": 4\n')
    assert mod.read_results(str(tmp_path / 't.jsonl')) == [good]
    assert mod.read_results(str(tmp_path / 't.jsonl')) == [good]  # (read again after every run)
    err = capsys.readouterr().err
    assert f"{tmp_path / 't.jsonl'}:1 is not a run's row (val_acc is '0.5', not a number), left out" in err
    assert err.count(f"{tmp_path / 't.jsonl'}:3 is not JSON") == 1 and err.count(':1 is not') == 1, err


def test_a_sweep_run_from_another_folder_finds_its_grid_and_writes_where_its_runs_write(tmp_path):
    """Relative paths are the repository's: the grid file, results_dir and runs_dir (where train.py, run in the
    repository, writes each run's log) mean the same files from any working directory."""
    fake = tmp_path / 'fake_train.py'  # FAKE_TRAIN without its wait: writes the log of a finished run
    fake.write_text(FAKE_TRAIN.format(python=sys.executable).replace('time.sleep(1.0)', ''))
    fake.chmod(0o755)
    (tmp_path / 'elsewhere').mkdir()
    rel = lambda p: os.path.relpath(p, ROOT)
    p = subprocess.run([sys.executable, os.path.join(ROOT, 'sweep.py'), 'config/sweep/synthetic.py', TINY_TASK,
                        "--mixers={'eda': ['--mixer=eda']}", '--learning_rates=[1e-3]', '--seeds=[0]', '--jobs=1',
                        '--pairs=[]', '--name=t', f'--results_dir={rel(tmp_path / "res")}', f'--runs_dir={rel(tmp_path / "runs")}',
                        f'--python={fake}'], cwd=tmp_path / 'elsewhere', capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    [row] = [json.loads(line) for line in (tmp_path / 'res' / 't.jsonl').read_text().splitlines()]
    assert row['status'] == 'ok' and row['val_acc'] == 0.5
