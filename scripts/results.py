"""
RESULTS.md and README.md's summary table from the JSON rows in results/ (each with the command, date, commit and
device that made it), the wording of scripts/results_template.md and model.py's parameter counts; the sweeps'
reports (results/<grid>.md, .png) are rebuilt on the way. Edit the rows or the template, never the two files.

    python scripts/results.py                                  # RESULTS.md, README.md's table, the sweeps' reports
    python scripts/results.py --results_dir=/tmp/r --out=/tmp/r/RESULTS.md --readme=/tmp/r/README.md
"""
import os
import re
import runpy
import sys
from dataclasses import fields
from pathlib import Path
from types import SimpleNamespace

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, 'scripts')]
from configurator import configure  # noqa: E402
from model import GPT, GPTConfig  # noqa: E402
from rows import figure, lines, made, read, table  # noqa: E402  (scripts/rows.py)

# ----------------------------------------------------------------------------------------------------
out = 'RESULTS.md'            # written here (relative to the repository)
readme = 'README.md'          # its summary table, between the BEGIN and END lines, rewritten
results_dir = 'results'       # the results files read, and where the sweeps' reports and figures go
reports = True                # rebuild the sweeps' reports and the figures (False: the two files only)
configure(globals())
# ----------------------------------------------------------------------------------------------------
os.chdir(ROOT)  # the grids and configs name their files from the repository's root
BEGIN, END = '<!-- results.py: begin -->', '<!-- results.py: end -->'
TEMPLATE = dict(part.split(' -->\n', 1)  # {name: its text}, as its first lines say
                for part in Path(ROOT, 'scripts', 'results_template.md').read_text().split('<!-- ')[1:])

# The paper's Table 7 (total, active; in billions), set beside ours
TABLE7 = {('dense', 'transformer'): (2.5052, 2.5052), ('dense', 'gdn'): (2.5035, 2.5035),
          ('dense', 'gdn2'): (2.5353, 2.5353), ('dense', 'kda'): (2.5218, 2.5218), ('dense', 'eda'): (2.5295, 2.5295),
          ('moe', 'gdn'): (24.5676, 2.7236), ('moe', 'kda'): (24.6324, 2.7885), ('moe', 'eda'): (24.6558, 2.8119)}
MIXER_NAMES = {'eda': 'EDA', 'kda': 'KDA', 'gdn': 'GDN', 'gdn2': 'GDN-2', 'transformer': 'Transformer (no conv)'}
# EDA's kernels (as the template's columns order them) and the kernel benchmark's cases
WALKS = {'eda_fwd_ws_kernel': '_eda_fwd_kernel'}  # walk_gluon.py's forward walk, kernel.py's where it does not run
KERNELS = ('_eda_prep_kernel', '_eda_fwd_kernel', '_eda_dh_prep_kernel', '_eda_bwd_dh_kernel', '_eda_bwd_kernel')
EDA, KDA, SAFE = 'eda_triton (EDA)', 'eda_triton KDA path (e=None)', 'FLA chunk_kda safe_gate'
UPDATES = {'reassign': 'overwrites and moves'}  # what a task's updates are, where "updates" would say less


def fill(name, **fields):
    """A template part with its fields filled, its surrounding blank lines stripped."""
    return TEMPLATE[name].format(**fields).strip('\n')


def span(xs, fmt='{:.2f}x', sep=' to '):
    """The range of xs as the report prints it: one value where both ends print alike."""
    lo, hi = fmt.format(min(xs)), fmt.format(max(xs))
    return lo if lo == hi else lo + sep + hi


def read_rows(name, bench=None):
    """The JSON rows of results/<name>, those of one benchmark kind where bench is given."""
    rows = read(path := os.path.join(results_dir, name))
    if not rows or None in rows.values():
        sys.exit(f'results.py: {path} has no rows, or a line that is not JSON')
    return [r for r in rows.values() if bench is None or r['bench'] == bench]


def script(path, *argv):
    """A script's module-level names, loaded with argv as its command line (the scripts read their settings there)."""
    argv, sys.argv = sys.argv, [path, *argv]
    try:
        return SimpleNamespace(**runpy.run_path(os.path.join(ROOT, path)))
    finally:
        sys.argv = argv


def sweep_rows(grid):
    """(sweep.py loaded for one grid in results_dir, its rows); its report (.md, .png) rebuilt when `reports`."""
    sw = script('sweep.py', grid, f'--results_dir={results_dir}', '--report_only=True')
    rows = sw.read_results(sw.results_path)
    if rows and reports:
        sw.report(rows)
    return sw, rows


# ----------------------------------------------------------------------------------------------------
# Sections: each returns the fields of its part of results_template.md (row=False: no README row), or None where
# its grid has no rows yet


def erase_section():
    sw, rows = sweep_rows('config/sweep/erase.py')
    ok = {sw.key(r) for r in rows if r['status'] in ('ok', 'diverged')}
    if len(ok) < (n := sum(1 for _ in sw.grid(rows))):
        return dict(row=False, shipped=fill('erase not whole', done=len(ok), n=n))
    s, unit = sw.summarize(rows), {'mqar': 'pairs', 'reassign': 'updates', 'evict': 'updates', 'capacity': 'live pairs'}
    levels = {f'{t} {x} {unit[t]}': (t, x) for t in sw.tasks for x, _ in sw.tasks[t]['levels']}
    # {(mixer, seed): {level: its accuracy in points}}, a seed's repeats averaged (the grid is whole: every seed ran)
    values = {(m, seed): {level: sw.mean(sw.by_seed(s[t, x, m]['runs'])[seed], 100) for level, (t, x) in levels.items()}
              for m in sw.mixers for seed in sw.seeds}
    said = []  # the erase behind KDA's gate, then behind the safe gate: the table's rule over every level's seeds
    for a, b in sw.pairs[:2]:
        diffs = [values[a, seed][level] - values[b, seed][level] for seed in sw.seeds for level in levels]
        mu, (lo, hi), k, _, verdict = sw.paired(diffs, True, a, b)
        word = {f'{a} ahead': 'is ahead', f'{b} ahead': 'is behind'}.get(verdict, 'shows no resolved effect')
        said.append(dict(word=word, ahead=f'{k} of {len(diffs)}', mean=f'{mu:+.1f}', ci=f'[{lo:+.1f}, {hi:+.1f}]'))
    floor = sum(r['val_acc'] < sw.tasks[r['task']]['floor'][1][r['x']] + 0.02 for r in rows if sw.key(r) in ok)
    means = [[m, *(sw.fmt(s[t, x, m]['mean']) for t, x in levels.values())] for m in sw.mixers]
    pairs = sw.verdicts(values, dict.fromkeys(levels, (1, True)))[0]
    f = dict(provenance=made(rows, 'runs'), kda=said[0], safe=said[1], floor=floor, runs=len(ok),
             table=table(['mixer, or A − B', *levels], means + pairs))
    return dict(f, shipped=fill('erase verdict', **f))


def defaults_section():
    sw, rows = sweep_rows('config/sweep/defaults.py')
    by = {(r['task'], r['mixer']): r for r in rows}
    cell = lambda r: 'not run' if r is None else f"{100 * r['val_acc']:.2f}" + (  # noqa: E731
        f" (step {r['step']}, †)" if r['status'] == 'timeout' else '')
    return dict(provenance=made(rows, 'runs'), low=f"{100 * min(r['val_acc'] for r in rows):.2f}",
                table='; '.join(f"{m} {' / '.join(cell(by.get((t, m))) for t in sw.tasks)}" for m in sw.mixers),
                stopped=fill('defaults stopped') if any(r['status'] == 'timeout' for r in rows) else '')


def lm_section():
    sw, rows = sweep_rows('config/sweep/lm.py')
    if not rows:
        return None
    s, best, lrs = {m: v for (_, _, m), v in sw.summarize(rows).items()}, sw.best_lrs(rows), sw.learning_rates
    ok = {sw.key(r) for r in rows if r['status'] in ('ok', 'diverged')}
    done = [m for m in sw.mixers if any(k[2] == m for k in best)
            and all(sw.key(r) in ok for r, _ in sw.grid(rows) if r['mixer'] == m)]
    edge = ', '.join(f'{m} ({lr:g})' for (_, _, m), lr in best.items() if lr in (min(lrs), max(lrs)))
    return dict(lrs=', '.join(f'{lr:g}' for lr in lrs), seed0=sw.seeds[0], provenance=made(rows, 'runs'), row=False,
                edge=edge or 'none', mixers='; '.join(fill('lm mixer', m=m, s=s[m], n=len(s[m]['accs'])) for m in done))


def lm_long_section():
    sw, rows = sweep_rows('config/sweep/lm_long.py')
    if not rows:
        return None
    evals = read_rows('lm_long_eval.jsonl')
    ev = {(r['mixer'], r['seed'], r['what']): r[r['what']] for r in evals}
    block_size = runpy.run_path(sw.tasks['stdlib']['config'])['block_size']  # "past the block" starts there
    runs = {(r['mixer'], r['seed']): r for r in rows if r['status'] == 'ok'}
    seeds = sorted({s for _, s in runs})
    ms = [m for m in sw.mixers if all((m, s, w) in ev for s in seeds for w in ('text', 'needles'))]
    # the figures named in config/sweep/lm_long.py before its runs, as the template's columns order them:
    # {figure: (decimals of a difference, higher is better)}
    figures = {'val': (4, False), 'past': (4, False), 'carry': (4, False), 'bound': (2, True), 'rebound': (2, True),
               'stale': (2, False)}

    def needles(m, seeds, variant, score='acc', context=None):  # in points, over the seeds' depths and contexts
        cells = [c for s in seeds for c in ev[m, s, 'needles']['cells'] if c['variant'] == variant]
        return sw.mean((c[score] for c in cells if context is None or c['context'] == context), 100)
    fig = {}  # {(mixer, seed): {figure: value}}: the text past the block weighted by its buckets' widths
    for m, s in [(m, s) for m in ms for s in seeds]:
        text = ev[m, s, 'text']
        past = [(b - a, i) for i, (a, b) in enumerate(zip(text['edges'], text['edges'][1:])) if a >= block_size]
        carried, reset = (sum(w * text[key][i] for w, i in past) / sum(w for w, _ in past)
                          for key in ('carried', 'reset'))
        fig[m, s] = dict(val=runs[m, s]['val_loss'], past=carried, carry=carried - reset, bound=needles(m, [s], 'bound'),
                         rebound=needles(m, [s], 'rebound'), stale=needles(m, [s], 'rebound', 'stale'))
    text0, needles0 = ev[ms[0], seeds[0], 'text'], ev[ms[0], seeds[0], 'needles']
    contexts = sorted({c['context'] for c in needles0['cells']})
    pairs, said = sw.verdicts(fig, figures)
    means = {m: {f: sw.mean(fig[m, s][f] for s in seeds) for f in figures} for m in ms}

    def draw(ax):  # the text's loss by position bucket, mean over the seeds: the state carried, or reset (dotted)
        mids = [(a + b) / 2 for a, b in zip(text0['edges'], text0['edges'][1:])]
        lines(ax, mids, [([sw.mean(ev[m, s, 'text'][key][j] for s in seeds) for j in range(len(mids))],
                          dict(color=f'C{i}', **style)) for i, m in enumerate(ms)
                         for key, style in (('carried', dict(marker='o', ms=3, label=m)), ('reset', dict(ls=':')))],
              xlabel='position in the window (tokens); the block is 1024', ylabel='loss (nats/token)', ylim=(0.55, 1.1))
        ax.axvline(1024, color='gray', lw=0.5)
        ax.set_title('text past the training length (dotted: reset every 1024)', fontsize=9)
    if reports:
        figure(os.path.join(results_dir, 'lm_long_position.png'), draw)
    needle_v = [v for k, v in said.items() if k.endswith(('bound', 'stale')) and 'transformer' not in k]
    return dict(
        provenance=made(rows, 'runs'), evaluated=made(evals, 'evaluations'), n_seeds=len(seeds), text=text0,
        needles=needles0, last_ctx=contexts[-1], n_resolved=sum(v not in ('not resolved', 'not run') for v in needle_v),
        n_needle=sum(v != 'not run' for v in needle_v), v=said, pairs=table(None, pairs),
        past={m: f"{means[m]['past']:.4f}" if m in means else 'not run' for m in ('eda', 'transformer conv4')},
        mixers='\n'.join(fill('lm_long mixer', m=m, **means[m]) for m in ms),
        by_ctx=table(['mixer', *(f'{c:,}' for c in contexts)], [[m, *(
            f"{needles(m, seeds, 'bound', context=c):.0f} / {needles(m, seeds, 'rebound', context=c):.0f}"
            for c in contexts)] for m in ms]),
        near_chance=', '.join(f"{needles(m, seeds, 'bound', context=contexts[-1]):.0f}" for m in ms))


def length_task(sw, task, acc, rows, several):
    """One task's fields of the length section, with draw(ax), its panel of the figure; acc: {(mixer, seed):
    {multiple: eval.py's scores there}}; rows: the task's training rows."""
    spec, mults, seeds = sw.tasks[task], sorted({m for a in acc.values() for m in a}), sorted({s for _, s in acc})
    if len(spec['levels']) != 1:
        sys.exit(f"results.py: the length section reads one level a task; config/sweep/length.py's {task} has "
                 f"{len(spec['levels'])}")
    cfg, ms = runpy.run_path(spec['config']), [m for m in sw.mixers if all((m, s) in acc for s in seeds)]
    configure(cfg, spec['levels'][0][1])  # train.py's settings for the task: its config and level
    top, one = mults[-1], acc[ms[0], seeds[0]]  # the longest multiple; one run's scores, for what every run shares
    # a run's mean accuracy (points) over 2x and longer, of the mixers with every seed
    prim = {(m, s): sw.mean((acc[m, s][x]['acc'] for x in mults[1:]), 100) for m in ms for s in seeds}
    pairs, said = sw.verdicts({k: dict(acc=v) for k, v in prim.items()}, dict(acc=(1, True)))
    for row in pairs:  # each seed's difference beside the pair's cell
        a, b = row[0].split(' − ')
        row.insert(1, ', '.join(f'{prim[a, s] - prim[b, s]:+.1f}' for s in seeds))
    worst = min(prim, key=prim.get)  # the run of least accuracy past the training length

    def mean(m, x, score='acc'):  # a mixer's mean over the seeds at multiple x, in points
        return 100 * sw.mean(acc[m, s][x][score] for s in seeds)

    def draw(ax):  # thin: each seed; thick: the mixer's mean
        lines(ax, mults, [([100 * acc[m, s][x]['acc'] for x in mults], dict(color=f'C{i}', lw=0.5, alpha=0.35))
                          for i, m in enumerate(ms) for s in seeds] + [
            ([mean(m, x) for x in mults], dict(color=f'C{i}', lw=2, marker='o', label=m)) for i, m in enumerate(ms)],
              xticks=mults, xticklabels=[f'{x}x' for x in mults], ylim=(0 if min(prim.values()) < 50 else 50, 100.5),
              xlabel=f"evaluation length / training length ({cfg['block_size']} tokens)", ylabel='accuracy (%)',
              title=f'{task} past the training length (thin: seeds)')
    weak = acc[worst][top]  # its scores at the longest multiple
    n_ahead = sum('not' not in v for v in said.values())
    return dict(
        task=task, spec=spec, cfg=cfg, noun=UPDATES.get(task, 'updates'), draw=draw, v=said, top=top, seeds=seeds,
        train=one[1], longest=one[top], worst=worst, weak=weak, floor=weak['none_answers'] / weak['answers'],
        n_seeds=len(seeds), n_mixers=len(ms), n_ahead=n_ahead, n_pairs=len(said), pairs=table(None, pairs),
        label=f'**{task}**: ' + made(rows, 'runs') if several else '', spread='' if n_ahead else fill('length spread'),
        first=span([mean(m, 1) for m in ms], '{:.1f}', '-'), last=span([mean(m, top) for m in ms], '{:.1f}', '-'),
        rest=span([100 * acc[worst[0], s][top]['acc'] for s in seeds if s != worst[1]], '{:.1f}', '-'),
        low=', '.join(f"{m} seed {s} ({a[1]['acc']:.1%})" for (m, s), a in sorted(acc.items())
                      if a[1]['acc'] < 0.99) or 'none',
        head=[f"{x}x ({one[x]['seq_len']})" for x in mults] + [f'values / NONE at {top}x'],
        by_len=[[task, m, *(f'{mean(m, x):.1f}' for x in mults),
                 f"{mean(m, top, 'acc_value'):.1f} / {mean(m, top, 'acc_none'):.1f}"] for m in ms],
        runs=[[task, m, *(f"{100 * acc[m, s][1]['acc']:.1f} / {prim[m, s]:.1f}" for s in seeds)] for m in ms])


def pilot_found():
    """What the evict pilot found at each level, the step budget evict trains for ('not run yet' without its rows)."""
    _, rows = sweep_rows('config/sweep/evict_pilot.py')
    found = []
    for x in sorted({r['x'] for r in rows}):
        curves = [{step: a for step, _, a in r.get('curve') or []} for r in rows if r['x'] == x]
        steps = [s for s in sorted(curves[0]) if all(c.get(s, 0) >= 0.99 for c in curves)]
        found.append(f'with {x} updates ' + (f'every run was at 99% or more from step {steps[0]}' if steps
                                             else 'not every run reached 99%'))
    return '; '.join(found) or 'not run yet'


def length_section():
    sw, rows = sweep_rows('config/sweep/length.py')
    evals, acc = read_rows('length_eval.jsonl'), {}  # acc: {task: {(mixer, seed): {multiple: scores}}}
    for r in evals:
        acc.setdefault(r['task'], {})[r['mixer'], r['seed']] = {x['multiple']: x for x in r['length']}
    if stray := set(acc) - set(sw.tasks):
        sys.exit(f"results.py: results/length_eval.jsonl has rows of {', '.join(sorted(stray))}, not a task of "
                 "config/sweep/length.py")
    per = [length_task(sw, t, acc[t], [r for r in rows if r['task'] == t], len(acc) > 1) for t in sw.tasks if t in acc]
    if reports:  # the figure, and every run seed by seed: too long for RESULTS.md
        figure(os.path.join(results_dir, 'length_acc.png'), lambda *axes: [f['draw'](ax) for f, ax in zip(per, axes)],
               len(per))
        runs = table(['task', 'mixer', *(f'seed {s}' for s in per[0]['seeds'])], [r for f in per for r in f['runs']])
        Path(results_dir, 'length_runs.md').write_text(fill('length runs', top=per[0]['top'], runs=runs) + '\n')

    def each(field):  # a field of every task, as the template field formats it: one value where they agree
        vals = {f['task']: field.format(**f) for f in per}
        return vals[per[0]['task']] if len(set(vals.values())) == 1 else ', '.join(f'{v} on {t}' for t, v in vals.items())
    return dict(provenance=made(rows, 'runs'), evaluated=made(evals, 'evaluations'),
                n_runs=sum(1 for _ in sw.grid()), setup='; '.join(fill('length setup', **f) for f in per),
                keys=each('{train[num_keys]}'), grown=each('{longest[num_updates]}'), top=each('{top}x'),
                n_seeds=each('{n_seeds}'), models=each("{spec[config]}'s {cfg[n_layer]}-layer models"),
                evict=fill('length evict in' if 'evict' in acc else 'length evict out', pilot=pilot_found()),
                by_len=table(['task', 'mixer', *per[0]['head']], [r for f in per for r in f['by_len']]),
                verdicts='\n\n'.join(fill('length verdicts', **f) for f in per),
                measured='; '.join(fill('length row', **f) for f in per),
                spread_row=fill('length spread row') if all(f['spread'] for f in per) else '')


def probe_section():
    rows = {r['label']: r for r in read_rows('probe.jsonl', 'probe')}
    return dict(made=made([rows['EDA']], commands=True), eda=rows['EDA'], eda0=rows['EDA init'], kda=rows['KDA'],
                kda0=rows['KDA init'])


def table7_section():
    names, rows, exact, tf = {f.name for f in fields(GPTConfig)}, [], 0, None
    off = lambda n, p: f'{100 * (n / 1e9 / p - 1):+.3f}%'  # noqa: E731
    for scale, label, path in (('dense', 'Dense 2.5B', 'config/dense_2p5b.py'),
                               ('moe', 'MoE 25B-A2.8B', 'config/moe_25b_a2p8b.py')):
        cfg = {k: v for k, v in runpy.run_path(path).items() if k in names}
        for mixer in MIXER_NAMES:
            with torch.device('meta'):  # the shapes alone: no memory for the weights
                s = GPT(GPTConfig(**{**cfg, 'mixer': mixer})).param_summary()
            ns, paper = (s['total'], s['active']), TABLE7.get((scale, mixer), ())
            exact += mixer in ('eda', 'kda') and paper == tuple(round(n / 1e9, 4) for n in ns)
            tf = off(ns[0], paper[0]) if (scale, mixer) == ('dense', 'transformer') else tf
            cells = [(f'{n:,} ({off(n, p)})', f'{p}B') for n, p in zip(ns, paper)] or [(f'{n:,}', '—') for n in ns]
            rows.append([label, MIXER_NAMES[mixer], *cells[0], *cells[1]])
    return dict(counts=table(None, rows), exact=exact, tf=tf)


def kernel_section():
    rows = read_rows('kernels.jsonl')
    run = [r for r in rows if r['bench'] == 'kernel' and r['case'].startswith('FLA')][-1]['run']  # the last with FLA

    # {(case, shape): its row} of the run's timings, then of its profiles; sweep variants left out
    kr, prof = ({(r['case'], tuple(r['shape'])): r for r in rows if r['bench'] == bench and r['run'] == run
                 and not r['launch']} for bench in ('kernel', 'profile'))
    shapes, profiled = (list(dict.fromkeys(s for _, s in by)) for by in (kr, prof))  # in the order they ran
    # {(case, shape): {kernel: its ms in one fwd+bwd}}; the forward walk in Gluon where it ran, one column either way
    k = {key: {WALKS.get(n, n): ms for n, ms in r['kernels'].items()} for key, r in prof.items()}

    def ratio(r, f):  # r's forward and fwd+bwd times over those of FLA's row f
        return f"{r['fwd_ms'] / f['fwd_ms']:.2f}x / {r['fwd_bwd_ms'] / f['fwd_bwd_ms']:.2f}x" if f else '—'

    def vs_safe(case, key):  # the case's key over FLA's safe gate's, at each shape both ran
        return span([kr[case, s][key] / kr[SAFE, s][key] for s in shapes if (case, s) in kr and (SAFE, s) in kr])

    def over_kda(*kernels):  # EDA's time in these kernels over the KDA path's, at every profiled shape
        return span([k[EDA, s][n] / k[KDA, s][n] for s in profiled for n in kernels])
    # other: the elementwise kernels around them; added: what the erase adds to each kernel
    where = [fill('kernel time row', s=s, case=label, k=k[case, s],
                  ms=f"{kr[case, s]['fwd_bwd_ms']:.3f}" if (case, s) in kr else '—',
                  other=max(0., sum(k[case, s].values()) - sum(k[case, s][n] for n in KERNELS)))
             for s in profiled for case, label in ((EDA, 'EDA'), (KDA, 'KDA path'))]
    added = {(s, n): k[EDA, s][n] - k[KDA, s][n] for s in profiled for n in KERNELS}
    device = kr[EDA, shapes[0]]['device']  # the floor divides by a copy bandwidth measured on the same kind of GPU
    if not (bws := [r for r in rows if r['bench'] == 'copy_bandwidth' and r['device'] == device]):
        sys.exit(f"results.py: results/kernels.jsonl has no copy_bandwidth row from {device} (bench.py makes them)")
    bw, io_floor_bytes, floor = bws[-1], script('bench.py').io_floor_bytes, []

    def over(case, s, ms):  # the case's fwd+bwd time at shape s over ms
        return f"{kr[case, s]['fwd_bwd_ms'] / ms:.1f}x" if (case, s) in kr else '—'
    for s in shapes:  # the floor in ms, with the erase and without it (KDA's rule)
        fe, fk = (io_floor_bytes(*s, erase) / (bw['tb_s'] * 1e12) * 1e3 for erase in (True, False))
        floor.append([str(s), f'{fe:.3f}', over(EDA, s, fe), f'{fk:.3f}', over(KDA, s, fk), over(SAFE, s, fk)])
    main = [fill('kernel row', case=c, s=s, r=r, safe=ratio(r, kr.get((SAFE, s))),
                 chunk=ratio(r, kr.get(('FLA chunk_kda', s)))) for (c, s), r in kr.items()]
    fla0, eda0, kda0 = kr[SAFE, shapes[0]], kr[EDA, shapes[0]], kr[KDA, shapes[0]]  # the first shape's rows
    return dict(
        made=made([r for r in rows if r['bench'] == 'kernel' and r['run'] == run], note=True, commands=True),
        prof_made=made(list(prof.values()), commands=True), bw=bw, bw_made=made([bw], note=True, commands=True),
        main='\n'.join(main), where='\n'.join(where), floor=table(None, floor), s0=shapes[0],
        fwd=vs_safe(EDA, 'fwd_ms'), fwd_bwd=vs_safe(EDA, 'fwd_bwd_ms'), peak=vs_safe(EDA, 'peak_mib'),
        kda_fwd=vs_safe(KDA, 'fwd_ms'), kda_fwd_bwd=vs_safe(KDA, 'fwd_bwd_ms'),
        n_shapes=sum((EDA, s) in kr and (SAFE, s) in kr for s in shapes),
        par=over_kda('_eda_prep_kernel', '_eda_dh_prep_kernel', '_eda_bwd_kernel'),
        walks=over_kda('_eda_fwd_kernel', '_eda_bwd_dh_kernel'),
        share={n: span([round(100 * (added[s, n] / sum(added[s, m] for m in KERNELS))) for s in profiled], '{}%')
               for n in KERNELS},
        fla0=fla0, eda0=eda0, eda0_x=eda0['fwd_bwd_ms'] / fla0['fwd_bwd_ms'],
        kda0_x=kda0['fwd_bwd_ms'] / fla0['fwd_bwd_ms'])


def train_section():
    trains, layers = read_rows('train.jsonl', 'train'), read_rows('train.jsonl', 'model_train_layer')
    runs = {(r['mixer'] + r['tag'], r['block_size']): r for r in trains}
    ctx, tf = sorted({T for _, T in runs}), MIXER_NAMES['transformer']
    x = {(m, T): runs[m, T]['tok_s'] / runs['transformer', T]['tok_s'] for m, T in runs}  # over the Transformer's

    if reports:
        figure(os.path.join(results_dir, 'train_context.png'), lambda ax: lines(ax, ctx, [
            ([runs[m, T]['tok_s'] for T in ctx], dict(marker='o', label=label)) for m, label in (
                ('eda', 'EDA hybrid'), ('eda_recompute', 'EDA hybrid, recomputed states'), ('transformer', tf))],
            None, xticks=ctx, xticklabels=[str(T) for T in ctx], xlabel='block_size (tokens)', ylabel='tokens/s',
            title=f"~125M models, one {trains[0]['device']}, compiled"))
    return dict(
        made=made(trains, note=True, commands=True), layers_made=made(layers, note=True, commands=True),
        table='\n'.join(fill('train row', T=T, e=runs['eda', T], rc=runs['eda_recompute', T], t=runs['transformer', T],
                             x=x['eda', T], rx=x['eda_recompute', T]) for T in ctx),
        layers='\n'.join(fill('train layer row', r=r, core='—' if r['core_ms'] is None else f"{r['core_ms']:.3f}",
                              model=', '.join([tf if r['mixer'] == 'transformer' else r['mixer'], *r['overrides']]))
                         for r in layers if 'Linear' in r['layer'] or not r['overrides']),  # la_* change LA alone
        ratios=', '.join(f"{x['eda', T]:.2f}x at {T}" for T in (ctx[0], ctx[-2], ctx[-1])))


def decode_section():
    steps, kern = read_rows('model_decode.jsonl', 'model_decode'), read_rows('kernels.jsonl', 'decode_kernel')
    [check] = read_rows('model_decode.jsonl', 'model_decode_check')
    runs = {(r['mixer'], r['mode'], r['ctx'], r['B']): r for r in steps}
    # {(ctx, B): {'ec': the hybrid compiled, 'eg': in a graph; 'tc', 'tg': the Transformer}}
    at = {(c, b): {m[0] + mode[0]: runs[m, mode, c, b] for m in ('eda', 'transformer')
                   for mode in ('compiled', 'graph')} for _, _, c, b in runs}
    x = {k: r['ec']['tok_s'] / r['tc']['tok_s'] for k, r in at.items()}  # the hybrid's tokens/s over the Transformer's
    fla = {r['B']: r['ms'] for r in kern if r['case'].startswith('FLA')}
    return dict(
        made=made(steps, commands=True), kern_made=made(kern, note=True, commands=True), check=check, big=max(at),
        x_big=x[max(at)], verdict='all pass.' if check['ok'] else 'FAILED.', rounds=kern[0]['rounds'],
        launches=', '.join(f'{k} {n}' for k, n in check['kernels_per_step'].items()), longest=at[max(at)[0], 1]['ec'],
        table='\n'.join(fill('decode row', ctx=c, B=b, x=x[c, b], cache=r['ec']['mib_per_seq'] / r['tc']['mib_per_seq'],
                              **r) for (c, b), r in sorted(at.items())),
        kern='\n'.join(fill('decode kernel row', r=r, x=r['ms'] / fla[r['B']]) for r in kern))


SECTIONS = [erase_section, length_section, defaults_section, lm_long_section, lm_section, probe_section, table7_section,
            kernel_section, train_section, decode_section]


def render(section):
    """(a section's text, its README row or None): its template part filled with its fields."""
    name, out = section.__name__, section()
    if out is None:  # the grid of the section's name, config/sweep/<name>.py
        return fill('not run', title=TEMPLATE[name].split('\n', 1)[0], grid=f'config/sweep/{name[:-8]}.py') + '\n', None
    text = re.sub('\n\n\n+', '\n\n', TEMPLATE[name].format(**out))  # an empty field leaves no gap
    row = out.get('row', True) and fill(name + ' row', **out).split(' | ')
    return text.strip('\n') + '\n', row or None


def build():
    """(RESULTS.md's text, README.md's with its summary table, between BEGIN and END, rewritten)."""
    texts, rows = zip(*(render(section) for section in SECTIONS))
    titles = [t.split('\n', 1)[0][3:] for t in texts]
    anchor = {t: ''.join(c for c in t.lower() if c.isalnum() or c in ' -').replace(' ', '-') for t in titles}
    summary = table(['question', 'measured', 'where'], [[*row[:2], f'[{row[2]}](RESULTS.md#{anchor[t]})']
                                                        for row, t in zip(rows, titles) if row])
    head, rest = Path(readme).read_text().split(BEGIN, 1)
    return (TEMPLATE['intro'] + ''.join(f'- [{t}](#{anchor[t]})\n' for t in titles) + '\n' + '\n'.join(texts),
            head + '\n'.join([BEGIN, summary, END]) + rest.split(END, 1)[1])


if __name__ == '__main__':
    for path, text in zip((out, readme), build()):
        Path(path).write_text(text)
    print(f'wrote {out} and the summary of {readme}')
