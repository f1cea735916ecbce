"""
Kernel benchmark for nanoEDA: correctness first, then one table of forward, forward+backward and
decode-step times and peak memory, ours against the references (and FLA when it imports).

    python bench.py                              # all shapes, checks + table
    python bench.py --shapes="[(1, 4096, 4, 4)]" --use_fla=False
    python bench.py --what=model_decode           # sample.py's decoding: EDA hybrid vs Transformer

Times are `triton.testing.do_bench` medians in ms; "fwd" is a training forward (inputs require grad),
"fwd+bwd" one forward plus backward(do); "peak MiB" is the extra memory allocated during fwd+bwd.
FLA (flash-linear-attention) is optional: only this script and optional GPU tests import it.
"""
import math
import sys
import time

import torch
import torch.nn.functional as F

import eda
import kernel

# ----------------------------------------------------------------------------------------------------
# settings (override with config files or --key=value, see configurator.py)
shapes = [(8, 4096, 16, 16), (1, 32768, 16, 16), (4, 4096, 8, 16)]  # (B, T, H, HV)
head_k = 128
head_v = 128
dtype = "bfloat16"
decode_batches = [1, 64]
warmup = 10          # ms, do_bench's warm-up
rep = 50             # ms, do_bench's repetitions
check = 1            # correctness before timing: 0 none, 1 bf16 EDA/KDA + decode (+ FLA agreement), 2 + fp32, GDN
profile = True       # per-kernel GPU times of one eda_triton fwd+bwd (torch.profiler), first shape
use_fla = True       # compare with FLA when it imports
fla_extra_shapes = 1  # FLA safe_gate and doubled-sequence rows for this many shapes (FLA's autotuning is slow)
sweep = [dict(FWD_STAGES=2), dict(DH_STAGES=2), dict(FWD_BV=128), dict(DH_BV=128), dict(FWD_WARPS=4),
         dict(BWD_BV=32), dict(BWD_BV=128), dict(PREP_WARPS=8)]  # launch variants, shape 0
bench_eda_chunk = True
what = "kernels"     # 'kernels' (the tables above), 'model_decode' (sample.py's path), or 'all'
decode_config = "config/eda_125m.py"  # model_decode: the EDA hybrid of this config vs its Transformer
decode_contexts = [1024, 8192, 32768]
decode_model_batches = [1, 64]
decode_steps = 32
compile_eda_chunk = False
chunk_size = kernel.CHUNK_TOKENS
fwd_bv, fwd_warps, fwd_stages = kernel.FWD_BV, kernel.FWD_WARPS, kernel.FWD_STAGES
bwd_bv, bwd_warps, bwd_stages = kernel.BWD_BV, kernel.BWD_WARPS, kernel.BWD_STAGES
from configurator import configure  # noqa: E402
configure(globals())
# ----------------------------------------------------------------------------------------------------

kernel.CHUNK_TOKENS = chunk_size
kernel.FWD_BV, kernel.FWD_WARPS, kernel.FWD_STAGES = fwd_bv, fwd_warps, fwd_stages
kernel.BWD_BV, kernel.BWD_WARPS, kernel.BWD_STAGES = bwd_bv, bwd_warps, bwd_stages
DTYPE = getattr(torch, dtype)
DEV = "cuda"
T0 = time.time()


def versions():
    import triton
    name = torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA device"
    return f"device: {name} | torch {torch.__version__} | triton {triton.__version__}"


def load_fla():
    if not use_fla:
        return None
    try:
        from fla.ops.kda import chunk_kda, fused_recurrent_kda
        import fla
        print(f"FLA {getattr(fla, '__version__', '?')} imported")
        return chunk_kda, fused_recurrent_kda
    except Exception as err:  # optional: the table just loses its FLA rows
        print(f"FLA not available ({type(err).__name__}: {err}); its rows are skipped")
        return None


def make_inputs(B, T, H, HV, K=None, V=None, dt=None, erase=True, seed=0):
    """Layer-like inputs: unit q, k, e; g from the safe gate (Eq. safe_gate) in (-5, 0], fp32; gates in (0, 1)."""
    K, V, dt = K or head_k, V or head_v, dt or DTYPE
    gen = torch.Generator(device=DEV).manual_seed(seed)
    rn = lambda *s: torch.randn(*s, device=DEV, generator=gen)  # noqa: E731
    q = F.normalize(rn(B, T, H, K), dim=-1).to(dt)
    k = F.normalize(rn(B, T, H, K), dim=-1).to(dt)
    v = rn(B, T, HV, V).to(dt)
    e = F.normalize(rn(B, T, HV, K), dim=-1).to(dt) if erase else None
    A_log = torch.log(torch.empty(HV, device=DEV).uniform_(1, 16, generator=gen))
    g = eda.safe_gate(rn(B, T, HV, K), A_log, torch.zeros(HV, K, device=DEV))
    beta = torch.rand(B, T, HV, device=DEV, generator=gen).to(dt)
    gamma = torch.rand(B, T, HV, device=DEV, generator=gen).to(dt) if erase else None
    return q, k, v, e, g, beta, gamma


def rel(a, b):
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


# ----------------------------------------------------------------------------------------------------
# 1. correctness (small shapes, against eda_recurrent in float64 on the GPU)


def check_grads(name, inputs, fn, tol, h0=True, **kw):
    q = inputs[0]
    B, HV, K, V = q.shape[0], inputs[2].shape[2], q.shape[3], inputs[2].shape[3]
    s0 = torch.randn(B, HV, K, V, device=DEV) if h0 else None
    xs = list(inputs) + [s0]
    xt = [x.clone().requires_grad_() if x is not None else None for x in xs]
    xr = [x.double().requires_grad_() if x is not None else None for x in xs]
    o, ht = fn(*xt[:7], initial_state=xt[7], output_final_state=True, **kw)
    orf, htr = eda.eda_recurrent(*xr[:7], initial_state=xr[7], output_final_state=True)
    do, dht = torch.randn_like(o), torch.randn_like(ht)
    ((o.float() * do.float()).sum() + (ht * dht).sum()).backward()
    ((orf * do.double()).sum() + (htr * dht.double()).sum()).backward()
    errs = {"o": rel(o, orf), "ht": rel(ht, htr)}
    for n, a, b in zip(("q", "k", "v", "e", "g", "beta", "gamma", "h0"), xt, xr):
        if a is not None:
            errs["d" + n] = rel(a.grad, b.grad)
    worst = max(errs.values())
    ok = worst <= tol and all(math.isfinite(x) for x in errs.values())
    print(f"  {'PASS' if ok else 'FAIL'} {name}: worst {worst:.1e} (tol {tol:.0e}) "
          + " ".join(f"{n} {v:.1e}" for n, v in errs.items()))
    return ok


def check_all(fla):
    print("correctness vs eda_recurrent (float64):")
    ok = True
    ok &= check_grads("EDA bf16 B=2 T=512 H=2 HV=4", make_inputs(2, 512, 2, 4, seed=1), eda.eda_triton, 1e-2)
    ok &= check_grads("KDA path (e=None) bf16 T=512", make_inputs(2, 512, 2, 4, erase=False, seed=2),
                      eda.eda_triton, 1e-2)
    if check >= 2:  # fp32 and GDN compile their own kernel variants (about 10 s each on the device)
        ok &= check_fp32_and_gdn()
    # decode: 64 tokens one at a time, state updated in place
    q, k, v, e, g, beta, gamma = make_inputs(8, 64, 4, 8, seed=5)
    ok &= check_decode(q, k, v, e, g, beta, gamma)
    if fla is not None:  # same conventions: FLA's chunk_kda equals our KDA path
        chunk_kda = fla[0]
        q, k, v, _, g, beta, _ = make_inputs(2, 512, 2, 4, erase=False, seed=6)
        ours = eda.eda_triton(q, k, v, None, g, beta, None)[0]
        theirs = chunk_kda(q, k, v, g, beta, scale=head_k ** -0.5)[0]
        good = rel(ours, theirs) <= 2e-2
        ok &= good
        print(f"  {'PASS' if good else 'FAIL'} FLA chunk_kda vs our KDA path: {rel(ours, theirs):.1e}")
    print("correctness:", "ALL PASS" if ok else "SOME FAILED")
    return ok


def check_fp32_and_gdn():
    ok = check_grads("EDA fp32 T=300 K=64 V=128", make_inputs(1, 300, 2, 2, 64, 128, torch.float32, seed=3),
                      eda.eda_triton, 1e-4)
    # GDN: scalar decay per head
    q, k, v, _, g, beta, _ = make_inputs(1, 300, 2, 2, 64, 64, torch.float32, erase=False, seed=4)
    ok &= check_grads("GDN scalar g fp32 T=300", (q, k, v, None, g[..., 0].contiguous(), beta, None),
                      eda.eda_triton, 1e-4)
    return ok


def check_decode(q, k, v, e, g, beta, gamma):
    """The decode kernel against eda_recurrent, one token at a time, state updated in place."""
    B, HV = q.shape[0], v.shape[2]
    state = torch.randn(B, HV, head_k, head_v, device=DEV)
    ref = state.double()
    worst = 0.0
    for t in range(q.shape[1]):
        sl = lambda x: x[:, t:t + 1] if x is not None else None  # noqa: E731
        o, state = kernel.eda_decode(*map(sl, (q, k, v, e, g, beta, gamma)), state=state)
        orf, ref = eda.eda_recurrent(*[x.double() if x is not None else None
                                       for x in map(sl, (q, k, v, e, g, beta, gamma))],
                                     initial_state=ref, output_final_state=True)
        worst = max(worst, rel(o, orf), rel(state, ref))
    good = worst <= 1e-2
    print(f"  {'PASS' if good else 'FAIL'} decode, {q.shape[1]} tokens step by step, in place: worst {worst:.1e}")
    return good


# ----------------------------------------------------------------------------------------------------
# 2. chunked kernels: fwd, fwd+bwd, peak memory


def measure(fn, inputs):
    """(fwd ms, fwd+bwd ms, peak MiB) of fn(*inputs) -> output tensor, all float inputs requiring grad."""
    from triton.testing import do_bench
    xs = [x.detach().clone().requires_grad_() if x is not None else None for x in inputs]
    grads = [x for x in xs if x is not None]
    out = fn(*xs)
    do = torch.randn_like(out)

    def fwd():
        return fn(*xs)

    def fwdbwd():
        fn(*xs).backward(do)

    t_f = do_bench(fwd, warmup=warmup, rep=rep, return_mode="median")
    t_fb = do_bench(fwdbwd, warmup=warmup, rep=rep, grad_to_none=grads, return_mode="median")
    for x in grads:
        x.grad = None
    del out
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    fwdbwd()
    torch.cuda.synchronize()
    peak = (torch.cuda.max_memory_allocated() - base) / 2 ** 20
    for x in grads:
        x.grad = None
    return t_f, t_fb, peak


def kernel_cases(fla, extra=True):
    """name -> (fn taking (q, k, v, e, g, beta, gamma) and returning o, needs erase inputs)."""
    scale = head_k ** -0.5
    cases = {
        "eda_triton (EDA)": (lambda q, k, v, e, g, b, gm: eda.eda_triton(q, k, v, e, g, b, gm)[0], True),
        "eda_triton KDA path (e=None)": (lambda q, k, v, e, g, b, gm: eda.eda_triton(q, k, v, None, g, b, None)[0],
                                         False),
    }
    if bench_eda_chunk:
        chunk = torch.compile(eda.eda_chunk) if compile_eda_chunk else eda.eda_chunk
        cases["eda_chunk (PyTorch)"] = (lambda q, k, v, e, g, b, gm: chunk(q, k, v, e, g, b, gm)[0], True)
    if fla is not None:
        chunk_kda = fla[0]

        def doubled(q, k, v, e, g, b, gm, **kw):
            q2, k2, v2, g2, b2 = eda.double_sequence(q, k, v, e, g, b, gm)
            return chunk_kda(q2, k2, v2, g2, b2, scale=scale, **kw)[0][:, 1::2]

        cases["FLA chunk_kda"] = (lambda q, k, v, e, g, b, gm: chunk_kda(q, k, v, g, b, scale=scale)[0], False)
        if not extra:
            return cases
        cases.update({
            "FLA chunk_kda safe_gate": (lambda q, k, v, e, g, b, gm: chunk_kda(
                q, k, v, g, b, scale=scale, safe_gate=True, lower_bound=-5.0)[0], False),
            "EDA via doubled FLA chunk_kda": (doubled, True),
            "EDA via doubled chunk_kda safe_gate": (
                lambda *a: doubled(*a, safe_gate=True, lower_bound=-5.0), True),
        })
    return cases


def bench_kernels(fla, ours):
    """Rows (name, B, T, H, HV, fwd ms, fwd+bwd ms, peak MiB): our cases (ours=True) or the references.
    Ours run first in main(): FLA's first calls autotune for minutes, and a time limit must not cost us
    our own rows."""
    rows = []
    for i, (B, T, H, HV) in enumerate(shapes):
        full = make_inputs(B, T, H, HV, seed=7)
        for name, (fn, erase) in kernel_cases(fla, extra=i < fla_extra_shapes).items():
            if name.startswith("eda_triton") != ours:
                continue
            inputs = full if erase else (full[0], full[1], full[2], None, full[4], full[5], None)
            try:
                t_f, t_fb, peak = measure(fn, inputs)
            except torch.OutOfMemoryError:
                t_f = t_fb = peak = float("nan")
                name = name + " [OOM]"
            except Exception as err:  # one failing comparison must not lose the whole table
                print(f"{name} at {(B, T, H, HV)} failed: {type(err).__name__}: {str(err)[:200]}")
                t_f = t_fb = peak = float("nan")
            torch.cuda.empty_cache()
            rows.append((name, B, T, H, HV, t_f, t_fb, peak))
            print(f"  [{time.time() - T0:5.0f}s] {name:40s} B={B} T={T} H={H} HV={HV}: fwd {t_f:.3f} ms, "
                  f"fwd+bwd {t_fb:.3f} ms, peak {peak:.0f} MiB", flush=True)
    return rows


def bench_sweep():
    """Launch-setting variants of eda_triton on the first shape (fwd, fwd+bwd ms), for tuning notes."""
    B, T, H, HV = shapes[0]
    full = make_inputs(B, T, H, HV, seed=7)
    fn = lambda q, k, v, e, g, b, gm: eda.eda_triton(q, k, v, e, g, b, gm)[0]  # noqa: E731
    for variant in sweep:
        saved = {n: getattr(kernel, n) for n in variant}
        for n, val in variant.items():
            setattr(kernel, n, val)
        try:
            t_f, t_fb, _ = measure(fn, full)
            print(f"  [{time.time() - T0:5.0f}s] sweep {variant}: fwd {t_f:.3f} ms, fwd+bwd {t_fb:.3f} ms", flush=True)
        except Exception as err:
            print(f"  sweep {variant} failed: {type(err).__name__}: {str(err)[:200]}")
        for n, val in saved.items():
            setattr(kernel, n, val)


def profile_kernels():
    """Per-kernel GPU time of one eda_triton fwd+bwd on the first shape (where the time goes)."""
    from torch.profiler import ProfilerActivity, profile as torch_profile
    B, T, H, HV = shapes[0]
    xs = [x.detach().clone().requires_grad_() for x in make_inputs(B, T, H, HV, seed=7)]
    for _ in range(2):  # warm (compiled) before profiling
        eda.eda_triton(*xs)[0].float().sum().backward()
    torch.cuda.synchronize()
    with torch_profile(activities=[ProfilerActivity.CUDA]) as prof:
        o = eda.eda_triton(*xs)[0]
        o.backward(torch.ones_like(o))
        torch.cuda.synchronize()
    try:
        print(prof.key_averages().table(sort_by="device_time_total", row_limit=12))
    except Exception:  # older torch names the column after CUDA
        print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=12))


# ----------------------------------------------------------------------------------------------------
# 3. decode step: one token against a [B, HV, K, V] fp32 state


def bench_decode(fla):
    from triton.testing import do_bench
    rows = []
    H = HV = 16
    for B in decode_batches:
        q, k, v, e, g, beta, gamma = make_inputs(B, 1, H, HV, seed=8)
        state = torch.randn(B, HV, head_k, head_v, device=DEV)
        cases = {
            "eda_decode (EDA, in place)": lambda: kernel.eda_decode(q, k, v, e, g, beta, gamma, state),
            "eda_decode (EDA, new state)": lambda: kernel.eda_decode(q, k, v, e, g, beta, gamma, state,
                                                                     inplace=False),
            "eda_decode KDA path (in place)": lambda: kernel.eda_decode(q, k, v, None, g, beta, None, state),
        }
        if fla is not None:
            fused_recurrent_kda = fla[1]
            cases["FLA fused_recurrent_kda"] = lambda: fused_recurrent_kda(
                q, k, v, g, beta, scale=head_k ** -0.5, initial_state=state, output_final_state=True)
        for name, fn in cases.items():
            ms = do_bench(fn, warmup=warmup, rep=rep, return_mode="median")
            gbs = 2 * state.numel() * 4 / (ms * 1e-3) / 1e9
            rows.append((name, B, ms, gbs))
            print(f"  {name:40s} B={B}: {ms:.4f} ms ({gbs:.0f} GB/s of state read+written)", flush=True)
    return rows


# ----------------------------------------------------------------------------------------------------
# the table


def ratio(rows, num, den, col, B, T, H, HV):
    def get(name):
        for r in rows:
            if r[0] == name and r[1:5] == (B, T, H, HV):
                return r[col]
        return float("nan")
    return get(num) / get(den)


def print_tables(krows, drows):
    print("\n" + versions())
    print(f"K = {head_k}, V = {head_v}, {dtype}, chunk {chunk_size} tokens, do_bench medians\n")
    print("| case | B | T | H | HV | fwd ms | fwd+bwd ms | peak MiB |")
    print("|---|---|---|---|---|---|---|---|")
    for name, B, T, H, HV, f, fb, p in krows:
        print(f"| {name} | {B} | {T} | {H} | {HV} | {f:.3f} | {fb:.3f} | {p:.0f} |")
    print("\n| decode, one token | B | ms | GB/s (state r+w) |")
    print("|---|---|---|---|")
    for name, B, ms, gbs in drows:
        print(f"| {name} | {B} | {ms:.4f} | {gbs:.0f} |")
    print("\nratios (ours / theirs):")
    for (B, T, H, HV) in shapes:
        s = (B, T, H, HV)
        r = lambda a, b, c: ratio(krows, a, b, c, *s)  # noqa: E731
        print(f"  {s}: EDA/chunk_kda fwd {r('eda_triton (EDA)', 'FLA chunk_kda', 5):.2f}x, "
              f"fwd+bwd {r('eda_triton (EDA)', 'FLA chunk_kda', 6):.2f}x, "
              f"peak {r('eda_triton (EDA)', 'FLA chunk_kda', 7):.2f}x | "
              f"EDA/doubled fwd+bwd {r('eda_triton (EDA)', 'EDA via doubled FLA chunk_kda', 6):.2f}x | "
              f"KDA path/chunk_kda fwd {r('eda_triton KDA path (e=None)', 'FLA chunk_kda', 5):.2f}x, "
              f"fwd+bwd {r('eda_triton KDA path (e=None)', 'FLA chunk_kda', 6):.2f}x")
    for B in decode_batches:
        get = {n: ms for n, b, ms, _ in drows if b == B}
        if "FLA fused_recurrent_kda" in get:
            print(f"  decode B={B}: EDA in place / fused_recurrent_kda "
                  f"{get['eda_decode (EDA, in place)'] / get['FLA fused_recurrent_kda']:.2f}x, "
                  f"EDA new state {get['eda_decode (EDA, new state)'] / get['FLA fused_recurrent_kda']:.2f}x")


# ----------------------------------------------------------------------------------------------------
# 4. model decoding (sample.py's path): tokens/s and memory per sequence against context length, for the
# EDA hybrid and the Transformer of the same config. The caches are filled with random content up to
# the context length (what a prefill would leave, without paying for it); then `decode_steps` tokens are
# decoded one at a time through GPT.decode_step and timed with CUDA events.


def model_decode_table():
    import runpy
    import dataclasses
    from model import GPT, GPTConfig
    fields = {f.name for f in dataclasses.fields(GPTConfig)}
    base = {k: v for k, v in runpy.run_path(decode_config).items() if k in fields}
    rows = []
    for mixer in ("eda", "transformer"):
        for ctx_len in decode_contexts:
            for B in decode_model_batches:
                cfg = GPTConfig(**dict(base, mixer=mixer, block_size=ctx_len + decode_steps + 8))
                torch.cuda.empty_cache()
                model = GPT(cfg).to(DEV, DTYPE).eval()
                cache = model.new_cache(B, device=DEV, dtype=DTYPE)
                for layer in cache["layers"]:  # random memory content, as if ctx_len tokens had been read
                    for t in layer.values():
                        t.normal_()
                cache["pos"] = ctx_len
                # decode memory per sequence: the cache (KV for attention layers, conv tail + fp32 state for
                # linear layers); the KV part grows with ctx_len, the linear part does not
                per_seq = sum(t.numel() * t.element_size() for layer in cache["layers"] for t in layer.values()) / B
                tok = torch.randint(0, cfg.vocab_size, (B,), device=DEV)
                with torch.no_grad():
                    for _ in range(3):  # warm-up (kernels compile on first use)
                        model.decode_step(tok, cache)
                        cache["pos"] -= 1
                    torch.cuda.synchronize()
                    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    start.record()
                    for _ in range(decode_steps):
                        logits, cache = model.decode_step(tok, cache)
                    end.record()
                    torch.cuda.synchronize()
                ms = start.elapsed_time(end) / decode_steps
                rows.append((mixer, ctx_len, B, ms, B * 1000 / ms, per_seq / 2**20))
                if profile and ctx_len == decode_contexts[-1] and B == decode_model_batches[-1]:
                    # where a decode step's time goes: CPU (launch-bound) vs GPU time per operator
                    from torch.profiler import ProfilerActivity, profile as torch_profile
                    with torch.no_grad(), torch_profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                        model.decode_step(tok, cache)
                        torch.cuda.synchronize()
                    print(f"\nprofile of one {mixer} decode step, ctx {ctx_len}, B {B}:")
                    print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=15))
                del model, cache
    print(f"\nmodel decode ({decode_config}, {dtype}, {decode_steps} steps after a context of ctx tokens)")
    print(f"{'mixer':<12}{'ctx':>7}{'B':>5}{'ms/step':>10}{'tok/s':>12}{'MiB/seq':>10}")
    for r in rows:
        print(f"{r[0]:<12}{r[1]:>7}{r[2]:>5}{r[3]:>10.3f}{r[4]:>12.0f}{r[5]:>10.2f}")
    for ctx_len in decode_contexts:
        for B in decode_model_batches:
            e = next(r for r in rows if r[:3] == ("eda", ctx_len, B))
            t = next(r for r in rows if r[:3] == ("transformer", ctx_len, B))
            print(f"ctx {ctx_len:>6} B {B:>3}: EDA/Transformer memory per sequence {e[5] / t[5]:.3f}, "
                  f"tokens/s {e[4] / t[4]:.2f}x")


def main():
    if not torch.cuda.is_available():
        sys.exit("bench.py needs a CUDA GPU")
    if what not in ("kernels", "model_decode", "all"):
        sys.exit(f"bench.py: what must be 'kernels', 'model_decode' or 'all', got {what!r}")
    print(versions(), flush=True)
    if what in ("model_decode", "all"):
        model_decode_table()
        if what == "model_decode":
            return
    fla = load_fla()
    if check:
        check_all(fla)
    print("\ndecode:", flush=True)
    drows = bench_decode(fla)
    print("\nchunked kernels, ours:", flush=True)
    krows = bench_kernels(fla, ours=True)
    if profile:
        try:
            profile_kernels()
        except Exception as err:
            print(f"profile failed: {type(err).__name__}: {str(err)[:200]}")
    print("\nchunked kernels, references:", flush=True)
    krows += bench_kernels(fla, ours=False)
    print_tables(krows, drows)
    if sweep:
        print("\nlaunch-setting sweep (EDA, first shape):", flush=True)
        bench_sweep()


if __name__ == "__main__":
    main()
