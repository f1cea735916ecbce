"""
RESULTS.md from the files in results/: every table in it is made here from the file that holds the runs (a
sweep's JSONL rows, a benchmark's output as printed), or computed from the code (the parameter counts), and
each section names the command that reproduces it and the date, commit and device of its runs. The sweeps'
own reports (results/<grid>.md, .png) are rebuilt on the way. A results file is what to change, never
RESULTS.md: test_results.py rebuilds it and fails when the committed file differs.

    python scripts/results.py                                   # RESULTS.md and the sweeps' reports
    python scripts/results.py --results_dir=/tmp/r --out=/tmp/r/RESULTS.md   # elsewhere (the test)
"""
import importlib.util
import json
import math
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from configurator import configure  # noqa: E402

# ----------------------------------------------------------------------------------------------------
out = 'RESULTS.md'            # written here (relative to the repository)
results_dir = 'results'       # the results files read, and where the sweeps' reports and figures go
configure(globals())
# ----------------------------------------------------------------------------------------------------
os.chdir(ROOT)  # the grids and configs name their files from the repository's root

# The paper's numbers this file sets ours beside (Table 7; Sec. 4.4's memory-state probes)
TABLE7 = {('dense', 'transformer'): (2.5052, 2.5052), ('dense', 'gdn'): (2.5035, 2.5035),
          ('dense', 'gdn2'): (2.5353, 2.5353), ('dense', 'kda'): (2.5218, 2.5218), ('dense', 'eda'): (2.5295, 2.5295),
          ('moe', 'gdn'): (24.5676, 2.7236), ('moe', 'kda'): (24.6324, 2.7885), ('moe', 'eda'): (24.6558, 2.8119)}
PAPER_PROBES = {'shares': '35.4 / 31.8 / 32.8 %', 'retained': '69.1 %, ≈ 3.0x', 'perturbation': '0.064 / 0.143 / 0.115 / 0.223',
                'fold': '2.4x / 1.9x / 3.4x', 'cos': '0.105 (0.0707)', 'recall': 'KDA ahead of EDA'}
MIXER_NAMES = {'eda': 'EDA', 'kda': 'KDA', 'gdn': 'GDN', 'gdn2': 'GDN-2', 'transformer': 'Transformer (no conv)'}


def rel(path):
    """A path as RESULTS.md links it (results_dir may be elsewhere: a test's copy)."""
    return os.path.join('results', os.path.relpath(path, results_dir))


def table(header, rows):
    return ['| ' + ' | '.join(header) + ' |', '|' + '---|' * len(header)] + \
           ['| ' + ' | '.join(str(c) for c in row) + ' |' for row in rows] + ['']


def read_text_result(name):
    """A result kept as printed, under its '# key: value' lines (command, date, commit, device): (meta, lines)."""
    meta, lines = {}, []
    for line in open(os.path.join(results_dir, name)):
        m = re.match(r'# (\w+): (.*)', line)
        if m and not lines:
            meta[m[1]] = m[2].strip()
        else:
            lines.append(line.rstrip('\n'))
    return meta, lines


def made(meta):
    """The provenance line of a result kept with its meta fields."""
    return f"Made {meta['date']} at commit {meta['commit']} on {meta['device']}."


def sweep_of(grid):
    """sweep.py as a module for one grid (its settings, its rows, its report), reading and writing results_dir."""
    argv, sys.argv = sys.argv, ['sweep.py', grid, f'--results_dir={results_dir}', '--report_only=True']
    try:
        spec = importlib.util.spec_from_file_location('sweep_' + os.path.basename(grid)[:-3],
                                                      os.path.join(ROOT, 'sweep.py'))
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        sys.argv = argv
    return mod


def config_values(path):
    """A train.py config file's settings (it is plain assignments)."""
    scope = {}
    exec(compile(open(os.path.join(ROOT, path)).read(), path, 'exec'), scope)
    return scope


def sweep_report(grid):
    """(the grid's sweep module, its rows, their summary); the grid's own report (.md, .png) rebuilt."""
    sw = sweep_of(grid)
    rows = sw.read_results(sw.results_path)
    if rows:
        sw.report(rows)
    return sw, rows, sw.summarize(rows)


# ----------------------------------------------------------------------------------------------------
# Sections


def intro():
    return ['# Results', '',
            'Every measured result of this repository. `python scripts/results.py` writes this file from the results '
            'files in `results/` (the sweeps\' rows as their runs wrote them, benchmarks\' output as printed): edit '
            'those, never this file (`test_results.py` fails when it differs from what the script writes). Each '
            'section gives the command that reproduces it and the date, commit and device of its runs; for runs '
            'made before the tools recorded it, the commit is the one that added the result to the repository.', '',
            '- [Does the erase help? Synthetic recall](#does-the-erase-help-synthetic-recall)',
            '- [Every default recipe learns](#every-default-recipe-learns)',
            '- [The language-model comparison](#the-language-model-comparison)',
            '- [What the memory does: the probes](#what-the-memory-does-the-probes)',
            "- [The paper's models: parameter counts (Table 7)](#the-papers-models-parameter-counts-table-7)",
            '- [Kernel speed](#kernel-speed)', '- [Training speed](#training-speed)',
            '- [Decoding speed](#decoding-speed)', '']


LEVEL = {'mqar': 'pairs', 'reassign': 'updates', 'evict': 'updates', 'capacity': 'live pairs'}


def erase_rows(grid, ev, sq):
    """The erase benchmark's table rows, each task and level of the grid (evict also at 6000 steps); sq gets the
    three mixers' summaries of each, for the square and the counts."""
    (sw, _, s), (_, _, s_long) = grid, ev
    rows = []
    for task in ('mqar', 'reassign', 'evict', 'capacity'):
        spec = sw.tasks[task]
        for summary, steps in ((s, 2000), (s_long, 6000)) if task == 'evict' else ((s, 2000),):
            for x, _ in spec['levels']:
                cells = [summary.get((task, x, m)) for m in ('eda', 'eda kda-gate', 'kda')]
                if None in cells:
                    continue
                ahead = sw.pair_stats(cells[1], cells[2])
                floor = sw.fmt(spec['floor'][1][x]) if 'floor' in spec else '—'
                rows.append([f'{task}, {x} {LEVEL[task]}', steps, *[re.sub(r' lr \S+', '', sw.cell(c, 0)) for c in cells],
                             f'{ahead[0]} of {ahead[1]}', floor])
                sq.setdefault(task, {})[x, steps] = cells
    return rows


def square_rows(sw, sq, safe):
    """The erase x gate square: the erase behind each gate, paired by seed, where all four mixers ran; its
    rows, the paired seeds the erase wins behind each gate, and each mixer's mean by (task, level)."""
    rows, counts, means = [], {'safe': [0, 0], 'kda': [0, 0]}, {}
    for task, levels in sq.items():
        for (x, steps), (eda, eda_kg, kda) in levels.items():
            kda_sg = safe.get((task, x, 'kda safe-gate'))
            if kda_sg is None or (task == 'evict' and steps != 6000):
                continue
            means[task, x] = {'eda': eda['mean'], 'kda': kda['mean'], 'eda kda-gate': eda_kg['mean'],
                              'kda safe-gate': kda_sg['mean']}
            cells = []
            for gate, (a, b) in (('safe', (eda, kda_sg)), ('kda', (eda_kg, kda))):
                n, m, d = sw.pair_stats(a, b)
                counts[gate] = [counts[gate][0] + n, counts[gate][1] + m]
                cells += [sw.fmt(a['mean']), sw.fmt(b['mean']), f'{n} of {m}, {sw.fmt_diff(d)}']
            rows.append([f'{task}, {x} {LEVEL[task]} ({steps} steps)', *cells])
    return rows, counts, means


def erase_section():
    grid, ev, sg = (sweep_report(f'config/sweep/{g}.py') for g in ('synthetic', 'evict_long', 'safe_gate'))
    sq = {}
    rows = erase_rows(grid, ev, sq)
    square, counts, before = square_rows(grid[0], sq, sg[2])  # before: the means with one A per head
    ahead = {}  # the erase behind KDA's gate where it was learned (evict at 6000 steps) or not: [ahead, compared]
    for task, levels in sq.items():
        for (x, steps), (eda, eda_kg, kda) in levels.items():
            if task == 'evict' and steps != 6000:
                continue
            group = ahead.setdefault(task in ('capacity', 'evict'), [0, 0])
            n, m, _ = grid[0].pair_stats(eda_kg, kda)
            group[0], group[1] = group[0] + n, group[1] + m
    rerun, holds = erase_rerun(ahead[True], before)
    return ['## Does the erase help? Synthetic recall', '',
            "The paper's claim is that an erase at its own address helps the memory. The tasks (`data/synthetic.py`): "
            'mqar (store and recall), reassign (overwrites and explicit moves: the old key must read NONE), capacity '
            '(reassign where every update is a move and the live bindings approach the state\'s key dimension, so '
            'stale addresses must be cleared to make room) and evict (values are unique: `k\' v` unbinds v\'s old '
            'key k, which the current token never names). Models: `config/mqar.py`\'s, 2 layers, 2 linear-attention '
            'heads of 64 x 64 state (~2.5M parameters). EDA with KDA\'s decay gate differs from KDA only by the erase: '
            'that pair is the erase\'s own effect; EDA\'s default (the safe gate) differs from KDA by the gate too. '
            'A seed fixes the data and the init, so runs pair up by seed: "ahead" counts the paired seeds one mixer '
            'wins, then the mean difference in points.', '', *rerun,
            '### The full benchmark, run with one A per head', '',
            'All four tasks at two levels each, run when the decay amplitude A was one per value head (the model '
            'as shipped keeps one per channel, above):', '',
            '```sh', 'python sweep.py config/sweep/synthetic.py --jobs=4    # 4 tasks x 2 levels x 3 mixers x lr 1e-3, '
            '3e-3 x seeds 0-2, 2000 steps: 144 runs',
            'python sweep.py config/sweep/evict_long.py --jobs=4   # evict at 6000 steps, lr 1e-3: 18 runs',
            'python sweep.py config/sweep/safe_gate.py --jobs=4    # KDA with the safe gate (EDA minus the erase): 12 runs',
            '```', '',
            *[f'`{g}`: {s[0].provenance(s[1])}' for g, s in (('synthetic', grid), ('evict_long', ev), ('safe_gate', sg))],
            '', 'Validation accuracy (%) at each mixer\'s best lr (1e-3 for every mixer and level), mean ± std over '
            'seeds 0-2 [min, max]; "erase ahead": the seeds on which EDA with KDA\'s gate beats KDA. The floor is '
            'what answering NONE at every query scores.', '',
            *table(['task, level', 'steps', 'eda', "eda with KDA's gate", 'kda', 'erase ahead (seeds)', 'floor'], rows),
            f'![synthetic grid: accuracy against difficulty]({rel(os.path.join(results_dir, "synthetic.png"))})',
            f'![evict at 6000 steps]({rel(os.path.join(results_dir, "evict_long.png"))})', '',
            'The erase x gate square: mean accuracy (%) with and without the erase behind each gate, and the paired '
            'seeds the erase wins.', '',
            *table(['task, level', 'safe gate: with erase (eda)', 'without (kda safe-gate)', 'erase ahead',
                    "KDA's gate: with erase", 'without (kda)', 'erase ahead'], square),
            f"On these runs the erase behind KDA's gate was ahead on {ahead[True][0]} of {ahead[True][1]} paired seeds "
            f"of capacity and of evict at 6000 steps, and on {ahead[False][0]} of {ahead[False][1]} of mqar and "
            f"reassign; behind the safe gate, on {counts['safe'][0]} of {counts['safe'][1]} of the square's. They "
            'read as an erase that ties on pure recall and on reassignment and helps where stale bindings must be '
            'removed to make room or are unbound implicitly, once the task is learned at all (no mixer learned evict '
            'in 2000 steps), its gain in recalling values rather than in answering NONE (the reports\' "values vs '
            'NONE" tables); most capacity curves were still rising at step 2000. '
            + ('The rerun on the model as shipped (above) holds that reading at capacity and evict.' if holds else
               'The rerun on the model as shipped (above) does not hold that reading at capacity and evict, where '
               'A per channel changed the mixers with KDA\'s gate, with the erase and without it (the table there '
               'compares both models).'), '',
            'Full reports (every lr, every run, the pairs, values vs NONE): '
            + ', '.join(f'[`{rel(os.path.join(results_dir, g + ".md"))}`]({rel(os.path.join(results_dir, g + ".md"))})'
                        for g in ('synthetic', 'evict_long', 'safe_gate', 'erase')) + '.', '']


def with_result(sw, rows):
    """The keys of the grid's runs that have a result: finished, or diverged (a result too, not run again)."""
    return {sw.key(r) for r in rows if r['status'] in ('ok', 'diverged')}


def erase_rerun(old, before):
    """The square on the model as shipped (A per channel), capacity and evict, and its verdict; or how far the
    grid is. old: [ahead, compared] of the erase behind KDA's gate at these levels in the runs with one A per
    head; before: those runs' mean accuracies by level and mixer. Returns (lines, whether the rerun holds the
    earlier runs' reading)."""
    sw, rows, _ = sweep_report('config/sweep/erase.py')
    head = ['### On the model as shipped (A per channel): capacity and evict', '',
            'The decay amplitude A of the channel-wise gates is one per channel (Eq. safe_gate\'s A_i). The four '
            'mixers of the erase x gate square at the levels and seeds where the erase\'s effect was largest in the '
            'full benchmark below (run with one A per head), capacity at 2000 steps and evict at 6000, lr 1e-3, '
            'seeds 0-2:', '', '```sh', 'python sweep.py config/sweep/erase.py --jobs=4    # 2 tasks x 2 levels x 4 '
            'mixers x 3 seeds: 48 runs', '```', '']
    if not rows:
        return head + ['Not run yet.', ''], True
    ok = with_result(sw, rows)
    n = sum(1 for _ in sw.grid(rows))
    if len(ok) < n:  # a failed run of a half-done grid is one still to run again, not a result: no tables yet
        return head + [f'Not whole yet: {len(ok)} of its {n} runs are in `{rel(sw.results_path)}` (the same command '
                       f'runs the rest, failed ones included); no verdict until the grid is whole.', '',
                       *whole_levels(sw, rows, ok)], True
    summary = sw.summarize(rows)
    levels = [(t, x) for t in sw.tasks for x, _ in sw.tasks[t]['levels']]
    verdict = {}
    for a, b in sw.pairs:
        stats = [(t, x, *sw.pair_stats(summary[t, x, a], summary[t, x, b])) for t, x in levels]
        verdict[a, b] = (sum(s[2] for s in stats), sum(s[3] for s in stats), sum(s[4] for s in stats) / len(stats),
                         stats)
    done = [r for r in rows if sw.key(r) in ok]
    floor = sum(r['val_acc'] < sw.tasks[r['task']]['floor'][1][r['x']] + 0.02 for r in done)
    rising = {}  # task: [runs still gaining more than a point at their last evaluation, runs, steps between evals]
    for r in done:
        (s0, _, a0), (s1, _, a1) = r['curve'][-2:]
        rising.setdefault(r['task'], [0, 0, s1 - s0])
        rising[r['task']][0] += a1 - a0 > 0.01
        rising[r['task']][1] += 1
    unconverged = '; '.join(f'{k} of the {j} {t} runs' for t, (k, j, _) in rising.items() if k)
    steps = sorted({e for k, _, e in rising.values() if k})
    word = lambda n, m: ('is ahead' if n >= 0.75 * m else 'is behind' if n <= 0.25 * m else  # noqa: E731
                         'shows no consistent effect')
    n, m, d, stats = verdict['eda kda-gate', 'kda']
    by_level = '; '.join(f'{t} {x} {LEVEL[t]}: {k} of {j}, {sw.fmt_diff(e)}' for t, x, k, j, e in stats)
    sn, sm, sd, _ = verdict['eda', 'kda safe-gate']
    holds = word(n, m) == word(*old)
    report = open(os.path.join(results_dir, f'{sw.name}.md')).read()
    every = report.split('\n## Every run', 1)[1].split('\n## ', 1)[0].splitlines()
    return head + [sw.provenance(rows), '', 'Mean accuracy (%) over seeds 0-2 and the pairs by seed; the runs '
                   f'seed by seed below, and every cell of them in [`results/{sw.name}.md`](results/{sw.name}.md):',
                   '', *whole_levels(sw, rows, ok, intro=False),
                   f'**Verdict: behind KDA\'s gate the erase {word(n, m)}**: ahead on {n} of {m} paired seeds '
                   f'(mean {sw.fmt_diff(d)} points; {by_level}). Behind the safe gate (EDA against KDA with the safe '
                   f'gate) it {word(sn, sm)}: ahead on {sn} of {sm}, mean {sw.fmt_diff(sd)}. {floor} of the '
                   f'{len(ok)} runs ended within 2 points of the floor (answering NONE at every query): a seed often '
                   'either learns the task or stays at the floor, and three seeds a level leave wide spreads. '
                   + (f'Not all converged: {unconverged} still gained more than a point over their last '
                      f'{" or ".join(map(str, steps))} steps. ' if unconverged else '')
                   + 
                   f'The runs with one A per head had the erase behind KDA\'s gate ahead on {old[0]} of {old[1]} '
                   f'paired seeds of these levels; on the model as shipped that lead '
                   f'{"holds" if holds else "does not repeat"}.', '',
                   'What A per channel changed: mean accuracy (%) over seeds 0-2 with one A per head, then on the '
                   'model as shipped (the same levels, steps, lr and seeds). At init the safe gate\'s A is 1 '
                   '(`la_A_init`) in both models; KDA\'s gate draws A ~ U(1, 16), once per head before and once per '
                   'channel now:', '',
                   *table(['level', *sw.mixers], [[f'{t} {x} {LEVEL[t]}', *[
                       f"{sw.fmt(before[t, x][m])} → {sw.fmt(summary[t, x, m]['mean'])}" for m in sw.mixers]]
                       for t, x in levels if (t, x) in before]),
                   '#### Every run (seed: validation accuracy %)', *every[1:], '',
                   f'![the rerun: accuracy against difficulty](results/{sw.name}.png)', ''], holds


def whole_levels(sw, rows, ok, intro=True):
    """A grid's levels whose runs all have a result, as the square: each pair of the grid by seed. A level is
    shown whole or not at all, so that no mixer is read from the seeds that happened to finish first."""
    have = {}
    for row, _ in sw.grid(rows):
        have.setdefault((row['task'], row['x']), []).append(sw.key(row) in ok)
    whole = [level for level, runs in have.items() if all(runs)]
    if not whole:
        return []
    summary = sw.summarize([r for r in rows if sw.key(r) in ok])
    out = []
    for task, x in whole:
        cells = []
        for a, b in sw.pairs:
            sa, sb = summary[task, x, a], summary[task, x, b]
            ahead, m, d = sw.pair_stats(sa, sb)
            cells += [sw.fmt(sa['mean']), sw.fmt(sb['mean']), f'{ahead} of {m}, {sw.fmt_diff(d)}']
        out.append([f'{task} {x} {LEVEL[task]}', *cells])
    header = ['level'] + [c for a, b in sw.pairs for c in (a, b, f'{a} ahead')]
    return (['The levels whose runs are all in so far, mean accuracy (%) over seeds 0-2 and the pairs by seed '
             f'(every run: [`results/{sw.name}.md`](results/{sw.name}.md)):', ''] if intro else []) + table(header, out)


def defaults_section():
    sw, rows, _ = sweep_report('config/sweep/defaults.py')
    by = {(r['task'], r['mixer']): r for r in rows}
    cells, stopped = [], False
    for m in sw.mixers:
        row = [m]
        for task in sw.tasks:
            r = by.get((task, m))
            if r is None:
                row.append('not run')
                continue
            stopped |= r['status'] == 'timeout'
            row.append(f"{100 * r['val_acc']:.2f}" + (f" (step {r['step']}, †)" if r['status'] == 'timeout' else ''))
        cells.append(row)
    return ['## Every default recipe learns', '',
            "Each mixer's recipe as a user runs it: `python train.py config/mqar.py --mixer=X` and `python train.py "
            "config/reassign.py --mixer=X` (train.py's seed 1337, batch 256, 3000 steps; the Transformer with a "
            '4-tap causal conv on attention\'s input, `attn_conv_size = 4`, the local mixing the linear layers\' conv '
            'gives them). Validation accuracy (%) at the last evaluation.', '',
            '```sh', 'python sweep.py config/sweep/defaults.py --jobs=4', '```', '', sw.provenance(rows), '',
            *table(['mixer', 'mqar', 'reassign'], cells),
            *(['† the run\'s last evaluation at its final step; the process was stopped before it exited, so the '
               'sweep lists the run as unfinished.', ''] if stopped else []),
            f"Report: [`{rel(sw.results_path)[:-len('.jsonl')]}.md`]({rel(sw.results_path)[:-len('.jsonl')]}.md). Why "
            'these recipes (batch 256, the conv): `notes/synthetic.md`.', '']


def lm_section():
    sw = sweep_of('config/sweep/lm.py')
    rows = sw.read_results(sw.results_path)
    head = ['## The language-model comparison', '']
    if not rows:
        return head + ['Not run yet. `python sweep.py config/sweep/lm.py --jobs=7` trains `config/stdlib_26m.py` '
                       '(~26M parameters, bytes of the stdlib corpus) for every mixer of the grid and writes '
                       f'`{rel(sw.results_path)}`; this section is then that sweep\'s report.', '']
    sw.report(rows)
    md = open(os.path.join(results_dir, f'{sw.name}.md')).read().replace(results_dir + '/', 'results/')
    body = [('##' + line) if line.startswith('## ') else line for line in md.splitlines()[1:]]  # its title dropped
    return head + ['```sh', 'python sweep.py config/sweep/lm.py --jobs=7', '```', '', *lm_status(sw, rows),
                   *lm_verdict(sw, rows), *body,
                   '', f'![validation loss curves]({rel(os.path.join(results_dir, sw.name + ".png"))})', '']


def lm_status(sw, rows):
    """How much of the fixed grid has a result, and the corpus's size in epochs; no verdict until it is whole."""
    ok = with_result(sw, rows)
    first = [row for row, _ in sw.grid()]
    later_each = len([s for s in sw.best_seeds if s not in sw.seeds]) + sw.best_repeats
    n_later = later_each * len(sw.mixers) * sum(len(spec['levels']) for spec in sw.tasks.values())
    done_first = sum(sw.key(row) in ok for row in first)
    done_later = sum(sw.key(row) in ok for row, _ in sw.grid(rows)) - done_first
    cfg = config_values(sw.tasks['stdlib']['config'])
    tokens = cfg['max_iters'] * cfg['batch_size'] * cfg['block_size']
    corpora = sorted({tuple(r['data_tokens']) for r in rows if r.get('data_tokens')})
    epochs = ', '.join(f'{tokens / train:.1f} epochs of {train:,} train tokens' for train, _ in corpora)
    whole = done_first == len(first) and done_later == n_later
    missing = set(sw.mixers) - complete_mixers(sw, rows)
    lrs = sorted(sw.learning_rates)
    edge = [f'{m} ({lr:g})' for (_, _, m), lr in sorted(sw.best_lrs(rows).items()) if lr in (lrs[0], lrs[-1])]
    return [f"The grid is fixed in `config/sweep/lm.py` before any run: {len(sw.mixers)} mixers x lr "
            f"{', '.join(f'{lr:g}' for lr in sw.learning_rates)} on seed {sw.seeds[0]}, then seeds "
            f"{', '.join(map(str, sw.best_seeds))} and {sw.best_repeats} same-seed repeat at each mixer's best lr. "
            f"Done: {done_first} of {len(first)} learning-rate runs, {done_later} of {n_later} seed and repeat runs. "
            f"Each run trains {tokens:,} tokens ({epochs or 'corpus not recorded'}; the corpus is the running "
            "Python's standard library, so its size depends on the Python that prepared it)."
            + ('' if whole else f" **The grid is not whole:** runs of {', '.join(sorted(missing))} are still to "
               'come, so the verdict below leaves them out. A failed run (out of GPU memory, stopped before its end) '
               'is no result and runs again.')
            + (f" Best lr at an edge of the grid (a better one may lie outside it): {', '.join(edge)}." if edge
               else '')]


def complete_mixers(sw, rows):
    """The mixers whose every run of the grid has a result: their lrs, and the seeds and repeats at their best."""
    ok = with_result(sw, rows)
    best = sw.best_lrs(rows)
    return {m for m in sw.mixers if all((t, x, m) in best for t, spec in sw.tasks.items() for x, _ in spec['levels'])
            and all(sw.key(row) in ok for row, _ in sw.grid(rows) if row['mixer'] == m)}


def t_two_sided_p(t, dof):
    """P(|T| >= |t|) for Student's t with an integer number of degrees of freedom (the closed forms of Abramowitz &
    Stegun 26.7.3-4), so that the report needs no scipy."""
    th = math.atan(abs(t) / math.sqrt(dof))
    c2, term, total = math.cos(th) ** 2, 1.0, 1.0
    if dof % 2 == 0:
        for j in range(2, dof, 2):
            term *= c2 * (j - 1) / j
            total += term
        inside = math.sin(th) * total
    else:
        for j in range(3, dof, 2):
            term *= c2 * (j - 1) / j
            total += term
        inside = 2 / math.pi * (th + (math.sin(th) * math.cos(th) * total if dof > 1 else 0.0))
    return max(0.0, 1.0 - inside)


def paired_t(sw, sa, sb):
    """Mixer A against mixer B seed by seed (a seed's repeats averaged): (t, two-sided p), or None below 2 seeds."""
    d = sw.seed_diffs(sa, sb)
    if len(d) < 2:
        return None
    sd = sw.std(d)
    if sd == 0:
        return (math.copysign(math.inf, sw.mean(d)) if sw.mean(d) else 0.0), (0.0 if sw.mean(d) else 1.0)
    t = sw.mean(d) / (sd / math.sqrt(len(d)))
    return t, t_two_sided_p(t, len(d) - 1)


def lm_verdict(sw, rows):
    """What the runs say. A pair of the grid (two mixers that differ by the erase alone) is decided where a paired
    t-test over seeds gives p < 0.05 (same seed: same data and init, so the seed's share of the spread cancels);
    otherwise it is a tie at this many seeds, its numbers given. Then every complete mixer by its mean at its best
    lr, beside the lowest: unpaired, so the spread over seeds is the yardstick."""
    summary, done = sw.summarize(rows), complete_mixers(sw, rows)
    lines = []
    for task, spec in sw.tasks.items():
        for x, _ in spec['levels']:
            s = {m: summary[(task, x, m)] for m in sw.mixers if m in done and (task, x, m) in summary}
            for a, b in sw.pairs:
                if a not in s or b not in s or not (test := paired_t(sw, s[a], s[b])):
                    continue
                ahead, n, diff = sw.pair_stats(s[a], s[b])
                (t, p), noise = test, max(v for v in (sw.run_to_run(s[a]), sw.run_to_run(s[b]), 0.0) if v is not None)
                word = f'{a if diff < 0 else b} ahead' if p < 0.05 else f'a tie at {n} seeds'
                lines.append(f'- **{a} vs {b}** (the erase alone differs): {a} lower on {ahead} of {n} seeds, mean '
                             f'{a} − {b} = {diff:+.4f} (paired t = {t:+.2f}, p = {p:.2f}); run-to-run spread '
                             f"{noise:.4f}, spread over seeds {s[a]['std']:.4f} / {s[b]['std']:.4f}: **{word}**.")
            if s:
                order = sorted(s, key=lambda m: s[m]['mean'])
                low = s[order[0]]['mean']
                lines.append('- Every complete mixer at its best lr, mean over seeds (difference to the lowest): '
                             + ', '.join(f"{m} {s[m]['mean']:.4f}" + (f' ({s[m]["mean"] - low:+.4f})' if i else '')
                                         for i, m in enumerate(order))
                             + f". Unpaired, against a spread over seeds of {min(v['std'] for v in s.values()):.4f} "
                             f"to {max(v['std'] for v in s.values()):.4f}: a difference smaller than that is not one.")
    if not lines:
        return []
    return ['', '**Verdict** (a pair is decided where a paired t-test over its seeds gives p < 0.05):', '', *lines, '']


def probe_numbers(lines):
    """The numbers RESULTS.md compares with the paper, from probe.py's output as printed."""
    text = '\n'.join(lines)
    grab = lambda pattern: re.search(pattern, text, re.M).groups()  # noqa: E731
    return {'shares': grab(r'^\s+EDA\s+all\s+all\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$'),
            'retained': grab(r'^\s+EDA\s+>=0\.9\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+([\d.]+)\s+([\d.]+)'),
            'perturbation': grab(r'^\s+mean\s+all\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+\|\s+([\d.]+)\s+'
                                 r'([\d.]+)\s+([\d.]+)'),
            'cos': grab(r'^\s+mean\s+all\s+(0\.\d+)\s+[\d.]+\s*$') + grab(r'reference at d_k = \d+: ([\d.]+)'),
            'recall': grab(r'^\s+EDA\s+mean\s+all(?:\s+[\d.]+){5}\s+([\d.]+)') +
            grab(r'^\s+KDA\s+mean\s+all(?:\s+[\d.]+){5}\s+([\d.]+)')}


def probe_section():
    meta, lines = read_text_result('probe_lm.txt')
    n = probe_numbers(lines)
    p, o = PAPER_PROBES, n['perturbation']
    rows = [['(a) shares decay / delta / erase, all tokens', p['shares'], ' / '.join(n['shares']) + ' %'],
            ['(a) erase share when ᾱ ≥ 0.9, erase / delta', p['retained'], f"{n['retained'][0]} %, {n['retained'][1]}x"],
            ['(b) perturbation ‖δo‖/‖o⁻‖: actual / random / shuffled / e = k', p['perturbation'], ' / '.join(o[:4])],
            ['(b) fold over actual: random / shuffled / e = k', p['fold'], ' / '.join(v + 'x' for v in o[4:])],
            ['(c) mean \\|cos(e, k)\\| (independent reference)', p['cos'], f"{n['cos'][0]} ({n['cos'][1]})"],
            ['(d) raw write-key recall, mean over lags', p['recall'], f"KDA {n['recall'][1]}, EDA {n['recall'][0]}"]]
    return ['## What the memory does: the probes', '',
            "The paper's memory-state probes (its Sec. 4.4; definitions and the choices the paper leaves open: "
            '`notes/probe.md`) on an EDA and a KDA model of `config/stdlib_26m.py` (~26M parameters, 6 linear '
            'layers, bytes of the stdlib corpus, seed 0), 8 x 1024 held-out tokens. Means over the linear layers.', '',
            '```sh', *meta['command'].split('; '), '```', '', made(meta) + ' At that commit `config/stdlib_26m.py` '
            'trained 800 steps at lr 2e-3 and the decay amplitude A was one per value head; run the commands at that '
            'commit to reproduce these figures.', '',
            *table(['probe', 'paper (Sec. 4.4)', 'ours (26M, stdlib bytes)'], rows),
            f'![probe figure]({rel(os.path.join(results_dir, "probe_lm.png"))})', '',
            'What holds at this scale: the erase address is nearly orthogonal to the write key, the erase takes a '
            'large share of the gate strength, erasing at the write key instead would disturb the readout several '
            'times more, and KDA reads old values back from their raw write keys better than EDA. What does not: the '
            'learned address is no gentler on the readout than a random one, and the erase does not take over the '
            "high-retention tokens. One seed each, 26M parameters on 13M bytes of code, where the paper's models have "
            '2.5B-25B parameters: a different regime. The whole output, per layer: '
            f'[`{rel(os.path.join(results_dir, "probe_lm.txt"))}`]({rel(os.path.join(results_dir, "probe_lm.txt"))}).', '']


def param_counts():
    """{(scale, mixer): param_summary()} of the paper's configs, built on the meta device."""
    import torch
    from dataclasses import fields
    from model import GPT, GPTConfig
    names = {f.name for f in fields(GPTConfig)}
    out = {}
    for scale, path in (('dense', 'config/dense_2p5b.py'), ('moe', 'config/moe_25b_a2p8b.py')):
        scope = config_values(path)
        for mixer in MIXER_NAMES:
            with torch.device('meta'):
                out[scale, mixer] = GPT(GPTConfig(**{**{k: v for k, v in scope.items() if k in names},
                                                     'mixer': mixer})).param_summary()
    return out


def table7_section():
    counts = param_counts()
    rows, parts = [], []
    for (scale, mixer), s in counts.items():
        paper = TABLE7.get((scale, mixer))
        diff = (lambda ours, theirs: f'{ours:,} ({100 * (ours / 1e9 / theirs - 1):+.3f}%)') if paper else None
        rows.append([{'dense': 'Dense 2.5B', 'moe': 'MoE 25B-A2.8B'}[scale], MIXER_NAMES[mixer],
                     diff(s['total'], paper[0]) if paper else f"{s['total']:,}", f'{paper[0]}B' if paper else '—',
                     diff(s['active'], paper[1]) if paper else f"{s['active']:,}", f'{paper[1]}B' if paper else '—'])
        parts.append([rows[-1][0], rows[-1][1], *[f'{v / 1e6:,.2f}' for v in s['breakdown'].values()]])
    return ['## The paper\'s models: parameter counts (Table 7)', '',
            'Computed by this script from `model.py` (`GPT(cfg).param_summary()` on the meta device) for '
            '`config/dense_2p5b.py` and `config/moe_25b_a2p8b.py` with each mixer, beside the paper\'s Table 7. '
            '`python train.py --dry_run=True config/dense_2p5b.py --mixer=<mixer>` prints the same counts. How the '
            'shapes the paper leaves open were pinned down: `notes/params.md`. The input embedding and the untied '
            'lm_head count in total and in active parameters, as Table 7 counts them.', '',
            *table(['Scale', 'Model', 'ours total', 'paper total', 'ours active', 'paper active'], rows),
            'Breakdown in millions ("norms": the blocks\' pre-norms and the final norm; a mixer\'s own norms are in '
            'the mixer):', '',
            *table(['Scale', 'Model', *next(iter(counts.values()))['breakdown']], parts)]


def kernel_bench(name='kernel_bench.txt'):
    """bench.py's output kept in results/<name>: (meta, rows {(case, shape): (fwd, fwd+bwd, peak MiB)},
    sweep {shape: [(variant, fwd, fwd+bwd)], the run's own settings first as variant ''},
    profiles {(label, shape): {kernel: ms}}, lines)."""
    meta, lines = read_text_result(name)
    rows, profiles = {}, {}
    for line in lines:
        m = re.match(r'\s+\[\s*\d+s\] (.+?)\s+B=(\d+) T=(\d+) H=(\d+) HV=(\d+): fwd ([\d.]+) ms, fwd\+bwd ([\d.]+) ms, '
                     r'peak (\d+) MiB', line)
        if m:
            rows[m[1], tuple(int(x) for x in m.group(2, 3, 4, 5))] = (float(m[6]), float(m[7]), int(m[8]))
        m = re.match(r'\s+profile (.+?) B=(\d+) T=(\d+) H=(\d+) HV=(\d+): total [\d.]+ ms \| (.*)', line)
        if m:  # kernel names as printed (cut at 60 characters); only the _eda_ kernels are read
            profiles[m[1], tuple(int(x) for x in m.group(2, 3, 4, 5))] = {
                k: float(ms) for k, ms in (item.rsplit(' ', 1) for item in m[6].split(' | '))}
    return meta, rows, parse_sweep(lines), profiles, lines


def parse_sweep(lines, part=''):
    """bench.py's sweep lines: {shape: [(variant, fwd, fwd+bwd)]}, the run's own settings first as variant ''. part:
    '' for EDA's, 'KDA path ' for the KDA path's (its sweep_kda=True)."""
    sweep, shape = {}, None
    for line in lines:
        m = re.match(r"\s+\((\d+), (\d+), (\d+), (\d+)\), " + part + r"this run's settings: fwd ([\d.]+) ms, "
                     r"fwd\+bwd ([\d.]+) ms", line)
        if m:
            shape = tuple(int(x) for x in m.group(1, 2, 3, 4))
            sweep[shape] = [('', float(m[5]), float(m[6]))]
        m = re.match(r'\s+\[\s*\d+s\] sweep ' + part + r'(\{.*\}): fwd ([\d.]+) ms, fwd\+bwd ([\d.]+) ms', line)
        if m:
            sweep[shape].append((m[1], float(m[2]), float(m[3])))
    return sweep


EDA_KERNELS = {'_eda_prep_kernel': 'prep', '_eda_fwd_kernel': 'forward walk', '_eda_dh_prep_kernel': 'dh prep',
               '_eda_bwd_dh_kernel': 'reverse walk', '_eda_bwd_kernel': 'per-chunk backward'}


def kernel_cells(per):
    """The five EDA kernels' ms of one profile line, in EDA_KERNELS' order."""
    return [f'{per[k]:.3f}' for k in EDA_KERNELS]


def lever_rows(sweep, profiles, label='sweep'):
    """Rows of a profiled sweep: variant, shape, fwd / fwd+bwd ms (fwd+bwd against the shipped settings in the same
    run), each kernel's ms (profile lines labelled `label`: 'sweep KDA path' for bench.py's sweep_kda part)."""
    rows = []
    for s, runs in sweep.items():
        base = runs[0][2]
        for variant, f, fb in runs:
            per = profiles[f"{label} {variant or 'this run'}", s]
            rows.append([f'`{variant}`' if variant else 'the shipped settings', str(s),
                         f'{f:.3f} / {fb:.3f} ({fb / base:.2f}x)', *kernel_cells(per)])
    return rows


def kernel_section():
    meta, rows, sweep, profiles, _ = kernel_bench()
    shapes = list(dict.fromkeys(shape for _, shape in rows))
    ratio = lambda r, ref: f'{r[0] / ref[0]:.2f}x / {r[1] / ref[1]:.2f}x' if ref else '—'  # noqa: E731
    crows = [[case, str(shape), f'{f:.3f}', f'{fb:.3f}', f'{p:,}', ratio((f, fb), rows.get(('FLA chunk_kda safe_gate', shape))),
              ratio((f, fb), rows.get(('FLA chunk_kda', shape)))] for (case, shape), (f, fb, p) in rows.items()]
    within = lambda case: [(rows[case, s][0] / rows['FLA chunk_kda safe_gate', s][0],  # noqa: E731
                            rows[case, s][1] / rows['FLA chunk_kda safe_gate', s][1])
                           for s in shapes if (case, s) in rows and ('FLA chunk_kda safe_gate', s) in rows]
    span = lambda rs, i: f'{min(r[i] for r in rs):.2f}x to {max(r[i] for r in rs):.2f}x'  # noqa: E731
    eda, kda = within('eda_triton (EDA)'), within('eda_triton KDA path (e=None)')
    unmatched = [str(s) for s in shapes if ('FLA chunk_kda safe_gate', s) not in rows]
    # the per-chunk backward's designs (an earlier run with FLA, whose first table timed the shipped settings again)
    bmeta, brows, bsweep, _, _ = kernel_bench('kernel_bwd_levers.txt')
    again = [abs(bsweep[s][0][2] / brows['eda_triton (EDA)', s][1] - 1) for s in bsweep if ('eda_triton (EDA)', s) in brows]
    srows, wins = [], 0
    for variant in [v for v, _, _ in next(iter(bsweep.values()))]:
        cells = []
        for s, runs in bsweep.items():
            base = runs[0]
            f, fb = next((f, fb) for v, f, fb in runs if v == variant)
            cells.append(f'{f:.3f} / {fb:.3f} ({fb / base[2]:.2f}x)')
            wins += bool(variant) and fb < base[2]
        srows.append([f'`{variant}`' if variant else 'the shipped settings', *cells])
    # where the time goes (the chunk-size run's profiles of the shipped kernels), then the chunk sizes, the precision
    lmeta, lrows_, lsweep, lprof, _ = kernel_bench('kernel_levers.txt')
    where, extra = [], {k: [] for k in EDA_KERNELS}
    for s in dict.fromkeys(shape for _, shape in lrows_):
        e, k = lprof['eda_triton (EDA)', s], lprof['eda_triton KDA path (e=None)', s]
        where += [[str(s), 'EDA', f"{lrows_['eda_triton (EDA)', s][1]:.3f}", *kernel_cells(e)],
                  [str(s), 'KDA path (e=None)', f"{lrows_['eda_triton KDA path (e=None)', s][1]:.3f}", *kernel_cells(k)]]
        more = sum(e[n] - k[n] for n in EDA_KERNELS)
        for n in EDA_KERNELS:
            extra[n].append((e[n] - k[n]) / more)
    share = lambda n: f'{100 * min(extra[n]):.0f}-{100 * max(extra[n]):.0f}%'  # noqa: E731
    pmeta, _, psweep, pprof, plines = kernel_bench('kernel_precision.txt')
    checks = {m[1]: dict(re.findall(r' (d?\w+) ([\d.]+e[-+]\d+)', m[2])) for m in
              (re.match(r'\s+PASS EDA bf16 B=2 T=512 H=2 HV=4, (h0 draw 0|launch \{.*\}): worst (.*)', ln) for ln in plines)
              if m}
    draw, probe = checks['h0 draw 0'], checks["launch {'BWD_PRECISE': 0}"]
    gain = [1 - runs[1][2] / runs[0][2] for runs in psweep.values()]
    dmeta, drows_, _, _, dlines = kernel_bench('kernel_decode.txt')
    drows = decode_rows(dlines)
    decode_again = decode_rows(kernel_bench()[-1])
    repeat = {key: drows_[key][1] / rows[key][1] - 1 for key in drows_ if key in rows and 'check_g' not in key[0]}
    fla_again = {key: d for key, d in repeat.items() if not key[0].startswith('eda_triton')}
    outliers = [key for key, d in fla_again.items() if abs(d) > 0.1]
    walk = lambda n: [lprof['eda_triton (EDA)', s][n] / lprof['eda_triton KDA path (e=None)', s][n]  # noqa: E731
                      for s in dict.fromkeys(shape for _, shape in lrows_)]
    times = lambda ns: f'{min(min(walk(n)) for n in ns):.2f}-{max(max(walk(n)) for n in ns):.2f}x'  # noqa: E731
    heads = ['variant', 'shape', 'fwd / fwd+bwd ms (vs shipped)', *(f'{n} ms' for n in EDA_KERNELS.values())]
    epk = [rows['eda_triton (EDA)', s][2] / rows['FLA chunk_kda safe_gate', s][2] for s in shapes
           if ('eda_triton (EDA)', s) in rows and ('FLA chunk_kda safe_gate', s) in rows]
    return ['## Kernel speed', '',
            'The update rule alone (`eda_triton` as `model.py` calls it, `check_g=False`: its gates bound g; `check_g=True` '
            'reads g\'s range back, a device sync per call) against flash-linear-attention\'s KDA kernel `chunk_kda`, '
            'plain and with the safe gate (FLA\'s faster path, and the mark EDA\'s kernels aim at), bf16, K = V = 128, '
            'shapes (B, T, H, HV); (8, 4096, 3, 6) is a layer of `config/eda_125m.py`.', '', '```sh', meta['command'], '```', '',
            f"{made(meta)} {meta['note']}", '',
            *table(['case', 'shape', 'fwd ms', 'fwd+bwd ms', 'peak MiB', 'vs FLA safe gate (fwd / fwd+bwd)',
                    'vs FLA chunk_kda (fwd / fwd+bwd)'], crows),
            f'Against FLA\'s safe-gate `chunk_kda` at the {len(eda)} shapes with both: EDA takes {span(eda, 0)} its forward '
            f'time and {span(eda, 1)} its forward + backward; our KDA path (the same kernels without the erase) '
            f'{span(kda, 0)} and {span(kda, 1)}.' + (f" No FLA row at {', '.join(unmatched)}." if unmatched else '')
            + f' An earlier run the same day at commit {dmeta["commit"]} (its command under "Decoding one token", below; '
            'before the per-chunk backward\'s carveout and the backward without zero gradients, "What the levers did") timed FLA\'s rows within '
            f'{100 * max(abs(d) for key, d in fla_again.items() if key not in outliers):.1f}% of these fwd+bwd times'
            + ''.join(f', but for {case} at {s}: {drows_[case, s][0]:.3f} / {drows_[case, s][1]:.3f} ms, an outlier of '
                      f'that run (its forward {drows_[case, s][0] / rows[case, s][0]:.1f}x the one above), not chased'
                      for case, s in outliers) + '.'
            + (f' Peak memory: EDA\'s {ratio_span(epk)} FLA\'s safe gate\'s.' if epk else ''), '',
            '### Where the time goes', '',
            'GPU time of each of the five kernels in one fwd+bwd (torch.profiler), EDA beside the KDA path (the same '
            'kernels without the erase: a chunk of 16 sub-steps instead of 32), with the fwd+bwd time bench.py measured. '
            'From the chunk-size run below:', '', '```sh', lmeta['command'], '```', '', f"{made(lmeta)} {lmeta['note']}", '',
            *table(['shape', 'case', 'fwd+bwd ms', *(f'{n} ms' for n in EDA_KERNELS.values())], where),
            'Of what the erase adds to these five kernels\' time, the per-chunk backward takes '
            f"{share('_eda_bwd_kernel')}, the prep {share('_eda_prep_kernel')}, the dh prep {share('_eda_dh_prep_kernel')}"
            f", the forward walk {share('_eda_fwd_kernel')} and the reverse walk {share('_eda_bwd_dh_kernel')} across the "
            f"shapes. The kernels that work on a chunk's sub-steps in parallel take "
            f"{times(['_eda_prep_kernel', '_eda_dh_prep_kernel', '_eda_bwd_kernel'])} their KDA-path time with twice the "
            f"sub-steps; the walks, one step a chunk either way, {times(['_eda_fwd_kernel', '_eda_bwd_dh_kernel'])} (the "
            'most where few heads walk long sequences).', '',
            '### What the levers did', '',
            'Every lever in one table first: each variant\'s fwd+bwd against the shipped settings timed in the same '
            'run, over that run\'s shapes; each run, with its command, profiles and what it says, follows. '
            '`BWD_CARVEOUT=0` is kept (its row times Triton\'s -1 against it), and so is the backward without zero '
            'gradients; folding the prep into the walks was bounded, not built ("Folding", below).', '',
            *table(['lever', 'variant', 'commit', 'fwd+bwd against the shipped settings', 'shapes', 'verdict'],
                   lever_summary()),
            'Each run below timed launch variants of the EDA kernels, each checked against the float64 reference first, '
            'at every shape (fwd / fwd+bwd ms, and fwd+bwd against the shipped settings timed in the same run). '
            'First the per-chunk backward, from an earlier run with FLA (its table of FLA\'s rows stopped at its time '
            'limit): '
            '`BWD_BKC` is the per-chunk backward in two phases, its second in blocks of key columns (no spills at 8 '
            'warps), `BWD_PER_SM` its persistent programs per SM, `BWD_MAXNREG` a register cap that fits two programs '
            'an SM; `BWD_WARPS=16` gives one program 16 warps; `chunk_size: 32` doubles the chunk (`*_STAGES=2` fit the '
            'walks in shared memory). '
            + ('None of them ran faster than the shipped settings, so none was kept (the two-phase backward left '
               '`kernel.py` after this run).' if not wins else
               f'{wins} variant-shape pairs of them ran faster than the shipped settings.')
            + f' The noise beside it: the shipped settings, timed twice in the run (the first table and this one\'s '
            f'first row), differ by up to {100 * max(again):.1f}% in fwd+bwd. Profiles, compile figures and the '
            'reasons: `notes/kernel.md`.', '', '```sh', bmeta['command'], '```', '', f"{made(bmeta)} {bmeta['note']}", '',
            *table(['launch variant', *[str(s) for s in bsweep]], srows),
            'The chunk size, with each variant\'s kernels profiled (the run of "Where the time goes"): 32-token chunks '
            'with the prep at 8 warps (at its 16-token 4 warps it spilled) and with it in 64-column passes, and '
            '8-token chunks. 64-token chunks do not run: their per-chunk backward needs 640 KB of shared memory a '
            'program (`scripts/kernel_regs.py --chunk=64`), an SM has 228 KB.', '',
            *table(heads, lever_rows(lsweep, lprof)),
            'Per-product precision: `BWD_PRECISE=0` gives the per-chunk backward\'s cancelling sums bf16 operands '
            '(no tf32 dG products, no hi + lo parts of R and dX), the fastest any choice of precision could make those '
            f'products. It took {100 * min(gain):.1f}-{100 * max(gain):.1f}% off fwd+bwd, and the float64 check\'s '
            f"errors went from dg {draw['dg']}, d(gamma) {draw['dgamma']}, dq {draw['dq']} to {probe['dg']}, "
            f"{probe['dgamma']}, {probe['dq']} (T = 512, the same draw). Not kept: the gain is the size of the noise, "
            'and dg\'s error, which grows with the length, doubled.', '', '```sh', pmeta['command'], '```', '',
            f"{made(pmeta)} {pmeta['note']}", '',
            *table(heads, lever_rows(psweep, pprof)),
            *transposed_levers(heads), *fold_lever(), *carveout_lever(heads), *unfilled_lever(rows, meta), *prep_lever(heads), *stages_lever(heads), *solve_lever(heads),
            '### Decoding one token', '',
            'H = HV = 16: GPU time of a CUDA-graph replay, as `generate` runs it; the eager call (host path included) '
            'beside it.', '', '```sh', dmeta['command'], '```', '', f"{made(dmeta)} {dmeta['note']}", '',
            *table(['case', 'B', 'ms (graph replay)', 'GB/s (state read + written)', 'vs FLA', 'ms (eager call)'],
                   drows),
            *([f"The first table's run (commit {meta['commit']}) timed B = 1 again:", '',
               *table(['case', 'B', 'ms (graph replay)', 'GB/s (state read + written)', 'vs FLA', 'ms (eager call)'],
                      decode_again)] if decode_again else [])]


def decode_rows(lines):
    """The decode table's rows from bench.py's decode lines: case, B, graph-replay ms, GB/s, against FLA's row of the
    same B, eager ms."""
    dec = [(m[1], int(m[2]), float(m[3]), int(m[4]), float(m[5])) for m in
           (re.match(r'\s+(.+?)\s+B=(\d+): ([\d.]+) ms graphed \((\d+) GB/s of state read\+written\), ([\d.]+) ms eager',
                     ln) for ln in lines) if m]
    fla = {B: ms for case, B, ms, _, _ in dec if case.startswith('FLA')}
    return [[case, B, f'{ms:.4f}', gbs, f'{ms / fla[B]:.2f}x', f'{eager:.4f}'] for case, B, ms, gbs, eager in dec]


def sweep_ratios(sweep):
    """{variant: [its fwd+bwd over the shipped settings' first timing, at each shape of the sweep]}."""
    ratios = {}
    for runs in sweep.values():
        for variant, _, fb in runs[1:]:
            ratios.setdefault(variant, []).append(fb / runs[0][2])
    return ratios


def sweep_verdict(sweep, repeat=None):
    """'`variant` faster at n of m shapes (a to b the shipped fwd+bwd)' for each variant of a sweep but `repeat` (the
    shipped settings timed again, given as how far it landed from the first timing instead)."""
    ratios = sweep_ratios(sweep)
    verdict = [f'`{v}` faster at {sum(r < 1 for r in rs)} of {len(rs)} shapes ({min(rs):.2f}x to {max(rs):.2f}x the '
               f'shipped fwd+bwd)' for v, rs in ratios.items() if v != repeat]
    if repeat in ratios:
        verdict.append(f'the shipped settings timed again (`{repeat}`) {100 * max(abs(r - 1) for r in ratios[repeat]):.1f}% '
                       'or less from their first timing')
    return '; '.join(verdict)


def transposed_levers(heads):
    """The levers built for Hopper's warpgroup MMA and tensor descriptors (WALK_VMAJ, BWD_KMAJ, FWD_TMA): their
    profiled run, results/kernel_transposed.txt (bench.py's output as printed under its '# key: value' lines)."""
    meta, _, sweep, profiles, _ = kernel_bench('kernel_transposed.txt')
    return ['The transposed products and tensor descriptors: `WALK_VMAJ=1` holds the walks\' state value-major and '
            '`BWD_KMAJ=1` the per-chunk backward\'s K-side sums key-major, the same products BV or BK rows tall instead '
            'of a chunk\'s 32 sub-steps (the height of Hopper\'s warpgroup MMA); `FWD_TMA=1` has the forward walk read '
            'its operands through tensor descriptors; `BWD_BV=128` is the shipped per-chunk backward at the V-block '
            'width that failed with `BWD_KMAJ` (the note under the command below). The walks\' steps compile to 10-16% fewer instructions '
            '(`notes/kernel.md`, "Transposed products"), and yet each variant was slower where it changed a kernel, so '
            'none was kept.', '', '```sh', meta['command'], '```', '', f"{made(meta)} {meta['note']}", '',
            *table(heads, lever_rows(sweep, profiles)), sweep_verdict(sweep, repeat="{'BWD_BV': 64}") + '.', '']


def fold_bound():
    """Folding the prep into the walks, bounded from below by one chunk's prep time (results/kernel_fold.txt: the
    prep kernel as one program alone on the GPU) against "Where the time goes"'s kernels (kernel_levers.txt): (meta,
    one chunk's prep ms with the erase, without it, [(shape, forward walk ms, prep ms, chunks, folded walk at least
    ms)])."""
    meta, _, _, profiles, _ = kernel_bench('kernel_fold.txt')
    one = profiles['eda_triton (EDA)', (1, 16, 1, 1)]['_eda_prep_kernel']
    kda = profiles['eda_triton KDA path (e=None)', (1, 16, 1, 1)]['_eda_prep_kernel']
    bound = []
    for (case, s), per in kernel_bench('kernel_levers.txt')[3].items():
        if case == 'eda_triton (EDA)':
            chunks = s[1] // 16  # 16-token chunks: the steps of one walk
            walk, prep = per['_eda_fwd_kernel'], per['_eda_prep_kernel']
            bound.append((s, walk, prep, chunks, walk + chunks * one))
    return meta, one, kda, bound


def fold_lever():
    """The fold_bound() table."""
    meta, one, kda, bound = fold_bound()
    rows = [[str(s), f'{walk:.3f} + {prep:.3f} = {walk + prep:.3f}', chunks, f'{least:.3f} ({least / (walk + prep):.1f}x)']
            for s, walk, prep, chunks, least in bound]
    return ['Folding the prep into the walks (not built): a walk that prepared its own chunks would run each '
            'chunk\'s prep inside its sequence of steps, where nothing else on its SM hides it. One chunk\'s prep, '
            f'the prep kernel as one program alone on the GPU, takes {1000 * one:.0f} us ({1000 * kda:.0f} us without '
            'the erase); a walk of N chunks would take at least its own time plus N of those:', '',
            '```sh', meta['command'], '```', '', f"{made(meta)} {meta['note']}", '',
            *table(['shape', 'forward walk + prep kernels now, ms ("Where the time goes")', 'chunks a walk steps through',
                    'folded walk at least, ms'], rows)]


def kernel_change(profiles, sweep, label, variant, against, kernel='_eda_prep_kernel'):
    """A kernel's time under variant over its time under `against` ('this run': the shipped settings' first timing;
    or their second), each shape of a sweep; label: 'sweep', or 'sweep KDA path' for bench.py's sweep_kda part."""
    return [profiles[f'{label} {variant}', s][kernel] / profiles[f'{label} {against}', s][kernel] for s in sweep]


def carveout_lever(heads):
    """The per-chunk backward's shared-memory carveout (BWD_CARVEOUT), from its run with FLA (results/kernel_carveout.txt,
    bench.py's output as printed under its '# key: value' lines)."""
    meta, _, sweep, profiles, _ = kernel_bench('kernel_carveout.txt')
    kernel = kernel_change(profiles, sweep, 'sweep', "{'BWD_CARVEOUT': -1}", 'this run', '_eda_bwd_kernel')
    total = sweep_ratios(sweep)["{'BWD_CARVEOUT': -1}"]
    return ['The per-chunk backward\'s shared-memory carveout (`BWD_CARVEOUT`, kept): Triton asks the driver for the '
            'largest shared-memory carveout for every kernel that takes over 48 KB of it, which leaves an H100\'s SM '
            '28 KB of its 256 KB as L1 cache. The per-chunk backward takes 68 KB of shared memory and spills, and '
            'under Nsight Compute 4% of its spill loads hit L1 (`notes/kernel.md`, "Shared-memory carveout"). '
            '`BWD_CARVEOUT=0` asks for the smallest carveout that holds its shared memory, leaving the rest to L1; '
            '`-1` leaves Triton\'s. From a run with FLA before the backward without zero gradients (below):', '',
            '```sh', meta['command'], '```', '', f"{made(meta)} {meta['note']}", '',
            *table(heads, lever_rows(sweep, profiles)),
            sweep_verdict(sweep, repeat="{'BWD_CARVEOUT': 0}") + f'. Triton\'s carveout makes the per-chunk '
            f'backward {100 * (min(kernel) - 1):.0f}-{100 * (max(kernel) - 1):.0f}% slower and fwd+bwd '
            f'{100 * (min(total) - 1):.1f}-{100 * (max(total) - 1):.1f}% slower than the shipped one: `BWD_CARVEOUT=0` is the default.', '']


LEVER_RUNS = [  # (results file, what its variants try, the variant that is the shipped setting timed again or None,
    #               {variant: its verdict where 'slower' would not say it, above all why a variant that ran faster
    #               somewhere was not kept})
    ('kernel_bwd_levers.txt', 'the per-chunk backward without spills, more warps; 32-token chunks', None, {}),
    ('kernel_levers.txt', 'chunk sizes', None, {}),
    ('kernel_precision.txt', 'per-product precision', None,
     {"{'BWD_PRECISE': 0}": "dg's error doubled (it grows with the length)"}),
    ('kernel_transposed.txt', "transposed products for Hopper's warpgroup MMA; tensor descriptors (TMA)",
     "{'BWD_BV': 64}", {"{'BWD_BV': 128}": 'within the noise'}),
    ('kernel_carveout.txt', "the per-chunk backward's L1 (the shipped `BWD_CARVEOUT=0` against Triton's -1)",
     "{'BWD_CARVEOUT': 0}", {"{'BWD_CARVEOUT': -1}": 'slower: 0 is kept'}),
    ('kernel_prep_regs.txt', "the preps' programs an SM", "{'PREP_MAXNREG': 0}",
     {"{'PREP_MAXNREG': 168}": "within the noise; the KDA path's prep 8-9% slower",
      "{'DH_PREP_MAXNREG': 128}": 'within the noise'}),
    ('kernel_bwd_stages.txt', "the per-chunk backward's V loop pipelined", "{'BWD_STAGES': 1}",
     {"{'BWD_STAGES': 2}": 'within the noise', "{'BWD_STAGES': 3, 'BWD_BV': 32}": 'within the noise'}),
    ('kernel_solve.txt', "the UT solve's substitution steps and merge precision", "{'MERGE_FP32': 0}",
     {"{'SUB_BLOCK': 4}": 'fwd+bwd within the noise, fwd faster; not the default until its bf16 accuracy at T = 4096 '
                          'is checked on the GPU',
      "{'SUB_BLOCK': 2}": 'as `SUB_BLOCK: 4`',
      "{'MERGE_FP32': 1}": "the KDA path's prep slower", "{'SUB_BLOCK': 4, 'MERGE_FP32': 1}":
      'its prep slower than under `SUB_BLOCK: 4` alone',
      "{'SUB_BLOCK': 2, 'MERGE_FP32': 1}": 'its prep slower than under `SUB_BLOCK: 2` alone'}),
]


def ratio_span(rs):
    """'a x to b x' over a list of ratios, or one figure when they round alike."""
    lo, hi = f'{min(rs):.2f}x', f'{max(rs):.2f}x'
    return lo if lo == hi else f'{lo} to {hi}'


def lever_summary():
    """One row per variant of every lever run: what it tries, the range of its fwd+bwd over the run's shapes against
    the shipped settings timed first in the same run, and why a variant that ran faster somewhere was not kept; then
    the backward without zero gradients (kept; its two runs)."""
    rows = []
    for name, what, repeat, why in LEVER_RUNS:
        meta, _, sweep, _, _ = kernel_bench(name)
        for v, rs in sweep_ratios(sweep).items():
            if v == repeat:
                rows.append([what, 'the shipped settings, timed again', meta['commit'], ratio_span(rs), len(rs), 'noise'])
            else:
                assert min(rs) >= 1 or v in why, (name, v)  # a variant faster somewhere says why it was not kept
                rows.append([what, f'`{v}`', meta['commit'], ratio_span(rs), len(rs), why.get(v, 'slower')])
    fmeta, _, _, bound = fold_bound()
    least = [least / (walk + prep) for _, walk, prep, _, least in bound]
    rows.append(['folding the prep into the walks', 'not built: a lower bound', fmeta['commit'],
                 f'forward walk + prep at least {ratio_span(least)}', len(least), 'slower'])
    _, _, ameta, _, gains = unfilled_runs()
    g = [1 - x for x in gains['eda_triton (EDA)']]
    rows.append(["autograd's zero gradients", '`ctx.set_materialize_grads(False)`', ameta['commit'], ratio_span(g),
                 len(g), 'kept'])
    return rows


def stages_lever(heads):
    """The per-chunk backward's pipeline stages over its V-blocks (BWD_STAGES, with BWD_BV), from its run
    (results/kernel_bwd_stages.txt)."""
    meta, _, sweep, profiles, _ = kernel_bench('kernel_bwd_stages.txt')
    repeat = "{'BWD_STAGES': 1}"
    best = "{'BWD_STAGES': 3, 'BWD_BV': 32}"
    kernel = kernel_change(profiles, sweep, 'sweep', best, repeat, '_eda_bwd_kernel')
    return ['The per-chunk backward\'s loop over its V-blocks, pipelined (`BWD_STAGES` 2 or 3: the next V-block\'s '
            'S_0 and dS_C blocks are loaded while this one is computed, in shared memory the carveout then takes from '
            'L1), at its 64-column V-blocks and at 32 (four steps, whose smaller tiles spill less: 272 B of stack a '
            'thread at 3 stages against 448 B shipped, `scripts/kernel_regs.py`):', '',
            '```sh', meta['command'], '```', '', f"{made(meta)} {meta['note']}", '',
            *table(heads, lever_rows(sweep, profiles)), sweep_verdict(sweep, repeat=repeat) + '. Against the '
            f'shipped settings\' second timing, the best of them (`{best}`) took the per-chunk backward '
            f"{pct_span(kernel)}; none stayed the default.", '']


def both_paths(name, heads, repeat):
    """A run of bench.py's sweep with sweep_kda=True (results/<name>): its command and provenance, the EDA table and
    verdict, the KDA path's table and verdict; and (meta, EDA sweep, KDA sweep, profiles) for the text around it."""
    meta, _, sweep, profiles, lines = kernel_bench(name)
    kda = parse_sweep(lines, 'KDA path ')
    text = ['```sh', meta['command'], '```', '', f"{made(meta)} {meta['note']}", '',
            *table(heads, lever_rows(sweep, profiles)), sweep_verdict(sweep, repeat=repeat) + '.', '',
            'The KDA path under the same settings:', '',
            *table(heads, lever_rows(kda, profiles, 'sweep KDA path')), sweep_verdict(kda, repeat=repeat) + '.', '']
    return text, (meta, sweep, kda, profiles)


def fwd_change(sw, variant, against):
    """fwd+bwd ('fb') and fwd ('f') of variant over those of `against`, each shape of a sweep."""
    pick = lambda runs, v, i: next(r[i] for r in runs if r[0] == v)  # noqa: E731
    return {'f': [pick(r, variant, 1) / pick(r, against, 1) for r in sw.values()],
            'fb': [pick(r, variant, 2) / pick(r, against, 2) for r in sw.values()]}


def pct_span(xs, digits=1):
    """'+a% to +b%': how far a list of ratios lies from 1, the smallest and the largest."""
    return f'{100 * (min(xs) - 1):+.{digits}f}% to {100 * (max(xs) - 1):+.{digits}f}%'


def prep_lever(heads):
    """The prep kernels' register caps and warps (PREP_MAXNREG, DH_PREP_WARPS, DH_PREP_MAXNREG): their run, EDA and
    the KDA path (results/kernel_prep_regs.txt)."""
    repeat = "{'PREP_MAXNREG': 0}"
    text, (meta, sweep, kda, profiles) = both_paths('kernel_prep_regs.txt', heads, repeat)
    prep = lambda label, v: kernel_change(profiles, sweep, label, v, 'this run')  # noqa: E731
    span = lambda xs: pct_span(xs, 0)  # noqa: E731
    cap, w8 = "{'PREP_MAXNREG': 168}", "{'PREP_WARPS': 8}"
    dev = lambda sw, v: max(abs(r - 1) for r in sweep_ratios(sw)[v])  # noqa: E731
    return ['The prep kernels\' occupancy (not kept): both preps wait far more than they issue, like the per-chunk '
            'backward, so more programs an SM might hide more of the wait. `PREP_MAXNREG` caps the prep\'s registers a '
            'thread (at its 4 warps it takes 255, two programs an SM; a cap of 168 fits three with 112 B of spills, 128 '
            'four), `PREP_WARPS=8` halves each thread\'s tiles, and `DH_PREP_WARPS`, `DH_PREP_MAXNREG` do the same for '
            'the backward\'s prep (152 registers, three programs an SM; 80 at 8 warps). The launch settings are shared '
            'with the KDA path, so the run times both:', '', *text,
            f'The cap of 168 took the EDA prep kernel {span(prep("sweep", cap))} against the first timing and the KDA '
            f'path\'s {span(prep("sweep KDA path", cap))} (where the compiler, left alone, takes 128 registers and '
            'four programs an SM, it took 164 under the cap); fwd+bwd moved by '
            + ('less than' if dev(sweep, cap) < dev(sweep, repeat) and dev(kda, cap) < dev(kda, repeat) else 'as much as or more than')
            + ' the shipped settings\' second timing did. The others were within that noise or slower, 8 warps most of all (EDA\'s prep '
            f"{min(prep('sweep', w8)):.1f}-{max(prep('sweep', w8)):.1f}x its time). So the preps are not held back by "
            'how few programs share an SM, and none of these settings stayed in `kernel.py`.', '']


def solve_lever(heads):
    """The UT solve's substitution blocks (SUB_BLOCK) and fp32 merges (MERGE_FP32): their run, EDA and the KDA path
    (results/kernel_solve.txt)."""
    repeat, sb4, m32 = "{'MERGE_FP32': 0}", "{'SUB_BLOCK': 4}", "{'MERGE_FP32': 1}"
    text, (meta, sweep, kda, profiles) = both_paths('kernel_solve.txt', heads, repeat)
    e4, k4 = fwd_change(sweep, sb4, repeat), fwd_change(kda, sb4, repeat)
    checks = [m for m in (re.match(r'\s+PASS EDA bf16 .*launch (\{.*\}): worst ([\d.e-]+)', ln)
                          for ln in kernel_bench('kernel_solve.txt')[-1]) if m]
    same = len({m[2] for m in checks}) == 1 and len(checks) >= 6
    return ['The UT solve\'s forward substitution (`SUB_BLOCK`: rows a block, each substitution step a chain of '
            'shared-memory reductions, the prep\'s main stall in Nsight Compute, `notes/kernel.md`) in blocks of 4 '
            'or 2 rows instead of 8, with more block merges after it; `MERGE_FP32=1` gave the merges fp32 operands '
            '(tf32) instead of bf16, so that more merges would not round T more often:', '', *text,
            f'`SUB_BLOCK=4` took EDA\'s prep {pct_span(kernel_change(profiles, sweep, "sweep", sb4, repeat))} and the KDA '
            f'path\'s {pct_span(kernel_change(profiles, kda, "sweep KDA path", sb4, repeat))} against the shipped '
            f"settings' second timing, EDA's forward {pct_span(e4['f'])} and its fwd+bwd {pct_span(e4['fb'])} (the KDA "
            f"path's {pct_span(k4['f'])} and {pct_span(k4['fb'])}). "
            + ('Every variant\'s float64 check at T = 512 gave the same worst error as the shipped settings\'. '
               if same else 'The float64 checks at T = 512 differed between the variants (the run\'s output). ')
            + f'`MERGE_FP32=1` took EDA\'s prep {pct_span(kernel_change(profiles, sweep, "sweep", m32, repeat))} and '
            f'the KDA path\'s {pct_span(kernel_change(profiles, kda, "sweep KDA path", m32, repeat))}, and left '
            '`kernel.py`. `SUB_BLOCK=4` is not '
            'the default yet: fewer substitution steps once cost d(gamma) accuracy (`notes/kernel.md`, "Tried and not '
            'kept"), and the bf16 test at T = 4096 on the GPU has not been run with it.', '']


def unfilled_runs():
    """The backward without autograd's zero gradients: two bench.py runs of one call, the commit before and the one
    that made the change (results/kernel_unfilled_before.txt, kernel_unfilled.txt): (meta before, rows before, meta
    after, rows after, {case: [fwd+bwd gain at each shape]}), the check_g rows left out."""
    bmeta, before, _, _, _ = kernel_bench('kernel_unfilled_before.txt')
    ameta, after, _, _, _ = kernel_bench('kernel_unfilled.txt')
    before = {key: r for key, r in before.items() if 'check_g' not in key[0]}
    gains = {}
    for key, (_, fb, _) in before.items():
        gains.setdefault(key[0], []).append(1 - after[key][1] / fb)
    return bmeta, before, ameta, after, gains


def unfilled_lever(fla_rows, fla_meta):
    """The unfilled_runs() table, beside FLA's peak from the first table (fla_rows, its run's meta fla_meta)."""
    span = lambda xs: f'{100 * min(xs):.1f}-{100 * max(xs):.1f}%'  # noqa: E731
    bmeta, before, ameta, after, gains = unfilled_runs()
    rows, below = [], []
    for key, (_, fb, peak) in before.items():
        _, fb2, peak2 = after[key]
        fla = fla_rows.get(('FLA chunk_kda safe_gate', key[1]))
        below.append(fla is not None and peak2 < fla[2])
        rows.append([key[0], str(key[1]), f'{fb:.3f} / {peak:,}', f'{fb2:.3f} / {peak2:,}', f'{fb2 / fb:.3f}x',
                     f'{fla[2]:,}' if fla else '—'])
    return ['The backward without zero gradients (kept): autograd filled a zero gradient for each output of the '
            'forward op the loss did not reach (the chunk states kept for the backward, a tensor of 1 GB at '
            '(8, 4096, 16, 16), and T, Qk) before calling a backward that never reads them. Asking it not to '
            f'(`ctx.set_materialize_grads(False)`, commit {ameta["commit"]}) made EDA\'s fwd+bwd '
            f"{span(gains['eda_triton (EDA)'])} faster (the KDA path's {span(gains['eda_triton KDA path (e=None)'])})"
            + (', and every peak is now below FLA\'s safe gate\'s.' if all(below) else
               f', and {sum(below)} of {len(below)} peaks are below FLA\'s safe gate\'s.')
            + ' Both runs in one call, the commit before first:', '', '```sh', bmeta['command'], f'{ameta["command"]}', '```', '',
            f"{made(ameta)} The first run at commit {bmeta['commit']}, just before. FLA was not in this call: its "
            f"peak is the first table's, whose run (commit {fla_meta['commit']}) times the code since this change "
            'against FLA.', '',
            *table(['case', 'shape', 'fwd+bwd ms / peak MiB before', 'after', 'fwd+bwd after / before',
                    'FLA safe gate peak MiB (first table)'], rows)]


def train_section():
    spec = importlib.util.spec_from_file_location('plot_context', os.path.join(ROOT, 'scripts', 'plot_context.py'))
    plot_context = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plot_context)
    report = os.path.join(results_dir, 'train_context.txt')
    runs, (meta, _) = plot_context.read(report), read_text_result('train_context.txt')
    try:
        plot_context.main(report, os.path.join(results_dir, 'train_context.png'))
    except ImportError:
        print('figure: skipped (matplotlib is not installed)')
    rows = []
    for T in sorted(runs['eda']):
        (e, em), (r, rm), (t, tm) = runs['eda'][T], runs['eda_recompute'][T], runs['transformer'][T]
        rows.append([T, f'{e:,.0f} ({r:,.0f})', f'{t:,.0f}', f'{e / t:.2f}x ({r / t:.2f}x)', f'{em} ({rm}) / {tm}'])
    before_path = os.path.join(results_dir, 'train_context_before.txt')
    before, (bmeta, _) = plot_context.read(before_path), read_text_result('train_context_before.txt')
    change = lambda m, T: f'{before[m][T][0]:,.0f} -> {runs[m][T][0]:,.0f} ({runs[m][T][0] / before[m][T][0] - 1:+.1%})'  # noqa: E731
    crows = [[T, change('eda', T), change('eda_recompute', T), change('transformer', T)]
             for T in sorted(runs['eda']) if all(T in before[m] for m in ('eda', 'eda_recompute', 'transformer'))]
    lay = json.load(open(os.path.join(results_dir, 'train_layers.json')))
    named = lambda m: MIXER_NAMES[m] if m == 'transformer' else m  # noqa: E731 (config/eda_125m.py's: no conv)
    lrows = [[named(r['model']), r['layer'], r['count'], f"{r['fwd_bwd_ms']:.3f}", '—' if r['core_ms'] is None else
              f"{r['core_ms']:.3f}", f"{r['kept_bytes_per_token']:,}"] for r in lay['layers']]
    srows = [[named(s['model']), f"{s['ms']:.1f}", f"{s['tok_s']:,}", s['peak_gib']] for s in lay['steps']]
    return ['## Training speed', '',
            'The ~125M EDA hybrid (`config/eda_125m.py`: 3:1, 9 linear and 3 attention layers) against the ~125M '
            f"{MIXER_NAMES['transformer']}, compiled, 32,768 tokens a step (batch = 32768 / block_size; one "
            'sequence at 65536), tok/s and MFU the mean of steps 3-7 of 8; in brackets the hybrid with `la_recompute_states=True` (the '
            'backward recomputes the chunk states instead of keeping them).', '',
            '```sh', *meta['command'].split('; '), '```', '', f"{made(meta)} {meta.get('note', '')}".rstrip(), '',
            *table(['block_size', 'EDA hybrid tok/s (recomputed states)', f"{MIXER_NAMES['transformer']} tok/s",
                    'ratio (recomputed)', 'peak GiB: hybrid (recomputed) / Transformer'], rows),
            f'![training tok/s by block_size]({rel(os.path.join(results_dir, "train_context.png"))})', '',
            'What the kernel changes since an earlier run of the same commands bought (the per-chunk backward\'s '
            'carveout and the backward without zero gradients, "Kernel speed", "What the levers did"): tok/s then -> '
            f"now. The earlier run: {made(bmeta)} {bmeta['note']} The Transformer's code did not change between "
            'them, so its column is the spread between the two runs, beside which to read the hybrid\'s.', '',
            *table(['block_size', 'EDA hybrid', 'EDA hybrid, recomputed states', f"{MIXER_NAMES['transformer']}"], crows),
            'The hybrid overtakes the Transformer where an attention layer costs more than a linear one: an attention '
            "layer's cost grows with the context, a linear layer's does not. Per layer, forward + backward (the core: "
            '`eda_triton` or SDPA alone at the same shapes) and the bytes a layer keeps a token for its backward:', '',
            '```sh', *lay['command'].split('; '), '```', '',
            f"Made {lay['date']} at commit {lay['commit']} on {lay['device']}; {lay['source']}.", '',
            *table(['model', 'layer', 'count', 'fwd+bwd ms', 'core ms', 'kept bytes/token'], lrows),
            *table(['model', 'step ms (fwd+bwd, no optimizer)', 'tok/s', 'peak GiB'], srows)]


def decode_section():
    meta, lines = read_text_result('decode.txt')
    runs = {}
    for line in lines:
        m = re.match(r'(eda|transformer)\s+(graph|compiled|eager)\s+(\d+)\s+(\d+)\s+([\d.]+)\s+(\d+)\s+([\d.]+)\s+'
                     r'([\d.]+)%', line)
        if m:
            runs[m[1], m[2], int(m[3]), int(m[4])] = (m[5], int(m[6]), float(m[7]), m[8])  # ms as printed
    rows = []
    for ctx, B in sorted({(c, b) for _, _, c, b in runs}):
        e, t = runs['eda', 'compiled', ctx, B], runs['transformer', 'compiled', ctx, B]
        rows.append([ctx, B, e[0], runs['eda', 'graph', ctx, B][0], t[0], runs['transformer', 'graph', ctx, B][0],
                     f'{e[1] / t[1]:.2f}x', f'{e[3]}%', f'{e[2] / t[2]:.3f}'])
    kernels = next(line for line in lines if line.startswith('kernels per decode step'))
    check = next(line for line in lines if line.startswith('correctness:'))
    return ['## Decoding speed', '',
            'One decode step of the ~125M configs (`config/eda_125m.py`), bf16, caches filled to the context with '
            'random content, ms per step over 32 steps. `graph`: the step replayed from a CUDA graph '
            '(`decode.GraphDecoder`, what `generate` and `sample.py` run on a GPU); `compiled`: the Inductor-compiled '
            'step in the graph (`sample.py --compile=True`). "floor": the bytes a step must read (weights, linear '
            "states, the cached K/V) over the time, as a fraction of the device's measured copy bandwidth.", '',
            '```sh', meta['command'], '```', '', made(meta), '',
            *table(['ctx', 'B', 'hybrid compiled', 'hybrid graph', f"{MIXER_NAMES['transformer']} compiled",
                    f"{MIXER_NAMES['transformer']} graph",
                    "hybrid tok/s / Transformer's (compiled)", 'hybrid floor (compiled)', 'cache per sequence, '
                    'hybrid / Transformer'], rows),
            f'From the same run: {kernels}; {check}. The output as printed: '
            f'[`{rel(os.path.join(results_dir, "decode.txt"))}`]({rel(os.path.join(results_dir, "decode.txt"))}).', '']


if __name__ == '__main__':
    parts = [intro(), erase_section(), defaults_section(), lm_section(), probe_section(), table7_section(),
             kernel_section(), train_section(), decode_section()]
    text = '\n'.join(line for part in parts for line in part).rstrip('\n') + '\n'
    with open(out, 'w') as f:
        f.write(text)
    print(f'wrote {out}')
