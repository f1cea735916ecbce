"""
Many small train.py runs over a fixed grid (tasks x difficulty x mixers x learning rates x seeds), several at
once on one machine, each row of results appended to a JSONL file the moment its run ends; then a table and
a figure from that file. Zoology's protocol: each mixer is reported at its best learning rate (best mean
over seeds), with the spread over seeds and every run kept in the file.

    python sweep.py config/sweep/synthetic.py             # the grid of README's "Does erase help?"
    python sweep.py config/sweep/synthetic.py --jobs=16   # 16 runs at a time (one GPU holds many small runs)
    python sweep.py config/sweep/synthetic.py --report_only=True   # table + figure from the results file

A run is one `python train.py <task config> <level args> --mixer=.. --learning_rate=.. --seed=..` process,
so a sweep trains exactly what a user's command trains. Rerunning the same command resumes: rows already in
the results file (finished, failed or diverged) are not run again; a failed run is recorded and the sweep
goes on. matplotlib is optional: without it the table is still written.
"""
import itertools
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time

from configurator import configure

# ----------------------------------------------------------------------------------------------------
# Settings (config files and --key=value, as train.py)
name = 'sweep'                # results go to <results_dir>/<name>.jsonl, .md, .png
results_dir = 'notes/sweep'
runs_dir = 'out/sweep'        # each run's out_dir and log (not kept in the repo)
# task -> {'config': train.py config file, 'x': the difficulty's name, 'levels': [[x, [train.py args]], ...],
#          optionally 'floor': [what, {x: accuracy}]: a trivial answer's score (e.g. NONE at every query), shown
#          as a row of the table and a dashed line in the figure, so that a run stuck there reads as such}
tasks = {'mqar': {'config': 'config/mqar.py', 'x': 'num_kv_pairs',
                  'levels': [[16, ['--num_kv_pairs=16']], [32, ['--num_kv_pairs=32']]]}}
mixers = {m: [f'--mixer={m}'] for m in ('eda', 'kda', 'gdn', 'gdn2', 'transformer')}  # label -> train.py args
learning_rates = [1e-3]       # [] : the task config's own
pairs = []                    # [[A, B], ...]: mixers compared seed by seed at each level, each at its best lr (a
                              # seed fixes the data and the init): on how many seeds A is ahead, mean A - B
paired_from = {}              # {task: another sweep's name}: a mixer of `pairs` that this sweep does not run is
                              # read from that sweep's results file (same task, level and lr), for the pairing
                              # only; the config must say that those runs had this sweep's commands but the mixer
seeds = [0, 1, 2]             # every lr runs each of these; the best lr is chosen on them
best_seeds = []               # more seeds, run only at each mixer's best lr once all its `seeds` x lrs are in
repeats = 0                   # reruns of each best run with the same seed (seeds[0]: same data, same init): the
                              # run-to-run noise (bf16, atomics), to read beside the spread over seeds
checkpoints = False           # True: each run saves a checkpoint at every evaluation, and a run cut off (the
                              # sweep or its machine stopped) resumes from it when the sweep is started again
extra = []                    # train.py args for every run, e.g. ['--max_iters=1000']
jobs = 4                      # runs at a time; on CUDA each starts on the visible GPU running the fewest
run_timeout = 1800            # seconds; a run still going then is killed and recorded as 'timeout'
start_until = 0.0             # seconds into the sweep after which no new run starts (0: no limit): on a
                              # machine lent for a fixed time, start only what can finish in it
deadline = 0.0               # seconds into the sweep by which every run it starts should have ended (0: none):
                              # the next run starts only if the finished runs of its task and level (the results
                              # file's 'seconds', their median) say it fits; one level with no runs yet starts
retry_failed = True           # rerun rows whose run failed or timed out (an OOM, a killed machine); the newest
                              # row of a run is the one reported. False: a failure is that run's final result
report_only = False           # only rebuild the table and figure from the results file
metric = 'val_acc'            # 'val_acc' (synthetic tasks: higher is better; the figure is accuracy against
                              # difficulty) or 'val_loss' (language models: lower is better; the figure is the
                              # validation loss against step, from each run's evaluations)
python = sys.executable
configure(globals())
if metric not in ('val_acc', 'val_loss'):
    sys.exit(f"sweep: metric must be 'val_acc' or 'val_loss', got {metric!r}")
# ----------------------------------------------------------------------------------------------------

HERE = os.path.dirname(os.path.abspath(__file__))
results_path = os.path.join(results_dir, f'{name}.jsonl')
mixer_args = mixers
KEY = ('task', 'x', 'mixer', 'lr', 'seed', 'rep')  # rep: 0, or which same-seed repeat


def key(row):
    return tuple(row.get(k, 0) for k in KEY)  # (rows written before repeats existed have no 'rep')


def read_results(path):
    """The rows of the results file, the newest row of each run only."""
    rows = {}
    if os.path.exists(path):
        with open(path) as f:
            for i, line in enumerate(f):
                line = line.strip()
                if line:
                    try:
                        row = json.loads(line)
                    except ValueError:  # a line cut by a crash mid-write: that run is simply run again
                        print(f'sweep: {path}:{i + 1} is not JSON, ignored', file=sys.stderr)
                        continue
                    rows[key(row)] = row
    return list(rows.values())


PAIRED_ELSEWHERE = sorted({m for pair in pairs for m in pair} - set(mixers))  # read from paired_from's sweeps


def foreign_rows():
    """Rows of the paired_from sweeps that pairs need: their task, this sweep's lrs, a mixer this sweep lacks."""
    lrs = learning_rates or [None]
    return [r for task, other in paired_from.items()
            for r in read_results(os.path.join(results_dir, f'{other}.jsonl'))
            if r['task'] == task and r['mixer'] in PAIRED_ELSEWHERE and r['lr'] in lrs]


if set(paired_from) - set(tasks):
    sys.exit(f"sweep: paired_from names tasks this sweep does not have: {sorted(set(paired_from) - set(tasks))}")
_found = {r['mixer'] for r in foreign_rows()}
for pair in pairs:
    if len(pair) != 2 or any(m not in mixers and m not in _found for m in pair):
        sys.exit(f"sweep: each of pairs must be two of the mixers {list(mixers)} (or of the paired_from sweeps' "
                 f"rows), got {pair!r} (running a subset of a config's mixers with --mixers=, pass --pairs=[] too)")


def run_id(row):
    lr = 'cfg' if row['lr'] is None else f"{row['lr']:g}"
    label = ''.join(c if c.isalnum() or c in '.-' else '_' for c in row['mixer'])
    rep = f"_r{row['rep']}" if row.get('rep') else ''
    return f"{row['task']}_{row['x']}_{label}_lr{lr}_s{row['seed']}{rep}"


def run_args(task, level_args, row):
    args = [tasks[task]['config'], *level_args, *mixer_args[row['mixer']], f"--seed={row['seed']}", *extra]
    return args + ([f"--learning_rate={row['lr']}"] if row['lr'] is not None else [])


def grid(results=()):
    """Every run of the grid, in a fixed order (task, level, seed, lr, mixer: a half-done sweep has whole
    levels, and every mixer's runs at a level finish close together); then, for each (task, level, mixer)
    whose `seeds` x lrs are all in `results`, the best_seeds and the same-seed repeats at its best lr."""
    lrs = learning_rates or [None]
    best = best_lrs(results)
    for task, spec in tasks.items():
        for (x, level_args), seed, lr, mixer in itertools.product(spec['levels'], seeds, lrs, mixer_args):
            row = {'task': task, 'x': x, 'mixer': mixer, 'lr': lr, 'seed': seed, 'rep': 0}
            yield row, run_args(task, level_args, row)
        for (x, level_args), mixer in itertools.product(spec['levels'], mixer_args):
            if (task, x, mixer) not in best:
                continue
            more = [(s, 0) for s in best_seeds if s not in seeds] + [(seeds[0], r) for r in range(1, repeats + 1)]
            for seed, r in more:
                row = {'task': task, 'x': x, 'mixer': mixer, 'lr': best[task, x, mixer], 'seed': seed, 'rep': r}
                yield row, run_args(task, level_args, row)


def best_lrs(rows):
    """{(task, x, mixer): its best lr}, chosen on the `seeds` runs alone (rep 0), for the mixers whose every
    lr x seed of `seeds` has a result: ok, or diverged (a result of that lr). A failed run (an out-of-memory, a
    killed machine) or a timeout is no result: it is run again, and the choice waits for it."""
    lrs = learning_rates or [None]
    by = {}
    for r in rows:
        if r['seed'] in seeds and not r.get('rep') and r['status'] in ('ok', 'diverged'):
            by.setdefault((r['task'], r['x'], r['mixer']), {}).setdefault(r['lr'], []).append(value(r))
    pick = max if metric == 'val_acc' else min
    return {k: pick(lrs, key=lambda lr: mean([v for v in per_lr[lr] if v is not None]))
            for k, per_lr in by.items() if all(len(per_lr.get(lr, ())) == len(seeds) for lr in lrs)}


def outcome(proc_rc, out_dir, log_path, seconds, timed_out):
    """The row's result fields from a finished train.py process: its log.jsonl's last evaluation, the
    parameter count from its first lines, and a status (ok | diverged | failed | timeout). A run killed by
    the time limit after its final evaluation (train.py marks it 'final') has its result: ok."""
    res = {'seconds': round(seconds, 1), 'returncode': proc_rc}
    evals = []
    try:
        with open(os.path.join(out_dir, 'log.jsonl')) as f:
            evals = [r for r in map(json.loads, f) if r.get('eval')]
    except (OSError, ValueError):
        pass
    if evals:
        last = evals[-1]
        res.update(step=last['step'], val_loss=last['val_loss'], val_acc=last.get('val_acc'),
                   **{k: last[k] for k in ('val_acc_none', 'val_acc_value') if k in last},
                   best_val_acc=max(r.get('val_acc', float('nan')) for r in evals),
                   curve=[[r['step'], r['val_loss'], r.get('val_acc')] for r in evals])
    text = open(log_path, errors='replace').read() if os.path.exists(log_path) else ''
    for line in text.splitlines():
        if '| params total ' in line and 'params' not in res:
            res['params'] = int(line.split('| params total ')[1].split()[0].replace(',', ''))
        counts = re.search(r'([\d,]+) train \+ ([\d,]+) val tokens', line) if line.startswith('data: ') else None
        if counts and 'data_tokens' not in res:  # which corpus: runs compared in one table must share it
            res['data_tokens'] = [int(c.replace(',', '')) for c in counts.groups()]
    finished = bool(evals) and evals[-1].get('final', False)  # killed after its last evaluation: finished
    if timed_out and not finished:
        res['status'] = 'timeout'
    elif (proc_rc == 0 or timed_out) and evals:
        res['status'] = 'ok'
    else:
        res['status'] = 'diverged' if 'non-finite loss' in text else 'failed'
        res['error'] = text.strip().splitlines()[-1][:300] if text.strip() else f'exit {proc_rc}, no output'
    return res


def commit():
    """The code's commit, for the results file: git's, or $NANOEDA_COMMIT where the tree is a copy without git."""
    try:
        out = subprocess.run(['git', 'rev-parse', '--short', 'HEAD'], cwd=HERE, capture_output=True, text=True)
        if out.returncode == 0:
            dirty = subprocess.run(['git', 'status', '--porcelain', '--untracked-files=no'], cwd=HERE,
                                   capture_output=True, text=True).stdout.strip()
            return out.stdout.strip() + ('+changes' if dirty else '')
    except OSError:
        pass
    return os.environ.get('NANOEDA_COMMIT', 'unknown')


def fmt_time(s):
    s = int(s)
    return f'{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}'


def sweep():
    rerun = ('failed', 'timeout') if retry_failed else ()
    done = {key(r) for r in read_results(results_path) if r['status'] not in rerun}
    tried = set(done)  # runs this invocation has started or found done: each runs at most once per invocation

    def pending():  # the grid's runs not yet tried; best_seeds and repeats appear as their mixer's lrs finish
        return [(row, args) for row, args in grid(read_results(results_path)) if key(row) not in tried]

    todo = pending()
    total = len(todo) + len(done)
    more = ' (+ best_seeds and repeats as the lrs finish)' if best_seeds or repeats else ''
    print(f'sweep {name}: {total} runs in the grid{more}, {len(done)} already in {results_path}, {len(todo)} to '
          f'run, {jobs} at a time', flush=True)
    if not todo:
        return
    os.makedirs(results_dir, exist_ok=True)
    os.makedirs(runs_dir, exist_ok=True)
    try:
        import torch
        n_gpu = torch.cuda.device_count()
    except ImportError:
        n_gpu = 0
    running, finished, t0, stopped = [], 0, time.time(), False
    provenance = {'date': time.strftime('%Y-%m-%d'), 'commit': commit(),
                  'device': torch.cuda.get_device_name(0) if n_gpu else 'cpu'}
    durations = []
    took = {}  # (task, x) -> seconds of its finished runs, for the deadline
    for r in read_results(results_path):
        if r['status'] == 'ok' and r.get('seconds'):
            took.setdefault((r['task'], r['x']), []).append(r['seconds'])
    while True:
        if not todo and not stopped:
            todo = pending()
            total = max(total, len(done) + finished + len(running) + len(todo))
        if not todo and not running:
            break
        if todo and start_until and time.time() - t0 > start_until:
            print(f'sweep: start_until={start_until}s passed; {len(todo)} runs left for the next invocation '
                  f'(the same command resumes)', flush=True)
            todo, stopped = [], True
        level = (todo[0][0]['task'], todo[0][0]['x']) if todo else None
        if todo and deadline and took.get(level) and len(running) < jobs:
            need = sorted(took[level])[len(took[level]) // 2]
            if time.time() - t0 + need > deadline:
                print(f'sweep: the next run ({level[0]} {level[1]}, ~{need:.0f}s as its finished runs took) would '
                      f'end after deadline={deadline:g}s; {len(todo)} runs left for the next invocation (the '
                      f'same command resumes)', flush=True)
                todo, stopped = [], True
        while todo and len(running) < jobs:
            row, args = todo.pop(0)
            tried.add(key(row))
            rid = run_id(row)
            out_dir = os.path.join(runs_dir, rid)
            log_path = out_dir + '.log'
            cmd = [python, os.path.join(HERE, 'train.py'), *args, f'--out_dir={out_dir}', '--progress=False']
            if checkpoints and os.path.exists(os.path.join(out_dir, 'ckpt.pt')):
                cmd.append('--init_from=resume')  # a run cut off: on from its last checkpoint
            else:  # a rerun starts its out_dir afresh
                shutil.rmtree(out_dir, ignore_errors=True)
                if not checkpoints:
                    cmd.append('--save_ckpt=False')
            env = dict(os.environ, OMP_NUM_THREADS='1', PYTHONUNBUFFERED='1')
            gpu = None
            if n_gpu:  # the GPU with the fewest runs on it: runs of unequal length would pile up round-robin
                gpu = min(range(n_gpu), key=lambda g: sum(item[-1] == g for item in running))
                env['CUDA_VISIBLE_DEVICES'] = str(gpu)
            log = open(log_path, 'a' if '--init_from=resume' in cmd else 'w')
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=HERE)
            running.append((proc, row, cmd, out_dir, log_path, log, time.time(), gpu))
        time.sleep(0.5)
        for item in list(running):
            proc, row, cmd, out_dir, log_path, log, start, _ = item
            timed_out = proc.poll() is None and time.time() - start > run_timeout
            if timed_out:
                proc.kill()
                proc.wait()
            if proc.poll() is None:
                continue
            log.close()
            running.remove(item)
            seconds = time.time() - start
            res = outcome(proc.returncode, out_dir, log_path, seconds, timed_out)
            full = {**row, **res, 'command': ' '.join(['python', 'train.py', *cmd[2:]]), **provenance}
            with open(results_path, 'a') as f:  # one whole line per run: an interrupted sweep loses no row
                f.write(json.dumps(full) + '\n')
            finished += 1
            durations.append(seconds)
            if res['status'] == 'ok':
                took.setdefault((row['task'], row['x']), []).append(seconds)
            # ETA: the runs left, in waves of `jobs`, at the mean duration so far
            left = len(todo) + len(running)
            eta = math.ceil(left / jobs) * (sum(durations) / len(durations)) if left else 0
            acc = (f"{metric} {fmt(res[metric]) if res.get(metric) is not None else 'none'}" if res['status'] == 'ok'
                   else f"{res['status']}: {res.get('error', '')[:80]}")
            print(f"[{len(done) + finished}/{total}] {run_id(row)}: {acc} ({seconds:.0f}s) | "
                  f"elapsed {fmt_time(time.time() - t0)} | eta {fmt_time(eta)}", flush=True)


# ----------------------------------------------------------------------------------------------------
# Report: best learning rate per (task, level, mixer) by mean accuracy over seeds; mean, spread, every seed


def value(r):
    """A run's result in `metric`. A failed or diverged run counts as accuracy 0 (it is a result of that lr, not
    a missing one); it has no loss, so with metric='val_loss' it is None: counted as failed, left out of the mean."""
    if r['status'] == 'ok':
        return r.get(metric)
    return 0.0 if metric == 'val_acc' else None


def mean(vals):
    return sum(vals) / len(vals) if vals else (float('-inf') if metric == 'val_acc' else float('inf'))


def summarize(rows):
    """{(task, x, mixer): {'lr', 'accs', 'mean', 'std', 'min', 'max', 'n_failed', 'params'}} at the best lr
    ('accs': the runs' values of `metric`; the best lr: highest mean accuracy or lowest mean loss). A run the
    sweep stopped at run_timeout is unfinished, not a result: it is left out here (report() lists it)."""
    by, reps = {}, {}
    for r in rows:
        if r['status'] == 'timeout':
            continue
        k = (r['task'], r['x'], r['mixer'])
        if r.get('rep'):
            reps.setdefault(k, {}).setdefault(r['lr'], []).append(r)
            continue
        by.setdefault(k, {}).setdefault(r['lr'], []).append((value(r), r))
    out = {}
    best = max if metric == 'val_acc' else min
    for key, per_lr in by.items():
        # the best lr on the `seeds` runs alone: best_seeds ran only at one lr, and would tip the choice
        lr, runs = best(per_lr.items(), key=lambda kv: mean([a for a, r in kv[1] if a is not None
                                                              and r['seed'] in seeds]))
        accs = [a for a, _ in runs if a is not None] or [float('nan')]  # nan: every run failed (loss metric)
        mu = sum(accs) / len(accs)
        std = math.sqrt(sum((a - mu) ** 2 for a in accs) / (len(accs) - 1)) if len(accs) > 1 else 0.0
        params = next((r['params'] for _, r in runs if r.get('params')), None)
        out[key] = dict(lr=lr, accs=accs, mean=mu, std=std, min=min(accs), max=max(accs), params=params,
                        n_failed=sum(r['status'] != 'ok' for _, r in runs),
                        runs=[r for _, r in runs],
                        # run-to-run noise: the seeds[0] run at this lr and its same-seed repeats
                        repeats=[value(r) for _, r in runs if r['seed'] == seeds[0]]
                        + [value(r) for r in reps.get(key, {}).get(lr, [])],
                        lrs={l: mean([a for a, _ in v if a is not None]) for l, v in per_lr.items()})
    return out


def fmt(v):
    return f'{100 * v:.1f}' if metric == 'val_acc' else f'{v:.4f}'


def report(rows):
    summary = summarize(rows)
    order = [m for m in mixer_args]
    what = ('validation accuracy (%)', 'highest', 'count as 0') if metric == 'val_acc' else \
        ('validation loss (nats/token)', 'lowest', 'have no loss: left out of the mean')
    lines = [f'# Sweep `{name}`', '',
             f'{len(rows)} runs from `{results_path}`. Each cell: {what[0]} at the mixer\'s best learning '
             f'rate ({what[1]} mean over seeds), mean ± sample std over seeds [min, max], and that lr. '
             f'Failed or diverged runs {what[2]} and are marked with !. Runs stopped by the sweep\'s time limit '
             f'are unfinished: left out of the cells, marked with +N unfinished, and listed below the tables.', '']
    unfinished = [r for r in rows if r['status'] == 'timeout']
    for task, spec in tasks.items():
        xs = [x for x, _ in spec['levels']]
        lines += [f'## {task} (difficulty: {spec["x"]})', '']
        corpora = {tuple(r['data_tokens']) for r in rows if r['task'] == task and r.get('data_tokens')}
        if corpora:  # a table compares runs on the same tokens; say so, and say it loudly when they differ
            n_rec = sum(r['task'] == task and bool(r.get('data_tokens')) for r in rows)
            n_all = sum(r['task'] == task for r in rows)
            kinds = '; '.join(f'{a:,} train + {b:,} val tokens' for a, b in sorted(corpora))
            lines += [(f'Data: {kinds}' if len(corpora) == 1 else f'**Runs on different data** ({kinds}): not '
                       'comparable') + (f' ({n_rec} of {n_all} runs recorded it)' if n_rec < n_all else '') + '.', '']
        lines += ['| mixer | params | ' + ' | '.join(f'{spec["x"]}={x}' for x in xs) + ' |',
                  '|---|---|' + '---|' * len(xs)]
        for m in order:
            cells, params = [], None
            for x in xs:
                s = summary.get((task, x, m))
                n_unf = sum((r['task'], r['x'], r['mixer']) == (task, x, m) for r in unfinished)
                more = f' +{n_unf} unfinished' if n_unf else ''
                if s is None:
                    cells.append(more.strip() or '—')
                    continue
                params = params or s['params']
                lr = 'cfg' if s['lr'] is None else f"{s['lr']:g}"
                bad = f" !{s['n_failed']}" if s['n_failed'] else ''
                spread = f"{100 * s['std']:.1f}" if metric == 'val_acc' else f"{s['std']:.4f}"
                cells.append(f"{fmt(s['mean'])} ± {spread} [{fmt(s['min'])}, {fmt(s['max'])}] lr {lr}{bad}{more}")
            params = params or next((r['params'] for r in rows if r['mixer'] == m and r.get('params')), None)
            lines.append(f'| {m} | {params:,} | ' if params else f'| {m} | ? | ')
            lines[-1] += ' | '.join(cells) + ' |'
        if 'floor' in spec:
            answer, floor = spec['floor']
            lines.append(f'| *{answer}* | — | ' + ' | '.join(fmt(floor[x]) if x in floor else '—' for x in xs) + ' |')
        lines.append('')
    split = []  # runs that logged the accuracy on value answers and on NONE answers apart
    for (task, x, m), s in summary.items():
        ok = [r for r in s['runs'] if r['status'] == 'ok']
        if metric == 'val_acc' and ok and all('val_acc_value' in r for r in ok):
            split.append(f"| {task} | {x} | {m} | {fmt(mean([r['val_acc_value'] for r in ok]))} | "
                         f"{fmt(mean([r['val_acc_none'] for r in ok]))} |")
    if split:
        lines += ['## Values vs NONE answers (best lr, mean over seeds): recall of values | NONE answered right', '',
                  '| task | x | mixer | values (%) | NONE answers (%) |', '|---|---|---|---|---|', *split, '']
    paired = []
    both = {**summarize(foreign_rows()), **summary}
    for (task, spec), (a, b) in itertools.product(tasks.items(), pairs):
        for x, _ in spec['levels']:
            if (task, x, a) not in both or (task, x, b) not in both:
                continue
            va, vb = ({r['seed']: value(r) for r in both[(task, x, m)]['runs'] if value(r) is not None}
                      for m in (a, b))
            diffs = [va[seed] - vb[seed] for seed in sorted(set(va) & set(vb))]
            if diffs:
                ahead = sum(d > 0 if metric == 'val_acc' else d < 0 for d in diffs)
                d = sum(diffs) / len(diffs)
                paired.append(f"| {task} | {x} | {a} vs {b} | {ahead} of {len(diffs)} | "
                              + (f'{100 * d:+.1f}' if metric == 'val_acc' else f'{d:+.4f}') + ' |')
    if paired:
        lines += ['## Paired by seed (same seed: same data and init; each mixer at its best lr)', '']
        if PAIRED_ELSEWHERE and paired_from:
            lines += [', '.join(PAIRED_ELSEWHERE) + ': the rows of ' + ', '.join(
                f'`{os.path.join(results_dir, other + ".jsonl")}` ({task})' for task, other in paired_from.items())
                + ', made with this sweep\'s commands but the mixer.', '']
        lines += ['| task | x | A vs B | A ahead (seeds) | mean A - B |', '|---|---|---|---|---|', *paired, '']
    noise = [(k, s) for k, s in summary.items() if len([v for v in s['repeats'] if v is not None]) > 1]
    if noise:  # same seed, same data and init, run again: what the spread over seeds should be read against
        lines += [f'## Run-to-run noise (seed {seeds[0]} at the best lr, run again with the same seed)', '',
                  '| task | x | mixer | lr | runs | max - min | std over seeds |', '|---|---|---|---|---|---|---|']
        for (task, x, m), s in noise:
            vals = [v for v in s['repeats'] if v is not None]
            lr = 'cfg' if s['lr'] is None else f"{s['lr']:g}"
            lines.append(f"| {task} | {x} | {m} | {lr} | {', '.join(fmt(v) for v in vals)} | "
                         f"{fmt(max(vals) - min(vals))} | {fmt(s['std'])} |")
        lines.append('')
    lines += [f'## Every learning rate (mean {what[0]} over seeds)', '',
              '| task | x | mixer | ' + ' | '.join(f'lr {l:g}' if l is not None else 'cfg' for l in
                                                   (learning_rates or [None])) + ' |',
              '|---|---|---|' + '---|' * len(learning_rates or [None])]
    for (task, x, m), s in sorted(summary.items(), key=lambda kv: (list(tasks).index(kv[0][0]), kv[0][1],
                                                                    order.index(kv[0][2]) if kv[0][2] in order else 99)):
        lines.append(f'| {task} | {x} | {m} | ' + ' | '.join(
            fmt(s['lrs'][l]) if l in s['lrs'] else '—' for l in (learning_rates or [None])) + ' |')
    if unfinished:
        lines += ['', '## Unfinished runs (stopped by the sweep\'s time limit; rerun the sweep to finish them)', '',
                  '| task | x | mixer | lr | seed | last evaluation |', '|---|---|---|---|---|---|']
        for r in unfinished:
            last = f"{fmt(r[metric])} at step {r['step']}" if r.get(metric) is not None else 'none'
            lr = 'cfg' if r['lr'] is None else f"{r['lr']:g}"
            lines.append(f"| {r['task']} | {r['x']} | {r['mixer']} | {lr} | {r['seed']} | {last} |")
    md_path = os.path.join(results_dir, f'{name}.md')
    with open(md_path, 'w') as f:
        f.write('\n'.join(lines) + '\n')
    print(f'table: {md_path}')
    try:
        import matplotlib
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError:
        print('figure: skipped (matplotlib is not installed: pip install matplotlib)')
        return
    if metric == 'val_loss':
        figure_curves(plt, summary, order)
        return
    fig, axes = plt.subplots(1, len(tasks), figsize=(4.2 * len(tasks), 3.6), squeeze=False)
    for ax, (task, spec) in zip(axes[0], tasks.items()):
        xs = [x for x, _ in spec['levels']]
        for i, m in enumerate(order):
            pts = [(j, summary[(task, x, m)]) for j, x in enumerate(xs) if (task, x, m) in summary]
            if not pts:
                continue
            off = (i - (len(order) - 1) / 2) * 0.06  # side by side, so that seed dots do not hide each other
            line, = ax.plot([j + off for j, _ in pts], [100 * s['mean'] for _, s in pts], marker='o', label=m,
                            color=f'C{i % 10}')  # one colour per mixer in every panel
            for j, s in pts:
                ax.scatter([j + off] * len(s['accs']), [100 * a for a in s['accs']], s=8, color=line.get_color(),
                           alpha=0.5)
                ax.vlines(j + off, 100 * s['min'], 100 * s['max'], color=line.get_color(), alpha=0.6)
        if 'floor' in spec:
            what, floor = spec['floor']
            for j, x in enumerate(xs):
                if x in floor:  # one legend entry for the task's floor lines
                    ax.hlines(100 * floor[x], j - 0.4, j + 0.4, color='grey', linestyles='dashed', label=what)
                    what = None
        ax.set_xticks(range(len(xs)), [str(x) for x in xs])
        ax.set_xlim(-0.5, len(xs) - 0.5)
        ax.set_xlabel(spec['x'])
        ax.set_title(task)
        ax.set_ylim(-2, 102)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel('val accuracy (%), best lr; dots: seeds')
    labelled = {}  # one legend entry per mixer, from whichever panel has its runs (a half-done grid has empty ones)
    for ax in axes[0]:
        for h, l in zip(*ax.get_legend_handles_labels()):
            labelled.setdefault(l, h)
    if labelled:
        names = [m for m in order if m in labelled] + [l for l in labelled if l not in order]
        axes[0][0].legend([labelled[m] for m in names], names, fontsize=8, loc='lower left')
    fig.tight_layout()
    png = os.path.join(results_dir, f'{name}.png')
    fig.savefig(png, dpi=120)
    print(f'figure: {png}')


def figure_curves(plt, summary, order):
    """Validation loss against step, one panel per (task, level): per mixer (best lr) the mean over seeds of
    the runs' evaluations, a band from the lowest to the highest seed, and each seed as a thin line."""
    panels = [(task, x) for task, spec in tasks.items() for x, _ in spec['levels']]
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4.0), squeeze=False)
    for ax, (task, x) in zip(axes[0], panels):
        lows, highs = [], []
        for i, m in enumerate(order):
            s = summary.get((task, x, m))
            curves = [r['curve'] for r in (s['runs'] if s else []) if r.get('curve')]
            steps = sorted(set.intersection(*[{c[0] for c in cv} for cv in curves])) if curves else []
            steps = [t for t in steps if t > 0]  # step 0 (the untrained model) would squash the scale
            if not steps:
                continue
            per = [[dict((c[0], c[1]) for c in cv)[t] for cv in curves] for t in steps]
            color = f'C{i % 10}'
            ax.plot(steps, [sum(v) / len(v) for v in per], color=color, label=f'{m} ({len(curves)} seeds)')
            ax.fill_between(steps, [min(v) for v in per], [max(v) for v in per], color=color, alpha=0.2)
            for cv in curves:
                ax.plot([c[0] for c in cv if c[0] > 0], [c[1] for c in cv if c[0] > 0], color=color, lw=0.5, alpha=0.5)
            lows.append(min(min(v) for v in per[len(per) // 3:]))
            highs.append(max(max(v) for v in per[len(per) // 3:]))
        if lows:  # zoom on the last two thirds, where the mixers separate
            pad = 0.1 * (max(highs) - min(lows) or 1.0)
            ax.set_ylim(min(lows) - pad, max(highs) + pad)
            ax.legend(fontsize=8)
        ax.set_title(f'{task} ({x})')
        ax.set_xlabel('step')
        ax.set_ylabel('validation loss (nats/token)')
        ax.grid(alpha=0.3)
    fig.tight_layout()
    png = os.path.join(results_dir, f'{name}.png')
    fig.savefig(png, dpi=120)
    print(f'figure: {png}')


if __name__ == '__main__':
    if not report_only:
        sweep()
    rows = read_results(results_path)
    if not rows and report_only:
        sys.exit(f'sweep: no results in {results_path}')
    if not rows:  # nothing ran yet (start_until passed first): nothing to report, and nothing went wrong
        sys.exit(0)
    report(rows)
