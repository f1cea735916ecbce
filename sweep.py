"""
Many small train.py runs over a grid (tasks x difficulty x mixers x learning rates x seeds), several at once,
each run's row appended to a JSONL file the moment it ends; then a table and a figure from that file. Zoology's
protocol: each mixer at its best learning rate (best mean over seeds), the spread over seeds, every run kept.

    python sweep.py config/sweep/synthetic.py             # the erase benchmark of RESULTS.md
    python sweep.py config/sweep/synthetic.py --jobs=4    # 4 runs at a time (small runs share a GPU's time)
    python sweep.py config/sweep/synthetic.py --report_only=True   # table + figure from the results file

A run is one `python train.py <task config> <level args> --mixer=.. --learning_rate=.. --seed=..` process, so a
sweep trains exactly what a user's command trains. The same command resumes: runs in the results file are not
run again, failed ones are (retry_failed). A failed run is recorded and the sweep goes on; one out of GPU memory
beside others runs again with fewer at once; a setting train.py rejects (a typo in the grid) stops the sweep.
Rows record the date, commit, device (the run's first log.jsonl record) and at_once (the runs allowed at once:
they share a GPU's time). Stopping the sweep (Ctrl-C, SIGTERM, even SIGKILL on Linux) stops its runs. A sweep
locks <results file>.lock for its life: a second sweep on the file is refused, naming the first one's pid.
From any folder, relative paths are the repository's (its runs run there): results_dir, runs_dir and a task's
config (else the working directory's); a grid file is read from the working directory, else the repository.
matplotlib is optional: without it the table is still written.
"""
import ctypes
import fcntl
import itertools
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter

from configurator import configure

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'scripts'))
from rows import commit  # noqa: E402  (scripts/rows.py: the code's commit, as every results row records it)

# ----------------------------------------------------------------------------------------------------
# Settings (config files and --key=value, as train.py)
name = 'sweep'                # results go to <results_dir>/<name>.jsonl, .md, .png
results_dir = 'out/sweep'     # the grids whose results RESULTS.md reports write to results/
runs_dir = 'out/sweep/runs'   # each run's out_dir and log (not kept in the repo)
# task -> {'config': train.py config file, 'x': the difficulty's name, 'levels': [[x, [train.py args]], ...],
#          optionally 'floor': [what, {x: accuracy}]: a trivial answer's score (e.g. NONE at every query), a row of
#          the table and a dashed line in the figure, so that a run stuck there reads as such}
tasks = {'mqar': {'config': 'config/mqar.py', 'x': 'num_kv_pairs',
                  'levels': [[16, ['--num_kv_pairs=16']], [32, ['--num_kv_pairs=32']]]}}
mixers = {m: [f'--mixer={m}'] for m in ('eda', 'kda', 'gdn', 'gdn2', 'transformer')}  # label -> train.py args
learning_rates = [1e-3]       # [] : the task config's own
seeds = [0, 1, 2]
best_seeds = []               # more seeds, run only at each mixer's best lr (chosen on `seeds`) once all its
                              # `seeds` x lrs have a result, in the same invocation
best_repeats = 0              # more runs of seeds[0] at each mixer's best lr (as best_seeds): on a GPU the same
                              # command trains a little differently each time (atomic adds, bf16); the report
                              # sets that run-to-run spread beside the spread over seeds
checkpoints = False           # True: runs save a checkpoint at every evaluation, and a run cut off goes on from it
pairs = []                    # [[A, B], ...]: mixers compared seed by seed (a seed fixes the data) at each level,
                              # each at its best lr: on how many seeds A is ahead, mean A - B
paired_from = {}              # {task: another sweep's name}: a mixer of `pairs` this sweep lacks is read from that
                              # sweep's results (same task, level, lr) for the pairing only; the config must say
                              # that those runs had this sweep's commands but the mixer
extra = []                    # train.py args for every run, e.g. ['--max_iters=1000']
jobs = 4                      # runs at a time; on CUDA each starts on the visible GPU running the fewest
mixer_jobs = {}               # {mixer: most runs of it at a time}, for a mixer whose runs take more memory
run_timeout = 1800            # seconds; a run still going then is killed and recorded as 'timeout'
start_until = 0.0             # seconds into the sweep after which no new run starts (0: no limit)
deadline = 0.0                # seconds into the sweep by which every run should have ended (0: none): a run starts
                              # only if the median 'seconds' of its level's finished runs made with as many at once
                              # says it fits (a level with no such runs starts)
retry_failed = True           # rerun rows whose run failed or timed out (the newest row of a run is reported)
report_only = False           # only rebuild the table and figure from the results file
evaluate = []                 # [[what, eval.py args...], ...]: eval.py --what=<what> on each ok run's checkpoint,
                              # on its GPU, rows to <results_dir>/<name>_eval.jsonl (notes/eval.md); needs checkpoints
metric = 'val_acc'            # 'val_acc' (higher is better; figure: accuracy against difficulty) or 'val_loss'
                              # (lower is better; figure: validation loss against step)
python = sys.executable


def _grid_file(arg):
    """A grid file (a .py argument) from the working directory, else the repository's."""
    found = arg.startswith('--') or not arg.endswith('.py') or os.path.exists(arg)
    return arg if found else os.path.join(os.path.dirname(os.path.abspath(__file__)), arg)


configure(globals(), [_grid_file(a) for a in sys.argv[1:]])
HERE, CWD = os.path.dirname(os.path.abspath(__file__)), os.getcwd()
if __name__ == '__main__':
    os.chdir(HERE)  # relative paths are the repository's, as for the runs (train.py runs there)


def grid_problem():
    """What is wrong with the settings, in one line naming the key, or None: checked before anything runs (a run
    of a malformed grid would fail, or a string be split into its characters)."""
    def strs(v):
        return isinstance(v, (list, tuple)) and all(isinstance(a, str) for a in v)

    def nums(v, kind):
        return all(isinstance(a, kind) and not isinstance(a, bool) for a in v)
    if metric not in ('val_acc', 'val_loss'):
        return f"metric must be 'val_acc' or 'val_loss', got {metric!r}"
    if jobs < 1 or run_timeout <= 0:
        return f'jobs must be at least 1 and run_timeout positive, got jobs={jobs}, run_timeout={run_timeout}'
    if any(not isinstance(n, int) or n < 1 for n in mixer_jobs.values()) or set(mixer_jobs) - set(mixers):
        return f'mixer_jobs must map mixers of this grid to at least 1 run, got {mixer_jobs!r}'
    if evaluate and (not checkpoints or any(not isinstance(e, list) or not e for e in evaluate)):
        return f'evaluate needs checkpoints=True and a list [what, eval.py args...] each, got {evaluate!r}'
    if best_repeats < 0:
        return f'best_repeats must be 0 or more, got {best_repeats}'
    if not tasks:
        return 'tasks is empty: give at least one task'
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
    if not mixers:
        return 'mixers is empty: give at least one mixer'
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
    return None if seeds else 'seeds is empty: give at least one seed'


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
ROW_NUMBERS = ('lr', 'seed', 'repeat', 'val_acc', 'val_loss', 'best_val_acc', 'seconds', 'step', 'at_once',
               'params')
warned = set()  # the results file's lines already named: read_results runs after every run


def key(row):
    return tuple(row.get(k, 0) for k in KEY)


def read_text(path):
    """A file's text, '' where there is none (yet)."""
    if not os.path.exists(path):
        return ''
    with open(path, errors='replace') as f:
        return f.read()


def row_problem(row):
    """Why a line's JSON is not a run's row (a key missing, a value not a number), or None."""
    if missing := [k for k in ROW_KEYS if not isinstance(row, dict) or k not in row]:
        return f"is not a run's row (it lacks {', '.join(map(repr, missing))})"
    if odd := [k for k in ROW_NUMBERS if row.get(k) is not None and (
            not isinstance(row[k], (int, float)) or isinstance(row[k], bool))]:
        return f"is not a run's row ({', '.join(f'{k} is {row[k]!r}' for k in odd)}, not a number)"
    return None


def read_results(path):
    """The rows of the results file, the newest row of each run only. A line that is not a run's row (cut by a
    crash mid-write, or missing a key) is named on stderr once and left out: its run is simply run again."""
    rows = {}
    for i, line in enumerate(read_text(path).split('\n'), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            bad = row_problem(row)
        except ValueError:
            bad = 'is not JSON (a line cut mid-write?)'
        if not bad:
            rows[key(row)] = row
        elif (path, i, line) not in warned:
            warned.add((path, i, line))
            print(f'sweep: {path}:{i} {bad}, left out', file=sys.stderr)
    return list(rows.values())


def append_row(path, row):
    """One whole line per run, appended the moment the run ends: an interrupted sweep loses no row. A last line
    cut without its newline (a crash mid-write) is ended first, so that this row is not glued onto it."""
    with open(path, 'ab+') as f:
        if f.seek(0, os.SEEK_END):
            f.seek(-1, os.SEEK_END)
            if f.read(1) != b'\n':
                f.write(b'\n')
        f.write((json.dumps(row) + '\n').encode())


PAIRED_ELSEWHERE = sorted({m for pair in pairs for m in pair} - set(mixers))  # read from paired_from's sweeps


def foreign_rows():
    """Rows of the paired_from sweeps that pairs need: their task, this sweep's lrs, a mixer this sweep lacks."""
    lrs = learning_rates or [None]
    return [r for task, other in paired_from.items()
            for r in read_results(os.path.join(results_dir, f'{other}.jsonl'))
            if r['task'] == task and r['mixer'] in PAIRED_ELSEWHERE and r['lr'] in lrs]


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
    """Every run of the grid as (row, train.py args), in a fixed order (task, level, seed, lr, mixer: a half-done
    sweep has whole levels, and every mixer's runs at a level finish close together); then, for each (task, level,
    mixer) whose `seeds` x lrs all have a result in `results`, its best_seeds and best_repeats at its best lr."""
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
    """{(task, x, mixer): its best lr}, chosen on the first runs (repeat 0) of `seeds` alone, for the mixers whose
    every lr x seed of `seeds` has a result: ok, or diverged (a result of that lr). A failed run (out of memory, a
    killed machine) or a timeout is no result: it runs again, and the choice waits for it."""
    lrs = learning_rates or [None]
    by = {}
    for r in rows:
        if r['seed'] in seeds and not r.get('repeat') and r['status'] in ('ok', 'diverged'):
            by.setdefault((r['task'], r['x'], r['mixer']), {}).setdefault(r['lr'], []).append(r)
    pick = max if metric == 'val_acc' else min
    return {k: pick(lrs, key=lambda lr: lr_score(per_lr[lr]))
            for k, per_lr in by.items() if all(len(per_lr.get(lr, ())) == len(seeds) for lr in lrs)}


def lr_score(runs):
    """What an lr is chosen on: the mean of its first runs (repeat 0) of `seeds` (best_seeds and best_repeats ran
    at one lr only, and would tip the choice)."""
    return mean([value(r) for r in runs if r['seed'] in seeds and not r.get('repeat') and value(r) is not None])


def outcome(proc_rc, out_dir, log_path, seconds, timed_out):
    """The row's result fields from a finished train.py process: from its log.jsonl the first record (parameter
    count, corpus, device) and the last evaluation, and a status (ok | diverged | failed | timeout). A run killed
    by the time limit after its final evaluation (train.py marks it 'final') has its result: ok."""
    res = {'seconds': round(seconds, 1), 'returncode': proc_rc}
    log = os.path.join(out_dir, 'log.jsonl')
    try:
        records = [json.loads(line) for line in read_text(log).split('\n') if line.strip()]
    except ValueError:
        records = []
    start = next((r for r in records if r.get('start')), {})
    res.update({k: start[k] for k in ('params', 'data_tokens', 'device') if start.get(k) is not None})
    evals = [r for r in records if r.get('eval')]
    if evals:
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
        res['error'] = (f'exit 0, but {log} holds no final evaluation' if proc_rc == 0 and not timed_out
                        else error_line(text) or f'exit {proc_rc}, no output')
    return res


def error_line(text):
    """What a failed run's log says went wrong: its last exception line (a CUDA error is followed by hints such as
    'Compile with TORCH_USE_CUDA_DSA...', which name nothing), else its last line; '' for no output."""
    lines = text.strip().splitlines()
    raised = [line for line in lines if re.match(r'[\w.]*(Error|Exception|Interrupt)\b.*:', line)]
    return (raised or lines or [''])[-1][:300]


def fmt_time(s):
    s = int(s)
    return f'{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}'


# ----------------------------------------------------------------------------------------------------
# Running: each run a train.py process that stops with the sweep


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
            if not checkpoints:
                self.cmd.append('--save_ckpt=False')
        self.env = dict(os.environ, OMP_NUM_THREADS='1', PYTHONUNBUFFERED='1')
        if gpu is not None:
            self.env['CUDA_VISIBLE_DEVICES'] = str(gpu)
        self.result, self.evaluated = None, []  # result: its row, while evaluations run
        self.spawn(self.cmd, self.env, 'a' if resume else 'w')

    def spawn(self, cmd, env, mode='a'):
        """Start cmd in the repository, its output to the run's log."""
        self.log, self.start = open(self.log_path, mode), time.time()
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, env=env, cwd=HERE,
                                     preexec_fn=die_with_sweep if sys.platform.startswith('linux') else None)

    def evaluate_next(self, code):
        """Start the next of `evaluate` on the run's checkpoint (eval.py on the run's GPU, rows to
        <name>_eval.jsonl): it takes the run's place (its GPU, its slot of `jobs`), beside other runs. False when
        every evaluation has run."""
        if len(self.evaluated) == len(evaluate):
            return False
        what, *args = evaluate[len(self.evaluated)]
        rows = os.path.abspath(os.path.join(results_dir, f'{name}_eval.jsonl'))
        self.spawn([python, os.path.join(HERE, 'eval.py'), f'--out_dir={self.out_dir}', f'--what={what}', *args,
                    f'--results={rows}', f'--tags={ {k: self.row[k] for k in KEY}!r}'],
                   dict(self.env, NANOEDA_COMMIT=code or ''))
        return True

    def out_of_memory(self):
        """The run died of an allocation on its GPU (torch's OutOfMemoryError, or a CUDA error saying so)."""
        text = read_text(self.log_path)
        return self.proc.returncode != 0 and ('OutOfMemoryError' in text or 'CUDA error: out of memory' in text)

    def rejected(self):
        """The line of train.py's configurator refusing a setting (the grid is wrong: every run of it would fail
        so), or None."""
        last = (read_text(self.log_path).strip().splitlines() or [''])[-1]
        return last if self.proc.returncode != 0 and last.startswith('configurator:') else None

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def gpu_count():
    try:
        import torch
        return torch.cuda.device_count()
    except ImportError:
        return 0


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


def stop_on_signal(signum, frame):
    raise SystemExit(f'sweep: stopped by {signal.Signals(signum).name}; its unfinished runs were stopped and '
                     f'recorded nothing (the same command resumes)')


def hold_results_file():
    """Check that the results file and the runs' folder can be written, and lock the results file for the
    sweep's life (the lock goes with the process): two sweeps on one file would run every run twice and each
    delete the other's run folders. Exits naming the problem, or the pid of the sweep that holds the file."""
    def cannot(why):
        sys.exit(f'sweep: cannot write {why}; nothing was run: give a writable --results_dir and --runs_dir')
    for folder in (results_dir, runs_dir):
        try:
            os.makedirs(folder, exist_ok=True)
        except OSError as err:
            cannot(f'in {folder} ({err.strerror})')
    if os.path.isdir(results_path) or (os.path.exists(results_path) and not os.access(results_path, os.W_OK)):
        cannot(f"the results file {results_path} ({'a folder' if os.path.isdir(results_path) else 'read-only'})")
    try:
        fd = os.open(f'{results_path}.lock', os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as err:
        cannot(f'{results_path}.lock ({err.strerror})')
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        holder = os.pread(fd, 32, 0).decode(errors='replace').strip() or '?'
        sys.exit(f'sweep: another sweep (pid {holder}) is running on {results_path}; nothing was run: wait for it '
                 f'to end, or give this one another --name or --results_dir')
    os.ftruncate(fd, 0)
    os.pwrite(fd, f'{os.getpid()}\n'.encode(), 0)
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
    n_gpu, code, running, durations, t0 = gpu_count(), commit(), [], [], time.time()
    at_once = jobs  # falls when runs sharing a GPU run out of its memory
    took = {}  # (task, x) -> [(seconds, runs at once)] of its finished runs, for the deadline

    def timed(r):
        if r['status'] == 'ok' and r.get('seconds') is not None and r.get('at_once'):
            took.setdefault((r['task'], r['x']), []).append((r['seconds'], r['at_once']))

    def finish(row):  # the run's row to the results file, counted and said
        append_row(results_path, row)
        durations.append(row['seconds'])
        timed(row)
        progress(row, len(done) + len(durations), total, len(todo) + len(running), durations, t0, at_once)

    for r in read_results(results_path):
        timed(r)
    signal.signal(signal.SIGTERM, stop_on_signal)
    signal.signal(signal.SIGINT, stop_on_signal)
    try:
        stopped = False
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
                if rejection := run.rejected():
                    sys.exit(f'sweep: train.py rejected a setting of run {run_id(run.row)}, so every run of this '
                             f'grid would fail: {rejection}\n  command: {" ".join(run.cmd)}\nnothing more was '
                             f'started and no row recorded; fix the grid and run the same command again')
                beside = [r for r in running if r.gpu == run.gpu]
                if not timed_out and beside and run.out_of_memory():  # too many at once: not the run's result
                    at_once = max(1, min(at_once - 1, len(running)))
                    todo.insert(0, (run.row, run.args))
                    stopped = False
                    print(f'sweep: {run_id(run.row)} ran out of GPU memory beside {len(beside)} other runs; it runs '
                          f'again, and from now on at most {at_once} at once', flush=True)
                    continue
                res = outcome(run.proc.returncode, run.out_dir, run.log_path, time.time() - run.start, timed_out)
                stamp = {'at_once': run.at_once, 'date': time.strftime('%Y-%m-%d %H:%M', time.gmtime()), 'commit': code}
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


def progress(row, n, total, left, durations, t0, at_once):
    """One line per finished run; the ETA is the runs left, in waves of `at_once` (the runs at once), at the mean
    duration so far."""
    eta = math.ceil(left / at_once) * (sum(durations) / len(durations)) if left else 0
    acc = (f"{metric} {fmt(row[metric]) if row.get(metric) is not None else 'none'}" if row['status'] == 'ok'
           else f"{row['status']}: {row.get('error', '')[:80]}")
    print(f"[{n}/{total}] {run_id(row)}: {acc} ({row['seconds']:.0f}s) | elapsed {fmt_time(time.time() - t0)} | "
          f"eta {fmt_time(eta)}", flush=True)


# ----------------------------------------------------------------------------------------------------
# Report: best learning rate per (task, level, mixer) by mean accuracy over seeds; mean, spread, every run


def value(r):
    """A run's result in `metric`. A failed or diverged run counts as accuracy 0 (it is a result of that lr, not
    a missing one); it has no loss, so with metric='val_loss' it is None: counted as failed, left out of the mean."""
    if r['status'] == 'ok':
        return r.get(metric)
    return 0.0 if metric == 'val_acc' else None


def mean(vals):
    return sum(vals) / len(vals) if vals else (float('-inf') if metric == 'val_acc' else float('inf'))


def std(vals):
    """The sample standard deviation (0 for one value)."""
    mu = sum(vals) / len(vals)
    return math.sqrt(sum((v - mu) ** 2 for v in vals) / (len(vals) - 1)) if len(vals) > 1 else 0.0


def summarize(rows):
    """{(task, x, mixer): {'lr', 'accs', 'mean', 'std', 'min', 'max', 'n_failed', 'params', 'runs', 'lrs', 'per_lr'}}
    at the best lr (highest mean accuracy or lowest mean loss; 'accs': a value of `metric` per seed, its repeats
    averaged). A run stopped at run_timeout is unfinished, not a result: left out here (report() lists it)."""
    by = {}
    for r in rows:
        if r['status'] != 'timeout':
            by.setdefault((r['task'], r['x'], r['mixer']), {}).setdefault(r['lr'], []).append(r)
    out = {}
    for k, per_lr in by.items():
        lr, runs = (max if metric == 'val_acc' else min)(per_lr.items(), key=lambda kv: lr_score(kv[1]))
        # one value per seed (its repeats averaged): the spread over seeds; repeats_table shows the rest
        accs = [mean(v) for v in by_seed(runs).values()] or [float('nan')]  # nan: all failed
        out[k] = dict(lr=lr, accs=accs, mean=sum(accs) / len(accs), std=std(accs), min=min(accs), max=max(accs),
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


def fmt(v, sign=''):
    return f'{100 * v:{sign}.1f}' if metric == 'val_acc' else f'{v:{sign}.4f}'


def fmt_diff(d):
    return fmt(d, '+')


def fmt_lr(lr):
    return 'cfg' if lr is None else f'{lr:g}'


def ordered(summary):
    """summary's items in the grid's order: task, level, mixer (a mixer only another sweep has: last)."""
    def place(kv):
        task, x, m = kv[0]
        levels = [lx for lx, _ in tasks[task]['levels']]
        return (list(tasks).index(task), levels.index(x) if x in levels else len(levels),
                list(mixers).index(m) if m in mixers else len(mixers))
    return sorted(summary.items(), key=place)


WHAT = {'val_acc': ('validation accuracy (%)', 'highest', 'count as 0'),
        'val_loss': ('validation loss (nats/token)', 'lowest', 'have no loss: left out of the mean')}


def provenance(rows):
    """Where the rows come from: the dates, commits and devices they record (rows of older sweeps may lack them)."""
    def counts(field):
        n = Counter(r.get(field) or 'not recorded' for r in rows)
        return ', '.join(f'{v} ({c})' for v, c in sorted(n.items()))
    dates = sorted(r['date'][:10] for r in rows if r.get('date'))
    when = (dates[0] if dates[0] == dates[-1] else f'{dates[0]} to {dates[-1]}') if dates else 'dates not recorded'
    return f'Runs made {when}; commit (runs): {counts("commit")}; device (runs): {counts("device")}.'


def data_line(task, rows):
    """The corpus the task's runs trained on: a table compares runs on the same tokens; say so, and say it loudly
    when they differ ([] when no run recorded one)."""
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
    spread = f"{100 * s['std']:.1f}" if metric == 'val_acc' else f"{s['std']:.4f}"
    return f"{fmt(s['mean'])} ± {spread} [{fmt(s['min'])}, {fmt(s['max'])}] lr {fmt_lr(s['lr'])}{bad}{more}"


def md_table(title, header, rows, intro=()):
    """A report section: its title, intro lines, and a table of rows (lists of cells); [] without rows."""
    return rows and [f'## {title}', '', *intro, '| ' + ' | '.join(header) + ' |', '|' + '---|' * len(header),
                     *('| ' + ' | '.join(map(str, row)) + ' |' for row in rows), '']


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


def split_table(summary):
    """Runs that logged the accuracy on value answers and on NONE answers apart: both, at the best lr."""
    split = []
    for (task, x, m), s in ordered(summary):
        ok = [r for r in s['runs'] if r['status'] == 'ok']
        if metric == 'val_acc' and ok and all('val_acc_value' in r for r in ok):
            split.append([task, x, m, fmt(mean([r['val_acc_value'] for r in ok])),
                          fmt(mean([r['val_acc_none'] for r in ok]))])
    return md_table('Values vs NONE answers (best lr, mean over seeds): recall of values | NONE answered right',
                    ['task', 'x', 'mixer', 'values (%)', 'NONE answers (%)'], split)


def seed_diffs(sa, sb):
    """A - B seed by seed over their shared seeds, given two summarize() entries (a seed's repeats: their mean)."""
    va, vb = ({seed: mean(v) for seed, v in by_seed(s['runs']).items()} for s in (sa, sb))
    return [va[seed] - vb[seed] for seed in sorted(set(va) & set(vb))]


def pair_stats(sa, sb):
    """Mixer A against mixer B seed by seed, given their summarize() entries (each at its best lr; a seed's
    repeats: their mean): (seeds on which A is ahead, seeds compared, mean A - B), or None without a shared seed."""
    diffs = seed_diffs(sa, sb)
    if not diffs:
        return None
    return sum(d > 0 if metric == 'val_acc' else d < 0 for d in diffs), len(diffs), mean(diffs)


def paired_table(summary):
    """pairs, seed by seed at each level (pair_stats)."""
    paired, both = [], {**summarize(foreign_rows()), **summary}
    for (task, spec), (a, b) in itertools.product(tasks.items(), pairs):
        for x, _ in spec['levels']:
            if (task, x, a) in both and (task, x, b) in both and (p := pair_stats(both[task, x, a], both[task, x, b])):
                paired.append([task, x, f'{a} vs {b}', f'{p[0]} of {p[1]}', fmt_diff(p[2])])
    elsewhere = [', '.join(PAIRED_ELSEWHERE) + ': the rows of ' + ', '.join(
        f'`{os.path.join(results_dir, other + ".jsonl")}` ({task})' for task, other in paired_from.items())
        + ', made with this sweep\'s commands but the mixer.', ''] if PAIRED_ELSEWHERE and paired_from else []
    return md_table('Paired by seed (same seed: same data; each mixer at its best lr)',
                    ['task', 'x', 'A vs B', 'A ahead (seeds)', 'mean A - B'], paired, elsewhere)


def repeats_table(summary):
    """Run-to-run noise beside the seed spread, where a seed ran more than once (at the best lr): the sample std
    of the seeds' means, and the pooled sample std of runs of the same seed."""
    out = []
    for (task, x, m), s in ordered(summary):
        seeds_ = by_seed(s['runs'])
        if again := {seed: v for seed, v in seeds_.items() if len(v) > 1}:
            pooled = math.sqrt(sum(std(v) ** 2 * (len(v) - 1) for v in again.values())
                               / sum(len(v) - 1 for v in again.values()))
            out.append([task, x, m, fmt_lr(s['lr']), len(seeds_), fmt(std([mean(v) for v in seeds_.values()])),
                        fmt(pooled), '; '.join(f'seed {seed}: ' + ', '.join(fmt(a) for a in v)
                                               for seed, v in sorted(again.items()))])
    return md_table('Same-seed repeats: run-to-run spread beside the spread over seeds (best lr)',
                    ['task', 'x', 'mixer', 'lr', 'seeds', 'std of the seeds\' means',
                     'std within a seed (pooled)', 'repeated runs'], out)


def lr_table(summary):
    """Every lr's mean: '! failed' where its runs left no value (a failed run is no result), '—' where none ran."""
    lrs = learning_rates or [None]
    return md_table(f'Every learning rate (mean {WHAT[metric][0]} over seeds)',
                    ['task', 'x', 'mixer', *(f'lr {l:g}' if l is not None else 'cfg' for l in lrs)],
                    [[task, x, m, *('—' if l not in s['lrs'] else fmt(s['lrs'][l]) if math.isfinite(s['lrs'][l])
                                    else '! failed' for l in lrs)] for (task, x, m), s in ordered(summary)])


def runs_table(summary):
    """Every run's result, seed by seed (a seed's repeats one after another; ! a failed or diverged run)."""
    out = []
    for (task, x, m), s in ordered(summary):
        for lr, runs in sorted(s['per_lr'].items(), key=lambda kv: (kv[0] is None, kv[0] or 0)):
            each = {}
            for r in sorted(runs, key=lambda r: (r['seed'], r.get('repeat', 0))):
                each.setdefault(r['seed'], []).append(fmt(r[metric]) if value(r) is not None and r['status'] == 'ok'
                                                      else f"! {r['status']}")
            out.append([task, x, m, fmt_lr(lr), '; '.join(f'{seed}: ' + ', '.join(v) for seed, v in each.items())])
    return md_table('Every run (seed: result)', ['task', 'x', 'mixer', 'lr', 'runs'], out)


def unfinished_table(rows):
    out = [[r['task'], r['x'], r['mixer'], fmt_lr(r['lr']), f"{r['seed']} (repeat {r['repeat']})" if r.get('repeat')
            else r['seed'], f"{fmt(r[metric])} at step {r['step']}" if r.get(metric) is not None else 'none']
           for r in rows if r['status'] == 'timeout']
    return md_table('Unfinished runs (stopped by the sweep\'s time limit; rerun the sweep to finish them)',
                    ['task', 'x', 'mixer', 'lr', 'seed', 'last evaluation'], out)


def report(rows):
    """The table (<results_dir>/<name>.md) and the figure (.png) from the results file's rows."""
    summary, what = summarize(rows), WHAT[metric]
    lines = [f'# Sweep `{name}`', '',
             f'{len(rows)} runs from `{results_path}`. Each cell: {what[0]} at the mixer\'s best learning '
             f'rate ({what[1]} mean over seeds), mean ± sample std over seeds [min, max], and that lr. '
             f'Failed or diverged runs {what[2]} and are marked with !. Runs stopped by the sweep\'s time limit '
             f'are unfinished: left out of the cells, marked with +N unfinished, and listed below the tables.', '',
             provenance(rows), '']
    for task, spec in tasks.items():
        lines += task_table(task, spec, rows, summary)
    lines += (split_table(summary) + paired_table(summary) + repeats_table(summary) + lr_table(summary)
              + runs_table(summary) + unfinished_table(rows))
    md_path = os.path.join(results_dir, f'{name}.md')
    with open(md_path, 'w') as f:
        f.write('\n'.join(lines).rstrip('\n') + '\n')
    print(f'table: {md_path}')
    try:  # optional
        import matplotlib
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError:
        print('figure: skipped (matplotlib is not installed: pip install matplotlib)')
        return
    fig = figure_curves(plt, summary) if metric == 'val_loss' else figure_accuracy(plt, summary)
    png = os.path.join(results_dir, f'{name}.png')
    fig.savefig(png, dpi=120)
    print(f'figure: {png}')


def figure_accuracy(plt, summary):
    """Accuracy against difficulty, one panel per task: per mixer (best lr) the mean over seeds, each run as a
    dot and the range from the lowest to the highest as a bar; the task's floor dashed."""
    order = list(mixers)
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
        ax.set(xlim=(-0.5, len(xs) - 0.5), xlabel=spec['x'], title=task, ylim=(-2, 102))
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
    return fig


def figure_curves(plt, summary):
    """Per (task, level) two panels: validation loss against step (per mixer at its best lr the mean over seeds of
    the runs' evaluations, a band from the lowest to the highest run, each run a thin line), and beside it each
    run's final loss as a dot per mixer with the mean as a bar: the differences the table reports, at a scale
    where they show."""
    panels = [(task, x) for task, spec in tasks.items() for x, _ in spec['levels']]
    fig, axes = plt.subplots(1, 2 * len(panels), figsize=(10 * len(panels), 4.2), squeeze=False,
                             gridspec_kw={'width_ratios': [1.4, 1] * len(panels)})
    for n, (task, x) in enumerate(panels):
        ax, strip = axes[0][2 * n], axes[0][2 * n + 1]
        lows, highs, names = [], [], []
        for i, m in enumerate(mixers):
            s = summary.get((task, x, m))
            curves = [r['curve'] for r in (s['runs'] if s else []) if r.get('curve')]
            steps = sorted(set.intersection(*[{c[0] for c in cv} for cv in curves])) if curves else []
            steps = [t for t in steps if t > 0]  # step 0 (the untrained model) would squash the scale
            if not steps:
                continue
            per = [[dict((c[0], c[1]) for c in cv)[t] for cv in curves] for t in steps]
            color = f'C{i % 10}'
            ax.plot(steps, [sum(v) / len(v) for v in per], color=color,
                    label=f"{m} ({len(curves)} run{'s' if len(curves) > 1 else ''})")
            ax.fill_between(steps, [min(v) for v in per], [max(v) for v in per], color=color, alpha=0.2)
            for cv in curves:
                ax.plot([c[0] for c in cv if c[0] > 0], [c[1] for c in cv if c[0] > 0], color=color, lw=0.5, alpha=0.5)
            lows.append(min(min(v) for v in per[len(per) // 3:]))
            highs.append(max(max(v) for v in per[len(per) // 3:]))
            finals = [value(r) for r in s['runs'] if value(r) is not None]
            k = len(names)
            strip.scatter([k] * len(finals), finals, color=color, s=14, alpha=0.7)
            strip.hlines(s['mean'], k - 0.3, k + 0.3, color=color)
            names.append(m)
        if lows:  # zoom on the last two thirds, where the mixers separate
            pad = 0.1 * (max(highs) - min(lows) or 1.0)
            ax.set_ylim(min(lows) - pad, max(highs) + pad)
            ax.legend(fontsize=8)
        ax.set(title=f'{task} ({x})', xlabel='step', ylabel='validation loss (nats/token)')
        ax.grid(alpha=0.3)
        strip.set_xticks(range(len(names)), names, rotation=35, ha='right', fontsize=8)
        strip.set_title(f'{task} ({x}): final loss, each run (bar: mean over seeds)', fontsize=9)
        strip.grid(alpha=0.3, axis='y')
    fig.tight_layout()
    return fig


if __name__ == '__main__':
    if not report_only:
        sweep()
    rows = read_results(results_path)
    if not rows and report_only:
        sys.exit(f'sweep: no results in {results_path}')
    if not rows:  # nothing ran yet (start_until passed first): nothing to report, and nothing went wrong
        sys.exit(0)
    report(rows)
