"""
Where a small synthetic run's training step goes: wall time per step, GPU kernel time per step, kernel
launches per step, for each mixer alone on the GPU. If wall >> kernel time the step is bound by the host
(Python and launches); N runs sharing a GPU then scale until the CPU cores or the summed kernel time run out.

    python scripts/step_profile.py config/mqar.py eda kda gdn2 transformer [--steps=30] [--top=10] [--compile=True] [--la_chunk_size=64 ...]

--chunked_loss=True (the default) takes the loss as train.py's training step does (the chunked head, which skips
the positions without a target when eager); False, through the plain head's whole [tokens, vocab] logits.
"""
import ast
import sys
import time

import numpy as np
import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, '.')
from data.synthetic import mqar  # noqa: E402
from model import GPT, GPTConfig  # noqa: E402

args = [a for a in sys.argv[1:] if not a.startswith('--')]
opts = {'steps': 30, 'top': 0, 'compile': False, 'chunked_loss': True}  # --top=N: the N kernels with the most GPU time
for a in sys.argv[1:]:
    k = a[2:].split('=')[0]
    if a.startswith('--') and k in opts:
        opts[k] = ast.literal_eval(a.split('=', 1)[1])
steps = opts['steps']
config_path, mixers = args[0], args[1:]
conf = {}
exec(open(config_path).read(), conf)
for a in sys.argv[1:]:  # --key=value overrides of the config's settings, e.g. --la_chunk_size=64
    if a.startswith('--') and a[2:].split('=')[0] not in opts:
        k, v = a[2:].split('=', 1)
        conf[k] = ast.literal_eval(v)
fields = GPTConfig.__dataclass_fields__
dev = 'cuda' if torch.cuda.is_available() else 'cpu'  # cpu: a smoke test only
print(f'{"mixer":12s} {"wall ms/step":>13s} {"GPU kernel ms/step":>19s} {"launches/step":>14s}')
for mixer in mixers:
    cfg = GPTConfig(**{k: v for k, v in conf.items() if k in fields}, mixer=mixer)
    torch.manual_seed(0)
    model = GPT(cfg, compile=opts['compile']).to(dev)
    if opts['compile']:  # as train.py's compile=True: each block compiled in place
        for block in model.blocks:
            block.compile()
    opt = model.configure_optimizers(0.1, 1e-3, (0.9, 0.95), dev)
    rng = np.random.default_rng(0)

    def step():
        x, y = mqar(rng, conf['batch_size'], conf['block_size'], conf['vocab_size'], conf['num_kv_pairs'])
        x, y = (torch.from_numpy(t).to(dev) for t in (x, y))
        with torch.autocast(dev, torch.bfloat16):
            _, loss, aux = model(x, y, chunked_loss=opts['chunked_loss'])
        (loss + aux).backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        bad = (~torch.isfinite(loss) | ~torch.isfinite(gn)).float().item()  # train.py's one sync a step
        opt.step()
        opt.zero_grad(set_to_none=True)
        return bad

    for _ in range(10):  # autotuning, allocator warm-up
        step()
    dev == 'cuda' and torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    dev == 'cuda' and torch.cuda.synchronize()
    wall = (time.perf_counter() - t0) / steps * 1e3
    with profile(activities=[ProfilerActivity.CUDA if dev == 'cuda' else ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            step()
        dev == 'cuda' and torch.cuda.synchronize()
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    gpu_ms = sum(e.time_range.elapsed_us() for e in kernels) / 1e3 / steps
    print(f'{mixer:12s} {wall:13.1f} {gpu_ms:19.2f} {len(kernels) / steps:14.0f}', flush=True)
    by_name = {}
    for e in kernels:
        by_name[e.name] = by_name.get(e.name, 0) + e.time_range.elapsed_us()
    for name, us in sorted(by_name.items(), key=lambda kv: -kv[1])[:opts['top']]:
        print(f'    {us / 1e3 / steps:7.3f} ms  {name[:110]}')
    del model, opt
