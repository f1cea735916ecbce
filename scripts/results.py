"""
RESULTS.md and README.md's summary table: the fixed wording of scripts/results_template.md, filled in from the JSON
rows in results/ (each with the command, date, commit and device that made it) and model.py's parameter counts; the
sweeps' reports (results/<grid>.md, .png) are rebuilt on the way. Edit the rows or the template, never the two files:
test_results.py fails when they differ from what this script writes.

    python scripts/results.py                                  # RESULTS.md, README.md's table, the sweeps' reports
    python scripts/results.py --results_dir=/tmp/r --out=/tmp/r/RESULTS.md --readme=/tmp/r/README.md
"""
import importlib.util
import json
import math
import os
import sys
from dataclasses import fields

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from configurator import configure  # noqa: E402
from model import GPT, GPTConfig  # noqa: E402

# ----------------------------------------------------------------------------------------------------
out = 'RESULTS.md'            # written here (relative to the repository)
readme = 'README.md'          # its summary table, between the BEGIN and END lines, rewritten
results_dir = 'results'       # the results files read, and where the sweeps' reports and figures go
reports = True                # rebuild the sweeps' reports and the figures (False: the two files only)
configure(globals())
# ----------------------------------------------------------------------------------------------------
os.chdir(ROOT)  # the grids and configs name their files from the repository's root
BEGIN, END = '<!-- results.py: begin -->', '<!-- results.py: end -->'
# RESULTS.md's fixed wording: {name: its text}, a section's under its function's name, its README row's under
# '<name> row' ('question | measured | where'), the title and paragraph before the contents under 'intro'
with open(os.path.join(ROOT, 'scripts', 'results_template.md')) as f:
    TEMPLATE = dict(part.split(' -->\n', 1) for part in f.read().split('<!-- ')[1:])

# The paper's numbers set beside ours (Table 7; Sec. 4.4's memory-state probes are in results_template.md)
TABLE7 = {('dense', 'transformer'): (2.5052, 2.5052), ('dense', 'gdn'): (2.5035, 2.5035),
          ('dense', 'gdn2'): (2.5353, 2.5353), ('dense', 'kda'): (2.5218, 2.5218), ('dense', 'eda'): (2.5295, 2.5295),
          ('moe', 'gdn'): (24.5676, 2.7236), ('moe', 'kda'): (24.6324, 2.7885), ('moe', 'eda'): (24.6558, 2.8119)}
MIXER_NAMES = {'eda': 'EDA', 'kda': 'KDA', 'gdn': 'GDN', 'gdn2': 'GDN-2', 'transformer': 'Transformer (no conv)'}
TF = MIXER_NAMES['transformer']
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
EDA, KDA, SAFE = 'eda_triton (EDA)', 'eda_triton KDA path (e=None)', 'FLA chunk_kda safe_gate'  # kernel cases


def table(header, rows):
    return block(['| ' + ' | '.join(header) + ' |', '|' + '---|' * len(header)] +
                 ['| ' + ' | '.join(str(c) for c in row) + ' |' for row in rows])


def read_rows(name, bench=None):
    """The JSON rows of results/<name>, those of one benchmark kind where bench is given."""
    with open(os.path.join(results_dir, name)) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return [r for r in rows if bench is None or r['bench'] == bench]


def made(rows, note=False):
    """The commands that made rows, and where: the run(s) that wrote them (and the first row's note)."""
    runs = list(dict.fromkeys((r['date'], r['commit'], r['device'], r.get('torch'), r.get('triton')) for r in rows))
    where = 'Made ' + '; '.join(f'{d} at commit {c} on {dev}' + (f', torch {t}, triton {tr}' if t else '')
                                for d, c, dev, t, tr in runs) + '.'
    note = rows[0].get('note', '') if note else ''
    return block(['```sh', *dict.fromkeys(r['command'] for r in rows), '```', '',
                  f"{where} {note}{'.' if note and not note.endswith('.') else ''}".rstrip()])


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


def block(lines):
    """A table or paragraph as one template field (its trailing blank line the template's)."""
    return '\n'.join(lines).rstrip('\n')


def figure(name, draw):
    """draw(plt, ax) onto a figure saved as results/<name> (matplotlib is optional: skipped without it)."""
    try:
        import matplotlib
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError:
        return print('figure: skipped (matplotlib is not installed)')
    fig, ax = plt.subplots(figsize=(6, 4))
    draw(ax)
    fig.tight_layout()
    fig.savefig(os.path.join(results_dir, name), dpi=120)


# ----------------------------------------------------------------------------------------------------
# Statistics: a paired t interval without scipy


def t_two_sided_p(t, dof):
    """P(|T| >= |t|) for Student's t with an integer number of degrees of freedom (the closed forms of Abramowitz &
    Stegun 26.7.3-4)."""
    th = math.atan(abs(t) / math.sqrt(dof))
    c2, term, total = math.cos(th) ** 2, 1.0, 1.0
    for j in range(2 if dof % 2 == 0 else 3, dof, 2):
        term *= c2 * (j - 1) / j
        total += term
    if dof % 2 == 0:
        return max(0.0, 1.0 - math.sin(th) * total)
    return max(0.0, 1.0 - 2 / math.pi * (th + (math.sin(th) * math.cos(th) * total if dof > 1 else 0.0)))


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
    half = t_critical(n - 1) * math.sqrt(sum((d - mu) ** 2 for d in diffs) / (n - 1)) / math.sqrt(n)
    lo, hi = mu - half, mu + half
    verdict = ('A ahead' if hi < 0 else 'B ahead' if lo > 0 else f'a tie (inside ±{MATTERS})'
               if -MATTERS < lo and hi < MATTERS else 'unresolved')
    return mu, (lo, hi), sum(d < 0 for d in diffs), verdict


# ----------------------------------------------------------------------------------------------------
# Sections: each returns the fields of its part of results_template.md (row=False: no README row), or its own lines
# (no README row). Sections from eval.py's rows join SECTIONS below.


def erase_section():
    sw, rows = sweep_rows('config/sweep/erase.py')
    levels = [(t, x) for t in sw.tasks for x, _ in sw.tasks[t]['levels']]
    ok = {sw.key(r) for r in rows if r['status'] in ('ok', 'diverged')}
    n = sum(1 for _ in sw.grid(rows))
    if len(ok) < n:
        return dict(old_erase(None), row=False, shipped=f'Not whole yet: {len(ok)} of its {n} runs are in '
                    '`results/erase.jsonl`; no verdict until the grid is whole.')
    s, out, counts = sw.summarize(rows), [], {}
    for t, x in levels:
        out.append([f'{t} {x} {LEVEL[t]}'])
        for a, b in sw.pairs:
            k, m, d = sw.pair_stats(s[t, x, a], s[t, x, b])
            c = counts.setdefault((a, b), [0, 0, []])
            c[0], c[1], c[2] = c[0] + k, c[1] + m, c[2] + [d]
            out[-1] += [sw.fmt(s[t, x, a]['mean']), sw.fmt(s[t, x, b]['mean']), f'{k} of {m}, {sw.fmt_diff(d)}']
    word = lambda k, m: ('is ahead' if k >= 0.75 * m else 'is behind' if k <= 0.25 * m else  # noqa: E731
                         'shows no consistent effect')
    (k, m, ds), (sk, sm, sds) = counts[tuple(sw.pairs[0])], counts[tuple(sw.pairs[1])]
    floor = sum(r['val_acc'] < sw.tasks[r['task']]['floor'][1][r['x']] + 0.02 for r in rows if sw.key(r) in ok)
    old = old_erase(counts)
    before = old.pop('before')
    verdict = (f"behind KDA's gate the erase {word(k, m)}: ahead on {k} of {m} paired seeds (mean "
               f"{sw.fmt_diff(sum(ds) / len(ds))} points)")
    return dict(old, floor=floor, runs=len(ok), verdict_with=verdict.replace('behind', 'with'), kda_before=sw.fmt(
        before['capacity', 64]['kda']), kda_now=sw.fmt(s['capacity', 64, 'kda']['mean']), shipped=TEMPLATE[
        'erase verdict'].format(provenance=sw.provenance(rows), verdict=verdict, safe_word=word(sk, sm), floor=floor,
                                safe_ahead=f'{sk} of {sm}', safe_mean=sw.fmt_diff(sum(sds) / len(sds)), runs=len(ok),
                                table=table(['level', *(c for a, b in sw.pairs for c in (
                                    a, b, f'{a} ahead'))], out)))


def old_erase(counts):
    """The full benchmark, run with one A per head (synthetic, evict_long, safe_gate): its fields, and 'before':
    the mixers' means at the erase rerun's levels ('ahead': the erase behind KDA's gate there, [ahead, of])."""
    grids = ('synthetic', 'evict_long', 'safe_gate')
    (sw, rows), (_, ev), (sg, sgr) = (sweep_rows(f'config/sweep/{g}.py') for g in grids)
    s, s6 = sw.summarize(rows), sw.summarize(ev)
    before = {'ahead': [0, 0]}
    for (task, x, m), cell in sg.summarize(sgr).items():  # the square's levels: capacity at 2000 steps, evict at 6000
        summary = s6 if task == 'evict' else s
        before[task, x] = {mx: summary[task, x, mx]['mean'] for mx in ('eda', 'eda kda-gate', 'kda')} | {m: cell['mean']}
        k, n, _ = sw.pair_stats(summary[task, x, 'eda kda-gate'], summary[task, x, 'kda'])
        before['ahead'] = [before['ahead'][0] + k, before['ahead'][1] + n]
    holds = counts and counts[('eda kda-gate', 'kda')][0] >= 0.75 * counts[('eda kda-gate', 'kda')][1]
    return dict(before=before, ahead='{} of {}'.format(*before['ahead']), holds='holds' if holds else 'does not repeat',
                old_provenance=block(f'`{g}`: {sw.provenance(r)}' for g, r in zip(grids, (rows, ev, sgr))))


def defaults_section():
    sw, rows = sweep_rows('config/sweep/defaults.py')
    by = {(r['task'], r['mixer']): r for r in rows}
    cell = lambda r: 'not run' if r is None else f"{100 * r['val_acc']:.2f}" + (  # noqa: E731
        f" (step {r['step']}, †)" if r['status'] == 'timeout' else '')
    return dict(provenance=sw.provenance(rows), table=table(['mixer', 'mqar', 'reassign'], [
        [m, *(cell(by.get((t, m))) for t in sw.tasks)] for m in sw.mixers]), stopped=(
        "† the run's last evaluation at its final step; the process was stopped before it exited, so the sweep lists it "
        'as unfinished.' if any(r['status'] == 'timeout' for r in rows) else ''),
        low=f"{100 * min(r['val_acc'] for r in rows):.2f}")


def lm_section():
    sw, rows = sweep_rows('config/sweep/lm.py')
    if not rows:
        return ['## How do the mixers compare as language models?', '', 'Not run yet: `python sweep.py '
                'config/sweep/lm.py --jobs=7` trains `config/stdlib_26m.py` for every mixer of the grid and writes '
                '`results/lm.jsonl`.', '']
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
    pairs, verdicts = [], {}
    for a, b, what in LM_PAIRS:
        if a in done and b in done and len(d := sw.seed_diffs(s[a], s[b])) >= 2:
            mu, (lo, hi), k, v = paired(d)
            verdicts[a, b] = v = v.replace('A ahead', f'{a} ahead').replace('B ahead', f'{b} ahead')
            pairs.append([f'{a} − {b}', what or '—', ', '.join(f'{x:+.4f}' for x in d), f'{mu:+.4f}',
                          f'[{lo:+.4f}, {hi:+.4f}]', f'{k} of {len(d)}', f'**{v}**'])
    g = lambda a, b: verdicts.get((a, b), 'not run')  # noqa: E731
    return dict(
        lrs=', '.join(f'{lr:g}' for lr in sw.learning_rates), seed0=sw.seeds[0], seeds=', '.join(map(str, sw.best_seeds)),
        repeats=sw.best_repeats, tokens=f'{tokens:,}', matters=MATTERS, provenance=sw.provenance(rows),
        epochs=', '.join(f'{tokens / t:.1f} epochs of {t:,} train tokens' for t, _ in corpora) or 'corpus not recorded',
        grid_notes=(f" Best lr at an edge of the grid (a better one may lie outside it): {', '.join(edge)}." if edge
                    else '') + (f" **Not whole yet:** {', '.join(missing)} left out until their runs are in."
                                if missing else ''),
        mixers=table(['mixer', 'params', 'val loss', 'lr', 'seeds'], [
            [m, f"{s[m]['params']:,}", f"{s[m]['mean']:.4f} ± {s[m]['std']:.4f} [{s[m]['min']:.4f}, {s[m]['max']:.4f}]",
             f"{s[m]['lr']:g}", len(s[m]['accs'])] for m in sorted(done, key=lambda m: s[m]['mean'])]),
        pairs=table(['A − B', 'what differs', 'per seed', 'mean', '95% interval', 'A lower', 'verdict'], pairs),
        n_done=len(done), n_seeds=len(s['eda']['accs']), v_safe=g('eda', 'kda safe-gate'), v_kda=g('eda kda-gate', 'kda'),
        v_gate=g('kda safe-gate', 'kda'), v_eda_kda=g('eda', 'kda'))


def sign_test(k, n):
    """Two-sided exact sign test: P(a split at least as uneven as k of n) under a fair coin."""
    m = min(k, n - k)
    return min(1.0, 2 * sum(math.comb(n, i) for i in range(m + 1)) / 2 ** n)


def length_section():
    sw, rows = sweep_rows('config/sweep/length.py')
    evals = read_rows('length_eval.jsonl')
    acc = {(r['mixer'], r['seed']): {x['multiple']: x for x in r['length']} for r in evals}
    mults = sorted({m for a in acc.values() for m in a})
    seeds = sorted({s for _, s in acc})
    ms = [m for m in sw.mixers if all((m, s) in acc for s in seeds)]
    pct = lambda v: f'{100 * v:.1f}'  # noqa: E731
    prim = {k: 100 * sum(a[m]['acc'] for m in mults[1:]) / len(mults[1:]) for k, a in acc.items()}
    mean = lambda m, f, x: sum(acc[m, s][x][f] for s in seeds) / len(seeds)  # noqa: E731
    by_len = table(['mixer', *(f"{x}x ({acc[ms[0], seeds[0]][x]['seq_len']})" for x in mults), 'values / NONE at '
                    f'{mults[-1]}x'], [[m, *(pct(mean(m, 'acc', x)) for x in mults), f"{pct(mean(m, 'acc_value', mults[-1]))}"
                                         f" / {pct(mean(m, 'acc_none', mults[-1]))}"] for m in ms])
    pairs, verdicts, t = [], {}, t_critical(len(seeds) - 1)
    for a, b in sw.pairs:
        d = [prim[a, s] - prim[b, s] for s in seeds]
        mu = sum(d) / len(d)
        half = t * math.sqrt(sum((x - mu) ** 2 for x in d) / (len(d) - 1) / len(d))
        k, n = sum(x > 0 for x in d), sum(x != 0 for x in d)
        verdicts[a, b] = v = f'{a} ahead' if mu - half > 0 else f'{b} ahead' if mu + half < 0 else 'not resolved'
        pairs.append([f'{a} − {b}', ', '.join(f'{x:+.1f}' for x in d), f'{mu:+.1f}', f'[{mu - half:+.1f}, '
                      f'{mu + half:+.1f}]', f'{k} of {n}', f'{sign_test(k, n):.2f}', f'**{v}**'])
    low = [f'{m} seed {s} ({pct(a[1]["acc"])}%)' for (m, s), a in sorted(acc.items()) if a[1]['acc'] < 0.99]
    worst = min(acc.items(), key=lambda kv: prim[kv[0]])
    rest = [100 * acc[worst[0][0], s][mults[-1]]['acc'] for s in seeds if s != worst[0][1]]
    at = lambda x: [100 * mean(m, 'acc', x) for m in ms]  # noqa: E731
    span = lambda v: f'{min(v):.1f}-{max(v):.1f}'  # noqa: E731

    def draw(ax):
        for i, m in enumerate(ms):
            c = f'C{i}'
            for s in seeds:
                ax.plot(mults, [100 * acc[m, s][x]['acc'] for x in mults], color=c, lw=0.5, alpha=0.35)
            ax.plot(mults, [100 * mean(m, 'acc', x) for x in mults], color=c, lw=2, marker='o', label=m)
        ax.set(xscale='log', xticks=mults, xticklabels=[f'{x}x' for x in mults], ylim=(50, 100.5),
               xlabel='evaluation length / training length (256 tokens)', ylabel='accuracy (%)',
               title='reassign past the training length (thin: seeds)')
        ax.legend(fontsize=8)
    figure('length_acc.png', draw)
    return dict(provenance=sw.provenance(rows), eval_provenance=made(evals[:1]).split('```')[-1].strip()[5:],
                first=span(at(1)), last=span(at(mults[-1])), rest=span(rest), top=f'{mults[-1]}x',
                n_seeds=len(seeds), by_len=by_len, pairs=table(['A − B', 'per seed (points)', 'mean', '95% interval',
                                                                  'A higher', 'sign test p', 'verdict'], pairs),
                low=', '.join(low) or 'none', worst=f'{worst[0][0]} seed {worst[0][1]}', worst_acc=pct(
                    worst[1][mults[-1]]['acc']), runs=table(['mixer', *(f'seed {s}' for s in seeds)], [
                    [m, *(f"{pct(acc[m, s][1]['acc'])} / {prim[m, s]:.1f}" for s in seeds)] for m in ms]),
                v_safe=verdicts.get(('eda', 'kda safe-gate'), 'not run'),
                v_kda=verdicts.get(('eda kda-gate', 'kda'), 'not run'), n_ahead=sum(
                    'not' not in v for v in verdicts.values()), n_pairs=len(verdicts))


def probe_section():
    [r] = read_rows('probe.jsonl', 'probe')
    sh, p, f, rc = r['shares_pct'], r['perturbation'], r['fold'], r['recall']
    return dict(made=made([dict(r, command=c) for c in r['command'].split('; ')], True),
                shares=f"{sh['decay']:.1f} / {sh['delta']:.1f} / {sh['erase']:.1f} %",
                retained=f"{r['retained_erase_pct']:.1f} %, {r['retained_erase_over_delta']:.2f}x",
                perturbation=' / '.join(f'{p[k]:.3f}' for k in ('actual', 'random', 'shuffled', 'e_is_k')),
                fold=' / '.join(f'{f[k]:.2f}x' for k in ('random', 'shuffled', 'e_is_k')),
                cos_ek=f"{r['cos_ek']:.4f}", cos_ref=f"{r['cos_reference']:.4f}", kda=f"{rc['kda']:.3f}",
                eda=f"{rc['eda']:.3f}")


def table7_section():
    names, counts = {f.name for f in fields(GPTConfig)}, {}
    for scale, path in (('dense', 'config/dense_2p5b.py'), ('moe', 'config/moe_25b_a2p8b.py')):
        scope = {}
        exec(open(path).read(), scope)
        for mixer in MIXER_NAMES:  # built on the meta device
            with torch.device('meta'):
                counts[scale, mixer] = GPT(GPTConfig(**{**{k: v for k, v in scope.items() if k in names},
                                                        'mixer': mixer})).param_summary()
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
    return dict(counts=table(['Scale', 'Model', 'ours total', 'paper total', 'ours active', 'paper active'], rows),
                parts=table(['Scale', 'Model', *next(iter(counts.values()))['breakdown']], parts), exact=exact,
                tf=f'{100 * tf:+.3f}%')


def io_floor_bytes(B, T, H, HV, erase, K=128, V=128):
    """The bytes one fwd+bwd must move at least: the inputs read twice (forward, backward), their gradients written
    once, o written and do read (bf16 but g, fp32); nothing the design keeps between the passes."""
    inputs = B * T * (2 * H * K * 2 + HV * V * 2 + HV * K * 4 + HV * 2 + (HV * K * 2 + HV * 2 if erase else 0))
    return 3 * inputs + 2 * B * T * HV * V * 2


def kernel_section():
    rows = read_rows('kernels.jsonl')
    by = lambda bench, run=None: {(r['case'], tuple(r['shape'])): r for r in rows  # noqa: E731
                                  if r['bench'] == bench and run in (None, r['run']) and not r['launch']}
    main_rows = [r for r in rows if r['bench'] == 'kernel' and r['run'] == [
        r for r in rows if r['bench'] == 'kernel' and r['case'].startswith('FLA')][-1]['run']]
    kr, prof = by('kernel', main_rows[0]['run']), by('profile')
    timed = by('kernel', next(iter(prof.values()))['run'])
    shapes = list(dict.fromkeys(s for _, s in kr))
    ratio = lambda r, f: f"{r['fwd_ms'] / f['fwd_ms']:.2f}x / {r['fwd_bwd_ms'] / f['fwd_bwd_ms']:.2f}x" if f else '—'  # noqa: E731
    vs = lambda case, i: [kr[case, s][i] / kr[SAFE, s][i] for s in shapes if (case, s) in kr and (SAFE, s) in kr]  # noqa: E731
    span = lambda xs: f'{min(xs):.2f}x' if f'{min(xs):.2f}' == f'{max(xs):.2f}' else f'{min(xs):.2f}x to {max(xs):.2f}x'  # noqa: E731
    ratios = lambda ns: [prof[EDA, s]['kernels'][n] / prof[KDA, s]['kernels'][n] for s in shapes for n in ns]  # noqa: E731
    par, walks = ratios(('_eda_prep_kernel', '_eda_dh_prep_kernel', '_eda_bwd_kernel')), ratios(('_eda_fwd_kernel',
                                                                                                 '_eda_bwd_dh_kernel'))
    where, extra = [], {k: [] for k in KERNELS}
    for s in dict.fromkeys(s for _, s in prof):
        e, k = prof[EDA, s]['kernels'], prof[KDA, s]['kernels']
        for case, label, p in ((EDA, 'EDA', e), (KDA, 'KDA path', k)):
            where.append([str(s), label, f"{timed[case, s]['fwd_bwd_ms']:.3f}", *[f'{p[n]:.3f}' for n in KERNELS],
                          f'{sum(p.values()) - sum(p[n] for n in KERNELS):.3f}'])
        for n in KERNELS:
            extra[n].append((e[n] - k[n]) / sum(e[m] - k[m] for m in KERNELS))
    share = {n: f'{round(100 * min(v))}-{round(100 * max(v))}%' for n, v in extra.items()}
    [bw] = read_rows('model_decode.jsonl', 'copy_bandwidth')
    floor = []
    for s in shapes:
        fe, fk = (io_floor_bytes(*s, erase) / (bw['tb_s'] * 1e12) * 1e3 for erase in (True, False))
        x = lambda case, f: f"{kr[case, s]['fwd_bwd_ms'] / f:.1f}x" if (case, s) in kr else '—'  # noqa: E731
        floor.append([str(s), f'{fe:.3f}', x(EDA, fe), f'{fk:.3f}', x(KDA, fk), x(SAFE, fk)])
    s0, fla0 = shapes[0], kr[SAFE, shapes[0]]['fwd_bwd_ms']
    return dict(
        made=made(main_rows, True), prof_made=made(list(prof.values())), tb_s=f"{bw['tb_s']:.2f}", share=share,
        main=table(['case', 'shape', 'fwd ms', 'fwd+bwd ms', 'peak MiB', 'vs FLA safe gate (fwd / fwd+bwd)',
                    'vs FLA chunk_kda (fwd / fwd+bwd)'], [
            [c, str(s), f"{r['fwd_ms']:.3f}", f"{r['fwd_bwd_ms']:.3f}", f"{r['peak_mib']:,}", ratio(r, kr.get((SAFE, s))),
             ratio(r, kr.get(('FLA chunk_kda', s)))] for (c, s), r in kr.items()]),
        fwd=span(vs(EDA, 'fwd_ms')), fwd_bwd=span(vs(EDA, 'fwd_bwd_ms')), peak=span(vs(EDA, 'peak_mib')),
        kda_fwd=span(vs(KDA, 'fwd_ms')), kda_fwd_bwd=span(vs(KDA, 'fwd_bwd_ms')),
        where=table(['shape', 'case', 'fwd+bwd ms', *(f'{n} ms' for n in KERNELS.values()), 'other ms'], where),
        par=f'{min(par):.2f}-{max(par):.2f}x', walks=f'{min(walks):.2f}-{max(walks):.2f}x',
        floor=table(['shape', 'EDA floor ms', 'EDA', 'KDA floor ms', 'our KDA path', 'FLA safe gate'], floor),
        s0=s0, fla0=f'{fla0:.3f}', eda0=f"{kr[EDA, s0]['fwd_bwd_ms']:.3f}", n_shapes=len(vs(EDA, 'fwd_bwd_ms')),
        eda0_x=f"{kr[EDA, s0]['fwd_bwd_ms'] / fla0:.2f}x", kda0_x=f"{kr[KDA, s0]['fwd_bwd_ms'] / fla0:.2f}x")


def train_section():
    rows = read_rows('train.jsonl')
    trains, layers, steps = ([r for r in rows if r['bench'] == b] for b in ('train', 'model_train_layer', 'model_train_step'))
    runs = {(r['mixer'] + r['tag'], r['block_size']): r for r in trains}
    ctx = sorted({T for _, T in runs})
    out = []
    for T in ctx:
        e, rc, t = runs['eda', T], runs['eda_recompute', T], runs['transformer', T]
        out.append([T, f"{e['tok_s']:,} ({rc['tok_s']:,})", f"{t['tok_s']:,}",
                    f"{e['tok_s'] / t['tok_s']:.2f}x ({rc['tok_s'] / t['tok_s']:.2f}x)",
                    f"{e['peak_gib']:.1f} ({rc['peak_gib']:.1f}) / {t['peak_gib']:.1f}"])
    if reports:
        def draw(ax):
            for m, label in (('eda', 'EDA hybrid'), ('eda_recompute', 'EDA hybrid, recomputed states'), ('transformer', TF)):
                ax.plot(ctx, [runs[m, T]['tok_s'] for T in ctx], marker='o', label=label)
            ax.set(xscale='log', xlabel='block_size (tokens)', ylabel='tokens/s', title='~125M models, one H100, compiled')
            ax.set_xticks(ctx, [str(T) for T in ctx])
            ax.legend()
        figure('train_context.png', draw)
    name = lambda r: (TF if r['mixer'] == 'transformer' else r['mixer']) + (  # noqa: E731
        ', ' + ', '.join(r['overrides']) if r['overrides'] else '')
    return dict(
        made=made(trains, True), layers_made=made(layers, True),
        table=table(['block_size', 'EDA hybrid tok/s (recomputed states)', f"{TF} tok/s", 'ratio (recomputed)',
                     'peak GiB: hybrid (recomputed) / Transformer'], out),
        layers=table(['model', 'layer', 'count', 'fwd+bwd ms', 'core ms', 'kept bytes/token'], [
            [name(r), r['layer'], r['count'], f"{r['fwd_bwd_ms']:.3f}", '—' if r['core_ms'] is None else
             f"{r['core_ms']:.3f}", f"{r['kept_bytes_per_token']:,}"] for r in layers]),
        steps=table(['model', 'step ms (fwd+bwd, no optimizer)', 'tok/s', 'peak GiB'],
                    [[name(r), f"{r['ms']:.1f}", f"{r['tok_s']:,}", r['peak_gib']] for r in steps]),
        ratios=', '.join(f"{runs['eda', T]['tok_s'] / runs['transformer', T]['tok_s']:.2f}x at {T}"
                         for T in (ctx[0], ctx[-2], ctx[-1])))


def decode_section():
    rows = read_rows('model_decode.jsonl')
    steps = [r for r in rows if r['bench'] == 'model_decode']
    runs = {(r['mixer'], r['mode'], r['ctx'], r['B']): r for r in steps}
    out = []
    for ctx, B in sorted({(c, b) for _, _, c, b in runs}):
        e, t = runs['eda', 'compiled', ctx, B], runs['transformer', 'compiled', ctx, B]
        out.append([ctx, B, f"{e['ms']:.3f}", f"{runs['eda', 'graph', ctx, B]['ms']:.3f}", f"{t['ms']:.3f}",
                    f"{runs['transformer', 'graph', ctx, B]['ms']:.3f}", f"{e['tok_s'] / t['tok_s']:.2f}x",
                    f"{e['floor_pct']:.1f}%", f"{e['mib_per_seq'] / t['mib_per_seq']:.3f}"])
    [check] = [r for r in rows if r['bench'] == 'model_decode_check']
    kern = read_rows('kernels.jsonl', 'decode_kernel')
    fla = {r['B']: r['ms'] for r in kern if r['case'].startswith('FLA')}
    c = runs['eda', 'compiled', max(r[2] for r in runs), 1]
    big = max(out, key=lambda o: (o[0], o[1]))
    return dict(
        made=made(steps), kern_made=made(kern), worst=f"{check['worst']:.1e}", tol=f"{check['tol']:.0e}",
        worst_at='{mixer} {mode} ctx {ctx} B {B}'.format(**check['worst_at']),
        launches=', '.join(f'{k} {n}' for k, n in check['kernels_per_step'].items()),
        verdict='all pass.' if check['ok'] else 'FAILED.',
        table=table(['ctx', 'B', 'hybrid compiled', 'hybrid graph', f"{TF} compiled", f"{TF} graph",
                     "hybrid tok/s / Transformer's (compiled)", 'hybrid floor (compiled)',
                     'cache per sequence, hybrid / Transformer'], out),
        kern=table(['case', 'B', 'ms (graph replay)', 'GB/s (state read + written)', 'vs FLA', 'ms (eager call)'],
                   [[r['case'], r['B'], f"{r['ms']:.4f}", r['gb_s'], f"{r['ms'] / fla[r['B']]:.2f}x",
                     f"{r['eager_ms']:.4f}"] for r in kern]),
        ms=f"{c['ms']:.3f}", ctx=c['ctx'], big_x=big[6], big_B=big[1])


# The report's sections in order. Still to come from eval.py's rows: 'Long context and needles' (the LM grid,
# config/sweep/lm_long.py) after lm_section, and the probes beside untrained models in probe_section.
SECTIONS = [erase_section, length_section, defaults_section, lm_section, probe_section, table7_section, kernel_section,
            train_section, decode_section]


def anchor(title):
    return ''.join(c for c in title.lower() if c.isalnum() or c in ' -').replace(' ', '-')


def render(section):
    """(a section's text, its README row or None): its template part filled with its fields, or its own lines."""
    out = section()
    if isinstance(out, list):
        return '\n'.join(out).strip('\n') + '\n', None
    text = TEMPLATE[section.__name__].format(**out)
    while '\n\n\n' in text:  # an empty field leaves no gap
        text = text.replace('\n\n\n', '\n\n')
    row = out.get('row', True) and TEMPLATE[section.__name__ + ' row'].format(**out).strip().split(' | ')
    return text.strip('\n') + '\n', row or None


def build():
    """(RESULTS.md's text, README's summary block)."""
    texts, rows = zip(*(render(section) for section in SECTIONS))
    titles = [t.split('\n', 1)[0][3:] for t in texts]
    summary = table(['question', 'measured', 'where'], [[*row[:2], f'[{row[2]}](RESULTS.md#{anchor(t)})']
                                                        for row, t in zip(rows, titles) if row])
    return (TEMPLATE['intro'] + ''.join(f'- [{t}](#{anchor(t)})\n' for t in titles) + '\n' + '\n'.join(texts),
            '\n'.join([BEGIN, summary, END]))


def with_summary(readme_text, block):
    """README's text with its summary block replaced by block."""
    head, rest = readme_text.split(BEGIN, 1)
    return head + block + rest.split(END, 1)[1]


if __name__ == '__main__':
    text, summary = build()
    with open(out, 'w') as f:
        f.write(text)
    with open(readme) as f:
        new = with_summary(f.read(), summary)
    with open(readme, 'w') as f:
        f.write(new)
    print(f'wrote {out} and the summary of {readme}')
