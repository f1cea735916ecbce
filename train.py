"""
Train an EDA hybrid (or any mixer of model.py). nanoGPT's shape: settings at the top, overridden by config files and
--key=value (configurator.py), then one straight script. README.md shows the commands; notes/train.md the design.
"""
import dataclasses
import errno
import importlib.util
import json
import math
import os
import random
import shutil
import signal
import sys
import tempfile
import time
from contextlib import nullcontext, suppress

import numpy as np
import torch
from tqdm import tqdm

from torch.distributed.checkpoint.state_dict import (StateDictOptions, get_model_state_dict, get_optimizer_state_dict,
                                                     set_model_state_dict, set_optimizer_state_dict)

from configurator import configure, fmt_time, hold_lock, settings_of
from data.prepare import TokenFileError, dataset_dir, load_tokens, prepare_stdlib, read_meta
from data.synthetic import TASKS as SYNTHETIC_TASKS, accuracy_counts, evict, mqar, reassign
from model import GPT, CheckpointError, GPTConfig, load_checkpoint

# Settings -----------------------------------------------------------------------------------------------------
# Every name below can be set from a config file or the command line; a None default's type is its annotation.
# I/O
out_dir = 'out'
eval_interval = 100           # evaluate (and maybe checkpoint) every this many steps, and at the end
log_interval = 10             # one log line (and one JSONL record) every this many steps
eval_iters = 10               # batches per split per evaluation, shared out across ranks
eval_only = False             # evaluate the checkpoint once (needs init_from='resume') and exit, writing nothing
always_save_checkpoint = True  # else only when val loss improves
save_ckpt = True              # False: never write a checkpoint (benchmark runs)
init_from = 'scratch'         # 'scratch' or 'resume' (from resume_dir/ckpt.pt)
overwrite = False             # a run stops rather than replace another run's out_dir/ckpt.pt; True: replace it (and log)
resume_dir: str | None = None  # None: out_dir. Midtraining reads the pretraining run here, writes to out_dir
wandb_log = False             # optional; needs `pip install wandb`
wandb_project = 'nanoeda'
wandb_run_name = 'run'
# data
dataset = 'stdlib'            # a name in data/ (stdlib, fineweb_edu, openwebtext, ...), a folder path, or mqar / reassign / evict
gradient_accumulation_steps = 1  # over ALL ranks: each rank does this / world_size micro-steps
batch_size = 16               # micro-batch per rank; global batch = batch_size * gradient_accumulation_steps
num_kv_pairs = 16             # synthetic tasks: bindings in the context
num_updates = 16              # reassign: reassignments and moves after the context; evict: new owners
move_frac = 0.5               # reassign: the fraction of updates that move a binding (1.0: capacity pressure)
# optimizer: AdamW, decay on matrices only (model.configure_optimizers)
learning_rate = 3e-3          # max learning rate
max_iters = 400               # total optimizer steps
weight_decay = 0.1
beta1 = 0.9
beta2 = 0.95
grad_clip = 1.0               # clip the global grad norm at this value; 0 disables clipping
# learning rate schedule: linear warmup, then cosine from learning_rate down to min_lr
decay_lr = True
warmup_iters = 50
lr_decay_iters: int | None = None  # None: max_iters
min_lr = 3e-5                 # the paper decays to 3e-5
lr_schedule_start = 0         # the step at which warmup starts: a midtraining stage restarts its schedule
# system
device = 'auto'               # 'auto' (cuda if available, else cpu), 'cpu', 'cuda', 'cuda:1', ...
dtype = 'auto'                # 'auto' (bfloat16 autocast on GPUs that have it, else float32), 'float32', 'bfloat16', 'float16'
compile: bool | None = None   # torch.compile each block and the loss head's softmax; None: on one CUDA GPU only
grad_checkpoint = False       # recompute each block in backward (less activation memory, ~a forward more time)
parallel = 'ddp'              # under torchrun: 'ddp' (replicas) or 'fsdp' (FSDP2: sharded per block)
fsdp_meta_init = False        # fsdp: build on the meta device, init each shard on its GPU (same init, less host memory)
seed = 1337                   # the init (model.param_generator) and the training batches
eval_seed = 0                 # the validation batches: every run, whatever its seed, scores the same sample
dry_run = False               # build the model on the meta device, print sizes and memory, exit
progress = True               # tqdm progress bar (rank 0, on a terminal)
# debugging (tests)
debug_nan_at = -1             # make the loss NaN at this step (test of the non-finite stop)
debug_crash_on_save = 0       # die halfway through writing the Nth checkpoint (test of atomic saves)

# model: every model.GPTConfig field (model.py documents each), at its default: the toy model (notes/train.md)
globals().update(dataclasses.asdict(GPTConfig()))
vocab_size: int | None = None  # None: the dataset's vocab (256 for bytes); set it larger to pad (e.g. 50304)
configure(globals())

settings = settings_of(globals())
model_fields = [f.name for f in dataclasses.fields(GPTConfig)]
is_synthetic = dataset in SYNTHETIC_TASKS

# peak dense bf16 tensor FLOP/s per GPU (datasheets, without sparsity), for MFU; matched in order
PEAK_FLOPS = [('H100 PCIe', 756e12), ('H100 NVL', 835e12), ('H100', 989e12), ('H200', 989e12),
              ('GH200', 989e12), ('H800', 989e12), ('B200', 2250e12), ('A100', 312e12), ('A800', 312e12),
              ('L40S', 362e12), ('L4', 121e12), ('A10', 125e12), ('RTX 4090', 165e12), ('RTX 3090', 71e12)]


def model_config():
    try:
        cfg = GPTConfig(**{k: settings[k] for k in model_fields})
    except ValueError as err:  # GPTConfig names the bad field: say it without a traceback
        sys.exit(f'train: {err}')
    if cfg.mixer != 'transformer' and cfg.attn_every > cfg.n_layer and os.environ.get('RANK', '0') == '0':
        # legitimate (config/mqar.py measures pure linear attention this way), but easy to get by accident
        print(f'note: attn_every={cfg.attn_every} > n_layer={cfg.n_layer}: no full-attention layer, '
              f'every layer is {cfg.mixer}')
    return cfg


def settings_problems():
    """The settings no run can use, one line each, before any work (a negative grad_clip would flip the gradients)."""
    g = globals()
    out = [f'{n} must be >= 1, got {g[n]}' for n in ('batch_size', 'gradient_accumulation_steps', 'eval_iters',
                                                      'eval_interval', 'log_interval') if g[n] < 1]
    out += [f'{n} must be a finite number >= 0, got {g[n]}' for n in ('learning_rate', 'min_lr', 'weight_decay',
                                                                       'grad_clip') if not 0 <= g[n] < math.inf]
    out += [f'{n} must be in [0, 1), got {g[n]}' for n in ('beta1', 'beta2') if not 0 <= g[n] < 1]
    out += [f'{n} must be >= 0, got {g[n]}' for n in ('max_iters', 'warmup_iters', 'lr_schedule_start',
                                                      'lr_decay_iters') if g[n] is not None and g[n] < 0]
    # torch.manual_seed's range (numpy's generators take any int >= 0)
    out += [f'{n} must be in [0, 2**64), got {g[n]}' for n in ('seed', 'eval_seed') if not 0 <= g[n] < 2**64]
    out += [f"{n} must be {', '.join(map(repr, choices[:-1]))} or {choices[-1]!r}, got {g[n]!r}" for n, choices in (
        ('init_from', ('scratch', 'resume')), ('parallel', ('ddp', 'fsdp')),
        ('dtype', ('auto', 'float32', 'bfloat16', 'float16'))) if g[n] not in choices]
    if not (device in ('auto', 'cpu') or device.startswith('cuda')):
        out.append(f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N', got {device!r}")
    elif device.startswith('cuda') and not dry_run and not torch.cuda.is_available():
        out.append(f'device={device!r} but this torch sees no CUDA GPU (torch {torch.__version__}); use --device=cpu')
    if (la_backend == 'triton' and not dry_run and not torch.cuda.is_available()
            and os.environ.get('TRITON_INTERPRET') != '1'):
        out.append("la_backend='triton' needs a CUDA GPU (or TRITON_INTERPRET=1, Triton's slow CPU interpreter)")
    if wandb_log and importlib.util.find_spec('wandb') is None:  # (wandb is optional)
        out.append('wandb_log=True needs wandb, which is not installed: pip install wandb, or leave wandb_log off')
    return out


if problems := settings_problems():
    sys.exit('\n'.join(f'train: {p}' for p in problems))


# Dry run: sizes and memory from the meta device, no data, no GPU ----------------------------------------------
if dry_run:
    if vocab_size is None:  # the dataset's vocab if its files are there, else GPTConfig's default
        settings['vocab_size'] = 8192 if is_synthetic else read_meta(dataset_dir(dataset)).get(
            'vocab_size', 256 if dataset == 'stdlib' else GPTConfig.vocab_size)
    cfg = model_config()
    with torch.device('meta'):
        model = GPT(cfg)
    s = model.param_summary()
    print('config:\n' + '\n'.join(f'  {k} = {v!r}' for k, v in settings.items()))
    print('parameters by component:\n' + '\n'.join(f'  {k:<18} {v:>16,}  {v / s["total"]:6.1%}'
                                                   for k, v in s['breakdown'].items() if v))
    print(f'  {"total":<18} {s["total"]:>16,}\n  {"active per token":<18} {s["active"]:>16,}')
    n = s['total'] / 2**30  # fp32 master weights (4 B), fp32 grads (4 B), AdamW exp_avg + exp_avg_sq (8 B)
    print(f'memory: weights {4 * n:.2f} GiB + grads {4 * n:.2f} GiB + AdamW state {8 * n:.2f} GiB '
          f'= {16 * n:.2f} GiB (fp32; FSDP over N GPUs: / N each; activations extra)')
    print(f'flops/token at block_size {cfg.block_size}, the rule as it runs on CUDA: '
          f'{model.flops_per_token(cfg.block_size, on_cuda=True):.4g}')
    print(f'params total={s["total"]} active={s["active"]}')
    sys.exit(0)

# Distributed setup (torchrun sets RANK, LOCAL_RANK, WORLD_SIZE) -----------------------------------------------
distributed = int(os.environ.get('RANK', -1)) != -1
if device == 'auto':
    device = 'cuda' if torch.cuda.is_available() else 'cpu'
if distributed:
    import torch.distributed as dist
    rank, local_rank, world_size = int(os.environ['RANK']), int(os.environ['LOCAL_RANK']), int(os.environ['WORLD_SIZE'])
    if device.startswith('cuda'):
        device = f'cuda:{local_rank}'
        torch.cuda.set_device(device)
    dist.init_process_group(backend='nccl' if device.startswith('cuda') else 'gloo')  # gloo: CPU test runs
else:
    rank, local_rank, world_size = 0, 0, 1
master = rank == 0
if gradient_accumulation_steps % world_size:
    sys.exit(f'train: gradient_accumulation_steps={gradient_accumulation_steps} must be a multiple of the '
             f'{world_size} ranks (it counts micro-steps over all ranks)')
accum_local = gradient_accumulation_steps // world_size  # the global batch does not depend on world_size
device_type = 'cuda' if device.startswith('cuda') else 'cpu'
compile = device_type == 'cuda' and not distributed if compile is None else compile
if dtype == 'auto':
    dtype = 'bfloat16' if device_type == 'cuda' and torch.cuda.is_bf16_supported() else 'float32'
ptdtype = {'float32': torch.float32, 'bfloat16': torch.bfloat16, 'float16': torch.float16}[dtype]
autocast = nullcontext() if ptdtype == torch.float32 else torch.autocast(device_type=device_type, dtype=ptdtype)
if device_type == 'cuda':
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
tokens_per_iter = gradient_accumulation_steps * batch_size * block_size
bar = None  # the progress bar, once the training loop starts


def say(*args):
    if master:
        tqdm.write(' '.join(map(str, args)))  # through tqdm: lines stay above the progress bar
        sys.stdout.flush()


def fail(msg, code=1):
    """Stop every rank with a message (rank 0 prints it, the progress bar closed first)."""
    if bar is not None:
        bar.close()
    if master:
        print(f'train: {msg}', file=sys.stderr, flush=True)
    sys.exit(code)


def all_reduce_sum(t):
    if distributed:
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t


def any_rank(flag):
    """Whether flag (a bool or a one-element tensor) holds on any rank: every rank calls it and gets one verdict."""
    return bool(all_reduce_sum(torch.as_tensor(flag, device=device).float()).item())  # a sum of 0s and 1s


STOP_SIGNALS = {signal.SIGINT: 'interrupted (Ctrl-C)', signal.SIGTERM: 'terminated (SIGTERM)'}  # (a scheduler's)
saving = interrupted = False  # a checkpoint is being written; the stop signal that came meanwhile


def on_stop_signal(signum, frame):
    """Ctrl-C or SIGTERM: one line saying where the run stopped and which checkpoint holds, exit 128 + signum; a
    save finishes first (the training loop stops after it)."""
    global interrupted
    if saving:
        interrupted = signum
    elif bar is None:  # during the setup
        held = os.path.join(out_dir, 'ckpt.pt')
        fail(f'{STOP_SIGNALS[signum]} before the first step; no checkpoint written'
             + (f', {held} is unchanged' if os.path.exists(held) else ''), code=128 + signum)
    else:
        fail(f'{STOP_SIGNALS[signum]} at step {iter_num}; {kept_checkpoint()}', code=128 + signum)


for _sig in STOP_SIGNALS:
    signal.signal(_sig, on_stop_signal)


def no_follow(path, flags):
    """open()'s opener: never through a symbolic link (one planted in a shared folder would redirect the write)."""
    return os.open(path, flags | os.O_NOFOLLOW, 0o644)


# Output -------------------------------------------------------------------------------------------------------
# out_dir is made and tried before any data or model work; a run replaces another's files only when asked to, and
# continues the one in out_dir only when it resumes from out_dir's own checkpoint. eval_only writes nothing.
ckpt_path, log_path = os.path.join(out_dir, 'ckpt.pt'), os.path.join(out_dir, 'log.jsonl')
src = os.path.join(resume_dir or out_dir, 'ckpt.pt')  # what init_from='resume' loads
if init_from == 'resume' and not os.path.exists(src):
    fail(f'init_from=resume: no checkpoint at {src}')
continuing = init_from == 'resume' and os.path.exists(ckpt_path) and os.path.samefile(src, ckpt_path)
if eval_only and init_from != 'resume':
    fail(f'eval_only=True evaluates a checkpoint: add --init_from=resume (it reads {src})')
if not eval_only:
    try:
        os.stat(out_dir)
    except OSError as err:  # (one that does not exist yet is made below)
        if os.path.islink(out_dir):
            fail(f'out_dir {out_dir!r} is a symbolic link that ' + ('loops (a link cycle)' if err.errno == errno.ELOOP
                 else f'points to {os.readlink(out_dir)!r}, which does not exist'))
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as err:
        fail(f'cannot create out_dir {out_dir!r}: {err.strerror or err}')
    try:  # a read-only folder stops here, not at the first log line or checkpoint
        tempfile.TemporaryFile(dir=out_dir).close()
    except OSError as err:
        fail(f'cannot write in out_dir {out_dir!r}: {err.strerror or err}')
    problem, lock = None, os.path.join(out_dir, 'lock')
    try:  # held for the run's life: one live run per folder (only rank 0 looks at shared files)
        if master and (holder := hold_lock(lock)[1]):
            problem = (f'out_dir {out_dir!r} is in use by another run (pid {holder}): wait for it to end, or '
                       f'choose another --out_dir')
    except OSError as err:  # (a file system without locks too)
        problem = f'cannot lock {lock}: {err.strerror or err}'
    if any_rank(problem is not None):
        fail(problem or 'rank 0 stopped')
    for _path, _what in ((ckpt_path, 'checkpoint'), (log_path, 'log')):
        if os.path.islink(_path) or os.path.isdir(_path):
            _kind = 'a symbolic link (never written through)' if os.path.islink(_path) else 'a directory'
            fail(f'{_path} is {_kind}, where this run writes its {_what} file: move it or choose another --out_dir')
    if save_ckpt and not overwrite and not continuing and os.path.exists(ckpt_path):
        how = ('Continue that run with --init_from=resume' if init_from == 'scratch' else
               f'Continue the run in it with --resume_dir={out_dir}')
        fail(f'{ckpt_path} holds an earlier run; this {init_from} run would replace it. {how}, start over with '
             f'--overwrite=True, or choose another --out_dir')


# Data ---------------------------------------------------------------------------------------------------------
# A batch is a pure function of (seed, purpose, step, micro-batch index over all ranks): notes/train.md says why.
data_dir = dataset_dir(dataset)
splits, meta = {}, {}  # meta: {} when there is none; a damaged one exits naming the field
if is_synthetic:
    data_vocab = 8192 if vocab_size is None else vocab_size  # Zoology's MQAR vocab by default
else:
    if dataset == 'stdlib' and not all(os.path.exists(os.path.join(data_dir, f'{s}.bin')) for s in ('train', 'val')):
        if master:  # first run: build the default corpus (a few seconds, no network)
            print(f'preparing the default corpus in {data_dir} (python data/prepare.py stdlib)')
            prepare_stdlib(data_dir)
        if distributed:
            dist.barrier()
    try:
        splits['train'], data_vocab = load_tokens(os.path.join(data_dir, 'train.bin'))
        splits['val'], _ = load_tokens(os.path.join(data_dir, 'val.bin'), vocab_size=data_vocab)
    except TokenFileError as err:
        fail(err)
    for _split, _data in splits.items():
        if len(_data) < block_size + 2:  # a batch's window of block_size + 1 tokens, at more than one start
            fail(f'the {_split} split of {dataset!r} has {len(_data)} tokens; block_size={block_size} needs at '
                 f'least {block_size + 2}')
    meta = read_meta(data_dir)
unigram_entropy = meta.get('unigram_entropy')
# the tokenizer, recorded in checkpoints so that sample.py decodes with the one the model was trained on
encoding = f'synthetic:{dataset}' if is_synthetic else meta.get('encoding')
if vocab_size is None:
    settings['vocab_size'] = vocab_size = data_vocab
elif vocab_size < data_vocab:
    fail(f'vocab_size={vocab_size} is smaller than the dataset {dataset!r} vocab ({data_vocab})')


def get_batch(split, purpose, step, index):
    """Micro-batch `index` (counted over all ranks) of step `step`; purpose: 0 train, 1 eval (val: eval_seed's)."""
    rng = np.random.default_rng([seed if split == 'train' else eval_seed, purpose, 0 if split == 'train' else 1,
                                 step, index])
    T = block_size  # the current setting, also when resuming: a longer block_size is midtraining
    if is_synthetic:
        try:
            if dataset == 'mqar':
                x, y = mqar(rng, batch_size, T, data_vocab, num_kv_pairs)
            elif dataset == 'reassign':
                x, y = reassign(rng, batch_size, T, data_vocab, num_kv_pairs, num_updates, move_frac)
            else:
                x, y = evict(rng, batch_size, T, data_vocab, num_kv_pairs, num_updates)
        except ValueError as err:  # task sizes that do not fit block_size / vocab_size: say which
            fail(err)
    else:
        data = splits[split]
        ix = rng.integers(0, len(data) - T - 1, size=batch_size)
        xy = np.stack([data[i:i + T + 1] for i in ix]).astype(np.int64)
        x, y = xy[:, :-1], xy[:, 1:]
    x, y = (torch.from_numpy(np.ascontiguousarray(t)) for t in (x, y))
    if device_type == 'cuda':
        x, y = (t.pin_memory().to(device, non_blocking=True) for t in (x, y))
    return x, y


# Model --------------------------------------------------------------------------------------------------------
# built on the CPU from one seed on every rank (one init whatever the parallelism), loaded, moved or sharded
iter_num, best_val_loss, checkpoint = 0, float('inf'), None
if init_from == 'resume':
    try:
        checkpoint = load_checkpoint(src, keys=('model', 'optimizer', 'model_args', 'iter_num', 'best_val_loss',
                                                'rng', 'data_position'), mmap=True)
    except CheckpointError as err:
        fail(err)
    # the architecture from the checkpoint (retired fields dropped); run-time choices from the current settings
    runtime = ('block_size', 'la_backend', 'attn_decode', 'head_chunk_rows')
    arch = {k: v for k, v in checkpoint['model_args'].items() if k not in runtime and k in model_fields}
    for k, v in arch.items():
        if settings[k] != v and k != 'vocab_size':
            say(f'note: {k}={settings[k]!r} ignored, the checkpoint has {k}={v!r}')
    if arch.get('vocab_size', vocab_size) < data_vocab:
        fail(f"the checkpoint's vocab_size {arch['vocab_size']} is smaller than the dataset's ({data_vocab})")
    settings.update(arch)
    iter_num = checkpoint['iter_num']
    if max_iters < iter_num and not eval_only:
        fail(f'max_iters={max_iters} is below the step {iter_num} that {src} is at: resuming needs '
             f'--max_iters={iter_num} or more')
    was = checkpoint['data_position']
    best_val_loss = checkpoint['best_val_loss'] if was['dataset'] == dataset else float('inf')  # new data, new val
    if was['dataset'] != dataset or was['block_size'] != block_size:
        say(f"new stage from step {iter_num}: dataset {was['dataset']} -> {dataset}, "
            f"block_size {was['block_size']} -> {block_size}")
# the step of the checkpoint now at ckpt_path that this run knows to be good (wrote, or resumed from)
last_saved = iter_num if continuing else None

cfg = model_config()
if cfg.auto_backend_problem(device_type == 'cuda'):
    fail(cfg.auto_backend_problem(True))


def available_memory():
    """Bytes of memory the kernel can still give (Linux's MemAvailable, else the free pages), or None."""
    with suppress(OSError, ValueError, StopIteration), open('/proc/meminfo') as f:
        return next(int(ln.split()[1]) * 1024 for ln in f if ln.startswith('MemAvailable:'))
    with suppress(ValueError, OSError):
        return os.sysconf('SC_AVPHYS_PAGES') * os.sysconf('SC_PAGE_SIZE')
    return None


if device_type == 'cpu' and master and (available := available_memory()) is not None:
    # what a CPU run takes, roughly: 16 B a parameter (fp32 weights, gradients, AdamW's moments), and the activations:
    # ~72 floats a channel and 4 an FFN unit per token and layer, and attention's scores (config/stdlib_26m.py with
    # gdn: 22.2 GiB estimated, where a run was seen to grow to 23 GB)
    with torch.device('meta'):
        weights = 16 * GPT(cfg).param_summary()['total']
    layers = 1 if grad_checkpoint else cfg.n_layer  # (recomputed in the backward: about one layer's kept)
    acts = 4 * batch_size * block_size * layers * (72 * cfg.n_embd + 4 * cfg.ffn_hidden)
    acts += 8 * batch_size * cfg.n_head * block_size ** 2 * sum(map(cfg.is_attention_layer, range(cfg.n_layer)))
    if weights + acts > available:  # the kernel's OOM killer would end it with a bare 'Killed'
        say(f'warning: this CPU run needs roughly {(weights + acts) / 2**30:.1f} GiB (weights, gradients and AdamW '
            f'state {weights / 2**30:.1f} GiB + activations {acts / 2**30:.1f} GiB), more than the '
            f'{available / 2**30:.1f} GiB of memory available: the kernel may kill it. Lower --batch_size (with '
            f'more --gradient_accumulation_steps) or --block_size, or run it on a GPU')
meta_init = distributed and parallel == 'fsdp' and fsdp_meta_init
torch.manual_seed(seed)
with torch.device('meta') if meta_init else nullcontext():
    model = GPT(cfg, compile=compile, seed=seed)  # compile: the loss head's softmax (and each block whole, below)
model.grad_checkpoint = grad_checkpoint
if checkpoint is not None and not meta_init:
    model.load_state_dict(checkpoint['model'])
raw_model = model  # the uncompiled, unwrapped module: its state_dict is what checkpoints hold
summary = raw_model.param_summary()
flops_per_token = raw_model.flops_per_token(cfg.block_size, on_cuda=device_type == 'cuda')
if compile:
    say('compile: torch.compile builds its graphs in the first evaluation and step (--compile=False: eager)')
    for block in raw_model.blocks:
        block.compile()  # in place: parameter names (and checkpoints) stay those of the plain model
if distributed and parallel == 'fsdp':
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    mesh = init_device_mesh(device_type, (world_size,))
    mp = MixedPrecisionPolicy(param_dtype=ptdtype, reduce_dtype=torch.float32)  # the fp32 masters stay sharded
    for block in raw_model.blocks:  # one all-gather per block, freed after use; moved to the device block by block
        fully_shard(block, mesh=mesh, mp_policy=mp)
    fully_shard(raw_model, mesh=mesh, mp_policy=mp)  # the rest: embedding, final norm, lm_head
    if meta_init:  # allocate only this rank's shards, then fill them
        raw_model.to_empty(device=device)
        if checkpoint is not None:
            set_model_state_dict(raw_model, checkpoint['model'], options=StateDictOptions(full_state_dict=True))
        else:
            raw_model.init_weights(seed)
else:
    model.to(device)
    if distributed:
        from torch.nn.parallel import DistributedDataParallel as DDP
        model = DDP(model, device_ids=[local_rank] if device_type == 'cuda' else None)

optimizer = raw_model.configure_optimizers(weight_decay, learning_rate, (beta1, beta2), device_type)
if checkpoint is not None:
    # parameter-name keyed (torch.distributed.checkpoint's format): the same file resumes on 1 GPU, DDP or FSDP
    set_optimizer_state_dict(raw_model, optimizer, checkpoint['optimizer'], options=StateDictOptions(full_state_dict=True))
    rng_state = checkpoint['rng']
    random.setstate(rng_state['python'])
    name, key, *rest = rng_state['numpy']  # (saved as plain values: see save_checkpoint)
    np.random.set_state((name, np.array(key, dtype=np.uint32), *rest))
    torch.set_rng_state(rng_state['torch'])
    if device_type == 'cuda' and rng_state.get('cuda') is not None:
        torch.cuda.set_rng_state(rng_state['cuda'])
    checkpoint = None  # free the CPU copy


# Helpers: learning rate, evaluation, checkpointing ------------------------------------------------------------
def get_lr(it):
    """Linear warmup over warmup_iters, then cosine from learning_rate to min_lr at lr_decay_iters."""
    if not decay_lr:
        return learning_rate
    it -= lr_schedule_start
    decay_end = (lr_decay_iters if lr_decay_iters is not None else max_iters) - lr_schedule_start
    if it < warmup_iters:
        return learning_rate * (it + 1) / (warmup_iters + 1)
    if it >= decay_end:
        return min_lr
    ratio = (it - warmup_iters) / max(1, decay_end - warmup_iters)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (learning_rate - min_lr)


@torch.no_grad()
def estimate_loss():
    """Mean loss per target token on eval_iters batches of each split, shared out across ranks (notes/train.md);
    for the synthetic tasks also the answers' accuracy."""
    out = {}
    model.eval()
    per_rank = math.ceil(eval_iters / world_size)
    for split in ('train', 'val'):
        # loss * n, n, correct, answers, correct where the answer is NONE, NONE answers
        sums = torch.zeros(6, dtype=torch.float64, device=device)
        for i in range(per_rank):
            x, y = get_batch(split, 1, 0, rank * per_rank + i)
            with autocast:  # the chunked head (the whole logits never exist) where no answers are scored
                logits, loss, _ = model(x, y, chunked_loss=not is_synthetic)
            n = (y != -1).sum()
            counts = accuracy_counts(logits, y) if is_synthetic else (n.new_zeros(()),) * 4
            sums += torch.stack([loss.double() * n, n, *counts]).double()
        sums = all_reduce_sum(sums)
        out[split] = (sums[0] / sums[1]).item()
        if is_synthetic:
            out[f'{split}_acc'] = (sums[2] / sums[3]).item()
            if 0 < sums[5] < sums[3]:  # tasks with NONE answers: accuracy on them and on the values apart
                out[f'{split}_acc_none'] = (sums[4] / sums[5]).item()
                out[f'{split}_acc_value'] = ((sums[2] - sums[4]) / (sums[3] - sums[5])).item()
    model.train()
    return out


def save_checkpoint(path):
    """Full state on rank 0, via a temp file and a rename (a crash mid-write leaves the previous one); every rank
    calls it (FSDP gathers). Non-finite weights are never written. Returns None, or on every rank what went wrong."""
    global saves, last_saved
    # each rank checks its own shard, then all agree: one NaN anywhere and no rank writes
    local = [p.to_local() if hasattr(p, 'to_local') else p for p in raw_model.parameters()]
    if any_rank(torch.stack([(~torch.isfinite(p.detach())).any() for p in local]).any()):
        return f'the weights at step {iter_num} are not finite, so they were not saved'
    # full tensors, on the CPU of rank 0, keyed by parameter name, whatever the parallelism
    opts = StateDictOptions(full_state_dict=True, cpu_offload=True)
    model_sd = get_model_state_dict(raw_model, options=opts)
    optim_sd = get_optimizer_state_dict(raw_model, optimizer, options=opts)
    problem = None
    if master:
        # tensors and plain Python values only (the RNG states too): loads with weights_only=True
        name, key, pos, has_gauss, gauss = np.random.get_state()
        ckpt = {'model': model_sd, 'optimizer': optim_sd, 'model_args': dataclasses.asdict(cfg), 'config': settings,
                'iter_num': iter_num, 'best_val_loss': best_val_loss, 'encoding': encoding,
                'rng': {'python': random.getstate(), 'numpy': (name, key.tolist(), int(pos), int(has_gauss), float(gauss)),
                        'torch': torch.get_rng_state(),
                        'cuda': torch.cuda.get_rng_state() if device_type == 'cuda' else None},
                'data_position': {'dataset': dataset, 'block_size': cfg.block_size, 'iter': iter_num}}
        tmp, made = f'{path}.tmp{os.getpid()}', False  # this process's own, created here (never a planted link)
        try:
            with open(tmp, 'xb', opener=no_follow) as f:
                made = True
                torch.save(ckpt, f)
                saves += 1
                if saves == debug_crash_on_save:  # simulate a crash mid-write: half a temp file, no rename
                    f.truncate(f.tell() // 2)
                    f.flush()
                    print(f'debug_crash_on_save: dying while writing checkpoint #{saves}', flush=True)
                    os._exit(3)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)  # (replaces a link at path itself, never its target)
        except (OSError, RuntimeError) as err:  # torch.save reports a failed write as a RuntimeError
            if made and os.path.exists(tmp):
                os.remove(tmp)  # a full disk: give the space back, leave no half file behind
            why = disk_full(err, ckpt) or getattr(err, 'strerror', None) or err
            problem = f'could not write the checkpoint {tmp}: {why} (the partial file was removed)'
    if any_rank(problem is not None):  # rank 0's verdict for every rank
        return problem or 'rank 0 could not write the checkpoint'
    last_saved = iter_num
    return None


def disk_full(err, ckpt):
    """'the disk is full (...)' when that is why writing `ckpt` failed, else None: an ENOSPC, or less free
    space than its tensors take (torch.save's RuntimeError carries no errno, only '[enforce fail at ...]')."""
    def nbytes(x):
        if isinstance(x, torch.Tensor):
            return x.numel() * x.element_size()
        if isinstance(x, dict):
            x = list(x.values())
        return sum(map(nbytes, x)) if isinstance(x, (list, tuple)) else 0
    try:
        free = shutil.disk_usage(os.path.dirname(os.path.abspath(ckpt_path))).free
    except OSError:
        return None
    need = nbytes(ckpt)
    if getattr(err, 'errno', None) == errno.ENOSPC or free < need:
        return f'the disk is full ({free / 2**20:.1f} MiB free, the checkpoint takes {need / 2**20:.1f} MiB)'
    return None


def kept_checkpoint():
    """For a stop message: what the checkpoint on disk is, stated only as far as this run knows it."""
    if last_saved is not None:
        return f'the last good checkpoint {ckpt_path} (step {last_saved}) is unchanged'
    if os.path.exists(ckpt_path):
        return f'this run wrote no checkpoint ({ckpt_path} is from an earlier run, unchanged)'
    return 'no checkpoint was written'


# Logging ------------------------------------------------------------------------------------------------------
gpu_name = torch.cuda.get_device_name(device) if device_type == 'cuda' else None
peak_flops = next((f for key, f in PEAK_FLOPS if key in gpu_name), None) if gpu_name else None
say(f'model: {cfg.mixer} n_layer={cfg.n_layer} n_embd={cfg.n_embd} block_size={cfg.block_size} '
    f'vocab={cfg.vocab_size}{" moe" if cfg.moe else ""} | params total {summary["total"]:,} active {summary["active"]:,}')
data_desc = ('synthetic, generated from the seed' if is_synthetic else
             f'{data_dir}: {len(splits["train"]):,} train + {len(splits["val"]):,} val tokens')
say(f'data: {dataset} ({data_desc}) | '
    f'{tokens_per_iter:,} tokens/step = {batch_size} x {cfg.block_size} x {gradient_accumulation_steps} accum'
    f' | {world_size} rank(s), {parallel if distributed else "single process"}, {device}, {dtype}')
if unigram_entropy is not None:
    say(f'reference: unigram entropy of {dataset} train = {unigram_entropy:.4f} nats/token (the loss a model '
        f'ignoring context reaches)')


def trim_log(path, step):
    """Drop the records of steps >= `step` (rewritten atomically): a resumed run logs them again, and an
    interrupted run may have logged them after the checkpoint it resumes from was written."""
    if not os.path.exists(path):
        return
    with open(path) as f:
        lines = f.readlines()
    keep = []
    for line in lines:
        with suppress(ValueError, KeyError, TypeError):  # a record cut short by the interruption
            if json.loads(line)['step'] < step:
                keep.append(line if line.endswith('\n') else line + '\n')
    if len(keep) < len(lines):
        with open(f'{path}.tmp{os.getpid()}', 'x', opener=no_follow) as f:
            f.writelines(keep)
        os.replace(f.name, path)


if master and not eval_only:
    try:
        if continuing:
            trim_log(log_path, iter_num)
        elif overwrite:  # the earlier run goes, its checkpoint first: at no moment does the folder hold its
            for _path in (ckpt_path, log_path):  # weights beside this run's log (a kill -9 anywhere included)
                if os.path.lexists(_path):
                    os.remove(_path)
        elif os.path.exists(log_path):  # a new run keeps an earlier run's log, renamed
            kept_log = next(p for i in range(1, 10**6)
                            if not os.path.lexists(p := os.path.join(out_dir, f'log.{i}.jsonl')))
            os.replace(log_path, kept_log)
            say(f'note: the earlier {log_path} was kept as {kept_log}')
        log_file = open(log_path, 'a' if continuing else 'x', opener=no_follow)
        # the run's first record, what a reader of the log needs before any evaluation (sweep.py's rows take it)
        log_file.write(json.dumps({'step': iter_num, 'start': True, 'params': summary['total'],
                                   'params_active': summary['active'], 'dataset': dataset,
                                   'data_tokens': [len(splits['train']), len(splits['val'])] if splits else None,
                                   'device': gpu_name or device_type}) + '\n')
        log_file.flush()
    except OSError as err:
        fail(f'cannot write the log in out_dir {out_dir!r}: {err.strerror or err}')
    if wandb_log:
        import wandb
        wandb.init(project=wandb_project, name=wandb_run_name, config=settings)


def log(record):
    if master and not eval_only:
        try:
            log_file.write(json.dumps(record) + '\n')
            log_file.flush()
        except OSError as err:  # a full disk, a removed folder: stop with what holds, not a traceback
            full = ' (the disk is full)' if err.errno == errno.ENOSPC else ''
            fail(f"cannot write the log {log_path}: {err.strerror or err}{full}; {kept_checkpoint()}")
        if wandb_log:
            wandb.log(record, step=record['step'])


def out_of_memory(kind, err, tb):
    """sys.excepthook: running out of memory (a batch too large) is one line naming the settings to lower."""
    if not (issubclass(kind, (MemoryError, torch.OutOfMemoryError)) or "can't allocate memory" in str(err)):
        return sys.__excepthook__(kind, err, tb)
    bar.close()
    if master:
        print(f'train: out of memory at step {iter_num} ({str(err).strip().splitlines()[0][:160]}): lower '
              f'--batch_size (with more --gradient_accumulation_steps for the same batch) or --block_size; '
              f'{kept_checkpoint()}', file=sys.stderr, flush=True)


# Training loop: at step `iter_num` evaluate/checkpoint if due, then take optimizer step `iter_num` ------------
saves = 0
sys.excepthook = out_of_memory
bar = tqdm(total=max_iters, initial=iter_num, disable=not (master and progress) or None, unit='step',
           dynamic_ncols=True)
t_start = t_last = time.time()
dt_avg, window_tokens, window_time = None, 0, 0.0
first_iter = iter_num
model.train()
while True:
    if iter_num % eval_interval == 0 or iter_num == max_iters or eval_only:
        losses = estimate_loss()
        acc = ''.join(f' | {s} acc {losses[f"{s}_acc"]:.4f}' for s in ('train', 'val') if is_synthetic)
        if 'val_acc_none' in losses:
            acc += f' (NONE answers {losses["val_acc_none"]:.4f}, values {losses["val_acc_value"]:.4f})'
        say(f'eval step {iter_num}: train loss {losses["train"]:.4f} | val loss {losses["val"]:.4f}{acc}')
        log({'step': iter_num, 'eval': True, 'train_loss': losses['train'], 'val_loss': losses['val'],
             **{k: v for k, v in losses.items() if '_acc' in k},
             **({'final': True} if iter_num >= max_iters else {})})  # the run's result (sweep.py reads it)
        if eval_only:
            break
        if not (math.isfinite(losses['train']) and math.isfinite(losses['val'])):
            # the weights of the last step are bad: never save them, and never let best_val_loss become NaN
            fail(f'non-finite loss at the evaluation of step {iter_num} (train {losses["train"]}, val '
                 f'{losses["val"]}); stopping without saving. {kept_checkpoint()}')
        improved, best_val_loss = losses['val'] < best_val_loss, min(best_val_loss, losses['val'])
        # (not at the step this run started from: a checkpoint holds the config that trained its weights)
        if save_ckpt and iter_num > first_iter and (improved or always_save_checkpoint):
            saving = True
            problem = save_checkpoint(ckpt_path)
            saving = False
            if problem:
                fail(f'{problem}; stopping. {kept_checkpoint()}')
            if interrupted:  # Ctrl-C or SIGTERM while it was written: stop now that it is in place
                on_stop_signal(interrupted, None)
        t_last = time.time()  # evaluation and saving do not count in the step time
    if iter_num >= max_iters:
        break

    lr = get_lr(iter_num)
    for group in optimizer.param_groups:
        group['lr'] = lr
    loss_sum, aux_sum = torch.zeros((), device=device), torch.zeros((), device=device)
    for micro in range(accum_local):
        x, y = get_batch('train', 0, iter_num, rank * accum_local + micro)
        # DDP: all-reduce the gradients only after the last micro-step (FSDP2 reduce-scatters every micro-step)
        sync = nullcontext() if not (distributed and parallel == 'ddp') or micro == accum_local - 1 else model.no_sync()
        with sync:
            with autocast:
                _, loss, aux_loss = model(x, y, chunked_loss=True)
                if iter_num == debug_nan_at:
                    loss = loss * float('nan')
                objective = (loss + aux_loss) / accum_local  # mean over micro-steps; ranks average in the reduction
            objective.backward()
        loss_sum += loss.detach()
        aux_sum += aux_loss.detach()
    grad_norm = torch.nn.utils.clip_grad_norm_(raw_model.parameters(), grad_clip if grad_clip > 0 else float('inf'))
    if hasattr(grad_norm, 'full_tensor'):  # FSDP: a DTensor
        grad_norm = grad_norm.full_tensor()
    # a non-finite loss or gradient stops the run before the optimizer touches the weights (the last checkpoint)
    if any_rank(~torch.isfinite(loss_sum) | ~torch.isfinite(grad_norm)):
        fail(f'non-finite loss at step {iter_num} (loss {loss_sum.item() / accum_local}, grad norm '
             f'{grad_norm.item()}); stopping. {kept_checkpoint()}')
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)

    # timing and logging (rank 0's loss; .item() syncs, only on log steps)
    t_now = time.time()
    dt, t_last = t_now - t_last, t_now
    if iter_num > first_iter:  # the ETA leaves out the run's first step: torch.compile's or Triton's compilation
        dt_avg = dt if dt_avg is None else 0.9 * dt_avg + 0.1 * dt
    window_tokens += tokens_per_iter
    window_time += dt
    iter_num += 1
    bar.update(1)
    if compile and iter_num == first_iter + 1:  # torch.compile builds its graphs in the first eval and step
        say(f'compile: {t_now - t_start:.1f}s to the end of the first step (graphs built, kernels tuned)')
    if (iter_num - 1) % log_interval == 0 or iter_num == max_iters:
        # the loss of the whole global batch (mean over ranks): comparable across world sizes
        lossf, auxf = (all_reduce_sum(t).item() / accum_local / world_size for t in (loss_sum, aux_sum))
        tok_s = window_tokens / window_time
        mfu = flops_per_token * tok_s / (peak_flops * world_size) if peak_flops else None
        eta = '    n/a' if dt_avg is None else fmt_time((max_iters - iter_num) * dt_avg)
        mem = torch.cuda.max_memory_allocated(device) / 2**30 if device_type == 'cuda' else None
        say(f'step {iter_num - 1:6d} | loss {lossf:.4f} | aux {auxf:.4f} | lr {lr:.3e} | {tok_s:10,.0f} tok/s | '
            f'mfu {"  n/a" if mfu is None else f"{100 * mfu:5.1f}%"} | eta {eta}'
            + ('' if mem is None else f' | mem {mem:.1f} GiB'))
        log({'step': iter_num - 1, 'loss': lossf, 'aux_loss': auxf, 'lr': lr, 'grad_norm': grad_norm.item(),
             'tok_per_s': tok_s, 'mfu': mfu, 'dt': dt, 'peak_mem_gib': mem, 'elapsed': time.time() - t_start})
        window_tokens, window_time = 0, 0.0
        bar.set_postfix(loss=f'{lossf:.3f}')

bar.close()
if not eval_only and master:
    ref = f' (unigram entropy {unigram_entropy:.4f})' if unigram_entropy is not None else ''
    acc = f', val acc {losses["val_acc"]:.4f}' if is_synthetic else ''
    print(f'done: {iter_num} steps, val loss {losses["val"]:.4f} nats/token{ref}{acc}, '
          f'{time.time() - t_start:.0f}s', flush=True)
    log_file.close()
if distributed:
    dist.barrier()  # no rank tears its gloo/NCCL pairs down while a peer may still be talking to it
    dist.destroy_process_group()
    # no interpreter teardown: freeing DDP's reducer there aborted 2-rank gloo CPU runs now and then
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
