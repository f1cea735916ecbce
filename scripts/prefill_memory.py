"""Peak memory of a long prompt's prefill, in one piece against sample.py's chunks (why sample.py prefills in
pieces: a long prompt in one pass makes a memory spike). Runs on the CPU; each setting in its own process, peak
RSS from the OS.

    python scripts/prefill_memory.py                      # config/stdlib_26m.py, one 16384-token prompt
    python scripts/prefill_memory.py 32768 None 2048 512  # prompt length, then the prefill_chunk values
"""
import dataclasses
import os
import resource
import runpy
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = os.path.join(HERE, 'config', 'stdlib_26m.py')


def one(T, chunk):
    """Prefill a random T-token prompt with chunk_size=chunk; print the peak RSS it added and the logits' norm
    (equal across chunkings: the same computation)."""
    import torch
    sys.path.insert(0, HERE)
    from decode import new_cache, prefill
    from model import GPT, GPTConfig
    fields = {f.name for f in dataclasses.fields(GPTConfig)}
    base = {k: v for k, v in runpy.run_path(CONFIG).items() if k in fields}
    torch.manual_seed(0)
    model = GPT(GPTConfig(**dict(base, block_size=T + 8, la_backend='chunk'))).eval()
    idx = torch.randint(0, model.config.vocab_size, (1, T))
    cache = new_cache(model, 1, max_len=T + 8)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    t0 = time.time()
    with torch.no_grad():
        logits, _ = prefill(model, idx, cache, chunk_size=chunk)
    added = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 2**10
    print(f"prefill_chunk={str(chunk):>5}  T={T}: peak RSS +{added:,.0f} MiB over the model and cache, "
          f"{time.time() - t0:.1f} s, last logits' norm {logits.float().norm():.4f}", flush=True)


if __name__ == '__main__':
    if len(sys.argv) > 1 and sys.argv[1] == '--one':
        one(int(sys.argv[2]), None if sys.argv[3] == 'None' else int(sys.argv[3]))
        sys.exit(0)
    T = int(sys.argv[1]) if len(sys.argv) > 1 else 16384
    chunks = sys.argv[2:] or ['None', '2048', '512']
    norms = []
    for c in chunks:
        r = subprocess.run([sys.executable, __file__, '--one', str(T), c], stdout=subprocess.PIPE, text=True)
        print(r.stdout, end='', flush=True)
        if r.returncode:
            sys.exit(f"prefill_memory.py: prefill_chunk={c} failed (exit {r.returncode})")
        norms.append(float(r.stdout.split()[-1]))
    if max(norms) - min(norms) > 1e-3 * max(norms):  # chunking must not change what the prefill computes
        sys.exit(f"prefill_memory.py: the last logits differ between chunkings: {norms}")
