"""RESULTS.md is what scripts/results.py writes from the results files, and its tables say what the reports and
outputs they are made from say: a hand-edited cell, a table left behind by newer results, or a README figure
that RESULTS.md does not back fails here."""
import json
import os
import re
import shutil
import subprocess
import sys

from conftest import load_script

ROOT = os.path.dirname(os.path.abspath(__file__))


def results_md():
    return open(os.path.join(ROOT, 'RESULTS.md')).read()


def test_results_md_and_the_sweep_reports_are_what_scripts_results_py_writes(tmp_path):
    shutil.copytree(os.path.join(ROOT, 'results'), tmp_path / 'results')
    p = subprocess.run([sys.executable, os.path.join(ROOT, 'scripts', 'results.py'),
                        f'--results_dir={tmp_path / "results"}', f'--out={tmp_path / "RESULTS.md"}'],
                       cwd=ROOT, capture_output=True, text=True, timeout=600, env=dict(os.environ, MPLBACKEND='Agg'))
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert (tmp_path / 'RESULTS.md').read_text() == results_md(), 'RESULTS.md differs from what its results files give'
    reports = [f for f in os.listdir(tmp_path / 'results') if f.endswith('.md')]
    assert {'synthetic.md', 'evict_long.md', 'safe_gate.md', 'defaults.md'} <= set(reports)
    for f in reports:  # each grid's own report, rebuilt from its results file
        rebuilt = (tmp_path / 'results' / f).read_text().replace(str(tmp_path / 'results'), 'results')
        assert rebuilt == open(os.path.join(ROOT, 'results', f)).read(), f'results/{f} differs from its results file'


def test_every_grid_in_config_sweep_is_cited_in_results_md():
    grids = sorted(f for f in os.listdir(os.path.join(ROOT, 'config', 'sweep')) if f.endswith('.py'))
    assert 0 < len(grids) <= 6
    for g in grids:
        assert f'config/sweep/{g}' in results_md(), g


def table_rows(text, first_cells):
    """The markdown table rows (lists of cells) of text whose first cell starts with one of first_cells."""
    cells = [[c.strip() for c in ln.strip().strip('|').split('|')] for ln in text.splitlines() if ln.startswith('| ')]
    return [c for c in cells if c[0].startswith(first_cells)]


def report_cell(md, task, x, mixer):
    """A sweep report's cell: mixer's row at level x of the task's table."""
    section = md.split(f'## {task} (difficulty')[1].split('\n## ')[0]
    header, *lines = [[c.strip() for c in ln.strip('|').split('|')] for ln in section.splitlines()
                      if ln.startswith('| ') and not ln.startswith('|---')]
    col = next(i for i, h in enumerate(header) if h.endswith(f'={x}'))
    return next(c[col] for c in lines if c[0] == mixer)


def report_pair(md, task, x, a, b):
    """A sweep report's paired-by-seed cells for A vs B at level x: ('N of M', '+d')."""
    [row] = [ln for ln in md.splitlines() if ln.startswith(f'| {task} | {x} | {a} vs {b} | ')]
    return tuple(c.strip() for c in row.strip('|').split('|')[3:5])


def test_the_erase_tables_are_the_grids_reports_cell_by_cell():
    """RESULTS.md's erase table and erase x gate square, laid out across three sweeps, against each sweep's own
    report (which the test above rebuilds from its results file)."""
    md = {n: open(os.path.join(ROOT, 'results', f'{n}.md')).read() for n in ('synthetic', 'evict_long', 'safe_gate')}
    grid = [c for c in table_rows(results_md(), ('mqar, ', 'reassign, ', 'evict, ', 'capacity, ')) if c[1].isdigit()]
    assert len(grid) == 10
    for level, steps, eda, eda_kg, kda, ahead, floor in grid:
        task, x = level.split(', ')[0], int(level.split(', ')[1].split()[0])
        table = md['evict_long' if steps == '6000' else 'synthetic']
        for mixer, cell in (('eda', eda), ('eda kda-gate', eda_kg), ('kda', kda)):
            assert report_cell(table, task, x, mixer).startswith(cell + ' lr '), (level, mixer, cell)
        assert report_pair(table, task, x, 'eda kda-gate', 'kda')[0] == ahead, (level, ahead)
        assert floor == (report_cell(table, task, x, '*NONE at every query*') if floor != '—' else '—'), level
    square = [c for c in table_rows(results_md(), ('capacity, ', 'evict, ')) if not c[1].isdigit()]
    assert len(square) == 4
    for level, with_sg, without_sg, ahead_sg, with_kg, without_kg, ahead_kg in square:
        task, x = level.split(', ')[0], int(level.split(', ')[1].split()[0])
        table = md['synthetic' if task == 'capacity' else 'evict_long']
        for (a, a_md), (b, b_md), cells in ((('eda', table), ('kda safe-gate', md['safe_gate']),
                                             (with_sg, without_sg, ahead_sg)),
                                            (('eda kda-gate', table), ('kda', table), (with_kg, without_kg, ahead_kg))):
            n_ahead, diff = report_pair(md['safe_gate'] if b == 'kda safe-gate' else table, task, x, a, b)
            means = [report_cell(m, task, x, mixer).split(' ± ')[0] for mixer, m in ((a, a_md), (b, b_md))]
            assert cells == (*means, f'{n_ahead}, {diff}'), (level, cells)


def test_the_context_table_is_the_report_as_printed_cell_by_cell():
    """RESULTS.md's training tok/s and peak memory by block_size against results/train_context.txt, read by
    scripts/plot_context.py (the figure's reader)."""
    plot_context = load_script('scripts/plot_context.py')
    runs = plot_context.read(os.path.join(ROOT, 'results', 'train_context.txt'))
    section = results_md().split('## Training speed')[1]
    rows = re.findall(r'^\| (\d+) \| ([\d,]+) \(([\d,]+)\) \| ([\d,]+) \| ([\d.]+)x \(([\d.]+)x\) \| '
                      r'([\d.]+) \(([\d.]+)\) / ([\d.]+) \|', section, re.M)
    assert [int(r[0]) for r in rows] == sorted(runs['eda']) == sorted(runs['eda_recompute']) == \
        sorted(runs['transformer'])
    num = lambda cell: float(cell.replace(',', ''))  # noqa: E731
    for T, eda_tok, rec_tok, tf_tok, ratio, rec_ratio, eda_mem, rec_mem, tf_mem in rows:
        eda, rec, tf = runs['eda'][int(T)], runs['eda_recompute'][int(T)], runs['transformer'][int(T)]
        assert (num(eda_tok), num(rec_tok), num(tf_tok)) == (eda[0], rec[0], tf[0])
        assert (float(eda_mem), float(rec_mem), float(tf_mem)) == (eda[1], rec[1], tf[1])
        assert (float(ratio), float(rec_ratio)) == (round(eda[0] / tf[0], 2), round(rec[0] / tf[0], 2))


def test_the_context_tables_change_is_each_runs_tok_s_then_and_now():
    """The table of what the kernel changes bought in training: each block_size's tok/s in the earlier report
    (results/train_context_before.txt) and the current one, and the change recomputed, for all three runs."""
    plot_context = load_script('scripts/plot_context.py')
    now = plot_context.read(os.path.join(ROOT, 'results', 'train_context.txt'))
    then = plot_context.read(os.path.join(ROOT, 'results', 'train_context_before.txt'))
    section = results_md().split('What the kernel changes since an earlier run')[1].split('\n\n', 2)[1]
    rows = [ln for ln in section.splitlines() if re.match(r'\| \d+ \|', ln)]
    assert len(rows) == len(now['eda']) == 5
    for row in rows:
        T = int(row.split('|')[1])
        cells = [f'{then[m][T][0]:,.0f} -> {now[m][T][0]:,.0f} ({now[m][T][0] / then[m][T][0] - 1:+.1%})'
                 for m in ('eda', 'eda_recompute', 'transformer')]
        assert row == f'| {T} | ' + ' | '.join(cells) + ' |', row


def test_the_kernel_tables_hold_every_timing_bench_py_printed():
    """Every timed row of results/kernel_bench.txt (bench.py's output as printed, read here with a pattern of its
    own) is a row of RESULTS.md's first kernel table with the same figures, and the per-chunk backward's design sweep
    (results/kernel_bwd_levers.txt) is its table with the ratios recomputed."""
    text = open(os.path.join(ROOT, 'results', 'kernel_bench.txt')).read()
    section = results_md().split('## Kernel speed')[1].split('\n## ')[0]
    timed = re.findall(r'\] (\S.*?) +B=(\d+) T=(\d+) H=(\d+) HV=(\d+): fwd ([\d.]+) ms, fwd\+bwd ([\d.]+) ms, '
                       r'peak (\d+) MiB', text)
    assert len(timed) >= 16
    for case, B, T, H, HV, f, fb, peak in timed:
        assert f'| {case} | ({B}, {T}, {H}, {HV}) | {f} | {fb} | {int(peak):,} |' in section, case
    text = open(os.path.join(ROOT, 'results', 'kernel_bwd_levers.txt')).read()
    for block in re.split(r'\n(?=  \(\d+, \d+, \d+, \d+\), this run)', text)[1:]:
        base = float(re.search(r"this run's settings: fwd [\d.]+ ms, fwd\+bwd ([\d.]+) ms", block)[1])
        variants = re.findall(r'sweep (\{.*?\}): fwd ([\d.]+) ms, fwd\+bwd ([\d.]+) ms', block)
        assert variants
        for variant, f, fb in variants:
            row = next(ln for ln in section.splitlines() if ln.startswith(f'| `{variant}` |'))
            assert f'{f} / {fb} ({float(fb) / base:.2f}x)' in row, (variant, row)


def test_the_lever_and_decode_tables_hold_every_timing_and_kernel_time_bench_py_printed():
    """The profiled lever runs (results/kernel_levers.txt, kernel_precision.txt, kernel_transposed.txt and the
    carveout sweep, kernel_carveout.txt): every sweep timing is a row of
    RESULTS.md with its ratio to the shipped settings recomputed and the five EDA kernels' times of its profile line;
    the shipped kernels' profiles are the rows of "Where the time goes"; every decode line of kernel_decode.txt is a
    row of the decode table."""
    section = results_md().split('## Kernel speed')[1].split('\n## ')[0]
    kernels = ('_eda_prep_kernel', '_eda_fwd_kernel', '_eda_dh_prep_kernel', '_eda_bwd_dh_kernel', '_eda_bwd_kernel')
    checked = 0
    for name in ('kernel_levers.txt', 'kernel_precision.txt', 'kernel_transposed.txt', 'kernel_carveout.txt',
                 'kernel_prep_regs.txt', 'kernel_bwd_stages.txt', 'kernel_solve.txt'):
        text = open(os.path.join(ROOT, 'results', name)).read()
        prof = {}
        for m in re.finditer(r'profile (.+?) B=(\d+) T=(\d+) H=(\d+) HV=(\d+): total [\d.]+ ms \| (.*)', text):
            times = dict(item.rsplit(' ', 1) for item in m[6].split(' | '))
            if m[1].startswith('FLA'):  # FLA's own kernels (kernel_carveout.txt profiles them too)
                continue
            prof[m[1], f'({m[2]}, {m[3]}, {m[4]}, {m[5]})'] = [times[k] for k in kernels]
        # the EDA blocks, then (bench.py's sweep_kda) the KDA path's, whose lines say so
        for block in re.split(r'\n(?=  \(\d+, \d+, \d+, \d+\), (?:KDA path )?this run)', text)[1:]:
            shape, kda, base_f, base = re.search(r"(\(\d+, \d+, \d+, \d+\)), (KDA path )?this run's settings: "
                                                 r"fwd ([\d.]+) ms, fwd\+bwd ([\d.]+) ms", block).groups()
            sweep = 'sweep KDA path' if kda else 'sweep'
            runs = [('the shipped settings', 'this run', base_f, base)] + \
                [(f'`{v}`', v, f, fb) for v, f, fb in re.findall(sweep + r' (\{.*?\}): fwd ([\d.]+) ms, '
                                                                 r'fwd\+bwd ([\d.]+) ms', block)]
            assert len(runs) >= 2
            for cell, label, f, fb in runs:
                row = f'| {cell} | {shape} | {f} / {fb} ({float(fb) / float(base):.2f}x) | ' + \
                    ' | '.join(prof[f'{sweep} {label}', shape]) + ' |'
                assert row in section, row
                checked += 1
        for case, short in (('eda_triton (EDA)', 'EDA'), ('eda_triton KDA path (e=None)', 'KDA path (e=None)')):
            for shape in {s for c, s in prof if c == case and name == 'kernel_levers.txt'}:
                assert f'| {shape} | {short} | ' in section and ' | '.join(prof[case, shape]) in section, (case, shape)
    assert checked >= 120
    decode = section.split('### Decoding one token')[1]
    for name, parts, least in (('kernel_decode.txt', slice(0, 1), 8), ('kernel_bench.txt', slice(1, 2), 4)):
        text = open(os.path.join(ROOT, 'results', name)).read()
        table = ''.join(decode.split("The first table's run")[parts])  # the decode run's rows, then the first table's
        lines = re.findall(r'\n  (\S.*?) +B=(\d+): ([\d.]+) ms graphed \((\d+) GB/s', text)
        assert len(lines) >= least, name
        for case, B, ms, gbs in lines:
            assert f'| {case} | {B} | {ms} | {gbs} |' in table, (name, case)


def test_the_lever_summary_gives_each_variants_span_against_the_shipped_settings_from_its_run():
    """The first table of "What the levers did": for every EDA variant of every lever run, the smallest and largest
    fwd+bwd against the shipped settings' first timing in its run, recomputed here from bench.py's output."""
    section = results_md().split('### What the levers did')[1].split('\n\n', 2)[2].split('\n\n')[0]
    rows = section.splitlines()[2:]
    checked = 0
    for name in ('kernel_bwd_levers.txt', 'kernel_levers.txt', 'kernel_precision.txt', 'kernel_transposed.txt',
                 'kernel_carveout.txt', 'kernel_prep_regs.txt', 'kernel_bwd_stages.txt', 'kernel_solve.txt'):
        text = open(os.path.join(ROOT, 'results', name)).read()
        commit = re.search(r'# commit: (\w+)', text)[1]
        ratios = {}
        for block in re.split(r'\n(?=  \(\d+, \d+, \d+, \d+\), (?:KDA path )?this run)', text)[1:]:
            if re.match(r'\s*\(\d+, \d+, \d+, \d+\), KDA path', block):
                continue
            base = float(re.search(r"this run's settings: fwd [\d.]+ ms, fwd\+bwd ([\d.]+) ms", block)[1])
            for v, fb in re.findall(r'\] sweep (\{.*?\}): fwd [\d.]+ ms, fwd\+bwd ([\d.]+) ms', block):
                ratios.setdefault(v, []).append(float(fb) / base)
        assert ratios, name
        for v, rs in ratios.items():
            lo, hi = f'{min(rs):.2f}x', f'{max(rs):.2f}x'
            span = lo if lo == hi else f'{lo} to {hi}'
            assert any(f'| {commit} | {span} | {len(rs)} |' in row and (f'`{v}`' in row or 'timed again' in row)
                       for row in rows), (name, v, span)
            checked += 1
    assert checked == len([r for r in rows if re.search(r'\| \w{7} \| [\d.]+x', r) and 'set_materialize' not in r])
    pattern = r'\] eda_triton \(EDA\) +B=(\d+) T=(\d+) H=(\d+) HV=(\d+): fwd [\d.]+ ms, fwd\+bwd ([\d.]+) ms'
    before, after = ({m[:4]: float(m[4]) for m in re.findall(pattern, open(os.path.join(ROOT, 'results', f)).read())}
                     for f in ('kernel_unfilled_before.txt', 'kernel_unfilled.txt'))
    rs = [after[k] / before[k] for k in before]
    lo, hi = f'{min(rs):.2f}x', f'{max(rs):.2f}x'
    assert any('set_materialize' in row and f'| {lo if lo == hi else f"{lo} to {hi}"} | {len(rs)} | kept |' in row
               for row in rows)


def test_each_lever_verdict_counts_the_shapes_where_the_variant_beat_the_shipped_settings():
    """The verdicts of the transposed products, the carveout, the preps' occupancy and the backward's stages (EDA, and
    the KDA path where the run timed it): for each variant, the shapes of its run where its fwd+bwd beat the shipped
    settings' first timing, counted here from bench.py's output; the shipped settings' second timing is given as
    noise, not as a variant."""
    section = results_md().split('## Kernel speed')[1].split('### Decoding one token')[0]
    for name, repeat, start in (('kernel_transposed.txt', "{'BWD_BV': 64}", 'The transposed products'),
                                ('kernel_carveout.txt', "{'BWD_CARVEOUT': 0}", "The per-chunk backward's shared-memory"),
                                ('kernel_prep_regs.txt', "{'PREP_MAXNREG': 0}", "The prep kernels' occupancy"),
                                ('kernel_bwd_stages.txt', "{'BWD_STAGES': 1}", "loop over its V-blocks, pipelined"),
                                ('kernel_solve.txt', "{'MERGE_FP32': 0}", "The UT solve's forward substitution")):
        part = section.split(start)[1]
        wins, noise = {}, {}
        text = open(os.path.join(ROOT, 'results', name)).read()
        for block in re.split(r'\n(?=  \(\d+, \d+, \d+, \d+\), (?:KDA path )?this run)', text)[1:]:
            kda, base = re.search(r"(KDA path )?this run's settings: fwd [\d.]+ ms, fwd\+bwd ([\d.]+) ms", block).groups()
            sweep = 'sweep KDA path' if kda else 'sweep'
            for v, _, fb in re.findall(sweep + r' (\{.*?\}): fwd ([\d.]+) ms, fwd\+bwd ([\d.]+) ms', block):
                if v == repeat:
                    noise.setdefault(sweep, []).append(abs(float(fb) / float(base) - 1))
                else:
                    wins.setdefault(sweep, {}).setdefault(v, []).append(float(fb) < float(base))
        assert 'sweep' in wins and set(wins) == set(noise) and all(len(n) == 4 for n in noise.values()), name
        parts = dict(zip(wins, part.split('The KDA path under the same settings', len(wins) - 1)))
        for sweep, text in parts.items():
            for v, won in wins[sweep].items():
                assert f'`{v}` faster at {sum(won)} of {len(won)} shapes' in text, (name, sweep, v)
            assert f'(`{repeat}`) {100 * max(noise[sweep]):.1f}% or less' in text, (name, sweep)


def test_the_fold_bound_is_one_chunks_prep_times_the_chunks_a_walk_steps_through():
    """The folded walk's lower bound: the prep kernel's time as one program alone (results/kernel_fold.txt) times
    the 16-token chunks of the sequence, plus the forward walk's time in "Where the time goes" (kernel_levers.txt)."""
    section = results_md().split('Folding the prep into the walks')[1].split('\n\n|')[1]
    fold = open(os.path.join(ROOT, 'results', 'kernel_fold.txt')).read()
    one = float(re.search(r'profile eda_triton \(EDA\) B=1 T=16 H=1 HV=1: .*?_eda_prep_kernel ([\d.]+)', fold)[1])
    levers = open(os.path.join(ROOT, 'results', 'kernel_levers.txt')).read()
    rows = re.findall(r'profile eda_triton \(EDA\) B=(\d+) T=(\d+) H=(\d+) HV=(\d+): (.*)', levers)
    assert len(rows) == 4
    for B, T, H, HV, times in rows:
        walk = float(re.search(r'_eda_fwd_kernel ([\d.]+)', times)[1])
        prep = float(re.search(r'_eda_prep_kernel ([\d.]+)', times)[1])
        n = int(T) // 16
        assert (f'| ({B}, {T}, {H}, {HV}) | {walk:.3f} + {prep:.3f} = {walk + prep:.3f} | {n} | '
                f'{walk + n * one:.3f} ({(walk + n * one) / (walk + prep):.1f}x) |') in section, T


def test_the_unfilled_gradients_table_pairs_each_case_before_and_after_from_its_two_runs():
    """The backward without zero gradients: each case and shape of the two kept runs (the commit before, the commit
    after) is one row with both fwd+bwd times and peaks as printed and their ratio recomputed."""
    section = results_md().split('The backward without zero gradients')[1].split('### Decoding one token')[0]
    pattern = (r'\] (eda_triton \S.*?) +B=(\d+) T=(\d+) H=(\d+) HV=(\d+): fwd [\d.]+ ms, fwd\+bwd ([\d.]+) ms, '
               r'peak (\d+) MiB')
    runs = [{m[:5]: m[5:] for m in re.findall(pattern, open(os.path.join(ROOT, 'results', f)).read())
             if 'check_g' not in m[0]} for f in ('kernel_unfilled_before.txt', 'kernel_unfilled.txt')]
    assert len(runs[0]) == len(runs[1]) == 8
    for (case, B, T, H, HV), (fb, peak) in runs[0].items():
        fb2, peak2 = runs[1][case, B, T, H, HV]
        assert (f'| {case} | ({B}, {T}, {H}, {HV}) | {fb} / {int(peak):,} | {fb2} / {int(peak2):,} | '
                f'{float(fb2) / float(fb):.3f}x |') in section, case


def test_every_figure_in_readmes_results_summary_is_in_the_results_md_section_it_links():
    readme = open(os.path.join(ROOT, 'README.md')).read()
    summary = readme.split('## Results', 1)[1].split('\n## ', 1)[0]
    rows = [ln for ln in summary.splitlines() if ln.startswith('| ') and 'RESULTS.md#' in ln]
    assert len(rows) >= 5
    sections = {}
    for part in results_md().split('\n## ')[1:]:
        title = part.splitlines()[0]
        sections[re.sub(r'[^\w\- ]', '', title.lower()).replace(' ', '-')] = part
    for row in rows:
        anchor = re.search(r'RESULTS\.md#([\w-]+)', row)[1]
        assert anchor in sections, anchor
        for number in re.findall(r'\d[\d,.]*\d|\d', re.sub(r'\(RESULTS\.md#[^)]*\)', '', row)):
            assert number in sections[anchor], (number, anchor)


def test_the_lm_section_is_the_lm_sweeps_own_report_once_its_results_exist(tmp_path):
    """Until results/lm.jsonl exists the section says the comparison has not been run; then it is sweep.py's
    report of that file (every mixer at its best lr, the seeds, the pairs), not a table written elsewhere."""
    import json
    results = load_script('scripts/results.py', ['results.py', f'--results_dir={tmp_path}'])
    assert 'Not run yet' in '\n'.join(results.lm_section())
    grid = results.sweep_of('config/sweep/lm.py')  # whatever the grid's task, level and mixers are
    task, (x, _) = next(iter(grid.tasks)), grid.tasks[next(iter(grid.tasks))]['levels'][0]
    a, b = list(grid.mixers)[:2]
    rows = [{'task': task, 'x': x, 'mixer': m, 'lr': lr, 'seed': seed, 'status': 'ok', 'params': 26_000_000,
             'val_loss': loss + lr * 10 + seed / 100, 'curve': [[0, 5.0, None], [100, loss, None]]}
            for m, loss in ((a, 0.78), (b, 0.80)) for lr in (1e-3, 2e-3) for seed in (0, 1)]
    (tmp_path / 'lm.jsonl').write_text(''.join(json.dumps(r) + '\n' for r in rows))
    text = '\n'.join(results.lm_section())
    assert 'Not run yet' not in text and str(tmp_path) not in text
    assert f'| {a} | 26,000,000 | 0.7950 ± 0.0071 [0.7900, 0.8000] lr 0.001 |' in text  # its best lr, both seeds
    assert text == '\n'.join(results.lm_section())  # the same file gives the same section


def test_t_two_sided_p_gives_the_tables_critical_values():
    """The closed forms against Student's t tables: p = 0.05 at the two-sided 5% critical values, 0.01 at 1%."""
    results = load_script('scripts/results.py')
    for t, dof, p in ((12.706, 1, 0.05), (4.303, 2, 0.05), (3.182, 3, 0.05), (2.776, 4, 0.05), (2.228, 10, 0.05),
                      (9.925, 2, 0.01), (4.032, 5, 0.01)):
        assert abs(results.t_two_sided_p(t, dof) - p) < 2e-4, (t, dof, results.t_two_sided_p(t, dof))
    assert results.t_two_sided_p(0.0, 3) == 1.0


def test_the_lm_verdict_decides_an_erase_pair_only_where_a_paired_t_test_says_so(tmp_path):
    """With every run of a pair's two mixers in: one lower by 0.01 on every seed (differences that barely vary)
    is decided; a larger mean difference whose sign flips from seed to seed is a tie. A mixer with runs
    still to come is named and left out of the verdict."""
    import json
    results = load_script('scripts/results.py', ['results.py', f'--results_dir={tmp_path}'])
    grid = results.sweep_of('config/sweep/lm.py')
    task, (x, _) = next(iter(grid.tasks)), grid.tasks[next(iter(grid.tasks))]['levels'][0]
    a, b = grid.pairs[0]
    lrs, best = grid.learning_rates, grid.learning_rates[1]

    def runs(m, per_seed):  # every lr on seed 0 (best lowest), then the best lr's seeds and repeat
        out = [(lr, 0, 0, per_seed[0] + (0.0 if lr == best else 0.05)) for lr in lrs]
        out += [(best, s, 0, per_seed[s]) for s in grid.best_seeds] + [(best, 0, 1, per_seed[0] + 0.0005)]
        return [{'task': task, 'x': x, 'mixer': m, 'lr': lr, 'seed': s, 'repeat': r, 'status': 'ok',
                 'params': 1, 'val_loss': v} for lr, s, r, v in out]

    def verdict(b_by_seed):
        rows = runs(a, {0: 0.70, 1: 0.72, 2: 0.74}) + runs(b, b_by_seed)
        (tmp_path / 'lm.jsonl').write_text(''.join(json.dumps(r) + '\n' for r in rows))
        return '\n'.join(results.lm_section())

    text = verdict({0: 0.7100, 1: 0.7302, 2: 0.7498})
    assert f'**{a} vs {b}**' in text and f'**{a} ahead**' in text and f'{a} lower on 3 of 3 seeds' in text
    text = verdict({0: 0.7300, 1: 0.7100, 2: 0.7700})  # a larger mean difference, but not seed by seed
    assert f'**{a} vs {b}**' in text and '**a tie at 3 seeds**' in text and f'{a} lower on 2 of 3 seeds' in text
    others = sorted(set(grid.mixers) - {a, b})
    assert f"runs of {', '.join(others)} are still to come" in text


def test_the_erase_rerun_shows_whole_levels_only_as_its_report_says_and_its_verdict_counts_them():
    """RESULTS.md shows the erase rerun's levels whose every run has a result, each cell as the grid's own report
    has it (a level with a run still to go is not shown); once the grid is whole, the verdict's counts are the
    sums of the pairs shown, and the seed-by-seed table is the results file's."""
    part = results_md().split('### On the model as shipped (A per channel)', 1)[1].split('\n### ', 1)[0]
    newest = {}
    for line in open(os.path.join(ROOT, 'results', 'erase.jsonl')):
        r = json.loads(line)
        newest[r['task'], r['x'], r['mixer'], r['seed']] = r
    mixers = ('eda', 'kda', 'eda kda-gate', 'kda safe-gate')
    levels = {(t, x) for t, x, _, _ in newest}
    whole = {lv for lv in levels
             if sum(newest.get((*lv, m, s), {}).get('status') == 'ok' for m in mixers for s in (0, 1, 2)) == 12}
    shown = [c for c in table_rows(part, ('capacity ', 'evict ')) if '→' not in c[1]]
    assert {(c[0].split()[0], int(c[0].split()[1])) for c in shown} == whole
    md = open(os.path.join(ROOT, 'results', 'erase.md')).read()
    for level, *cells in shown:
        task, x = level.split()[0], int(level.split()[1])
        for (a, b), (mean_a, mean_b, ahead) in zip((('eda kda-gate', 'kda'), ('eda', 'kda safe-gate')),
                                                    (cells[:3], cells[3:])):
            assert report_cell(md, task, x, a).split(' ± ')[0] == mean_a and \
                report_cell(md, task, x, b).split(' ± ')[0] == mean_b, (level, a, b)
            assert ', '.join(report_pair(md, task, x, a, b)) == ahead, (level, a, b)
    if 'Not whole yet' in part:
        assert 'Verdict' not in part
        return
    assert len(whole) == len(levels) == 4
    for col, pair in ((3, "behind KDA's gate the erase"), (6, 'Behind the safe gate')):
        n = sum(int(c[col].split(' of ')[0]) for c in shown)
        m = sum(int(c[col].split(' of ')[1].split(',')[0]) for c in shown)
        assert re.search(re.escape(pair) + r'[^.]*?: ahead on ' + f'{n} of {m}' + r'\b', part), (pair, n, m)
    changed = [c for c in table_rows(part, ('capacity ', 'evict ')) if '→' in c[1]]
    assert len(changed) == 4
    for level, *cells in changed:  # one A per head -> A per channel: the after-value is the rerun report's mean
        task, x = level.split()[0], int(level.split()[1])
        for mixer, cell in zip(('eda', 'kda', 'eda kda-gate', 'kda safe-gate'), cells):
            assert cell.split(' → ')[1] == report_cell(md, task, x, mixer).split(' ± ')[0], (level, mixer)
    runs = table_rows(part, ('capacity', 'evict'))
    runs = [c for c in runs if c[1].isdigit()]
    assert len(runs) == 16
    for task, x, mixer, lr, seeds in runs:
        want = '; '.join(f"{s}: {100 * newest[task, int(x), mixer, s]['val_acc']:.1f}" for s in (0, 1, 2))
        assert seeds == want, (task, x, mixer)
