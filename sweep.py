"""
Many small train.py runs over a grid (tasks x difficulty x mixers x learning rates x seeds), several at once, each
run's row appended to a JSONL file as it ends; then a table and a figure. Zoology's protocol: each mixer at its best
learning rate (best mean over seeds), with the spread over seeds and every run kept. Each run is a process
`python train.py <task config> <level args> --mixer=.. --learning_rate=.. --seed=..`; the same command resumes.
"""
import ctypes
import itertools
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time

from configurator import configure, fmt_time, hold_lock

HERE, CWD = os.path.dirname(os.path.abspath(__file__)), os.getcwd()
sys.path.insert(0, os.path.join(HERE, 'scripts'))
from rows import append, commit, figure, made, read, table, versions  # noqa: E402  (scripts/rows.py)

# Settings (config files and --key=value, as train.py) -----------------------------------------------
name = 'sweep'                # results go to <results_dir>/<name>.jsonl, .md, .png
results_dir = 'out/sweep'     # the grids whose results RESULTS.md reports write to results/
runs_dir = 'out/sweep/runs'   # each run's out_dir and log (not kept in the repo)
# task -> {'config': train.py config file, 'x': the difficulty's name, 'levels': [[x, [train.py args]], ...], and
#          optionally 'floor': [what, {x: accuracy}]: a trivial answer's score, shown so a run stuck there reads so}
tasks = {'mqar': {'config': 'config/mqar.py', 'x': 'num_kv_pairs',
                  'levels': [[16, ['--num_kv_pairs=16']], [32, ['--num_kv_pairs=32']]]}}
mixers = {m: [f'--mixer={m}'] for m in ('eda', 'kda', 'gdn', 'gdn2', 'transformer')}  # label -> train.py args
learning_rates = [1e-3]       # [] : the task config's own
seeds = [0, 1, 2]
best_seeds = []               # more seeds at each mixer's best lr (chosen on `seeds`), once its `seeds` x lrs are in
best_repeats = 0              # more runs of seeds[0] there: the GPU's run-to-run noise, beside the spread over seeds
checkpoints = False           # True: a checkpoint at every evaluation, from which a run cut off goes on
pairs = []                    # [[A, B], ...]: mixers compared seed by seed (a seed fixes the data), at best lrs
paired_from = {}              # {task: another sweep's name} whose rows (same commands) give a mixer `pairs` lacks here
extra = []                    # train.py args for every run, e.g. ['--max_iters=1000']
jobs = 4                      # runs at a time; on CUDA each starts on the visible GPU running the fewest
mixer_jobs = {}               # {mixer: most runs of it at a time}, for a mixer whose runs take more memory
run_timeout = 1800            # seconds; a run still going then is killed and recorded as 'timeout'
start_until = 0.0             # seconds into the sweep after which no new run starts (0: no limit)
deadline = 0.0                # seconds into the sweep by which every run should end (0: none): a run starts only if
                              # the median time of its level's finished runs, made with as many at once, fits
retry_failed = True           # rerun runs that failed or timed out (the newest row of a run is reported)
report_only = False           # only rebuild the table and figure from the results file
evaluate = []                 # [[what, eval.py args...], ...] on each ok run's checkpoint (notes/eval.md)
metric = 'val_acc'            # or 'val_loss': lower is better, and the figure is the loss against step
python = sys.executable

# a grid file from the working directory, else the repository's
configure(globals(), [a if a.startswith('--') or not a.endswith('.py') or os.path.exists(a) else os.path.join(HERE, a)
                      for a in sys.argv[1:]])
if __name__ == '__main__':
    os.chdir(HERE)  # relative paths are the repository's, as for the runs (train.py runs there)


def grid_problem():
    """What is wrong with the settings, in one line naming the key, or None: checked before anything runs."""
    def strs(v):
        return isinstance(v, (list, tuple)) and all(isinstance(a, str) for a in v)

    def nums(v, kind):
        return all(isinstance(a, kind) and not isinstance(a, bool) for a in v)
    if metric not in ('val_acc', 'val_loss'):
        return f"metric must be 'val_acc' or 'val_loss', got {metric!r}"
    if jobs < 1 or run_timeout <= 0 or best_repeats < 0:
        return (f'jobs must be at least 1, run_timeout positive and best_repeats 0 or more, got jobs={jobs}, '
                f'run_timeout={run_timeout}, best_repeats={best_repeats}')
    if any(not isinstance(n, int) or n < 1 for n in mixer_jobs.values()) or set(mixer_jobs) - set(mixers):
        return f'mixer_jobs must map mixers of this grid to at least 1 run, got {mixer_jobs!r}'
    if evaluate and (not checkpoints or any(not isinstance(e, list) or not e for e in evaluate)):
        return f'evaluate needs checkpoints=True and a list [what, eval.py args...] each, got {evaluate!r}'
    if empty := next((k for k in ('tasks', 'mixers', 'seeds') if not globals()[k]), None):
        return f'{empty} is empty: give at least one {empty[:-1]}'
    for task, spec in tasks.items():
        at = f'tasks[{task!r}]'
        if not isinstance(spec, dict):
            return f"{at} must be a dict with 'config', 'x' and 'levels', got {spec!r}"
        if missing := [k for k in ('config', 'x', 'levels') if k not in spec]:
            return f"{at} lacks {', '.join(map(repr, missing))} (a task: {{'config': .., 'x': .., 'levels': ..}})"
        if not isinstance(spec['config'], str) or not spec['config'].endswith('.py'):
            return f"{at}['config'] must be a train.py config file (a .py path), got {spec['config']!r}"
        if not os.path.exists(os.path.join(HERE, spec['config'])):
            if not os.path.exists(os.path.join(CWD, spec['config'])):
                return f"{at}['config'] {spec['config']!r} is found neither in the repository nor in {CWD}"
            spec['config'] = os.path.join(CWD, spec['config'])
        levels = spec['levels']
        if not isinstance(levels, (list, tuple)) or not levels:
            return f"{at}['levels'] must be a non-empty list of [x, [train.py args]], got {levels!r}"
        for i, level in enumerate(levels):
            if not isinstance(level, (list, tuple)) or len(level) != 2 or not strs(level[1]):
                return f"{at}['levels'][{i}] must be a pair [x, [train.py args]], got {level!r}"
        if len(set(map(repr, xs := [x for x, _ in levels]))) < len(xs):
            return f"{at}['levels'] names a level twice: {xs!r}"
        if 'floor' in spec and not (isinstance(spec['floor'], (list, tuple)) and len(spec['floor']) == 2
                                    and isinstance(spec['floor'][1], dict)):
            return f"{at}['floor'] must be [what, {{x: accuracy}}], got {spec['floor']!r}"
    if (bad := next((m for m, args in mixers.items() if not strs(args)), None)) is not None:
        return f"mixers[{bad!r}] must be a list of train.py args (e.g. ['--mixer=eda']), got {mixers[bad]!r}"
    if not strs(extra):
        return f'extra must be a list of train.py args, got {extra!r}'
    if not nums(learning_rates, (int, float)) or any(not lr > 0 for lr in learning_rates):
        return f'learning_rates must be positive numbers ([]: the task config\'s own), got {learning_rates!r}'
    if bad := next((k for k in ('seeds', 'best_seeds') if not nums(globals()[k], int)), None):
        return f'{bad} must be a list of ints, got {globals()[bad]!r}'
    if set(paired_from) - set(tasks):
        return f'paired_from names tasks this sweep does not have: {sorted(set(paired_from) - set(tasks))}'


if problem := grid_problem():
    sys.exit(f'sweep: {problem}')
for _key in ('seeds', 'best_seeds', 'learning_rates'):  # a value listed twice (0.001 and 1e-3 too) runs once
    if len(set(globals()[_key])) < len(globals()[_key]):
        print(f'sweep: {_key} lists a value more than once, {globals()[_key]!r}: each runs once', file=sys.stderr)
        globals()[_key] = list(dict.fromkeys(globals()[_key]))
# ----------------------------------------------------------------------------------------------------

results_path = os.path.join(results_dir, f'{name}.jsonl')
KEY = ('task', 'x', 'mixer', 'lr', 'seed', 'repeat')  # one run; rows from before repeats existed are repeat 0
ROW_KEYS = ('task', 'x', 'mixer', 'lr', 'seed', 'status')  # what a line needs to be a run's row
ROW_NUMBERS = ('lr', 'seed', 'repeat', 'val_acc', 'val_loss', 'best_val_acc', 'seconds', 'step', 'at_once', 'params')
warned = set()  # the results file's lines already named: read_results runs after every run


def key(row):
    return tuple(row.get(k, 0) for k in KEY)


def read_text(path):
    if not os.path.exists(path):
        return ''
    with open(path, errors='replace') as f:
        return f.read()


def read_results(path):
    """The newest row of each run; a line that is not a run's row is named on stderr once and left out (it reruns)."""
    rows = {}
    for i, row in read(path).items():
        if row is None:
            bad = 'is not JSON (a line cut mid-write?)'
        else:
            lacks = ', '.join(repr(k) for k in ROW_KEYS if not isinstance(row, dict) or k not in row)
            odd = '' if lacks else ', '.join(f'{k} is {row[k]!r}' for k in ROW_NUMBERS if row.get(k) is not None and (
                not isinstance(row[k], (int, float)) or isinstance(row[k], bool)))
            bad = (lacks and f"is not a run's row (it lacks {lacks})"
                   or odd and f"is not a run's row ({odd}, not a number)")
        if not bad:
            rows[key(row)] = row
        elif (path, i, bad) not in warned:
            warned.add((path, i, bad))
            print(f'sweep: {path}:{i} {bad}, left out', file=sys.stderr)
    return list(rows.values())


PAIRED_ELSEWHERE = sorted({m for pair in pairs for m in pair} - set(mixers))  # read from paired_from's sweeps


def foreign_rows():
    """Rows of the paired_from sweeps that pairs need: their task, this sweep's lrs, a mixer this sweep lacks."""
    return [r for task, other in paired_from.items() for r in read_results(os.path.join(results_dir, f'{other}.jsonl'))
            if r['task'] == task and r['mixer'] in PAIRED_ELSEWHERE and r['lr'] in (learning_rates or [None])]


_found = {r['mixer'] for r in foreign_rows()}
for pair in pairs:
    if len(pair) != 2 or any(m not in mixers and m not in _found for m in pair):
        sys.exit(f"sweep: each of pairs must be two of the mixers {list(mixers)} (or of the paired_from sweeps' "
                 f"rows), got {pair!r} (running a subset of a config's mixers with --mixers=, pass --pairs=[] too)")


def run_id(row):
    label = ''.join(c if c.isalnum() or c in '.-' else '_' for c in row['mixer'])
    again = f"_r{row['repeat']}" if row.get('repeat') else ''
    return f"{row['task']}_{row['x']}_{label}_lr{fmt_lr(row['lr'])}_s{row['seed']}{again}"


def grid(results=()):
    """Every run as (row, train.py args), by task, level, seed, lr, mixer (a half-done sweep has whole levels);
    then best_seeds and best_repeats where best_lrs(results) has a (task, level, mixer)'s best lr."""
    best = best_lrs(results)
    more = [(s, 0) for s in best_seeds if s not in seeds] + [(seeds[0], r) for r in range(1, best_repeats + 1)]
    for task, spec in tasks.items():
        runs = [(x, args, mixer, lr, seed, 0) for (x, args), seed, lr, mixer in
                itertools.product(spec['levels'], seeds, learning_rates or [None], mixers)]
        runs += [(x, args, mixer, best[task, x, mixer], seed, rep) for (x, args), mixer in
                 itertools.product(spec['levels'], mixers) if (task, x, mixer) in best for seed, rep in more]
        for x, args, mixer, lr, seed, rep in runs:
            yield (dict(zip(KEY, (task, x, mixer, lr, seed, rep))),
                   [spec['config'], *args, *mixers[mixer], f'--seed={seed}', *extra]
                   + ([f'--learning_rate={lr}'] if lr is not None else []))


def best_lrs(rows):
    """{(task, x, mixer): its best lr}, once every lr x seed of `seeds` has a result (ok or diverged, not failed)."""
    lrs, by = learning_rates or [None], {}
    for r in rows:
        if r['seed'] in seeds and not r.get('repeat') and r['status'] in ('ok', 'diverged'):
            by.setdefault((r['task'], r['x'], r['mixer']), {}).setdefault(r['lr'], []).append(r)
    return {k: (max if metric == 'val_acc' else min)(lrs, key=lambda lr: lr_score(per_lr[lr]))
            for k, per_lr in by.items() if all(len(per_lr.get(lr, ())) == len(seeds) for lr in lrs)}


def lr_score(runs):
    """What an lr is chosen on: the mean of its runs of `seeds`, repeat 0 (more ran at one lr only); the worst
    score where none left a value."""
    vals = [value(r) for r in runs if r['seed'] in seeds and not r.get('repeat') and value(r) is not None]
    return mean(vals) if vals else float('-inf') if metric == 'val_acc' else float('inf')


def outcome(proc_rc, out_dir, log_path, seconds, timed_out):
    """A finished run's fields from its log.jsonl (params, corpus, device, last evaluation) and its status."""
    res = {'seconds': round(seconds, 1), 'returncode': proc_rc}
    log = os.path.join(out_dir, 'log.jsonl')
    records = [r for r in read(log).values() if r is not None]  # a line cut mid-write: left out
    start = next((r for r in records if r.get('start')), {})
    res.update({k: start[k] for k in ('params', 'data_tokens', 'device') if start.get(k) is not None})
    if evals := [r for r in records if r.get('eval')]:
        last = evals[-1]
        res.update(step=last['step'], val_loss=last['val_loss'], val_acc=last.get('val_acc'),
                   **{k: last[k] for k in ('val_acc_none', 'val_acc_value') if k in last},
                   best_val_acc=max(r.get('val_acc', float('nan')) for r in evals),
                   curve=[[r['step'], r['val_loss'], r.get('val_acc')] for r in evals])
    text = read_text(log_path)
    finished = bool(evals) and evals[-1].get('final', False)  # killed after its last evaluation: finished
    if timed_out and not finished:
        res['status'] = 'timeout'
    elif finished and (proc_rc == 0 or timed_out):  # only a final evaluation is the run's result
        res['status'] = 'ok'
    else:
        res['status'] = 'diverged' if 'non-finite loss' in text else 'failed'
        # the last exception line (a CUDA error is followed by hints that name nothing), else the last line
        lines = text.strip().splitlines()
        raised = [line for line in lines if re.match(r'[\w.]*(Error|Exception|Interrupt)\b.*:', line)]
        res['error'] = (f'exit 0, but {log} holds no final evaluation' if proc_rc == 0 and not timed_out
                        else (raised or lines or [''])[-1][:300] or f'exit {proc_rc}, no output')
    return res


# Running: each run a train.py process that stops with the sweep -------------------------------------
def die_with_sweep(sweep_pid=os.getpid()):
    """Run in each train.py process before it starts (Linux): the kernel sends it SIGTERM when the sweep dies,
    however it dies (SIGKILL included), so no run is left training into the run dirs of a stopped sweep."""
    try:
        ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != sweep_pid:  # the sweep died before the line above took effect
        os.kill(os.getpid(), signal.SIGTERM)


class Run:
    """A started train.py process, then its evaluations, and what the sweep needs to record it."""

    def __init__(self, row, args, gpu, at_once):
        self.row, self.args, self.gpu, self.at_once = row, args, gpu, at_once
        self.out_dir = os.path.join(runs_dir, run_id(row))
        self.log_path = self.out_dir + '.log'
        self.cmd = [python, os.path.join(HERE, 'train.py'), *args, f'--out_dir={self.out_dir}', '--progress=False']
        resume = checkpoints and os.path.exists(os.path.join(self.out_dir, 'ckpt.pt'))
        if resume:  # a run cut off: on from its last checkpoint (train.py trims its log.jsonl to that step)
            self.cmd.append('--init_from=resume')
        else:  # a rerun starts its out_dir afresh
            shutil.rmtree(self.out_dir, ignore_errors=True)
            self.cmd += [] if checkpoints else ['--save_ckpt=False']
        self.env = dict(os.environ, OMP_NUM_THREADS='1', PYTHONUNBUFFERED='1',
                        **({} if gpu is None else {'CUDA_VISIBLE_DEVICES': str(gpu)}))
        self.result, self.evaluated = None, []  # result: its row, while evaluations run
        self.spawn(self.cmd, self.env, 'a' if resume else 'w')

    def spawn(self, cmd, env, mode='a'):
        self.log, self.start = open(self.log_path, mode), time.time()
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, env=env, cwd=HERE,
                                     preexec_fn=die_with_sweep if sys.platform.startswith('linux') else None)

    def evaluate_next(self, code):
        """Start the next of `evaluate` on the run's checkpoint, on its GPU and slot; False when all have run."""
        if len(self.evaluated) == len(evaluate):
            return False
        what, *args = evaluate[len(self.evaluated)]
        rows = os.path.abspath(os.path.join(results_dir, f'{name}_eval.jsonl'))
        self.spawn([python, os.path.join(HERE, 'eval.py'), f'--out_dir={self.out_dir}', f'--what={what}', *args,
                    f'--results={rows}', f'--tags={ {k: self.row[k] for k in KEY}!r}'],
                   dict(self.env, NANOEDA_COMMIT=code or ''))
        return True

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def past_time(todo, running, took, t0, at_once):
    """True when no more runs should start: start_until has passed, or the deadline would (says why)."""
    left = f'{len(todo)} runs left for the next invocation (the same command resumes)'
    if start_until and time.time() - t0 > start_until:
        print(f'sweep: start_until={start_until}s passed; {left}', flush=True)
        return True
    level = (todo[0][0]['task'], todo[0][0]['x'])
    same = sorted(sec for sec, n in took.get(level, []) if n == at_once)  # runs share the GPU: time depends on n
    if deadline and same and len(running) < at_once and time.time() - t0 + same[len(same) // 2] > deadline:
        print(f'sweep: the next run ({level[0]} {level[1]}, ~{same[len(same) // 2]:.0f}s as its finished runs took '
              f'{at_once} at once) would end after deadline={deadline:g}s; {left}', flush=True)
        return True
    return False


def hold_results_file():
    """Check that the results and runs can be written, and lock the results file for the sweep's life: two sweeps
    on one file would run every run twice and delete each other's run folders. Returns the lock's fd."""
    try:
        for folder in (results_dir, runs_dir):
            os.makedirs(folder, exist_ok=True)
        if os.path.isdir(results_path) or (os.path.exists(results_path) and not os.access(results_path, os.W_OK)):
            raise OSError(0, 'a folder' if os.path.isdir(results_path) else 'read-only', f'the results file '
                          f'{results_path}')
        fd, holder = hold_lock(f'{results_path}.lock')
    except OSError as err:
        sys.exit(f'sweep: cannot write {err.filename or results_path + ".lock"} ({err.strerror}); nothing was run: '
                 f'give a writable --results_dir and --runs_dir')
    if holder:
        sys.exit(f'sweep: another sweep (pid {holder}) is running on {results_path}; nothing was run: wait for it '
                 f'to end, or give this one another --name or --results_dir')
    return fd


def sweep():
    hold_results_file()
    rerun = ('failed', 'timeout') if retry_failed else ()
    done = {key(r) for r in read_results(results_path) if r['status'] not in rerun}
    tried = set(done)  # each run starts at most once per invocation

    def pending():  # the grid's runs not tried yet: best_seeds and best_repeats join as their mixer's lrs finish
        return [(row, args) for row, args in grid(read_results(results_path)) if key(row) not in tried]

    todo = pending()
    total = len(todo) + len(done)
    later = ' (+ best_seeds and best_repeats as the lrs finish)' if best_seeds or best_repeats else ''
    print(f'sweep {name}: {total} runs in the grid{later}, {len(done)} already in {results_path}, {len(todo)} to '
          f'run, {jobs} at a time', flush=True)
    if not todo:
        return
    try:  # torch: only to count the GPUs (the report needs no torch)
        import torch
        n_gpu = torch.cuda.device_count()
    except ImportError:
        n_gpu = 0
    code, running, durations, t0, stopped = commit(), [], [], time.time(), False
    at_once = jobs  # falls when runs sharing a GPU run out of its memory
    took = {}  # (task, x) -> [(seconds, runs at once)] of its finished runs, for the deadline

    def timed(r):
        if r['status'] == 'ok' and r.get('seconds') is not None and r.get('at_once'):
            took.setdefault((r['task'], r['x']), []).append((r['seconds'], r['at_once']))

    def finish(row):  # the run's row to the results file, and a line; the ETA: the runs left, in waves of at_once
        append(results_path, row)  # at the mean duration so far
        durations.append(row['seconds'])
        timed(row)
        left = len(todo) + len(running)
        eta = math.ceil(left / at_once) * (sum(durations) / len(durations)) if left else 0
        acc = (f"{metric} {fmt(row[metric]) if row.get(metric) is not None else 'none'}" if row['status'] == 'ok'
               else f"{row['status']}: {row.get('error', '')[:80]}")
        print(f"[{len(done) + len(durations)}/{total}] {run_id(row)}: {acc} ({row['seconds']:.0f}s) | elapsed "
              f"{fmt_time(time.time() - t0)} | eta {fmt_time(eta)}", flush=True)

    for r in read_results(results_path):
        timed(r)

    def stop_on_signal(signum, frame):
        raise SystemExit(f'sweep: stopped by {signal.Signals(signum).name}; its unfinished runs were stopped and '
                         f'recorded nothing (the same command resumes)')
    signal.signal(signal.SIGTERM, stop_on_signal)
    signal.signal(signal.SIGINT, stop_on_signal)
    try:
        while True:
            if not todo and not stopped:
                todo = pending()
                total = max(total, len(done) + len(durations) + len(running) + len(todo))
            if not todo and not running:
                break
            if todo and past_time(todo, running, took, t0, at_once):
                todo, stopped = [], True
            while len(running) < at_once and (i := next_startable(todo, running)) is not None:
                # on CUDA the GPU with the fewest runs: unequal runs pile up
                gpu = min(range(n_gpu), key=lambda g: sum(r.gpu == g for r in running)) if n_gpu else None
                row, args = todo.pop(i)
                tried.add(key(row))
                running.append(Run(row, args, gpu, at_once))
            time.sleep(0.5)
            for run in [r for r in running if r.proc.poll() is not None or time.time() - r.start > run_timeout]:
                timed_out = run.proc.poll() is None
                run.stop()
                running.remove(run)
                if run.result is not None:  # one of its evaluations ended: the next, or its row at last
                    run.evaluated.append('timeout' if timed_out else run.proc.returncode)
                    if not timed_out and run.evaluate_next(code):
                        running.append(run)
                    else:
                        finish({**run.result, 'evaluated': run.evaluated})
                    continue
                log = read_text(run.log_path) if run.proc.returncode != 0 else ''
                if (last := (log.strip().splitlines() or [''])[-1]).startswith('configurator:'):  # every run fails so
                    sys.exit(f'sweep: train.py rejected a setting of run {run_id(run.row)}, so every run of this '
                             f'grid would fail: {last}\n  command: {" ".join(run.cmd)}\nnothing more was '
                             f'started and no row recorded; fix the grid and run the same command again')
                beside = [r for r in running if r.gpu == run.gpu]  # out of GPU memory beside them: not its result
                if not timed_out and beside and ('OutOfMemoryError' in log or 'CUDA error: out of memory' in log):
                    at_once = max(1, min(at_once - 1, len(running)))
                    todo.insert(0, (run.row, run.args))
                    stopped = False
                    print(f'sweep: {run_id(run.row)} ran out of GPU memory beside {len(beside)} other runs; it runs '
                          f'again, and from now on at most {at_once} at once', flush=True)
                    continue
                res = outcome(run.proc.returncode, run.out_dir, run.log_path, time.time() - run.start, timed_out)
                stamp = {'at_once': run.at_once, 'date': time.strftime('%Y-%m-%d %H:%M', time.gmtime()), 'commit': code,
                         **versions()}
                run.result = {**run.row, **res, **stamp, 'command': ' '.join(['python', 'train.py', *run.cmd[2:]])}
                if run.result['status'] == 'ok' and run.evaluate_next(code):  # evaluated where it trained
                    running.append(run)
                else:
                    finish(run.result)
    finally:
        for run in running:
            run.stop()


def next_startable(todo, running):
    """The index of the first run of todo whose mixer is under its mixer_jobs cap, or None."""
    return next((i for i, (row, _) in enumerate(todo) if sum(r.row['mixer'] == row['mixer'] for r in running)
                 < mixer_jobs.get(row['mixer'], math.inf)), None)


# Report: best learning rate per (task, level, mixer) by mean accuracy over seeds; mean, spread, every run ---
def value(r):
    """A run's result in `metric`. A failed or diverged run counts as accuracy 0 (it is a result of that lr, not
    a missing one); it has no loss, so with metric='val_loss' it is None: counted as failed, left out of the mean."""
    return r.get(metric) if r['status'] == 'ok' else 0.0 if metric == 'val_acc' else None


def mean(xs, scale=1):
    """scale times the mean of xs (100: in percent), scaled before the division as the reports' figures were."""
    xs = list(xs)
    return scale * sum(xs) / len(xs)


def std(vals):
    """The sample standard deviation (0 for one value)."""
    mu = mean(vals)
    return math.sqrt(sum((v - mu) ** 2 for v in vals) / (len(vals) - 1)) if len(vals) > 1 else 0.0


def summarize(rows):
    """{(task, x, mixer): {'lr', 'accs', 'mean', 'std', 'min', 'max', 'n_failed', 'params', 'runs', 'lrs', 'per_lr'}}
    at the best lr; 'accs': one value per seed. A timed-out run is unfinished, not a result: left out here."""
    by = {}
    for r in rows:
        if r['status'] != 'timeout':
            by.setdefault((r['task'], r['x'], r['mixer']), {}).setdefault(r['lr'], []).append(r)
    out = {}
    for k, per_lr in by.items():
        lr, runs = (max if metric == 'val_acc' else min)(per_lr.items(), key=lambda kv: lr_score(kv[1]))
        # one value per seed (its repeats averaged): the spread over seeds; the repeats' table shows the rest
        accs = [mean(v) for v in by_seed(runs).values()] or [float('nan')]  # nan: all failed
        out[k] = dict(lr=lr, accs=accs, mean=mean(accs), std=std(accs), min=min(accs), max=max(accs),
                      params=next((r['params'] for r in runs if r.get('params')), None), runs=runs,
                      n_failed=sum(r['status'] != 'ok' for r in runs), per_lr=per_lr,
                      lrs={l: lr_score(v) for l, v in per_lr.items()})
    return out


def by_seed(runs):
    """{seed: [values of its runs (repeats)]}, failed runs without a value left out."""
    out = {}
    for r in sorted(runs, key=lambda r: r.get('repeat', 0)):
        if value(r) is not None:
            out.setdefault(r['seed'], []).append(value(r))
    return out


# Student's t two-sided 95% critical values by degrees of freedom (any statistics table)
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
        11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131}


def sign_test(k, n):
    """Two-sided exact sign test: P(a split at least as uneven as k of n) under a fair coin."""
    return min(1.0, 2 * sum(math.comb(n, i) for i in range(min(k, n - k) + 1)) / 2 ** n)


def paired(diffs, higher_is_better=False, a='A', b='B'):
    """The verdict rule the grids fix before their runs. Per-seed differences a - b: (mean, 95% t interval, seeds
    where a is better, sign test p, verdict): 'a ahead' or 'b ahead' only where the interval excludes zero, else
    'not resolved' (always, from one seed)."""
    n, mu = len(diffs), mean(diffs)
    half = T975[n - 1] * std(diffs) / math.sqrt(n) if n > 1 else math.inf
    better = sum(d > 0 if higher_is_better else d < 0 for d in diffs)
    up, down = (a, b) if higher_is_better else (b, a)
    verdict = f'{up} ahead' if mu - half > 0 else f'{down} ahead' if mu + half < 0 else 'not resolved'
    return mu, (mu - half, mu + half), better, sign_test(better, sum(d != 0 for d in diffs)), verdict


def verdicts(values, figures):
    """The verdict rule over `pairs` with values ({(mixer, seed): {figure: value}}), each pair on the seeds both
    have: a row per pair, a cell per figure ({figure: (decimals, higher is better)}), bold with its verdict where
    resolved; and {'A, B, figure': verdict}, 'not run' where the two share no seed."""
    rows, said = [], {f'{a}, {b}, {f}': 'not run' for a, b in pairs for f in figures}
    for a, b in pairs:
        seeds = sorted(s for m, s in values if m == a and (b, s) in values)
        if not seeds:
            continue
        rows.append([f'{a} − {b}'])
        for f, (n, higher) in figures.items():
            mu, (lo, hi), k, p, v = paired([values[a, s][f] - values[b, s][f] for s in seeds], higher, a, b)
            cell = f'{mu:+.{n}f} [{lo:+.{n}f}, {hi:+.{n}f}] {k}/{len(seeds)}, p {p:.2f}'
            rows[-1].append(cell if v == 'not resolved' else f'**{cell}, {v}**')
            said[f'{a}, {b}, {f}'] = v
    return rows, said


def fmt(v):
    return f'{100 * v:.1f}' if metric == 'val_acc' else f'{v:.4f}'


def fmt_lr(lr):
    return 'cfg' if lr is None else f'{lr:g}'


def data_line(task, rows):
    """The corpus the task's runs trained on, loudly when it differs: a table compares runs on the same tokens."""
    corpora = {tuple(r['data_tokens']) for r in rows if r['task'] == task and r.get('data_tokens')}
    if not corpora:
        return []
    n_rec = sum(r['task'] == task and bool(r.get('data_tokens')) for r in rows)
    n_all = sum(r['task'] == task for r in rows)
    kinds = '; '.join(f'{a:,} train + {b:,} val tokens' for a, b in sorted(corpora))
    return [(f'Data: {kinds}' if len(corpora) == 1 else f'**Runs on different data** ({kinds}): not comparable')
            + (f' ({n_rec} of {n_all} runs recorded it)' if n_rec < n_all else '') + '.', '']


def cell(s, n_unfinished):
    """A table cell: mean ± std [min, max] lr, failures (!N) and unfinished runs (+N) marked."""
    more = f' +{n_unfinished} unfinished' if n_unfinished else ''
    if s is None:
        return more.strip() or '—'
    bad = f" !{s['n_failed']}" if s['n_failed'] else ''
    if len(s['accs']) == 1:  # one seed: no spread to show (± 0 [x, x] would read as a measured one)
        return f"{fmt(s['mean'])} (1 seed) lr {fmt_lr(s['lr'])}{bad}{more}"
    return f"{fmt(s['mean'])} ± {fmt(s['std'])} [{fmt(s['min'])}, {fmt(s['max'])}] lr {fmt_lr(s['lr'])}{bad}{more}"


def md_table(title, header, rows, intro=()):
    """A report section: its title, intro lines, and a table of rows (lists of cells); [] without rows."""
    return rows and [f'## {title}', '', *intro, table(header, rows), '']


def task_table(task, spec, rows, summary):
    """The task's table: a row per mixer, a column per level; its floor (a trivial answer's score) as a row."""
    xs = [x for x, _ in spec['levels']]
    unfinished = [(r['task'], r['x'], r['mixer']) for r in rows if r['status'] == 'timeout']
    out = []
    for m in mixers:
        params = next((p for p in [summary[task, x, m]['params'] for x in xs if (task, x, m) in summary]
                       + [r.get('params') for r in rows if r['mixer'] == m] if p), None)
        out.append([m, f'{params:,}' if params else '?',
                    *(cell(summary.get((task, x, m)), unfinished.count((task, x, m))) for x in xs)])
    if 'floor' in spec:
        answer, floor = spec['floor']
        out.append([f'*{answer}*', '—', *(fmt(floor[x]) if x in floor else '—' for x in xs)])
    return md_table(f'{task} (difficulty: {spec["x"]})', ['mixer', 'params', *(f'{spec["x"]}={x}' for x in xs)], out,
                    data_line(task, rows))


WHAT = {'val_acc': ('validation accuracy (%)', 'highest', 'count as 0'),
        'val_loss': ('validation loss (nats/token)', 'lowest', 'have no loss: left out of the mean')}


def report(rows):
    """The table (<results_dir>/<name>.md) and the figure (.png) from the results file's rows."""
    summary, what = summarize(rows), WHAT[metric]

    def place(kv):  # the grid's order: task, level, mixer (a mixer only another sweep has: last)
        (task, x, m), levels, ms = kv[0], [lx for lx, _ in tasks[kv[0][0]]['levels']], list(mixers)
        return (list(tasks).index(task), levels.index(x) if x in levels else len(levels),
                ms.index(m) if m in ms else len(ms))
    every = sorted(summary.items(), key=place)
    lines = [f'# Sweep `{name}`', '',
             f'{len(rows)} runs from `{results_path}`. Each cell: {what[0]} at the mixer\'s best learning '
             f'rate ({what[1]} mean over seeds), mean ± sample std over seeds [min, max], and that lr. '
             f'Failed or diverged runs {what[2]} and are marked with !. Runs stopped by the sweep\'s time limit '
             f'are unfinished: left out of the cells, marked with +N unfinished, and listed below the tables.', '',
             made(rows, 'runs'), '']
    for task, spec in tasks.items():
        lines += task_table(task, spec, rows, summary)
    # runs that logged the accuracy on value answers and on NONE answers apart: both, at the best lr
    ok = {k: [r for r in s['runs'] if r['status'] == 'ok'] for k, s in every}
    lines += md_table('Values vs NONE answers (best lr, mean over seeds): recall of values | NONE answered right',
                      ['task', 'x', 'mixer', 'values (%)', 'NONE answers (%)'], [
        [*k, fmt(mean([r['val_acc_value'] for r in ok[k]])), fmt(mean([r['val_acc_none'] for r in ok[k]]))]
        for k, _ in every if metric == 'val_acc' and ok[k] and all('val_acc_value' in r for r in ok[k])])
    both, paired_rows = {**summarize(foreign_rows()), **summary}, []
    n, scale = (1, 100) if metric == 'val_acc' else (4, 1)  # a difference in points of accuracy, or in nats
    for task, spec in tasks.items():
        for x, _ in spec['levels']:
            values = {(m, seed): {metric: mean(v, scale)} for (t, lx, m), s in both.items() if (t, lx) == (task, x)
                      for seed, v in by_seed(s['runs']).items()}  # a seed's repeats averaged
            paired_rows += [[task, x, *row] for row in verdicts(values, {metric: (n, metric == 'val_acc')})[0]]
    elsewhere = [', '.join(PAIRED_ELSEWHERE) + ': the rows of ' + ', '.join(
        f'`{os.path.join(results_dir, other + ".jsonl")}` ({task})' for task, other in paired_from.items())
        + ', made with this sweep\'s commands but the mixer.', ''] if PAIRED_ELSEWHERE and paired_from else []
    lines += md_table('Paired by seed (same seed: same data; each mixer at its best lr)', [
        'task', 'x', 'A − B', 'mean [95% interval] seeds where A is better, sign test p'], paired_rows, elsewhere)
    # run-to-run noise beside the seed spread, where a seed ran more than once (at the best lr): the sample std
    # of the seeds' means, and the pooled sample std of runs of the same seed
    repeats = []
    for k, s in every:
        per_seed = by_seed(s['runs'])
        if again := {seed: v for seed, v in per_seed.items() if len(v) > 1}:
            pooled = math.sqrt(sum(std(v) ** 2 * (len(v) - 1) for v in again.values())
                               / sum(len(v) - 1 for v in again.values()))
            repeats.append([*k, fmt_lr(s['lr']), len(per_seed), fmt(std([mean(v) for v in per_seed.values()])),
                            fmt(pooled), '; '.join(f'seed {seed}: ' + ', '.join(fmt(a) for a in v)
                                                   for seed, v in sorted(again.items()))])
    lines += md_table('Same-seed repeats: run-to-run spread beside the spread over seeds (best lr)',
                      ['task', 'x', 'mixer', 'lr', 'seeds', 'std of the seeds\' means', 'std within a seed (pooled)',
                       'repeated runs'], repeats)
    # every lr's mean: '! failed' where its runs left no value (a failed run is no result), '—' where none ran
    lrs = learning_rates or [None]
    lines += md_table(f'Every learning rate (mean {what[0]} over seeds)',
                      ['task', 'x', 'mixer', *(f'lr {l:g}' if l is not None else 'cfg' for l in lrs)],
                      [[*k, *('—' if l not in s['lrs'] else fmt(s['lrs'][l]) if math.isfinite(s['lrs'][l])
                              else '! failed' for l in lrs)] for k, s in every])
    runs = []  # every run's result, seed by seed (a seed's repeats one after another; ! a failed or diverged run)
    for k, s in every:
        for lr, lr_runs in sorted(s['per_lr'].items(), key=lambda kv: (kv[0] is None, kv[0] or 0)):
            each = {}
            for r in sorted(lr_runs, key=lambda r: (r['seed'], r.get('repeat', 0))):
                each.setdefault(r['seed'], []).append(fmt(r[metric]) if value(r) is not None and r['status'] == 'ok'
                                                      else f"! {r['status']}")
            runs.append([*k, fmt_lr(lr), '; '.join(f'{seed}: ' + ', '.join(v) for seed, v in each.items())])
    lines += md_table('Every run (seed: result)', ['task', 'x', 'mixer', 'lr', 'runs'], runs)
    lines += md_table('Unfinished runs (stopped by the sweep\'s time limit; rerun the sweep to finish them)',
                      ['task', 'x', 'mixer', 'lr', 'seed', 'last evaluation'], [
        [r['task'], r['x'], r['mixer'], fmt_lr(r['lr']), f"{r['seed']} (repeat {r['repeat']})" if r.get('repeat')
         else r['seed'], f"{fmt(r[metric])} at step {r['step']}" if r.get(metric) is not None else 'none']
        for r in rows if r['status'] == 'timeout'])
    md_path = os.path.join(results_dir, f'{name}.md')
    with open(md_path, 'w') as f:
        f.write('\n'.join(lines).rstrip('\n') + '\n')
    print(f'table: {md_path}')
    png = os.path.join(results_dir, f'{name}.png')
    if metric == 'val_loss':  # per (task, level): the curves, then a strip of the final losses
        n = sum(len(spec['levels']) for spec in tasks.values())
        figure(png, lambda *axes: figure_curves(summary, axes), 2 * n, (5, 4.2),
               gridspec_kw={'width_ratios': [1.4, 1] * n})
    else:
        figure(png, lambda *axes: figure_accuracy(summary, axes), len(tasks), (4.2, 3.6))


def figure_accuracy(summary, axes):
    """Accuracy against difficulty per task: per mixer (best lr) the mean, seed dots, range bar; the floor dashed."""
    for ax, (task, spec) in zip(axes, tasks.items()):
        xs = [x for x, _ in spec['levels']]
        for i, m in enumerate(mixers):
            if not (pts := [(j, summary[task, x, m]) for j, x in enumerate(xs) if (task, x, m) in summary]):
                continue
            off, c = (i - (len(mixers) - 1) / 2) * 0.06, f'C{i % 10}'  # side by side: seed dots do not hide each
            ax.plot([j + off for j, _ in pts], [100 * s['mean'] for _, s in pts], marker='o', label=m, color=c)
            for j, s in pts:  # other; one colour per mixer in every panel
                ax.scatter([j + off] * len(s['accs']), [100 * a for a in s['accs']], s=8, color=c, alpha=0.5)
                ax.vlines(j + off, 100 * s['min'], 100 * s['max'], color=c, alpha=0.6)
        what, floor = spec.get('floor', (None, {}))
        for j, x in enumerate(xs):
            if x in floor:  # one legend entry for the task's floor lines
                ax.hlines(100 * floor[x], j - 0.4, j + 0.4, color='grey', linestyles='dashed', label=what)
                what = None
        ax.set_xticks(range(len(xs)), [str(x) for x in xs])
        ax.set(xlim=(-0.5, len(xs) - 0.5), xlabel=spec['x'], title=task, ylim=(-2, 102))
        ax.grid(alpha=0.3)
    axes[0].set_ylabel('val accuracy (%), best lr; dots: seeds')
    labelled = {}  # one legend entry per mixer, from whichever panel has its runs (a half-done grid has empty ones)
    for ax in axes:
        for h, l in zip(*ax.get_legend_handles_labels()):
            labelled.setdefault(l, h)
    if labelled:
        names = [m for m in mixers if m in labelled] + [l for l in labelled if l not in mixers]
        axes[0].legend([labelled[m] for m in names], names, fontsize=8, loc='lower left')


def figure_curves(summary, axes):
    """Per (task, level): the loss against step per mixer at its best lr (mean, min-max band, runs); final losses."""
    panels = [(task, x) for task, spec in tasks.items() for x, _ in spec['levels']]
    for n, (task, x) in enumerate(panels):
        ax, strip = axes[2 * n], axes[2 * n + 1]
        zoom, names = [], []
        for i, m in enumerate(mixers):
            s = summary.get((task, x, m))
            curves = [r['curve'] for r in (s['runs'] if s else []) if r.get('curve')]
            steps = sorted(set.intersection(*[{c[0] for c in cv} for cv in curves])) if curves else []
            if not (steps := [t for t in steps if t > 0]):  # step 0 (the untrained model) would squash the scale
                continue
            per, color = [[dict((c[0], c[1]) for c in cv)[t] for cv in curves] for t in steps], f'C{i % 10}'
            ax.plot(steps, [sum(v) / len(v) for v in per], color=color,
                    label=f"{m} ({len(curves)} run{'s' if len(curves) > 1 else ''})")
            ax.fill_between(steps, [min(v) for v in per], [max(v) for v in per], color=color, alpha=0.2)
            for cv in curves:
                ax.plot([c[0] for c in cv if c[0] > 0], [c[1] for c in cv if c[0] > 0], color=color, lw=0.5, alpha=0.5)
            zoom += [x for v in per[len(per) // 3:] for x in v]
            finals = [value(r) for r in s['runs'] if value(r) is not None]
            strip.scatter([len(names)] * len(finals), finals, color=color, s=14, alpha=0.7)
            strip.hlines(s['mean'], len(names) - 0.3, len(names) + 0.3, color=color)
            names.append(m)
        if zoom:  # on the last two thirds, where the mixers separate
            pad = 0.1 * (max(zoom) - min(zoom) or 1.0)
            ax.set_ylim(min(zoom) - pad, max(zoom) + pad)
            ax.legend(fontsize=8)
        ax.set(title=f'{task} ({x})', xlabel='step', ylabel='validation loss (nats/token)')
        ax.grid(alpha=0.3)
        strip.set_xticks(range(len(names)), names, rotation=35, ha='right', fontsize=8)
        strip.set_title(f'{task} ({x}): final loss, each run (bar: mean over seeds)', fontsize=9)
        strip.grid(alpha=0.3, axis='y')


if __name__ == '__main__':
    if not report_only:
        sweep()
    if not (rows := read_results(results_path)):  # without report_only: start_until passed first, nothing went wrong
        sys.exit(f'sweep: no results in {results_path}' if report_only else 0)
    report(rows)
