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


def kernel_figure():
    """The kernel summary's figure against FLA as README.md has it (each rerun changes it)."""
    m = re.search(r'\d+\.\d+x FLA', read('README.md'))
    return m.group(0) if m else 'no figure against FLA in README.md'


@pytest.fixture(scope='module')
def results():
    """scripts/results.py as a module, the sweeps' reports and figures left alone."""
    return load_script('scripts/results.py', ['results.py', '--reports=False'])


@pytest.fixture(scope='module')
def written(results):
    """(RESULTS.md, README.md) as results.py writes them from the committed rows."""
    return results.build()


def stale(committed, written):
    """The lines of a committed file that differ from what results.py writes ([] when it is up to date)."""
    a, b = committed.splitlines(), written.splitlines()
    return [x for x, y in zip(a, b) if x != y] + (['(lengths differ)'] if len(a) != len(b) else [])


def test_results_md_and_readmes_summary_are_what_scripts_results_py_writes(written):
    assert not stale(read('RESULTS.md'), written[0]), 'RESULTS.md differs from what its rows give'
    assert not stale(read('README.md'), written[1]), "README.md's summary differs from what the rows give"


@pytest.mark.parametrize('old,new', [('-7.8 points', '+7.8 points'), ('KDA 0.844 (untrained 0.829), EDA 0.725',
                                                                      'KDA 0.725 (untrained 0.829), EDA 0.844'),
                                     ('5 of 12', '7 of 12'), ('behind the safe gate: not resolved',
                                                              'behind the safe gate: eda ahead'),
                                     (kernel_figure(), '9.99x FLA')])
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
    """Settings a benchmark once swept and that left kernel.LAUNCH leave every command and note that names them
    (as NAME=value or 'NAME': value; scripts/gpu_train_check.sh's knobs are not launch settings)."""
    import kernel
    notes = ''.join(read(os.path.join('notes', f)) for f in os.listdir(os.path.join(ROOT, 'notes')))
    text = read('RESULTS.md') + read('README.md') + read('results/kernels.jsonl') + notes
    knobs = re.search(r'for knob in ([A-Z_ ]+);', read('scripts/gpu_train_check.sh')).group(1).split()
    names = set(re.findall(r"\b([A-Z][A-Z0-9]*_[A-Z0-9_]+)(?:=|': )", text)) - set(knobs)
    assert names and names <= set(kernel.LAUNCH), names - set(kernel.LAUNCH)


def test_the_kernel_table_holds_every_timing_of_its_run(written):
    rows = [json.loads(x) for x in open(os.path.join(ROOT, 'results', 'kernels.jsonl'))]
    run = [r for r in rows if r['bench'] == 'kernel' and r['case'].startswith('FLA')][-1]['run']  # the table's run
    timed = [r for r in rows if r['bench'] == 'kernel' and r['run'] == run]
    assert len(timed) == 16  # 4 shapes x (EDA, KDA path, FLA, FLA safe gate)
    for r in timed:
        assert (f"| {r['case']} | {tuple(r['shape'])} | {r['fwd_ms']:.3f} | {r['fwd_bwd_ms']:.3f} | "
                f"{r['peak_mib']:,} |") in written[0], r['case']


def test_the_training_table_is_its_rows_cell_by_cell(written):
    rows = {(r['mixer'] + r['tag'], r['block_size']): r for r in map(json.loads, open(os.path.join(
        ROOT, 'results', 'train.jsonl'))) if r['bench'] == 'train'}
    cells = re.findall(r'^\| (\d+) \| ([\d,]+) \(([\d,]+)\) \| ([\d,]+) \| ([\d.]+)x \(([\d.]+)x\) \|', written[0], re.M)
    assert len(cells) == len({T for _, T in rows}) == 3
    for T, e, rc, t, ratio, rratio in cells:
        got = [rows[m, int(T)]['tok_s'] for m in ('eda', 'eda_recompute', 'transformer')]
        assert [int(x.replace(',', '')) for x in (e, rc, t)] == got
        assert (ratio, rratio) == (f'{got[0] / got[2]:.2f}', f'{got[1] / got[2]:.2f}')


def test_provenance_names_each_run_with_its_count_and_says_what_a_row_does_not_record():
    rows = load_script('scripts/rows.py')
    runs = [dict(date='2026-01-02 10:00', commit='abc', device='gpu', torch='2.1', triton='3.0')] * 2 + [{}]
    assert rows.made(runs, 'runs') == ('Runs made 2026-01-02 at commit abc on gpu, torch 2.1, triton 3.0 (2 runs); '
                                       'date not recorded at commit not recorded on a device not recorded (1 run).')
    assert rows.made([dict(runs[0], note='Idle')], note=True) == \
        'Made 2026-01-02 at commit abc on gpu, torch 2.1, triton 3.0. Idle.'


def test_a_results_file_cut_mid_line_or_missing_is_one_line_naming_it(tmp_path, results, monkeypatch):
    monkeypatch.setattr(results, 'results_dir', str(tmp_path))
    (tmp_path / 'probe.jsonl').write_text('{"bench": "probe"}\n{"bench": "pro')
    for name in ('probe.jsonl', 'train.jsonl'):
        with pytest.raises(SystemExit, match=f'results.py: {tmp_path / name} has no rows, or a line that is not JSON'):
            results.read_rows(name)


def lm_long_rows(tmp_path, results, loss_past):
    """Rows of the LM grid for two of its mixers at 3 seeds: train.py's val loss and eval.py's text and needles,
    the text loss past the block given per (mixer, seed)."""
    rows, evals = [], []
    for (m, seed), past in loss_past.items():
        key = dict(task='stdlib', x='26M', mixer=m, lr=None, seed=seed, repeat=0)
        rows.append(dict(key, status='ok', params=1, val_loss=0.7, date='2026-01-01', commit='abc', device='gpu'))
        text = dict(window=4096, windows=2, edges=[0, 1024, 2048, 4096], val_loss=0.7, carried=[0.8, past, past],
                    reset=[0.8, 0.75, 0.75])
        needles = dict(choices=4, chance=0.25, trials=10, cells=[
            dict(variant=v, multiple=1, context=1024, depth=0.5, acc=0.5, stale=0.1) for v in ('bound', 'rebound')])
        evals += [dict(key, what='text', text=text, date='2026-01-01 00:00', commit='abc', device='gpu'),
                  dict(key, what='needles', needles=needles, date='2026-01-01 00:00', commit='abc', device='gpu')]
    for name, rs in (('lm_long.jsonl', rows), ('lm_long_eval.jsonl', evals)):
        (tmp_path / name).write_text(''.join(json.dumps(r) + '\n' for r in rs))


def test_the_lm_sections_say_not_run_yet_without_rows_and_pair_the_long_figures_by_seed(tmp_path, results,
                                                                                      monkeypatch):
    monkeypatch.setattr(results, 'results_dir', str(tmp_path))
    assert 'Not run yet' in results.render(results.lm_section)[0]
    assert 'Not run yet' in results.render(results.lm_long_section)[0]
    lm_long_rows(tmp_path, results, {('eda', 0): 0.60, ('eda', 1): 0.61, ('eda', 2): 0.62,
                                     ('kda safe-gate', 0): 0.70, ('kda safe-gate', 1): 0.70, ('kda safe-gate', 2): 0.73})
    text, row = results.render(results.lm_long_section)
    line = [x for x in text.splitlines() if x.startswith('| eda − kda safe-gate |')][0].split(' | ')
    assert line[1] == '+0.0000 [+0.0000, +0.0000] 0/3, p 1.00'  # the same val loss: no seed better, no verdict
    # past the block: (1024 * past + 2048 * past) / 3072 = past, eda lower by 0.10, 0.09, 0.11 -> mean -0.1000
    assert line[2].startswith('**-0.1000 [') and line[2].endswith('3/3, p 0.25, eda ahead**')
    assert 'the erase behind the safe gate: eda ahead' in text and str(tmp_path) not in text


def test_the_figures_and_the_run_tables_are_drawn_from_the_rows(tmp_path):
    """With reports on, every figure RESULTS.md shows, and the length grid's seed-by-seed table it links to, are
    drawn again from the committed rows (into a copy)."""
    pytest.importorskip('matplotlib', reason='matplotlib is optional; the figures are skipped without it')
    import shutil
    shutil.copytree(os.path.join(ROOT, 'results'), tmp_path / 'results')
    for f in (tmp_path / 'results').glob('*.png'):
        if f.name != 'probe_lm.png':  # probe.py draws that one, where the checkpoints are
            f.unlink()
    (tmp_path / 'results' / 'length_runs.md').unlink()  # the seed-by-seed table RESULTS.md links to
    mod = load_script('scripts/results.py', ['results.py', f'--results_dir={tmp_path / "results"}'])
    text, _ = mod.build()
    shown = re.findall(r'\]\(results/([\w.]+\.png)\)', text)
    assert len(shown) >= 5
    for name in shown:
        assert (tmp_path / 'results' / name).stat().st_size > 10_000, name
    runs = (tmp_path / 'results' / 'length_runs.md').read_text()
    assert '| evict | gdn | 98.8 / 56.8 | 99.0 / 43.6 |' in runs and runs.count('| reassign |') == 5


def length_rows(tmp_path, evict=None):
    """The length grid's committed reassign rows copied to tmp_path, with each run again as task 'evict' where evict
    gives its accuracy per mixer (the seed adding 0.001 a seed), and a grid that names another evict level."""
    for name in ('length.jsonl', 'length_eval.jsonl'):
        rows = [r for r in map(json.loads, open(os.path.join(ROOT, 'results', name))) if r['task'] == 'reassign']
        for r in list(rows) if evict else []:
            r = dict(json.loads(json.dumps(r)), task='evict', x=4)  # a deep copy
            for x in r.get('length', []):
                x.update(dict.fromkeys(('acc', 'acc_value', 'acc_none'), evict[r['mixer']] + 0.001 * r['seed']))
            rows.append(r)
        (tmp_path / name).write_text(''.join(json.dumps(r) + '\n' for r in rows))
    (tmp_path / 'length.py').write_text(read('config/sweep/length.py') + "tasks['evict'] = {'config': "
                                        "'config/reassign.py', 'x': 'num_updates', 'levels': [[4, ['--dataset=evict', "
                                        "'--num_updates=4', '--max_iters=6000', '--eval_interval=500']]]}\n")


@pytest.fixture
def in_tmp(tmp_path, results, monkeypatch):
    """results.py reading tmp_path, the length grid from tmp_path/length.py."""
    sweep_rows = results.sweep_rows
    monkeypatch.setattr(results, 'results_dir', str(tmp_path))
    monkeypatch.setattr(results, 'sweep_rows', lambda grid: sweep_rows(
        str(tmp_path / 'length.py') if grid == 'config/sweep/length.py' else grid))
    return results


def test_the_length_section_gives_every_task_in_the_rows_its_own_tables_and_verdicts(tmp_path, in_tmp):
    length_rows(tmp_path, {'eda': 0.9, 'kda': 0.9, 'eda kda-gate': 0.95, 'kda safe-gate': 0.9, 'gdn': 0.9})
    text, row = in_tmp.render(in_tmp.length_section)
    assert text.index('**reassign**') < text.index('**evict**') and text.count('| A − B | per seed') == 2
    assert "config/reassign.py's 2-layer models are trained on reassign (16 live pairs, 16 overwrites and moves, " \
           "256 tokens) for 1500 steps; evict (16 live pairs, 4 updates, 256 tokens) for 6000 steps" in text and '# 80 runs' in text and "evict's level and step budget" in text
    reassign, evict = text.split('**evict**')  # everything up to reassign's verdicts; evict's verdicts
    assert '| evict | kda | 90.4 |' in reassign  # one by-length table, a row per task and mixer
    assert 'In plain words: 0 of the 5 pairs' in reassign
    assert 'In plain words: 2 of the 5 pairs' in evict  # eda kda-gate 5 points ahead of kda and of eda, every seed
    assert '| eda kda-gate − kda | ' + ', '.join(['+5.0'] * 8) + ' | **+5.0 [+5.0, +5.0] 8/8, p 0.01, ' \
           'eda kda-gate ahead** |' in evict
    assert row[1].startswith('reassign at 1x-16x') and "; evict at 1x-16x of 256 tokens, 8 seeds, 5 mixers: the " \
        "mixers' means fall from 90.4-95.3% to 90.4-95.3% at 16x; the erase behind the safe gate is not resolved, " \
        "behind KDA's gate eda kda-gate ahead" in row[1] and 'seed-to-seed' not in row[1]  # a pair is resolved
    assert 'larger than the differences' in reassign and 'larger than the differences' not in evict


def test_the_length_section_says_what_the_evict_pilot_found_once_its_rows_exist(tmp_path, in_tmp):
    length_rows(tmp_path)
    assert '`config/sweep/evict_pilot.py` (not run yet)' in in_tmp.render(in_tmp.length_section)[0]
    rows = [dict(task='evict', x=x, mixer=m, lr=1e-3, seed=0, repeat=0, status='ok', curve=[
        [0, 9.0, 0.0], [500, 1.0, 0.9], [1000, 0.1, 0.98 if m == 'gdn' or x == 4 else 0.995],
        [1500, 0.05, 0.97 if x == 4 and m == 'kda' else 0.992]]) for x in (2, 4)
        for m in ('eda', 'kda', 'eda kda-gate', 'kda safe-gate', 'gdn')]
    (tmp_path / 'evict_pilot.jsonl').write_text(''.join(json.dumps(r) + '\n' for r in rows))
    text = in_tmp.render(in_tmp.length_section)[0]
    assert '`config/sweep/evict_pilot.py` (with 2 updates every run was at 99% or more from step 1500; with 4 ' \
           'updates not every run reached 99%).' in text, text
