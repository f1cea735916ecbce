"""RESULTS.md and README.md's summary table are what scripts/results.py writes from the rows in results/, and their
tables say what those rows say: a hand-edited figure, a flipped sign, a changed count or verdict fails here."""
import json
import os
import re

import pytest

from conftest import load_script

ROOT = os.path.dirname(os.path.abspath(__file__))


def read(name):
    return open(os.path.join(ROOT, name)).read()


@pytest.fixture(scope='module')
def results():
    """scripts/results.py as a module, the sweeps' reports and figures left alone."""
    return load_script('scripts/results.py', ['results.py', '--reports=False'])


@pytest.fixture(scope='module')
def written(results):
    """(RESULTS.md, README.md) as results.py writes them from the committed rows."""
    text, block = results.build()
    return text, results.with_summary(read('README.md'), block)


def stale(committed, written):
    """The lines of a committed file that differ from what results.py writes ([] when it is up to date)."""
    a, b = committed.splitlines(), written.splitlines()
    return [x for x, y in zip(a, b) if x != y] + (['(lengths differ)'] if len(a) != len(b) else [])


def test_results_md_and_readmes_summary_are_what_scripts_results_py_writes(written):
    assert not stale(read('RESULTS.md'), written[0]), 'RESULTS.md differs from what its rows give'
    assert not stale(read('README.md'), written[1]), "README.md's summary differs from what the rows give"


@pytest.mark.parametrize('old,new', [('-7.8 points', '+7.8 points'), ("0.847 against EDA's 0.707", "0.707 against EDA's 0.847"),
                                     ('5 of 12', '7 of 12'), ('is a tie', 'is ahead'), ('1.24x FLA', '1.42x FLA')])
def test_a_corrupted_figure_in_readme_or_results_md_is_caught(written, old, new):
    """Sign flips, swapped figures, changed counts and verdicts: each edit of the committed text is a stale line."""
    for name in ('README.md', 'RESULTS.md'):
        text = read(name)
        if old in text:
            assert stale(text.replace(old, new, 1), written[name == 'README.md']), (name, old)
    assert old in read('README.md'), old  # each corruption applies to the summary itself


def test_every_grid_in_config_sweep_and_every_results_file_is_cited_in_results_md():
    for g in sorted(f for f in os.listdir(os.path.join(ROOT, 'config', 'sweep')) if f.endswith('.py')):
        assert f'config/sweep/{g}' in read('RESULTS.md'), g
    files = os.listdir(os.path.join(ROOT, 'results'))
    for f in files:  # nothing superseded kept: rows the report reads, a grid's own report and figure, a cited figure
        stem = f.rsplit('.', 1)[0]
        grid = os.path.exists(os.path.join(ROOT, 'config', 'sweep', stem + '.py'))
        assert (f.endswith('.jsonl') and (grid or f in read('scripts/results.py'))) or \
            (f.endswith(('.md', '.png')) and stem + '.jsonl' in files) or f'results/{f}' in read('RESULTS.md'), f

def test_every_row_carries_its_command_date_commit_and_device():
    for f in ('kernels.jsonl', 'model_decode.jsonl', 'train.jsonl', 'probe.jsonl'):
        for line in open(os.path.join(ROOT, 'results', f)):
            row = json.loads(line)
            assert all(row.get(k) for k in ('bench', 'run', 'command', 'date', 'commit', 'device')), (f, row)


def test_no_command_or_note_names_a_launch_setting_kernel_py_lacks():
    """Settings a benchmark once swept and that left kernel.LAUNCH leave every command that names them."""
    import kernel
    names = set(re.findall(r"'([A-Z][A-Z_0-9]+)': ", read('RESULTS.md') + read('results/kernels.jsonl')))
    assert names and names <= set(kernel.LAUNCH), names - set(kernel.LAUNCH)


def test_the_kernel_table_holds_every_timing_of_its_run(written):
    rows = [json.loads(x) for x in open(os.path.join(ROOT, 'results', 'kernels.jsonl'))]
    run = [r for r in rows if r['bench'] == 'kernel' and r['case'].startswith('FLA')][-1]['run']
    timed = [r for r in rows if r['bench'] == 'kernel' and r['run'] == run]
    assert len(timed) == 20
    for r in timed:
        assert (f"| {r['case']} | {tuple(r['shape'])} | {r['fwd_ms']:.3f} | {r['fwd_bwd_ms']:.3f} | "
                f"{r['peak_mib']:,} |") in written[0], r['case']


def test_the_training_table_is_its_rows_cell_by_cell(written):
    rows = {(r['mixer'] + r['tag'], r['block_size']): r for r in map(json.loads, open(os.path.join(
        ROOT, 'results', 'train.jsonl'))) if r['bench'] == 'train'}
    cells = re.findall(r'^\| (\d+) \| ([\d,]+) \(([\d,]+)\) \| ([\d,]+) \| ([\d.]+)x \(([\d.]+)x\) \|', written[0], re.M)
    assert len(cells) == 5
    for T, e, rc, t, ratio, rratio in cells:
        got = [rows[m, int(T)]['tok_s'] for m in ('eda', 'eda_recompute', 'transformer')]
        assert [int(x.replace(',', '')) for x in (e, rc, t)] == got
        assert (ratio, rratio) == (f'{got[0] / got[2]:.2f}', f'{got[1] / got[2]:.2f}')


def test_t_two_sided_p_and_t_critical_give_the_tables_values(results):
    for t, dof, p in ((12.706, 1, 0.05), (4.303, 2, 0.05), (3.182, 3, 0.05), (2.776, 4, 0.05), (2.228, 10, 0.05),
                      (9.925, 2, 0.01), (4.032, 5, 0.01)):
        assert abs(results.t_two_sided_p(t, dof) - p) < 2e-4, (t, dof)
        if p == 0.05:
            assert abs(results.t_critical(dof) - t) < 2e-3, dof
    assert results.t_two_sided_p(0.0, 3) == 1.0


def test_a_pair_is_ahead_only_where_its_interval_excludes_zero(results):
    assert results.paired([-0.010, -0.011, -0.009])[3] == 'A ahead'
    assert results.paired([0.010, 0.011, 0.009])[3] == 'B ahead'
    assert results.paired([-0.02, 0.001, -0.01])[3] == 'unresolved'  # wide, holding zero
    assert results.paired([-0.0001, -0.0014, 0.0005])[3].startswith('a tie')  # narrow, around zero
    mu, (lo, hi), lower, _ = results.paired([-0.0011, -0.0043, -0.0033])
    assert lower == 3 and lo < mu < hi < 0.002 and round(mu, 4) == -0.0029


def test_the_lm_section_says_not_run_yet_without_rows_and_pairs_by_seed_with_them(tmp_path, results, monkeypatch):
    monkeypatch.setattr(results, 'results_dir', str(tmp_path))
    assert 'Not run yet' in results.render(results.lm_section)[0]
    grid = results.sweep_of('config/sweep/lm.py')
    lrs, best = grid.learning_rates, grid.learning_rates[1]

    def runs(m, per_seed):  # every lr on seed 0 (best lowest), then the best lr's seeds and repeat
        out = [(lr, 0, 0, per_seed[0] + (0.0 if lr == best else 0.05)) for lr in lrs]
        out += [(best, s, 0, per_seed[s]) for s in grid.best_seeds] + [(best, 0, 1, per_seed[0])]
        return [{'task': 'stdlib', 'x': '26M', 'mixer': m, 'lr': lr, 'seed': s, 'repeat': r, 'status': 'ok',
                 'params': 1, 'val_loss': v} for lr, s, r, v in out]
    rows = runs('eda', {0: 0.70, 1: 0.72, 2: 0.74}) + runs('kda safe-gate', {0: 0.7100, 1: 0.7302, 2: 0.7498}) + \
        runs('kda', {0: 0.7300, 1: 0.7100, 2: 0.7700})
    (tmp_path / 'lm.jsonl').write_text(''.join(json.dumps(r) + '\n' for r in rows))
    text, row = results.render(results.lm_section)
    assert '| eda − kda safe-gate | the erase, behind the safe gate | -0.0100, -0.0102, -0.0098 | -0.0100 |' in text
    assert '3 of 3 | **eda ahead** |' in text and '| eda − kda | erase and gate |' in text
    assert '**unresolved** |' in text.split('| eda − kda |')[1].splitlines()[0]
    assert 'Not whole yet:** gdn2' in text and str(tmp_path) not in text

