"""
Evaluate a checkpoint past the length it was trained at: synthetic recall at 1x-16x its block, the loss on
held-out text by position out to 16x (the state carried, and reset at every block), a variable's value in
held-out Python source (bound early, or rebound midway), and the standard benchmarks of lm-evaluation-harness.

Every sequence comes from eval_seed alone, so runs of any seed are scored on the same ones. The functions
(length_eval, text_eval, needles_eval, harness_eval, harness_model) take a loaded model. How and why: notes/eval.md.
"""
import functools
import os
import re
import sys
import time
from contextlib import nullcontext

import numpy as np
import torch
import torch.nn.functional as F
from torch.nn.utils.rnn import pad_sequence

from configurator import configure
from data.prepare import TokenFileError, dataset_dir, load_tokenizer, load_tokens
from data.synthetic import accuracy_counts, at_length, evict, reassign
from decode import generate
from model import CheckpointError, model_from_checkpoint

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'scripts'))
from rows import append, provenance  # noqa: E402  (scripts/rows.py: a row appended under a lock; its provenance)

# Settings (a config file or --key=value, as train.py) ---------------------------------------------------------
out_dir = 'out'                 # the checkpoint: out_dir/ckpt.pt
what = 'length'                 # length | text | needles | harness, or several: 'text,needles'
results: str | None = None      # a JSONL file each evaluation appends its row to (None: print only)
tags = {}                       # fields added to every row (sweep.py: the run's task, x, mixer, lr, seed, repeat)
eval_seed = 0                   # fixes every evaluation sequence, whatever seed trained the checkpoint
multiples = [1, 2, 4, 8, 16]    # lengths in training blocks: length and needles at each, text out to the largest
batch_tokens = 2**18            # tokens per forward: sequences of one length batched up to this (16x fits a GPU)
length_seqs = 512               # synthetic sequences per length (in units of 16, each from its own generator)
data_dir: str | None = None     # held-out text (val.bin) for text and needles; None: data/<the checkpoint's dataset>
text_windows = 16               # held-out windows of max(multiples) blocks
needle_depths = [0.1, 0.5, 0.9]  # where the binding sits in the haystack (a fraction of it)
needle_trials = 20              # haystacks per variant, length and depth
needle_choices = 4              # candidate values scored per haystack: chance is 1 / needle_choices
harness_tasks = 'hellaswag,arc_easy,piqa'  # lm_eval task names, comma-separated (their data needs the network)
harness_include: str | None = None  # a folder of lm_eval task YAMLs: only those are indexed (offline, fast)
harness_limit: int | None = None    # documents per task (None: all)
device = 'auto'                 # 'auto' (cuda if available), 'cpu', 'cuda', 'cuda:N'
dtype = 'auto'                  # 'auto' (bfloat16 autocast on GPUs that have it, else float32), 'bfloat16', 'float32'

PARTS = ('length', 'text', 'needles', 'harness')
UNIT = 16  # synthetic sequences drawn from one generator: the sequences do not depend on the batching


def fail(msg):
    sys.exit(f'eval: {msg}')


def hidden(model, idx):
    """GPT.forward without the head: the final normed states [B, T, d], for logits formed only where scored."""
    x = model.wte(idx)
    for block in model.blocks:
        x, _ = block(x)
    return model.norm_f(x)


def groups(n, T, budget):
    """range(n) in slices of at most budget // T sequences (at least one) of T tokens."""
    b = max(1, budget // T)
    return [slice(i, min(i + b, n)) for i in range(0, n, b)]


# Length: the synthetic task at 1x..16x the training block -----------------------------------------------------
@torch.no_grad()
def length_eval(model, ckpt, multiples, n_seqs, seed, budget):
    """Accuracy of a reassign or evict checkpoint at each multiple of its training block (data.synthetic.at_length)
    -> [{multiple, seq_len, num_updates, num_keys, acc, acc_value, acc_none, answers, none_answers}]."""
    c, block = ckpt['config'], ckpt['model_args']['block_size']
    if c['dataset'] not in ('reassign', 'evict'):
        raise ValueError(f"the length benchmark takes a reassign or evict checkpoint, not one of {c['dataset']!r}")
    dev, units, out = model.wte.weight.device, -(-n_seqs // UNIT), []
    for m in multiples:
        T = m * block
        kw = at_length(c['dataset'], T, block, c['num_kv_pairs'], c['num_updates'])
        args = (UNIT, T, ckpt['model_args']['vocab_size'], c['num_kv_pairs'])
        counts = np.zeros(4, dtype=np.int64)  # correct, answers, correct NONE answers, NONE answers
        for g in groups(units, T * UNIT, budget):
            xs, ys = zip(*[reassign(np.random.default_rng([seed, T, u]), *args, move_frac=c['move_frac'], **kw)
                           if c['dataset'] == 'reassign' else evict(np.random.default_rng([seed, T, u]), *args, **kw)
                           for u in range(g.start, g.stop)])
            x, y = (torch.from_numpy(np.concatenate(a)).to(dev) for a in (xs, ys))
            mask = y != -1
            counts += [int(v) for v in accuracy_counts(model.lm_head(hidden(model, x)[mask]), y[mask])]
        hit, n, hit_none, n_none = counts.tolist()
        out.append(dict(multiple=m, seq_len=T, **kw, acc=hit / n, acc_value=(hit - hit_none) / max(1, n - n_none),
                        acc_none=hit_none / n_none if n_none else None, answers=n, none_answers=n_none))
    return out


# Text: the loss by position out to 16x the training block -----------------------------------------------------
@torch.no_grad()
def token_losses(model, x, y, rows=4096):
    """Per-token cross-entropy [B, T] of targets y after inputs x, the head `rows` positions at a time."""
    h = hidden(model, x).flatten(0, 1)
    t = y.flatten()
    return torch.cat([F.cross_entropy(model.lm_head(h[i:i + rows]).float(), t[i:i + rows], reduction='none')
                      for i in range(0, len(t), rows)]).view(y.shape)


def text_eval(model, block, tokens, multiples, n_windows, seed, budget):
    """Mean loss in position buckets of n_windows held-out windows of max(multiples) blocks (starts from seed):
    'carried', the window fed whole (the state carried across blocks), and 'reset', every block of it fed alone
    (as in training). val_loss: the reset pass's mean, the loss at the training length on these windows."""
    W = max(multiples) * block
    if len(tokens) < W + 1:
        raise ValueError(f'the held-out split has {len(tokens):,} tokens, fewer than a window of '
                         f'{max(multiples)} x {block} + 1 = {W + 1:,}')
    starts = np.random.default_rng([seed, W]).integers(0, len(tokens) - W, size=n_windows)
    xy = torch.from_numpy(np.stack([tokens[s:s + W + 1] for s in starts]).astype(np.int64)).to(model.wte.weight.device)
    x, y = xy[:, :-1], xy[:, 1:]
    carried = torch.cat([token_losses(model, x[g], y[g]) for g in groups(n_windows, W, budget)])
    xb, yb = x.reshape(-1, block), y.reshape(-1, block)
    reset = torch.cat([token_losses(model, xb[g], yb[g]) for g in groups(len(xb), block, budget)]).view(x.shape)
    edges = sorted({0, block // 8, block // 4, block // 2} | {block * m for m in multiples})
    return dict(window=W, windows=n_windows, edges=edges, val_loss=reset.mean().item(),
                **{k: [v[:, a:b].mean().item() for a, b in zip(edges, edges[1:])]
                   for k, v in (('carried', carried), ('reset', reset))})


# Needles: `NAME = 'value'` in held-out Python source, read back at the end ------------------------------------
NAMES = (('MAX', 'BASE', 'LOCAL', 'REMOTE', 'CACHE', 'RETRY', 'TOKEN', 'QUEUE', 'PROXY', 'SERVER', 'CLIENT', 'BATCH'),
         ('KEY', 'MODE', 'PATH', 'TAG', 'LABEL', 'PREFIX', 'SUFFIX', 'CODE', 'STATE', 'LEVEL', 'SECRET', 'HOST'))
CHARS = list('abcdefghijklmnopqrstuvwxyz0123456789')


def needle_case(tokens, rng, length, depth, rebound, choices, encode, decode):
    """(context ids, candidate value ids: the answer first, then the stale value): `length` tokens of held-out
    text with the line `NAME = 'answer'` inserted at `depth` (rebound: `NAME = 'stale'` there and the answer's
    midway to the end), ending in `assert NAME == '`."""
    values = []
    while len(values) < choices:
        v = ''.join(rng.choice(CHARS, 5))
        values += [v] if v not in values else []
    start = int(rng.integers(0, len(tokens) - length))
    text = decode([int(t) for t in tokens[start:start + length]])
    name = next((n for n in ('_'.join(rng.choice(w) for w in NAMES) for _ in range(50)) if n not in text), None)
    if name is None:
        raise ValueError('no needle name absent from the held-out text was found')
    lines = [(depth, values[1 if rebound else 0])] + ([((1 + depth) / 2, values[0])] if rebound else [])
    query = encode(f"\nassert {name} == '")
    n_hay = length - len(query) - sum(len(encode(f"{name} = '{v}'\n")) for _, v in lines)
    hay = [int(t) for t in tokens[start:start + n_hay]]
    for d, value in reversed(lines):  # the later line first: the earlier one's position stays put
        p = int(d * len(hay))
        while 0 < p < len(hay) and not decode(hay[p - 1:p]).endswith('\n'):
            p += 1  # at the start of a line, indented as the line it precedes
        indent = re.match(r'[ \t]*', decode(hay[p:p + 64])).group()
        hay[p:p] = encode(f"{indent}{name} = '{value}'\n")
    return (hay + query)[-length:], [encode(v) for v in values]  # (less the indents' tokens at the start)


@torch.no_grad()
def continuation_scores(model, pairs, budget):
    """For each (context ids, continuation ids): (log p(continuation | context), whether greedy decoding from the
    context gives the continuation), from one forward of both (right-padded batches of up to budget tokens)."""
    dev, out = model.wte.weight.device, [None] * len(pairs)
    order = sorted(range(len(pairs)), key=lambda i: -(len(pairs[i][0]) + len(pairs[i][1])))
    i = 0
    while i < len(order):
        L = len(pairs[order[i]][0]) + len(pairs[order[i]][1]) - 1
        batch = order[i:i + max(1, budget // L)]
        seqs = [torch.tensor(pairs[j][0] + pairs[j][1][:-1], dtype=torch.long) for j in batch]
        h = hidden(model, pad_sequence(seqs, batch_first=True).to(dev))  # right-padded to the first's L tokens
        for r, j in enumerate(batch):
            ctx, cont = pairs[j]
            logp = F.log_softmax(model.lm_head(h[r, len(ctx) - 1:len(ctx) + len(cont) - 1]).float(), -1)
            target = torch.tensor(cont, device=dev)
            out[j] = (logp.gather(1, target[:, None]).sum().item(), bool((logp.argmax(-1) == target).all()))
        i += len(batch)
    return out


def needles_eval(model, ckpt, tokens, multiples, depths, trials, choices, seed, budget):
    """The needle cells, variant x length x depth: acc (the answer's likelihood is the highest of the choices),
    stale (the stale value's is), exact (greedy decoding gives the answer), logprob (of the answer, per token)."""
    enc = load_tokenizer(ckpt.get('encoding') or 'bytes', 'eval')
    block, cells = ckpt['model_args']['block_size'], []
    if len(tokens) <= max(multiples) * block:
        raise ValueError(f'the held-out split has {len(tokens):,} tokens, too few for haystacks of '
                         f'{max(multiples) * block:,}')
    for variant, m, depth in ((v, m, d) for v in ('bound', 'rebound') for m in multiples for d in depths):
        cases = [needle_case(tokens, np.random.default_rng([seed, m * block, round(1000 * depth), t]), m * block,
                             depth, variant == 'rebound', choices, enc.encode_ordinary, enc.decode)
                 for t in range(trials)]
        scores = continuation_scores(model, [(ctx, c) for ctx, cands in cases for c in cands], budget)
        per = [scores[t * choices:(t + 1) * choices] for t in range(trials)]  # a trial's candidates, answer first
        picks = [max(range(choices), key=lambda k: s[k][0]) for s in per]
        cells.append(dict(variant=variant, multiple=m, context=m * block, depth=depth,
                          acc=float(np.mean([p == 0 for p in picks])), stale=float(np.mean([p == 1 for p in picks])),
                          exact=float(np.mean([s[0][1] for s in per])),
                          logprob=float(np.mean([s[0][0] / len(c[1][0]) for s, c in zip(per, cases)]))))
    return dict(choices=choices, chance=1 / choices, trials=trials, cells=cells)


# lm-evaluation-harness: our checkpoints as an lm_eval model named 'nanoeda' -----------------------------------
@functools.cache
def harness_model():
    """The lm_eval.api.model.LM subclass over our checkpoints, registered as 'nanoeda' on the first call:
    lm_eval.simple_evaluate(model='nanoeda', model_args='out_dir=out/x') after eval.harness_model()."""
    from lm_eval.api.model import LM  # optional: pip install lm_eval
    from lm_eval.api.registry import register_model
    from lm_eval.utils import get_rolling_token_windows, make_disjoint_window

    @register_model('nanoeda')
    class NanoEDA(LM):
        def __init__(self, out_dir='out', device='auto', model=None, ckpt=None, budget=2**16, **_):
            super().__init__()
            self.model, self.ckpt = (model, ckpt) if model is not None else load(out_dir, device)
            self.block, self.budget = self.model.config.block_size, budget
            enc = load_tokenizer(self.ckpt.get('encoding') or 'bytes', 'eval')
            self.encode, self.decode, self.eot = enc.encode_ordinary, enc.decode, enc.eot_token

        def loglikelihood(self, requests):
            pairs = []
            for r in requests:
                ctx, cont = (self.encode(s) for s in r.args)
                whole = ((ctx or [self.eot]) + cont)[-(self.block + 1):]  # the last block_size + 1 tokens
                pairs.append((whole[:len(whole) - len(cont)], cont))
            return continuation_scores(self.model, pairs, self.budget)

        def loglikelihood_rolling(self, requests):
            return [sum(lp for lp, _ in continuation_scores(self.model, [make_disjoint_window(w) for w in
                    get_rolling_token_windows(self.encode(r.args[0]), self.eot, self.block, 1)], self.budget))
                    for r in requests]

        def generate_until(self, requests):
            out = []
            for r in requests:
                ctx, kw = r.args
                until, n = kw.get('until', []), min(kw.get('max_gen_toks', 256), self.block - 1)
                ids = (self.encode(ctx) or [self.eot])[-(self.block - n):]
                idx = torch.tensor([ids], device=self.model.wte.weight.device)
                text = self.decode(generate(self.model, idx, n, temperature=0, cuda_graph=False)[0, len(ids):].tolist())
                for u in [until] if isinstance(until, str) else until:
                    text = text.split(u)[0]
                out.append(text)
            return out

    return NanoEDA


def harness_eval(model, ckpt, tasks, include=None, limit=None):
    """lm_eval's results {task: {metric: value}} for the comma-separated tasks; include: a folder of task YAMLs."""
    import lm_eval  # optional: pip install lm_eval
    from lm_eval.tasks import TaskManager
    lm = harness_model()(model=model, ckpt=ckpt)
    res = lm_eval.simple_evaluate(model=lm, tasks=tasks.split(','), limit=limit, bootstrap_iters=0, log_samples=False,
                                  task_manager=TaskManager(include_path=include, include_defaults=include is None))
    return {t: {k: v for k, v in m.items() if isinstance(v, (int, float))} for t, m in res['results'].items()}


# The command line: load, evaluate, print, append the rows -----------------------------------------------------
def load(out_dir, device):
    device = ('cuda' if torch.cuda.is_available() else 'cpu') if device == 'auto' else device
    try:
        return model_from_checkpoint(os.path.join(out_dir, 'ckpt.pt'), device=device)
    except CheckpointError as err:
        fail(err)


def report(part, fig):
    if part == 'length':
        for r in fig:
            none = '' if r['acc_none'] is None else f", NONE {100 * r['acc_none']:.1f}%"
            print(f"  {r['multiple']:>3}x {r['seq_len']:>6} tokens, {r['num_updates']:>5} updates, {r['num_keys']} "
                  f"keys: acc {100 * r['acc']:.2f}% (values {100 * r['acc_value']:.1f}%{none})")
    elif part == 'text':
        print(f"  val loss {fig['val_loss']:.4f} (each block alone; {fig['windows']} windows of {fig['window']})")
        for a, b, c, r in zip(fig['edges'], fig['edges'][1:], fig['carried'], fig['reset']):
            print(f'  positions [{a:>6}, {b:>6}): carried {c:.4f}  reset {r:.4f}  carried - reset {c - r:+.4f}')
    elif part == 'needles':
        print(f"  chance: {100 * fig['chance']:.0f}% (the highest likelihood of {fig['choices']} values); "
              f"exact match of a random 5-character value ~0")
        for c in fig['cells']:
            print(f"  {c['variant']:<8} {c['context']:>6} tokens, depth {c['depth']:.2f}: acc {100 * c['acc']:5.1f}%  "
                  f"stale {100 * c['stale']:5.1f}%  exact {100 * c['exact']:5.1f}%  logprob/token {c['logprob']:.3f}")
    else:
        for t, m in fig.items():
            print(f'  {t}: ' + ', '.join(f'{k} {v:.4f}' for k, v in m.items()))


def main():
    parts = what.split(',')
    if set(parts) - set(PARTS) or not parts:
        fail(f"what must name some of {', '.join(PARTS)} (comma-separated), got {what!r}")
    if not multiples or any(type(m) is not int or m < 1 for m in multiples) or min(
            length_seqs, text_windows, needle_trials, batch_tokens) < 1 or needle_choices < 2:
        fail('multiples must be positive ints, the counts and batch_tokens >= 1 and needle_choices >= 2')
    if not all(0 <= d < 1 for d in needle_depths):
        fail(f'needle_depths must be in [0, 1), got {needle_depths}')
    if dtype not in ('auto', 'bfloat16', 'float32'):
        fail(f"dtype must be 'auto', 'bfloat16' or 'float32', got {dtype!r}")
    model, ckpt = load(out_dir, device)
    cuda, cfg = model.wte.weight.is_cuda, ckpt.get('config', {})
    amp = dtype == 'bfloat16' or (dtype == 'auto' and cuda and torch.cuda.is_bf16_supported())
    row = dict(provenance(' '.join(['python', 'eval.py', *sys.argv[1:]]), model.wte.weight.device),
               checkpoint=os.path.join(out_dir, 'ckpt.pt'), iter=ckpt.get('iter_num'), mixer=model.config.mixer,
               la_gate=model.config.gate, seed=cfg.get('seed'), eval_seed=eval_seed, dtype='bfloat16' if amp else 'float32')
    tokens = None
    if {'text', 'needles'} & set(parts):
        if str(ckpt.get('encoding')).startswith('synthetic'):
            fail(f"text and needles read held-out text; {out_dir} holds a model of a synthetic task "
                 f"({ckpt['encoding']})")
        name = data_dir or cfg.get('dataset') or ckpt['data_position']['dataset']
        try:
            tokens, _ = load_tokens(os.path.join(dataset_dir(name), 'val.bin'))
        except TokenFileError as err:
            fail(err)
    run = {'length': lambda: length_eval(model, ckpt, multiples, length_seqs, eval_seed, batch_tokens),
           'text': lambda: text_eval(model, model.config.block_size, tokens, multiples, text_windows, eval_seed,
                                     batch_tokens),
           'needles': lambda: needles_eval(model, ckpt, tokens, multiples, needle_depths, needle_trials,
                                           needle_choices, eval_seed, batch_tokens),
           'harness': lambda: harness_eval(model, ckpt, harness_tasks, harness_include, harness_limit)}
    for part in parts:
        t0 = time.time()
        print(f"{part}: {row['checkpoint']} ({row['mixer']}, gate {row['la_gate']}, seed {row['seed']}), "
              f"eval_seed {eval_seed}")
        try:
            with torch.autocast('cuda', torch.bfloat16) if amp else nullcontext():
                fig = run[part]()
        except (ValueError, KeyError) as err:
            fail(f'{part}: {err}')
        report(part, fig)
        if results:
            append(results, {**row, **tags, 'what': part, 'seconds': round(time.time() - t0, 1), part: fig})


if __name__ == '__main__':
    configure(globals())
    main()
