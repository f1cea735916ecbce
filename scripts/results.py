"""
RESULTS.md and README.md's summary table from the results files in results/: JSON rows, each with the command,
date, commit and device that made it (the sweeps' rows, bench.py's, gpu_train_check.sh's), and the parameter
counts computed from model.py. A section is a function returning its lines and its README row; the sweeps' own
reports (results/<grid>.md, .png) are rebuilt on the way. Edit the rows, never the two files: test_results.py
fails when they differ from what this script writes.

    python scripts/results.py                                  # RESULTS.md, README.md's table, the sweeps' reports
    python scripts/results.py --results_dir=/tmp/r --out=/tmp/r/RESULTS.md --readme=/tmp/r/README.md
"""
import importlib.util
import json
import math
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from configurator import configure  # noqa: E402

# ----------------------------------------------------------------------------------------------------
out = 'RESULTS.md'            # written here (relative to the repository)
readme = 'README.md'          # its summary table, between the BEGIN and END lines, rewritten
results_dir = 'results'       # the results files read, and where the sweeps' reports and figures go
reports = True                # rebuild the sweeps' reports and the figures (False: the two files only)
configure(globals())
# ----------------------------------------------------------------------------------------------------
os.chdir(ROOT)  # the grids and configs name their files from the repository's root
BEGIN, END = '<!-- results.py: begin -->', '<!-- results.py: end -->'

# The paper's numbers set beside ours (Table 7; Sec. 4.4's memory-state probes)
TABLE7 = {('dense', 'transformer'): (2.5052, 2.5052), ('dense', 'gdn'): (2.5035, 2.5035),
          ('dense', 'gdn2'): (2.5353, 2.5353), ('dense', 'kda'): (2.5218, 2.5218), ('dense', 'eda'): (2.5295, 2.5295),
          ('moe', 'gdn'): (24.5676, 2.7236), ('moe', 'kda'): (24.6324, 2.7885), ('moe', 'eda'): (24.6558, 2.8119)}
PAPER_PROBES = {'shares': '35.4 / 31.8 / 32.8 %', 'retained': '69.1 %, ≈ 3.0x', 'perturbation': '0.064 / 0.143 / 0.115 / '
                '0.223', 'fold': '2.4x / 1.9x / 3.4x', 'cos': '0.105 (0.0707)', 'recall': 'KDA ahead of EDA'}
MIXER_NAMES = {'eda': 'EDA', 'kda': 'KDA', 'gdn': 'GDN', 'gdn2': 'GDN-2', 'transformer': 'Transformer (no conv)'}
# A language-model difference smaller than this (nats/token) would not change which mixer to use: a paired interval
# inside +-MATTERS is a tie, one wider that holds zero is unresolved. About half the spread between two H100 and H200
# runs of one seed (notes/train.md).
MATTERS = 0.005
# (A, B, what differs): the LM pairs read seed by seed: the erase x gate square's edges, then EDA against the rest
LM_PAIRS = [('eda', 'kda safe-gate', 'the erase, behind the safe gate'),
            ('eda kda-gate', 'kda', "the erase, behind KDA's gate"),
            ('kda safe-gate', 'kda', 'the gate, without the erase'), ('eda', 'eda kda-gate', 'the gate, with the erase'),
            ('eda', 'kda', 'erase and gate'), ('eda', 'gdn', ''), ('eda', 'gdn2', ''), ('eda', 'transformer conv4', ''),
            ('eda', 'transformer no-conv', '')]
KERNELS = {'_eda_prep_kernel': 'prep', '_eda_fwd_kernel': 'forward walk', '_eda_dh_prep_kernel': 'dh prep',
           '_eda_bwd_dh_kernel': 'reverse walk', '_eda_bwd_kernel': 'per-chunk backward'}
LEVEL = {'mqar': 'pairs', 'reassign': 'updates', 'evict': 'updates', 'capacity': 'live pairs'}


def table(header, rows):
    return ['| ' + ' | '.join(header) + ' |', '|' + '---|' * len(header)] + \
           ['| ' + ' | '.join(str(c) for c in row) + ' |' for row in rows] + ['']


def read_rows(name, bench=None):
    """The JSON rows of results/<name>, those of one benchmark kind where bench is given."""
    with open(os.path.join(results_dir, name)) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return [r for r in rows if bench is None or r['bench'] == bench]


def made(rows):
    """Where rows come from: the run(s) that wrote them."""
    runs = list(dict.fromkeys((r['date'], r['commit'], r['device'], r.get('torch'), r.get('triton')) for r in rows))
    return 'Made ' + '; '.join(f'{d} at commit {c} on {dev}' + (f', torch {t}, triton {tr}' if t else '')
                               for d, c, dev, t, tr in runs) + '.'


def commands(rows):
    return ['```sh', *dict.fromkeys(r['command'] for r in rows), '```', '']


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


def sweep_rows(grid):
    """(the grid's sweep module, its rows); its own report (.md, .png) rebuilt when `reports`."""
    sw = sweep_of(grid)
    rows = sw.read_results(sw.results_path)
    if rows and reports:
        sw.report(rows)
    return sw, rows


def link(name):
    return f'[`results/{name}`](results/{name})'


# ----------------------------------------------------------------------------------------------------
# Statistics: a paired t interval without scipy


def t_two_sided_p(t, dof):
    """P(|T| >= |t|) for Student's t with an integer number of degrees of freedom (the closed forms of Abramowitz &
    Stegun 26.7.3-4)."""
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


def t_critical(dof, p=0.05):
    """The t with P(|T| >= t) = p (bisection on t_two_sided_p)."""
    lo, hi = 0.0, 1e4
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if t_two_sided_p(mid, dof) > p else (lo, mid)
    return (lo + hi) / 2


def paired(diffs):
    """Per-seed differences A - B (lower is better): (mean, 95% t interval, seeds where A is lower, verdict)."""
    n, mu = len(diffs), sum(diffs) / len(diffs)
    sd = math.sqrt(sum((d - mu) ** 2 for d in diffs) / (n - 1))
    half = t_critical(n - 1) * sd / math.sqrt(n)
    lo, hi = mu - half, mu + half
    verdict = ('A ahead' if hi < 0 else 'B ahead' if lo > 0 else f'a tie (inside ±{MATTERS})'
               if -MATTERS < lo and hi < MATTERS else 'unresolved')
    return mu, (lo, hi), sum(d < 0 for d in diffs), verdict


# ----------------------------------------------------------------------------------------------------
# Sections: each returns (lines, README row or None). Sections from eval.py's rows join SECTIONS below.


def erase_section():
    sw, rows = sweep_rows('config/sweep/erase.py')
    old = {g: sweep_rows(f'config/sweep/{g}.py') for g in ('synthetic', 'evict_long', 'safe_gate')}
    levels = [(t, x) for t in sw.tasks for x, _ in sw.tasks[t]['levels']]
    ok = {sw.key(r) for r in rows if r['status'] in ('ok', 'diverged')}
    head = ['## Does the erase help? Synthetic recall', '',
            "The paper's claim is that an erase at its own address helps the memory. The tasks (`data/synthetic.py`): "
            'mqar (store and recall), reassign (overwrites and explicit moves: the old key must read NONE), capacity '
            "(reassign where every update is a move and the live bindings approach the state's key dimension, so "
            "stale addresses must be cleared to make room) and evict (values are unique: `k' v` unbinds v's old key "
            "k, which the current token never names). Models: `config/mqar.py`'s, 2 layers, 2 linear-attention heads "
            "of 64 x 64 state (~2.5M parameters). EDA with KDA's decay gate differs from KDA only by the erase; EDA's "
            'default (the safe gate) differs from KDA by the gate too. Runs of one seed see the same data (their '
            'initial weights differ: the erase draws its own), so they pair up by seed: "ahead" counts the paired '
            'seeds one mixer wins, then the mean difference in points.', '',
            "### The model as shipped (A per channel), capacity and evict", '',
            'The four mixers of the erase x gate square at the levels where the earlier benchmark (below) found the '
            'largest effect: capacity at 2000 steps, evict at 6000, lr 1e-3, seeds 0-2.', '',
            '```sh', 'python sweep.py config/sweep/erase.py --jobs=4    # 48 runs', '```', '']
    n = sum(1 for _ in sw.grid(rows))
    if len(ok) < n:
        return head + [f'Not whole yet: {len(ok)} of its {n} runs are in `results/erase.jsonl`; no verdict until '
                       'the grid is whole.', ''] + old_erase(old, None)[0], None
    s = sw.summarize(rows)
    out, counts = [], {}
    for t, x in levels:
        cells = []
        for a, b in sw.pairs:
            k, m, d = sw.pair_stats(s[t, x, a], s[t, x, b])
            c = counts.setdefault((a, b), [0, 0, []])
            c[0], c[1] = c[0] + k, c[1] + m
            c[2].append(d)
            cells += [sw.fmt(s[t, x, a]['mean']), sw.fmt(s[t, x, b]['mean']), f'{k} of {m}, {sw.fmt_diff(d)}']
        out.append([f'{t} {x} {LEVEL[t]}', *cells])
    word = lambda k, m: ('is ahead' if k >= 0.75 * m else 'is behind' if k <= 0.25 * m else  # noqa: E731
                         'shows no consistent effect')
    (k, m, ds), (sk, sm, sds) = counts[tuple(sw.pairs[0])], counts[tuple(sw.pairs[1])]
    floor = sum(r['val_acc'] < sw.tasks[r['task']]['floor'][1][r['x']] + 0.02 for r in rows if sw.key(r) in ok)
    old_lines, before = old_erase(old, counts)
    mean_d = sum(ds) / len(ds)
    verdict = (f"behind KDA's gate the erase {word(k, m)}: ahead on {k} of {m} paired seeds (mean "
               f"{sw.fmt_diff(mean_d)} points)")
    lines = head + [sw.provenance(rows), '',
                    *table(['level'] + [c for a, b in sw.pairs for c in (a, b, f'{a} ahead')], out),
                    f'**Verdict: {verdict}**. Behind the safe gate it {word(sk, sm)}: ahead on {sk} of {sm}, mean '
                    f'{sw.fmt_diff(sum(sds) / len(sds))}. {floor} of the {len(ok)} runs ended within 2 points of the '
                    'floor (answering NONE at every query): a seed often either learns the task or stays at the floor, '
                    'so three seeds a level leave wide spreads. Every run, seed by seed: ' + link('erase.md') + '.', '',
                    'What A per channel changed: mean accuracy (%) with one A per head (the earlier runs below), then '
                    "on the model as shipped. KDA's gate draws A ~ U(1, 16), once per head before and once per channel "
                    "now; the safe gate's A starts at 1 in both:", '',
                    *table(['level', *sw.mixers], [[f'{t} {x} {LEVEL[t]}', *[
                        f"{sw.fmt(before[t, x][mx])} → {sw.fmt(s[t, x, mx]['mean'])}" for mx in sw.mixers]]
                        for t, x in levels if (t, x) in before]), *old_lines]
    cap = s['capacity', 64, 'kda']['mean']
    row = ('Does the erase help?', f"on the model as shipped, {verdict.replace('behind', 'with')} of capacity and "
           f"evict, and {floor} of the {len(ok)} runs end within 2 points of the NONE floor. Earlier runs with one A "
           f"per head had it ahead on {before['ahead'][0]} of {before['ahead'][1]} there; A per channel moved KDA too, "
           f"from {sw.fmt(before['capacity', 64]['kda'])}% to {sw.fmt(cap)}% at capacity 64", 'synthetic recall')
    return lines, row


def old_erase(old, counts):
    """The full benchmark, run with one A per head (synthetic, evict_long, safe_gate): a paragraph, and the mixers'
    means at the erase rerun's levels ('ahead': the erase behind KDA's gate there, [ahead, paired seeds])."""
    (sw, rows), (_, ev), (sg, sgr) = old['synthetic'], old['evict_long'], old['safe_gate']
    s, s6, ssg = sw.summarize(rows), sw.summarize(ev), sg.summarize(sgr)
    before, ahead = {}, [0, 0]
    for (task, x, m), cell in ssg.items():  # the square's levels: capacity at 2000 steps, evict at 6000
        summary = s6 if task == 'evict' else s
        before[task, x] = {mx: summary[task, x, mx]['mean'] for mx in ('eda', 'eda kda-gate', 'kda')}
        before[task, x][m] = cell['mean']
        k, n, _ = sw.pair_stats(summary[task, x, 'eda kda-gate'], summary[task, x, 'kda'])
        ahead = [ahead[0] + k, ahead[1] + n]
    before['ahead'] = ahead
    holds = counts and counts[('eda kda-gate', 'kda')][0] >= 0.75 * counts[('eda kda-gate', 'kda')][1]
    lines = ['The earlier benchmark, run when A was one per value head: all four tasks at two levels, 2000 steps '
             '(evict also 6000), lr 1e-3 and 3e-3, seeds 0-2. There the erase behind KDA\'s gate was ahead on '
             f'{ahead[0]} of {ahead[1]} paired seeds at these levels and tied on plain recall and reassignment; on '
             f"the model as shipped that lead {'holds' if holds else 'does not repeat'}.", '',
             '```sh', 'python sweep.py config/sweep/synthetic.py --jobs=4    # 144 runs',
             'python sweep.py config/sweep/evict_long.py --jobs=4   # evict at 6000 steps',
             'python sweep.py config/sweep/safe_gate.py --jobs=4    # KDA with the safe gate', '```', '',
             *[f'`{g}`: {sw.provenance(r)}' for g, r in (('synthetic', rows), ('evict_long', ev), ('safe_gate', sgr))],
             '', 'Every lr, run and pair, and values against NONE answers: '
             + ', '.join(link(f'{g}.md') for g in ('synthetic', 'evict_long', 'safe_gate')) + '.', '',
             '![the model as shipped: accuracy against difficulty](results/erase.png)', '']
    return lines, before


def defaults_section():
    sw, rows = sweep_rows('config/sweep/defaults.py')
    by = {(r['task'], r['mixer']): r for r in rows}
    cells, stopped = [], False
    for m in sw.mixers:
        row = [m]
        for task in sw.tasks:
            r = by.get((task, m))
            stopped |= bool(r) and r['status'] == 'timeout'
            row.append('not run' if r is None else f"{100 * r['val_acc']:.2f}"
                       + (f" (step {r['step']}, †)" if r['status'] == 'timeout' else ''))
        cells.append(row)
    low = min(r['val_acc'] for r in rows)
    return ['## Do the default recipes learn?', '',
            "Each mixer's recipe as a user runs it: `python train.py config/mqar.py --mixer=X` and `python train.py "
            "config/reassign.py --mixer=X` (seed 1337, batch 256, 3000 steps; the Transformer with a 4-tap causal conv "
            "on attention's input). Validation accuracy (%) at the last evaluation; why these recipes: "
            '`notes/synthetic.md`.', '', '```sh', 'python sweep.py config/sweep/defaults.py --jobs=4', '```', '',
            sw.provenance(rows), '', *table(['mixer', 'mqar', 'reassign'], cells),
            *(["† the run's last evaluation at its final step; the process was stopped before it exited, so the sweep "
               'lists it as unfinished.', ''] if stopped else [])], \
        ('Do the default recipes learn?', f'every mixer reaches {100 * low:.2f}% or more on `config/mqar.py` and '
         '`config/reassign.py` (seed 1337)', 'default recipes')


def lm_section():
    sw, rows = sweep_rows('config/sweep/lm.py')
    head = ['## How do the mixers compare as language models?', '']
    if not rows:
        return head + ['Not run yet: `python sweep.py config/sweep/lm.py --jobs=7` trains `config/stdlib_26m.py` for '
                       'every mixer of the grid and writes `results/lm.jsonl`.', ''], None
    s = {m: v for (_, _, m), v in sw.summarize(rows).items()}
    best = sw.best_lrs(rows)
    ok = {sw.key(r) for r in rows if r['status'] in ('ok', 'diverged')}
    done = {m for m in sw.mixers if any(k[2] == m for k in best)
            and all(sw.key(r) in ok for r, _ in sw.grid(rows) if r['mixer'] == m)}
    cfg = {}
    exec(open(sw.tasks['stdlib']['config']).read(), cfg)
    tokens = cfg['max_iters'] * cfg['batch_size'] * cfg['block_size']
    corpora = sorted({tuple(r['data_tokens']) for r in rows if r.get('data_tokens')})
    lrs = sorted(sw.learning_rates)
    edge = [f'{m} ({lr:g})' for (_, _, m), lr in best.items() if lr in (lrs[0], lrs[-1])]
    missing = [m for m in sw.mixers if m not in done]
    mixers = [[m, f"{s[m]['params']:,}", f"{s[m]['mean']:.4f} ± {s[m]['std']:.4f} [{s[m]['min']:.4f}, "
               f"{s[m]['max']:.4f}]", f"{s[m]['lr']:g}", len(s[m]['accs'])]
              for m in sorted(done, key=lambda m: s[m]['mean'])]
    pairs, verdicts = [], {}
    for a, b, what in LM_PAIRS:
        if a in done and b in done and len(d := sw.seed_diffs(s[a], s[b])) >= 2:
            mu, (lo, hi), k, v = paired(d)
            verdicts[a, b] = v = v.replace('A ahead', f'{a} ahead').replace('B ahead', f'{b} ahead')
            pairs.append([f'{a} − {b}', what or '—', ', '.join(f'{x:+.4f}' for x in d), f'{mu:+.4f}',
                          f'[{lo:+.4f}, {hi:+.4f}]', f'{k} of {len(d)}', f'**{v}**'])
    lines = head + [
        'The ~26M hybrids of `config/stdlib_26m.py` (6 linear and 2 attention layers, bytes of the stdlib corpus) '
        'and the Transformer with and without a 4-tap conv. The grid is fixed in `config/sweep/lm.py`: lr '
        f"{', '.join(f'{lr:g}' for lr in sw.learning_rates)} on seed {sw.seeds[0]}, then seeds "
        f"{', '.join(map(str, sw.best_seeds))} and {sw.best_repeats} same-seed repeat at each mixer's best lr. Each run "
        f"trains {tokens:,} tokens ("
        + (', '.join(f'{tokens / t:.1f} epochs of {t:,} train tokens' for t, _ in corpora) or 'corpus not recorded')
        + ').' + (f" Best lr at an edge of the grid (a better one may lie outside it): {', '.join(edge)}." if edge else '')
        + (f" **Not whole yet:** {', '.join(missing)} left out until their runs are in." if missing else ''), '',
        '```sh', 'python sweep.py config/sweep/lm.py --jobs=7', '```', '', sw.provenance(rows), '',
        'Validation loss (nats/token) at each mixer\'s best lr, mean ± std over seeds [min, max] (a seed\'s repeats '
        'averaged):', '', *table(['mixer', 'params', 'val loss', 'lr', 'seeds'], mixers),
        'Paired by seed: a run of each seed sees the same data, so each pair\'s difference is taken seed by seed '
        '(the seed\'s share of the spread cancels), with a 95% t interval over the seeds and the seeds on which A '
        f'is lower. **Verdict rule**: "ahead" only where the interval excludes zero; a tie where it lies inside '
        f'±{MATTERS} nats (a smaller difference would not change which mixer to use); otherwise unresolved at this '
        'many seeds.', '',
        *table(['A − B', 'what differs', 'per seed', 'mean', '95% interval', 'A lower', 'verdict'], pairs),
        'Every run, the same-seed repeats and the unfinished runs: ' + link('lm.md') + '.', '',
        '![validation loss curves](results/lm.png)', '']
    g = lambda a, b: verdicts.get((a, b), 'not run')  # noqa: E731
    row = ('Language models', f"{len(done)} mixers at ~26M parameters, {len(s['eda']['accs'])} seeds each, paired by "
           f"seed: the erase behind the safe gate is {g('eda', 'kda safe-gate')}, behind KDA's gate "
           f"{g('eda kda-gate', 'kda')}; the safe gate against KDA's: {g('kda safe-gate', 'kda')}; EDA against KDA: "
           f"{g('eda', 'kda')}", 'LM comparison')
    return lines, row


def probe_section():
    [r] = read_rows('probe.jsonl', 'probe')
    sh, p, f = r['shares_pct'], r['perturbation'], r['fold']
    rows = [['(a) shares decay / delta / erase, all tokens', PAPER_PROBES['shares'],
             f"{sh['decay']:.1f} / {sh['delta']:.1f} / {sh['erase']:.1f} %"],
            ['(a) erase share when ᾱ ≥ 0.9, erase / delta', PAPER_PROBES['retained'],
             f"{r['retained_erase_pct']:.1f} %, {r['retained_erase_over_delta']:.2f}x"],
            ['(b) perturbation ‖δo‖/‖o⁻‖: actual / random / shuffled / e = k', PAPER_PROBES['perturbation'],
             ' / '.join(f'{p[k]:.3f}' for k in ('actual', 'random', 'shuffled', 'e_is_k'))],
            ['(b) fold over actual: random / shuffled / e = k', PAPER_PROBES['fold'],
             ' / '.join(f'{f[k]:.2f}x' for k in ('random', 'shuffled', 'e_is_k'))],
            ['(c) mean \\|cos(e, k)\\| (independent reference)', PAPER_PROBES['cos'],
             f"{r['cos_ek']:.4f} ({r['cos_reference']:.4f})"],
            ['(d) raw write-key recall, mean over lags', PAPER_PROBES['recall'],
             f"KDA {r['recall']['kda']:.3f}, EDA {r['recall']['eda']:.3f}"]]
    lines = ['## What does the memory do? The probes', '',
             "The paper's memory-state probes (its Sec. 4.4; definitions and the choices the paper leaves open: "
             '`notes/probe.md`) on an EDA and a KDA model of `config/stdlib_26m.py`, seed 0, 8 x 1024 held-out tokens, '
             'means over the linear layers.', '', *commands([dict(r, command=c) for c in r['command'].split('; ')]),
             f"{made([r])} {r['note']}", '', *table(['probe', 'paper (Sec. 4.4)', 'ours (26M, stdlib bytes)'], rows),
             '![probe figure](results/probe_lm.png)', '',
             'What agrees with the paper at this scale: the erase address lies far from the write key, the erase takes '
             'a large share of the gate strength, erasing at the write key instead would disturb the readout several '
             'times more, and KDA reads old values back from their raw write keys better than EDA. What does not: the '
             'learned address is no gentler on the readout than a random one, and the erase does not take over the '
             'high-retention tokens. One seed each, no untrained model beside them, 26M parameters where the '
             "paper's have 2.5B-25B: a different regime.", '']
    return lines, ('What does the memory do?', f"the erase address lies far from the write key (mean \\|cos\\| "
                   f"{r['cos_ek']:.4f}, independent directions {r['cos_reference']:.4f}); KDA reads old values back "
                   f"better ({r['recall']['kda']:.3f} against EDA's {r['recall']['eda']:.3f})", 'probes')


def param_counts():
    """{(scale, mixer): param_summary()} of the paper's configs, built on the meta device."""
    import torch
    from dataclasses import fields
    from model import GPT, GPTConfig
    names = {f.name for f in fields(GPTConfig)}
    counts = {}
    for scale, path in (('dense', 'config/dense_2p5b.py'), ('moe', 'config/moe_25b_a2p8b.py')):
        scope = {}
        exec(open(path).read(), scope)
        for mixer in MIXER_NAMES:
            with torch.device('meta'):
                counts[scale, mixer] = GPT(GPTConfig(**{**{k: v for k, v in scope.items() if k in names},
                                                        'mixer': mixer})).param_summary()
    return counts


def table7_section():
    counts = param_counts()
    rows, parts, exact = [], [], 0
    for (scale, mixer), s in counts.items():
        paper = TABLE7.get((scale, mixer))
        ours = lambda n, p: f'{n:,} ({100 * (n / 1e9 / p - 1):+.3f}%)' if paper else f'{n:,}'  # noqa: E731
        exact += bool(paper) and mixer in ('eda', 'kda') and all(
            round(n / 1e9, 4) == p for n, p in zip((s['total'], s['active']), paper))
        rows.append([{'dense': 'Dense 2.5B', 'moe': 'MoE 25B-A2.8B'}[scale], MIXER_NAMES[mixer],
                     ours(s['total'], paper and paper[0]), f'{paper[0]}B' if paper else '—',
                     ours(s['active'], paper and paper[1]), f'{paper[1]}B' if paper else '—'])
        parts.append([*rows[-1][:2], *[f'{v / 1e6:,.2f}' for v in s['breakdown'].values()]])
    tf = counts['dense', 'transformer']['total'] / 1e9 / TABLE7['dense', 'transformer'][0] - 1
    return ["## The paper's models: parameter counts (Table 7)", '',
            'Computed by this script from `model.py` (`GPT(cfg).param_summary()` on the meta device) for '
            "`config/dense_2p5b.py` and `config/moe_25b_a2p8b.py` with each mixer, beside the paper's Table 7; "
            '`python train.py --dry_run=True config/dense_2p5b.py --mixer=<mixer>` prints the same. The input '
            'embedding and the untied lm_head count in total and in active parameters, as Table 7 counts them; how '
            'the shapes the paper leaves open were pinned down: `notes/params.md`.', '',
            *table(['Scale', 'Model', 'ours total', 'paper total', 'ours active', 'paper active'], rows),
            'Breakdown in millions ("norms": the blocks\' pre-norms and the final norm; a mixer\'s own norms are in '
            'the mixer):', '', *table(['Scale', 'Model', *next(iter(counts.values()))['breakdown']], parts)], \
        ('Parameter counts', f"{exact} of the 4 KDA and EDA rows of the paper's Table 7 (dense and MoE) to its 4 "
         f"printed decimals, total and active; the dense Transformer {100 * tf:+.3f}%", 'Table 7')


def io_floor_bytes(B, T, H, HV, erase, K=128, V=128):
    """The bytes one fwd+bwd must move at least: the inputs read twice (forward, backward), their gradients written
    once, o written and do read (bf16 but g, fp32); nothing the design keeps between the passes."""
    inputs = B * T * (2 * H * K * 2 + HV * V * 2 + HV * K * 4 + HV * 2 + (HV * K * 2 + HV * 2 if erase else 0))
    return 3 * inputs + 2 * B * T * HV * V * 2


def kernel_section():
    rows = read_rows('kernels.jsonl')
    fla_run = [r for r in rows if r['bench'] == 'kernel' and r['case'].startswith('FLA')][-1]['run']
    kr = {(r['case'], tuple(r['shape'])): r for r in rows if r['bench'] == 'kernel' and r['run'] == fla_run}
    shapes = list(dict.fromkeys(s for _, s in kr))
    ref = lambda name, s: kr.get((name, s))  # noqa: E731
    ratio = lambda r, f: f"{r['fwd_ms'] / f['fwd_ms']:.2f}x / {r['fwd_bwd_ms'] / f['fwd_bwd_ms']:.2f}x" if f else '—'  # noqa: E731
    main = [[c, str(s), f"{r['fwd_ms']:.3f}", f"{r['fwd_bwd_ms']:.3f}", f"{r['peak_mib']:,}",
             ratio(r, ref('FLA chunk_kda safe_gate', s)), ratio(r, ref('FLA chunk_kda', s))] for (c, s), r in kr.items()]
    vs = lambda case, i: [kr[case, s][i] / kr['FLA chunk_kda safe_gate', s][i] for s in shapes  # noqa: E731
                          if (case, s) in kr and ('FLA chunk_kda safe_gate', s) in kr]
    span = lambda xs: f'{min(xs):.2f}x' if f'{min(xs):.2f}' == f'{max(xs):.2f}' else f'{min(xs):.2f}x to {max(xs):.2f}x'  # noqa: E731
    eda, kda = 'eda_triton (EDA)', 'eda_triton KDA path (e=None)'
    prof = {(r['case'], tuple(r['shape'])): r for r in rows if r['bench'] == 'profile' and not r['launch']}
    timed = {(r['case'], tuple(r['shape'])): r for r in rows if r['bench'] == 'kernel' and r['run'] == next(
        iter(prof.values()))['run']}
    where, extra, par, walks = [], {k: [] for k in KERNELS}, [], []
    for s in dict.fromkeys(s for _, s in prof):
        e, k = prof[eda, s]['kernels'], prof[kda, s]['kernels']
        for case, label, p in ((eda, 'EDA', e), (kda, 'KDA path', k)):
            where.append([str(s), label, f"{timed[case, s]['fwd_bwd_ms']:.3f}", *[f'{p[n]:.3f}' for n in KERNELS],
                          f'{sum(p.values()) - sum(p[n] for n in KERNELS):.3f}'])
        more = sum(e[n] - k[n] for n in KERNELS)
        for n in KERNELS:
            extra[n].append((e[n] - k[n]) / more)
        par += [e[n] / k[n] for n in ('_eda_prep_kernel', '_eda_dh_prep_kernel', '_eda_bwd_kernel')]
        walks += [e[n] / k[n] for n in ('_eda_fwd_kernel', '_eda_bwd_dh_kernel')]
    share = {n: f'{round(100 * min(v))}-{round(100 * max(v))}%' for n, v in extra.items()}
    [bw] = read_rows('model_decode.jsonl', 'copy_bandwidth')
    floor = []
    for s in shapes:
        fe, fk = (io_floor_bytes(*s, erase) / (bw['tb_s'] * 1e12) * 1e3 for erase in (True, False))
        x = lambda case, f: f"{kr[case, s]['fwd_bwd_ms'] / f:.1f}x" if (case, s) in kr else '—'  # noqa: E731
        floor.append([str(s), f'{fe:.3f}', x(eda, fe), f'{fk:.3f}', x(kda, fk), x('FLA chunk_kda safe_gate', fk)])
    main_rows = [r for r in rows if r['run'] == fla_run and r['bench'] == 'kernel']
    lines = ['## How fast are the kernels?', '',
             "The update rule alone (`eda_triton` as `model.py` calls it, `check_g=False`: its gates bound g; the "
             "default `check_g=True` reads g's range back, a device sync per call) against flash-linear-attention's KDA "
             "kernel `chunk_kda`, plain and with the safe gate (FLA's faster path, the mark EDA's kernels aim at), "
             'bf16, K = V = 128, shapes (B, T, H, HV); (8, 4096, 3, 6) is a layer of `config/eda_125m.py`. bench.py '
             'checks every kernel against the float64 reference first and times nothing if a check fails; it appends '
             'its rows to `--results_file` (`results/kernels.jsonl` here).', '', *commands(main_rows),
             f"{made(main_rows)} {main_rows[0].get('note', '')}".rstrip(), '',
             *table(['case', 'shape', 'fwd ms', 'fwd+bwd ms', 'peak MiB', 'vs FLA safe gate (fwd / fwd+bwd)',
                     'vs FLA chunk_kda (fwd / fwd+bwd)'], main),
             f"Against FLA's safe gate: EDA takes {span(vs(eda, 'fwd_ms'))} its forward time and "
             f"{span(vs(eda, 'fwd_bwd_ms'))} its forward + backward, at {span(vs(eda, 'peak_mib'))} its peak memory; "
             f"our KDA path (the same kernels without the erase) {span(vs(kda, 'fwd_ms'))} and "
             f"{span(vs(kda, 'fwd_bwd_ms'))}.", '',
             '### Where the time goes', '',
             'GPU time of each kernel in one fwd+bwd (torch.profiler), EDA beside the KDA path (a chunk of 16 sub-steps '
             'instead of 32), with the fwd+bwd bench.py timed; "other": the elementwise kernels around them.', '',
             *commands(list(prof.values())), made(list(prof.values())), '',
             *table(['shape', 'case', 'fwd+bwd ms', *(f'{n} ms' for n in KERNELS.values()), 'other ms'], where),
             f"Of what the erase adds to these kernels, the per-chunk backward takes {share['_eda_bwd_kernel']}, the "
             f"prep {share['_eda_prep_kernel']}, the dh prep {share['_eda_dh_prep_kernel']}, the forward walk "
             f"{share['_eda_fwd_kernel']} and the reverse walk {share['_eda_bwd_dh_kernel']}. The kernels that work on "
             f"a chunk's sub-steps in parallel take {min(par):.2f}-{max(par):.2f}x their KDA-path time with twice the "
             f'sub-steps; the walks, one step a chunk either way, {min(walks):.2f}-{max(walks):.2f}x. Why the kernels '
             'are shaped so, and what was tried and lost: `notes/kernel.md`.', '',
             '### How far from the floor', '',
             'The least a fwd+bwd must move: the inputs read in the forward and again in the backward, their gradients '
             'written, o written and its gradient read, at the copy bandwidth bench.py measured on the same kind of GPU '
             f"({bw['tb_s']:.2f} TB/s, the decoding run below). The floor of KDA's rule (no e, no gamma) is FLA's and "
             "our KDA path's. The arithmetic is below it at these shapes (`notes/kernel.md`, \"What bounds them\").", '',
             *table(['shape', 'EDA floor ms', 'EDA', 'KDA floor ms', 'our KDA path', 'FLA safe gate'], floor)]
    s0 = shapes[0]
    row = ('Kernel speed', f"EDA's rule {kr[eda, s0]['fwd_bwd_ms']:.3f} ms forward and backward at {s0}: "
           f"{kr[eda, s0]['fwd_bwd_ms'] / kr['FLA chunk_kda safe_gate', s0]['fwd_bwd_ms']:.2f}x FLA's safe-gate KDA "
           f"kernel ({kr['FLA chunk_kda safe_gate', s0]['fwd_bwd_ms']:.3f}), {span(vs(eda, 'fwd_bwd_ms'))} over the "
           f"{len(vs(eda, 'fwd_bwd_ms'))} benchmark shapes, at {span(vs(eda, 'peak_mib'))} its peak memory, while our "
           f"KDA path takes {kr[kda, s0]['fwd_bwd_ms'] / kr['FLA chunk_kda safe_gate', s0]['fwd_bwd_ms']:.2f}x; the "
           f"per-chunk backward is {share['_eda_bwd_kernel']} of what the erase adds", 'kernels')
    return lines, row


def train_section():
    rows = read_rows('train.jsonl')
    runs = {(r['mixer'] + r['tag'], r['block_size']): r for r in rows if r['bench'] == 'train'}
    ctx = sorted({T for _, T in runs})
    out = []
    for T in ctx:
        e, rc, t = runs['eda', T], runs['eda_recompute', T], runs['transformer', T]
        out.append([T, f"{e['tok_s']:,} ({rc['tok_s']:,})", f"{t['tok_s']:,}",
                    f"{e['tok_s'] / t['tok_s']:.2f}x ({rc['tok_s'] / t['tok_s']:.2f}x)",
                    f"{e['peak_gib']:.1f} ({rc['peak_gib']:.1f}) / {t['peak_gib']:.1f}"])
    if reports:
        figure_context(runs, ctx)
    layers, steps = ([r for r in rows if r['bench'] == b] for b in ('model_train_layer', 'model_train_step'))
    name = lambda r: (MIXER_NAMES['transformer'] if r['mixer'] == 'transformer' else r['mixer']) + (  # noqa: E731
        ', ' + ', '.join(r['overrides']) if r['overrides'] else '')
    lrows = [[name(r), r['layer'], r['count'], f"{r['fwd_bwd_ms']:.3f}", '—' if r['core_ms'] is None else
              f"{r['core_ms']:.3f}", f"{r['kept_bytes_per_token']:,}"] for r in layers]
    srows = [[name(r), f"{r['ms']:.1f}", f"{r['tok_s']:,}", r['peak_gib']] for r in steps]
    trains = [r for r in rows if r['bench'] == 'train']
    lines = ['## How fast does it train?', '',
             'The ~125M EDA hybrid (`config/eda_125m.py`: 9 linear and 3 attention layers) against the ~125M '
             f"{MIXER_NAMES['transformer']}, compiled, 32,768 tokens a step (batch = 32768 / block_size; one sequence "
             'at 65536), tok/s the mean of steps 3-7 of 8; in brackets the hybrid with `la_recompute_states=True` (the '
             'backward recomputes the chunk states instead of keeping them). `scripts/gpu_train_check.sh` appends a row '
             'a run to `$RESULTS` (`results/train.jsonl` here).', '', *commands(trains),
             f"{made(trains)} {trains[0].get('note', '')}".rstrip(), '',
             *table(['block_size', 'EDA hybrid tok/s (recomputed states)', f"{MIXER_NAMES['transformer']} tok/s",
                     'ratio (recomputed)', 'peak GiB: hybrid (recomputed) / Transformer'], out),
             '![training tok/s by block_size](results/train_context.png)', '',
             "The hybrid overtakes the Transformer where an attention layer costs more than a linear one: an attention "
             "layer's cost grows with the context, a linear layer's does not. Per layer, forward + backward at B = 8, "
             'T = 4096 (the core: `eda_triton` or SDPA alone at the same shapes) and the bytes a layer keeps a token '
             'for its backward:', '', *commands(layers), f"{made(layers)} {layers[0]['note']}.", '',
             *table(['model', 'layer', 'count', 'fwd+bwd ms', 'core ms', 'kept bytes/token'], lrows),
             *table(['model', 'step ms (fwd+bwd, no optimizer)', 'tok/s', 'peak GiB'], srows)]
    row = ('Training speed', "the ~125M hybrid at " + ', '.join(
        f"{runs['eda', T]['tok_s'] / runs['transformer', T]['tok_s']:.2f}x" + f' at {T}' for T in (ctx[0], ctx[-2], ctx[-1]))
        + " tokens of context, against the Transformer's tokens/s", 'training')
    return lines, row


def figure_context(runs, ctx):
    """tok/s against block_size, the hybrid (and with recomputed states) and the Transformer."""
    try:
        import matplotlib
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError:
        print('figure: skipped (matplotlib is not installed)')
        return
    fig, ax = plt.subplots(figsize=(6, 4))
    for m, label in (('eda', 'EDA hybrid'), ('eda_recompute', 'EDA hybrid, recomputed states'),
                     ('transformer', MIXER_NAMES['transformer'])):
        ax.plot(ctx, [runs[m, T]['tok_s'] for T in ctx], marker='o', label=label)
    ax.set(xscale='log', xlabel='block_size (tokens)', ylabel='tokens/s', title='~125M models, one H100, compiled')
    ax.set_xticks(ctx, [str(T) for T in ctx])
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(results_dir, 'train_context.png'), dpi=120)


def decode_section():
    rows = read_rows('model_decode.jsonl')
    runs = {(r['mixer'], r['mode'], r['ctx'], r['B']): r for r in rows if r['bench'] == 'model_decode'}
    out = []
    for ctx, B in sorted({(c, b) for _, _, c, b in runs}):
        e, t = runs['eda', 'compiled', ctx, B], runs['transformer', 'compiled', ctx, B]
        out.append([ctx, B, f"{e['ms']:.3f}", f"{runs['eda', 'graph', ctx, B]['ms']:.3f}", f"{t['ms']:.3f}",
                    f"{runs['transformer', 'graph', ctx, B]['ms']:.3f}", f"{e['tok_s'] / t['tok_s']:.2f}x",
                    f"{e['floor_pct']:.1f}%", f"{e['mib_per_seq'] / t['mib_per_seq']:.3f}"])
    [check] = [r for r in rows if r['bench'] == 'model_decode_check']
    w = check['worst_at']
    kern = read_rows('kernels.jsonl', 'decode_kernel')
    krows = [[r['case'], r['B'], f"{r['ms']:.4f}", r['gb_s'], f"{r['ms'] / next(f['ms'] for f in kern if f['B'] == r['B'] and f['case'].startswith('FLA')):.2f}x", f"{r['eager_ms']:.4f}"] for r in kern]
    steps = [r for r in rows if r['bench'] == 'model_decode']
    lines = ['## How fast does it decode?', '',
             'One decode step of the ~125M configs (`config/eda_125m.py`), bf16, caches filled to the context with '
             'random content, ms per step over 32 steps. `graph`: the step replayed from a CUDA graph '
             '(`decode.GraphDecoder`, what `generate` and `sample.py` run on a GPU); `compiled`: the Inductor-compiled '
             'step in the graph (`sample.py --compile=True`). "floor": the bytes a step must read (weights, linear '
             "states, the cached K/V) over the time, as a fraction of the device's measured copy bandwidth.", '',
             *commands(steps), made(steps), '',
             *table(['ctx', 'B', 'hybrid compiled', 'hybrid graph', f"{MIXER_NAMES['transformer']} compiled",
                     f"{MIXER_NAMES['transformer']} graph", "hybrid tok/s / Transformer's (compiled)",
                     'hybrid floor (compiled)', 'cache per sequence, hybrid / Transformer'], out),
             'Kernels per decode step (the static step, profiled once outside its graph): '
             + ', '.join(f'{k} {n}' for k, n in check['kernels_per_step'].items())
             + f". Each mode's first step against eager `decode_step`'s logits: worst {check['worst']:.1e} "
             f"({w['mixer']} {w['mode']} ctx {w['ctx']} B {w['B']}; tol {check['tol']:.0e}): "
             + ('all pass.' if check['ok'] else 'FAILED.'), '',
             'The decode kernel alone (H = HV = 16): GPU time of a CUDA-graph replay, as `generate` runs it, the eager '
             'call (host path included) beside it.', '', *commands(kern), made(kern), '',
             *table(['case', 'B', 'ms (graph replay)', 'GB/s (state read + written)', 'vs FLA', 'ms (eager call)'], krows)]
    c = runs['eda', 'compiled', max(r[2] for r in runs), 1]
    big = max(out, key=lambda o: (o[0], o[1]))
    row = ('Decoding speed', f"{c['ms']:.3f} ms a step at {c['ctx']} context and batch 1; {big[6]} the Transformer's "
           f'tokens/s at batch {big[1]}', 'decoding')
    return lines, row


# The report's sections in order. Later, from eval.py's rows: 'Past the training length' (the synthetic length
# grid) and 'Long context and needles' (the LM grid) after lm_section, and the probes beside untrained models in
# probe_section.
SECTIONS = [erase_section, defaults_section, lm_section, probe_section, table7_section, kernel_section,
            train_section, decode_section]


def anchor(title):
    return ''.join(c for c in title.lower() if c.isalnum() or c in ' -').replace(' ', '-')


def build():
    """(RESULTS.md's text, README's summary block)."""
    parts = [section() for section in SECTIONS]
    titles = [lines[0][3:] for lines, _ in parts]
    intro = ['# Results', '',
             'Every measured result of this repository, each with the command that reproduces it and the date, commit '
             'and device of its runs. `python scripts/results.py` writes this file from the rows in `results/`: edit '
             'those, never this file (`test_results.py` fails when it differs).', '',
             *[f'- [{t}](#{anchor(t)})' for t in titles], '']
    text = '\n'.join(intro + [ln for lines, _ in parts for ln in lines]).rstrip('\n') + '\n'
    summary = table(['question', 'measured', 'where'], [[*row[:2], f'[{row[2]}](RESULTS.md#{anchor(t)})']
                                                        for (_, row), t in zip(parts, titles) if row])
    return text, '\n'.join([BEGIN, *summary[:-1], END])


def with_summary(readme_text, block):
    """README's text with its summary block replaced by block."""
    head, rest = readme_text.split(BEGIN, 1)
    return head + block + rest.split(END, 1)[1]


if __name__ == '__main__':
    text, block = build()
    with open(out, 'w') as f:
        f.write(text)
    with open(readme) as f:
        new = with_summary(f.read(), block)
    with open(readme, 'w') as f:
        f.write(new)
    print(f'wrote {out} and the summary of {readme}')
