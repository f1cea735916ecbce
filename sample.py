"""
Sample from a trained model, streaming tokens to stdout as they are made.

The prompt is prefilled prefill_chunk tokens at a time, then each new token is one decode step (notes/decode.md).
After each sample a line on stderr gives the time to the first token (the prefill), the first step's and the rate.
"""
import codecs
import glob
import os
import re
import sys
import time

import torch

from configurator import configure, file_text
from data.prepare import load_tokenizer
from decode import cuda_graph_problem, generate, sampling_problem, tokens_problem
from model import GPT, CheckpointError, GPTConfig, model_from_checkpoint

# -----------------------------------------------------------------------------
init_from = 'resume'       # 'resume': out_dir/ckpt.pt; 'scratch': GPTConfig(), train.py's toy untrained (a smoke test)
out_dir = 'out'            # where train.py wrote ckpt.pt
start = '\n'               # the prompt, or FILE:path to read it from a file
num_samples = 2            # samples, one after another
max_new_tokens: int | None = None  # tokens generated per sample (None: up to the model's block_size)
temperature = 0.8          # 0: greedy; < 1 sharper, > 1 more random
top_k: int | None = None  # keep only the k most likely tokens (None: all)
top_p: float | None = None  # nucleus sampling: keep the smallest set with this much probability (None: off)
seed = 1337
device = 'cuda' if torch.cuda.is_available() else 'cpu'
dtype = 'bfloat16' if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else 'float32'  # on CUDA
cuda_graph = None          # None: replay decode steps from a CUDA graph on CUDA when possible; True: must; False: never
compile = False            # torch.compile the graphed decode step (CUDA): pays off for long samples (notes/decode.md)
la_backend = 'auto'        # linear-attention kernels for the prefill: auto (triton on CUDA, chunk on CPU) ...
prefill_chunk: int | None = 2048  # prompt tokens per prefill pass (None: the whole prompt in one pass)
encoding: str | None = None  # tokenizer override: 'bytes' or a tiktoken name (default: the checkpoint's)
# -----------------------------------------------------------------------------
configure(globals())


def fail(msg):
    sys.exit(f"sample.py: {msg}")


# settings a slip can get wrong: stop before loading anything, naming the setting
if problem := sampling_problem(temperature, top_k, top_p):
    fail(problem)
if num_samples < 1:
    fail(f"num_samples must be >= 1, got {num_samples}")
for name, count in (('max_new_tokens', max_new_tokens), ('prefill_chunk', prefill_chunk)):
    if count is not None and (type(count) is not int or count < 1):  # a bool is no count
        fail(f"{name} must be a positive int or None, got {count!r}")
if dtype not in ('float32', 'bfloat16', 'float16'):
    fail(f"dtype must be 'float32', 'bfloat16' or 'float16', got {dtype!r}")
if cuda_graph is not None and not isinstance(cuda_graph, bool):
    fail(f"cuda_graph must be None, True or False, got {cuda_graph!r}")
if compile and (cuda_graph is False or not device.startswith('cuda')):
    fail(f"compile=True compiles the CUDA-graph decode step: it needs device='cuda' and cuda_graph None or True "
         f"(got device={device!r}, cuda_graph={cuda_graph!r})")
if device.startswith('cuda') and not torch.cuda.is_available():
    fail(f"device={device!r} but this torch sees no CUDA GPU; use --device=cpu")


def train_command(out_dir):
    """The command that trains a checkpoint into out_dir: the config file that names it as its out_dir, else
    train.py's toy model there."""
    root = os.path.dirname(os.path.abspath(__file__))
    for path in sorted(glob.glob(os.path.join(root, 'config', '*.py'))):
        with open(path, encoding='utf-8') as f:
            named = re.search(r"^out_dir\s*=\s*['\"]([^'\"]+)['\"]", f.read(), re.M)
        if named and os.path.normpath(named.group(1)) == os.path.normpath(out_dir):
            return f"python train.py {os.path.relpath(path, root)}"
    return f"python train.py --out_dir={out_dir}"


torch.manual_seed(seed)

# the model and its tokenizer; on CUDA the weights are cast to dtype (not autocast, whose cached casts a CUDA graph
# cannot hold on to), the CPU computes in float32
if init_from == 'resume':
    ckpt_path = os.path.join(out_dir, 'ckpt.pt')
    hint = f": train one first ({train_command(out_dir)}), point --out_dir at one, or try --init_from=scratch"
    try:
        model, ckpt = model_from_checkpoint(ckpt_path, la_backend, device, dtype, missing=hint)
    except CheckpointError as err:
        fail(err)
    trained_on = ckpt.get('encoding')
    tokenizer = encoding or trained_on
    if tokenizer is None:
        fail(f"{ckpt_path} does not record its tokenizer (an older checkpoint?): pass --encoding=bytes "
             f"or --encoding=<tiktoken name>")
elif init_from == 'scratch':
    model = GPT(GPTConfig(la_backend=la_backend)).eval().to(device, getattr(torch, dtype) if 'cuda' in device else None)
    trained_on, tokenizer = None, encoding or 'bytes'
else:
    fail(f"init_from must be 'resume' or 'scratch', got {init_from!r}")
task = next((t for t in (trained_on, tokenizer) if t and t.startswith('synthetic')), None)
if task:  # whatever --encoding says: the model has learnt no text
    fail(f"this checkpoint was trained on a synthetic task ({task}): it has no text tokenizer to sample with")
if (cuda_graph or compile) and (problem := cuda_graph_problem(model)):
    fail(f"cuda_graph=True or compile=True, but decode steps cannot be replayed from a CUDA graph: {problem}")
enc = load_tokenizer(tokenizer, 'sample.py')

try:
    start = file_text(start, 'the prompt file')
except ValueError as err:
    fail(str(err))
try:
    prompt = enc.encode(start)
except (UnicodeEncodeError, ValueError) as err:  # lone surrogates; tiktoken's special-token guard
    fail(f"the prompt cannot be encoded with the '{tokenizer}' tokenizer: {err}")
if not prompt:
    fail("the prompt is empty: give at least one character with --start")
idx = torch.tensor([prompt], dtype=torch.long, device=device)
if problem := tokens_problem(idx, model.config.vocab_size):
    fail(f"{problem} (--start encoded with the '{tokenizer}' tokenizer)")
limit = model.config.block_size
if len(prompt) >= limit:
    fail(f"the prompt ({len(prompt)} tokens) fills the model's block_size ({limit}), the attention layers' "
         f"context limit: shorten the prompt")
if max_new_tokens is None:
    max_new_tokens = limit - len(prompt)
if len(prompt) + max_new_tokens > limit:
    fail(f"the prompt ({len(prompt)} tokens) plus max_new_tokens ({max_new_tokens}) exceeds the model's block_size "
         f"({limit}), the attention layers' context limit: shorten the prompt or lower --max_new_tokens")

# sample, streaming each token's text as soon as it forms complete UTF-8 characters (and only ids the
# tokenizer decodes: a model's vocab may be padded past the tokenizer's, e.g. 512 on bytes)
for i in range(num_samples):
    text = codecs.getincrementaldecoder('utf-8')(errors='replace')
    sys.stdout.write(start)
    stamps = []  # when each token reached the host (int() below waits for the GPU, so these are real times)

    def show(tok):
        sys.stdout.write(text.decode(enc.decode_bytes([int(tok[0, 0])])))
        sys.stdout.flush()
        stamps.append(time.perf_counter())

    t0 = time.perf_counter()
    generate(model, idx, max_new_tokens, temperature=temperature, top_k=top_k, top_p=top_p, on_token=show,
             cuda_graph=cuda_graph, prefill_chunk=prefill_chunk, compile=compile, n_vocab=enc.n_vocab)
    sys.stdout.write(text.decode(b'', final=True))
    print('\n---------------', flush=True)
    # the rate counts from the second token: the first decode step also captures the CUDA graph (and compiles)
    first = f", first step {1e3 * (stamps[1] - stamps[0]):.1f} ms" if len(stamps) > 1 else ""
    rate = (f"{len(stamps) - 2} tokens at {(len(stamps) - 2) / (stamps[-1] - stamps[1]):.1f} tokens/s"
            if len(stamps) > 2 and stamps[-1] > stamps[1] else "too few tokens for a rate")
    print(f"sample {i + 1}: prompt {len(prompt)} tokens, time to first token {1e3 * (stamps[0] - t0):.1f} ms "
          f"(prefill){first}, then {rate} (steps after the first)", file=sys.stderr, flush=True)
