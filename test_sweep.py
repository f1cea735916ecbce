"""sweep.py on a tiny grid, CPU: one row per run, a failing run recorded and the sweep going on, resume
past finished rows, the table from the results file."""
import json
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.abspath(__file__))
TINY_TASK = ("--tasks={'mqar': {'config': 'config/mqar.py', 'x': 'num_kv_pairs', 'levels': [[4, ["
             "'--num_kv_pairs=4', '--vocab_size=64', '--block_size=32', '--n_embd=32', '--ffn_hidden=64', "
             "'--head_dim=16', '--la_head_dim=16', '--la_v_head_dim=16', '--la_gate_rank=4', '--la_erase_rank=4']]]}}")
# 'broken' asks train.py for a mixer that does not exist: a run that fails
MIXERS = "--mixers={'eda': ['--mixer=eda'], 'broken': ['--mixer=nonexistent']}"
EXTRA = "--extra=['--max_iters=3', '--eval_interval=3', '--eval_iters=1', '--batch_size=4', '--device=cpu']"


def sweep(tmp_path, *args):
    cmd = [sys.executable, os.path.join(ROOT, 'sweep.py'), TINY_TASK, MIXERS, EXTRA, '--seeds=[0]', '--jobs=2',
           '--name=t', f'--results_dir={tmp_path}', f'--runs_dir={tmp_path / "runs"}', *args]
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, OMP_NUM_THREADS='1'))
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


def test_a_run_on_a_token_file_corpus_records_which_corpus_in_its_row(tmp_path):
    task = TINY_TASK.replace("'--num_kv_pairs=4', '--vocab_size=64'", "'--dataset=stdlib', '--vocab_size=256'")
    sweep(tmp_path, task, "--mixers={'eda': ['--mixer=eda']}")
    [row] = rows(tmp_path)
    meta = json.load(open(os.path.join(ROOT, 'data', 'stdlib', 'meta.json')))
    assert row['status'] == 'ok' and row['data_tokens'] == [meta['train_tokens'], meta['val_tokens']], row


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
    assert f"val_loss {ok['val_loss']:.4f}" in out and f"| eda | {ok['params']:,} | {ok['val_loss']:.4f} ± 0.0000" in (tmp_path / 't.md').read_text()


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


def test_a_run_stopped_by_the_time_limit_after_its_final_evaluation_counts_as_finished(tmp_path, monkeypatch):
    import importlib.util
    monkeypatch.setattr(sys, 'argv', ['sweep.py'])  # sweep.py's settings block reads the command line
    spec = importlib.util.spec_from_file_location('sweep_under_test', os.path.join(ROOT, 'sweep.py'))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    (tmp_path / 'run').mkdir()
    evals = [{'step': 0, 'eval': True, 'val_loss': 2.0, 'val_acc': 0.1},
             {'step': 100, 'eval': True, 'val_loss': 0.5, 'val_acc': 0.9}]
    for final, status in ((False, 'timeout'), (True, 'ok')):
        if final:
            evals[-1]['final'] = True
        (tmp_path / 'run' / 'log.jsonl').write_text(''.join(json.dumps(r) + '\n' for r in evals))
        res = mod.outcome(-9, str(tmp_path / 'run'), str(tmp_path / 'run.log'), 10.0, True)
        assert res['status'] == status and res['val_acc'] == 0.9


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


def test_every_committed_sweep_table_is_what_its_results_file_gives(tmp_path):
    """The tables in notes/sweep (which README's figures and verdicts cite) are rebuilt from their JSONL by each
    config in config/sweep; a table edited by hand or left behind by newer results fails here."""
    configs = sorted(f for f in os.listdir(os.path.join(ROOT, 'config', 'sweep')) if f.endswith('.py'))
    out = tmp_path  # every sweep's results file, copied once; each config writes its own <name>.md beside them
    for f in os.listdir(os.path.join(ROOT, 'notes', 'sweep')):
        if f.endswith('.jsonl'):
            shutil.copy(os.path.join(ROOT, 'notes', 'sweep', f), out / f)
    checked = []
    for cfg in configs:
        p = subprocess.run([sys.executable, os.path.join(ROOT, 'sweep.py'), f'config/sweep/{cfg}', '--report_only=True',
                            f'--results_dir={out}'], cwd=ROOT, capture_output=True, text=True, timeout=120,
                           env=dict(os.environ, MPLBACKEND='Agg'))
        if p.returncode != 0 and 'sweep: no results in ' in p.stderr:  # fixed, not run yet: no table either
            stem = os.path.basename(p.stderr.split('no results in ')[1].strip())[:-len('.jsonl')]
            assert not os.path.exists(os.path.join(ROOT, 'notes', 'sweep', stem + '.md')), cfg
            continue
        assert p.returncode == 0, cfg + p.stdout[-1000:] + p.stderr[-1000:]
        [md] = [line.split('table: ')[1] for line in p.stdout.splitlines() if line.startswith('table: ')]
        committed = os.path.join(ROOT, 'notes', 'sweep', os.path.basename(md))
        rebuilt = open(md).read().replace(str(out), 'notes/sweep')
        assert rebuilt == open(committed).read(), f'{cfg}: {committed} differs from the table its results file gives'
        checked.append(os.path.basename(md))
    assert {'synthetic.md', 'evict_long.md', 'lm.md', 'readme.md'} <= set(checked)


def test_pairs_compare_two_mixers_seed_by_seed_at_each_ones_best_lr(tmp_path):
    rows_ = [{'task': 'mqar', 'x': 4, 'mixer': m, 'lr': 1e-3, 'seed': seed, 'status': 'ok', 'val_acc': acc, 'params': 1}
             for m, accs in (('eda', [0.9, 0.5, 0.7]), ('broken', [0.8, 0.6, 0.6])) for seed, acc in enumerate(accs)]
    (tmp_path / 't.jsonl').write_text(''.join(json.dumps(r) + '\n' for r in rows_))
    sweep(tmp_path, '--report_only=True', '--seeds=[0, 1, 2]', "--pairs=[['eda', 'broken']]")
    # seeds 0 and 2 ahead (+10, +10), seed 1 behind (-10): mean +3.3 points
    assert '| mqar | 4 | eda vs broken | 2 of 3 | +3.3 |' in (tmp_path / 't.md').read_text()
    p = subprocess.run([sys.executable, os.path.join(ROOT, 'sweep.py'), TINY_TASK, MIXERS, f'--results_dir={tmp_path}',
                        '--name=t', '--report_only=True', "--pairs=[['eda', 'gdn']]"], cwd=ROOT, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode != 0 and "pairs must be two of the mixers ['eda', 'broken']" in p.stderr


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
    assert '| mqar | 4 | eda vs broken | 2 of 3 | +3.3 |' in md  # the lr 1e-3 rows: the 3e-3 ones would win 3 of 3
    assert 'eda: the rows of' in md and 'grid.jsonl` (mqar)' in md
    p = subprocess.run([sys.executable, os.path.join(ROOT, 'sweep.py'), TINY_TASK, only_broken, '--name=t',
                        f'--results_dir={tmp_path}', '--report_only=True', "--pairs=[['gdn', 'broken']]",
                        "--paired_from={'mqar': 'grid'}"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert p.returncode != 0 and "pairs must be two of the mixers ['broken'] (or of the paired_from" in p.stderr


def _newest_rows(name):
    """(task, x, mixer, lr, seed) -> the newest row of notes/sweep/<name>.jsonl."""
    out = {}
    with open(os.path.join(ROOT, 'notes', 'sweep', f'{name}.jsonl')) as f:
        for line in f:
            r = json.loads(line)
            out[r['task'], r['x'], r['mixer'], r['lr'], r['seed']] = r
    return out


def _readme_table_rows(first_cells):
    """The README's table rows (lists of cells) whose first cell starts with one of first_cells."""
    with open(os.path.join(ROOT, 'README.md')) as f:
        lines = [ln.strip() for ln in f if ln.startswith('| ')]
    cells = [[c.strip() for c in ln.strip('|').split('|')] for ln in lines]
    return [c for c in cells if c[0].startswith(first_cells)]


def _md_cell(md, task, x, mixer):
    """A committed sweep table's cell: mixer's row at level x of the task's table."""
    section = md.split(f'## {task} (difficulty')[1].split('\n## ')[0]
    header, *lines = [[c.strip() for c in ln.strip('|').split('|')] for ln in section.splitlines()
                      if ln.startswith('| ') and not ln.startswith('|---')]
    col = next(i for i, h in enumerate(header) if h.endswith(f'={x}'))
    return next(c[col] for c in lines if c[0] == mixer)


def _md_pair(md, task, x, a, b):
    """A committed sweep table's paired-by-seed cells for A vs B at level x: ('N of M', '+d')."""
    [row] = [ln for ln in md.splitlines() if ln.startswith(f'| {task} | {x} | {a} vs {b} | ')]
    return tuple(c.strip() for c in row.strip('|').split('|')[3:5])


def test_readmes_erase_tables_are_what_the_results_files_give():
    """The README's "Does erase help?" numbers, laid out by hand across sweeps, against the data: the grid table
    and the erase x gate square against the committed notes/sweep tables (which the test above rebuilds from
    their results files), the LM table's per-seed losses from lm.jsonl. A hand-edited or stale cell fails here."""
    md = {n: open(os.path.join(ROOT, 'notes', 'sweep', f'{n}.md')).read()
          for n in ('synthetic', 'evict_long', 'safe_gate')}
    grid = _readme_table_rows(('mqar, ', 'reassign, ', 'evict, ', 'capacity, '))
    grid = [c for c in grid if len(c) == 7 and c[1].isdigit()]  # the grid table has a steps column
    assert len(grid) == 10
    for level, steps, eda, eda_kg, kda, ahead, floor in grid:
        task, x = level.split(', ')[0], int(level.split(', ')[1].split()[0])
        table = md['evict_long' if steps == '6000' else 'synthetic']
        for mixer, cell in (('eda', eda), ('eda kda-gate', eda_kg), ('kda', kda)):
            assert _md_cell(table, task, x, mixer).startswith(cell + ' lr '), (level, mixer, cell)
        assert _md_pair(table, task, x, 'eda kda-gate', 'kda')[0] == ahead, (level, ahead)
        assert floor == (_md_cell(table, task, x, '*NONE at every query*') if floor != '—' else '—'), (level, floor)

    square = _readme_table_rows(('capacity, ', 'evict, '))
    square = [c for c in square if len(c) == 7 and not c[1].isdigit()]
    assert len(square) == 4
    for level, with_sg, without_sg, ahead_sg, with_kg, without_kg, ahead_kg in square:
        task, x = level.split(', ')[0], int(level.split(', ')[1].split()[0])
        table = md['synthetic' if task == 'capacity' else 'evict_long']
        for (a, a_md), (b, b_md), cells in ((('eda', table), ('kda safe-gate', md['safe_gate']),
                                             (with_sg, without_sg, ahead_sg)),
                                            (('eda kda-gate', table), ('kda', table), (with_kg, without_kg, ahead_kg))):
            n_ahead, diff = _md_pair(md['safe_gate'] if b == 'kda safe-gate' else table, task, x, a, b)
            means = [_md_cell(m, task, x, mixer).split(' ± ')[0] for mixer, m in ((a, a_md), (b, b_md))]
            assert cells == (*means, f'{n_ahead}, {diff}'), (level, cells)

    lm = _newest_rows('lm')
    labels = {'eda (erase, safe gate)': 'eda', 'kda with the safe gate (no erase)': 'kda safe-gate',
              "eda with KDA's gate (erase)": 'eda kda-gate', "kda (no erase, KDA's gate)": 'kda', 'gdn': 'gdn',
              'transformer': 'transformer', 'gdn2': 'gdn2'}
    lm_rows = [c for c in _readme_table_rows(tuple(labels)) if len(c) == 5 and c[1].endswith('M')]
    assert sorted(c[0] for c in lm_rows) == sorted(labels)
    for label, params, s0, s1, mean_std in lm_rows:
        losses = [lm['stdlib', '26M', labels[label], None, s]['val_loss'] for s in (0, 1)]
        mean = sum(losses) / 2
        std = (sum((v - mean) ** 2 for v in losses)) ** 0.5  # sample std of two values
        assert [s0, s1, mean_std] == [f'{losses[0]:.4f}', f'{losses[1]:.4f}', f'{mean:.4f} ± {std:.4f}'], label
        assert params == f"{lm['stdlib', '26M', labels[label], None, 0]['params'] / 1e6:.2f}M", label


def test_best_seeds_and_repeats_run_at_each_mixers_best_lr_chosen_on_the_first_seeds(tmp_path):
    """Stage one: every lr on `seeds`; stage two, in the same invocation once a mixer's lrs are in: best_seeds
    and same-seed repeats at its best lr only. The best lr stays the one chosen on `seeds`, and the report
    shows the repeats as run-to-run noise."""
    sweep(tmp_path, '--learning_rates=[1e-3, 3e-2]', "--mixers={'eda': ['--mixer=eda']}", '--best_seeds=[1]',
          '--repeats=1', '--metric=val_loss')
    got = rows(tmp_path)
    first = {r['lr']: r['val_loss'] for r in got if r['seed'] == 0 and not r.get('rep')}
    best = min(first, key=first.get)
    later = sorted((r['lr'], r['seed'], r.get('rep', 0)) for r in got[2:])
    assert len(got) == 4 and sorted(first) == [1e-3, 3e-2] and later == sorted([(best, 1, 0), (best, 0, 1)])
    table = (tmp_path / 't.md').read_text()
    assert 'Run-to-run noise' in table and f'| mqar | 4 | eda | {best:g} |' in table
    # nothing left: a rerun of the command runs nothing
    assert '0 to run' in sweep(tmp_path, '--learning_rates=[1e-3, 3e-2]', "--mixers={'eda': ['--mixer=eda']}",
                               '--best_seeds=[1]', '--repeats=1', '--metric=val_loss')


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
    subprocess.run([sys.executable, os.path.join(ROOT, 'train.py'), *json.loads(json.dumps(
        done['command'].split()[2:])), '--max_iters=3', '--overwrite=True', '--eval_only=False'],
        cwd=ROOT, capture_output=True, check=True, env=dict(os.environ, OMP_NUM_THREADS='1'))
    with open(tmp_path / 't.jsonl', 'a') as f:
        f.write(json.dumps({**done, 'status': 'timeout', 'step': 3}) + '\n')
    sweep(tmp_path, *args)
    again = rows(tmp_path)[-1]
    assert again['status'] == 'ok' and again['step'] == 6 and [c[0] for c in again['curve']] == [0, 3, 6]
    assert '--init_from=resume' in again['command']
