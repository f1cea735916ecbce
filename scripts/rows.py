"""
Measurements as JSON rows, one line each, carrying the command, date, commit and device that made them (bench.py,
eval.py, sweep.py); scripts/gpu_train_check.sh appends a row per train.py run from the run's log:

    python scripts/rows.py RESULTS_FILE COMMAND RUNS_DIR NAME...
"""
import datetime
import fcntl
import importlib.metadata
import json
import os
import re
import shlex
import subprocess
import sys
from collections import Counter

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN = datetime.datetime.now().isoformat(timespec='seconds')  # one id for every row of this process


def commit():
    """git's short hash of the code ('-dirty' with uncommitted changes to tracked files); $NANOEDA_COMMIT where set
    (a copy of the tree without its history)."""
    if os.environ.get('NANOEDA_COMMIT'):
        return os.environ['NANOEDA_COMMIT']
    git = lambda *a: subprocess.run(['git', *a], cwd=HERE, capture_output=True, text=True)  # noqa: E731
    try:
        head, dirty = git('rev-parse', '--short', 'HEAD'), git('status', '--porcelain', '--untracked-files=no')
    except OSError:
        return None
    return head.stdout.strip() + ('-dirty' if dirty.stdout.strip() else '') if head.returncode == 0 else None


def versions():
    """The torch and triton versions installed (read from package metadata: no import, for the sweep)."""
    def version(name):
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            return None
    return dict(torch=version('torch'), triton=version('triton'))


def provenance(command=None, device=None):
    """The fields every row starts with: run (this process), command, date, commit, device, torch, triton. device:
    where the work ran (a torch device or its name; default: the current GPU, else the CPU)."""
    import torch
    device = torch.device(device or ('cuda' if torch.cuda.is_available() else 'cpu'))
    return dict(run=RUN, command=command or 'python ' + shlex.join(sys.argv), date=RUN[:10], commit=commit(),
                device=torch.cuda.get_device_name(device) if device.type == 'cuda' else 'cpu', **versions())


def append(path, row):
    """One whole line under an exclusive lock (writers at once lose no row: evaluations side by side, a sweep's
    runs); a last line cut without its newline (a crash mid-write) is ended first, not glued onto this row."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, 'ab+') as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        if f.seek(0, os.SEEK_END):
            f.seek(-1, os.SEEK_END)
            if f.read(1) != b'\n':
                f.write(b'\n')
        f.write((json.dumps(row) + '\n').encode())


def read(path):
    """{line number: its row} of a JSONL file, {} where there is none (yet); the row is None where its line is not
    JSON (one cut mid-write, say), for the reader to name."""
    rows = {}
    if os.path.exists(path):
        with open(path, errors='replace') as f:
            for i, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    rows[i] = json.loads(line)
                except ValueError:
                    rows[i] = None
    return rows


def made(rows, what='', note=False, commands=False):
    """When and where rows were made, as the reports print it: each date, commit, device and torch and triton
    versions they record, with how many rows each made where `what` names them ('runs'); note: the first row's;
    commands: the commands that made them first, in a shell block."""
    runs = Counter((r.get('date', '')[:10] or 'date not recorded', r.get('commit') or 'not recorded',
                    r.get('device') or 'a device not recorded', r.get('torch'), r.get('triton')) for r in rows)
    where = '; '.join(f'{d} at commit {c} on {dev}' + (f', torch {t}, triton {tr}' if t else '')
                      + (f' ({n} {what[:-1] if n == 1 else what})' if what else '')
                      for (d, c, dev, t, tr), n in runs.items())
    line = (f'{what.capitalize()} made ' if what else 'Made ') + where + '.'
    if note and rows[0].get('note'):
        line += ' ' + rows[0]['note'] + ('' if rows[0]['note'].endswith('.') else '.')
    return '\n'.join(['```sh', *dict.fromkeys(r['command'] for r in rows), '```', '', line]) if commands else line


def table(header, rows):
    """A markdown table of rows (lists of cells); header None: the rows alone, below a header a template holds."""
    head = [] if header is None else ['| ' + ' | '.join(header) + ' |', '|' + '---|' * len(header)]
    return '\n'.join(head + ['| ' + ' | '.join(map(str, row)) + ' |' for row in rows])


def figure(path, draw, panels=1, size=(6, 4), dpi=120, **subplots):
    """draw(*axes) on panels side by side, each size inches, saved as path; without matplotlib (optional), says so."""
    try:
        import matplotlib.pyplot as plt  # optional
    except ImportError:
        print(f'figure: {path} skipped (matplotlib is not installed: pip install matplotlib)')
        return
    plt.switch_backend('Agg')
    fig, axes = plt.subplots(1, panels, figsize=(size[0] * panels, size[1]), squeeze=False, **subplots)
    draw(*axes[0])
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    print(f'figure: {path}')


def lines(ax, x, ys, legend=8, **axis):
    """ys ([(y, plot's keywords)]) as lines over x on a log axis, then ax.set(**axis) and a legend of the labelled."""
    for y, style in ys:
        ax.plot(x, y, **style)
    ax.set(xscale='log', **axis)
    ax.legend(fontsize=legend)


def train_row(runs, name):
    """A train.py run's row from its log ($RUNS/NAME/log.jsonl) and command ($RUNS/NAME.cmd): tok/s and MFU the
    mean over steps >= 3, the peak memory, the last loss; None where the run logged no step."""
    path = os.path.join(runs, name, 'log.jsonl')
    steps = [r for r in map(json.loads, open(path)) if 'loss' in r] if os.path.exists(path) else []
    if not steps:
        return None
    timed = [r for r in steps if r['step'] >= 3] or steps[-1:]
    mfu = [r['mfu'] for r in timed if r['mfu'] is not None]
    cmd = open(os.path.join(runs, name + '.cmd')).read().strip()
    arg = lambda k: (re.findall(rf'--{k}=(\S+)', cmd) or [None])[-1]  # noqa: E731
    return dict(name=name, train_command=cmd, config=next(iter(re.findall(r'config/\S+\.py', cmd)), None),
                mixer=arg('mixer'), block_size=int(arg('block_size')) if arg('block_size') else None,
                tag=os.environ.get('TAG', ''), steps=len(steps),
                tok_s=round(sum(r['tok_per_s'] for r in timed) / len(timed)),
                mfu_pct=round(100 * sum(mfu) / len(mfu), 1) if mfu else None,
                peak_gib=round(max(r['peak_mem_gib'] or 0 for r in steps), 1), last_loss=round(steps[-1]['loss'], 4))


if __name__ == '__main__':
    path, command, runs, *names = sys.argv[1:]
    for name in names:
        if row := train_row(runs, name):
            append(path, dict(bench='train', **provenance(command), **row))
            print(f"row: {name} {row['tok_s']:,} tok/s -> {path}")
