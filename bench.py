"""
Benchmarks (GPU), each appending JSON rows (command, date, commit, device, figures) to `results_file`:

    python bench.py                      # kernels: checks, then fwd / fwd+bwd / peak, decode steps, FLA's beside
    python bench.py --what=model_decode  # sample.py's decoding: EDA hybrid vs Transformer
    python bench.py --what=model_train   # train.py's step, EDA hybrid vs Transformer: per layer, per kernel kind

Times are do_bench medians in ms (kernels: CUDA-graph replays; "fwd": a training forward; "peak MiB": beyond inputs).
Nothing is timed unless the kernels match the float64 reference first (else the run exits non-zero). FLA is optional.
"""
import dataclasses
import itertools
import os
import runpy
import shlex
import sys
import time

# FLA autotunes for minutes in every new process: keep its choices in Triton's cache for later runs (0: retime)
os.environ.setdefault("TRITON_CACHE_AUTOTUNING", "1")
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.profiler import ProfilerActivity, profile as torch_profile  # noqa: E402
from triton.testing import do_bench  # noqa: E402

import eda  # noqa: E402
import kernel  # noqa: E402
from configurator import configure  # noqa: E402
from decode import GraphDecoder, decode_state_snapshot, decode_step, new_cache  # noqa: E402
from model import GPT, GPTConfig  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "scripts"))
import rows as result_rows  # noqa: E402  (scripts/rows.py: the rows' provenance and the append)

# settings (override with config files or --key=value, see configurator.py) --------------------------
results_file = "out/bench.jsonl"  # every row is appended here (RESULTS.md's are results/*.jsonl)
shapes = [(8, 4096, 16, 16), (1, 32768, 16, 16), (4, 4096, 8, 16)]  # (B, T, H, HV)
head_k = head_v = 128  # K, V
dtype = "bfloat16"
decode_batches, decode_rounds = [1, 64], 5  # decode_kernel: every case in turn, 5 (odd) rounds: a median
warmup, rep = 10, 50  # ms, do_bench's warm-up and repetitions
check = 1            # correctness before timing: 0 none, 1 bf16 EDA/KDA + decode (+ FLA agreement), 2 + fp32, GDN
profile = True       # per-kernel GPU times of one fwd+bwd (torch.profiler): EDA, KDA path, FLA safe gate, sweep
profile_shapes = None  # [(B, T, H, HV), ...] profiled; None: the first shape
use_fla = True       # compare with FLA when it imports
fla_extra_shapes = 1  # FLA's safe_gate rows for this many shapes (FLA's autotuning is slow)
# launch variants (kernel.LAUNCH's names; 'chunk_size' too), each checked against float64 (check >= 1)
sweep = [dict(FILL_PROGRAMS=256), dict(BWD_BV_K128=64), dict(DH_WARPS=4), dict(PREP_WARPS=8)]
sweep_shapes = None  # [(B, T, H, HV), ...] of the sweep; None: the first shape
sweep_kda = False    # the sweep times each variant on our KDA path (e=None) too: the launch settings are shared
bench_eda_chunk, compile_eda_chunk = True, False  # rows of eda_chunk (PyTorch's chunk form), torch.compile'd
what = "kernels"     # 'kernels', 'model_decode' (sample.py's path), 'model_train' (a training step), or 'all'
decode_config = "config/eda_125m.py"  # model_decode: the EDA hybrid of this config vs its Transformer
decode_contexts, decode_model_batches, decode_steps = [4096, 32768], [1, 8, 64], 32  # model_decode's grid, tokens timed
decode_modes = ["graph", "compiled", "eager"]  # GraphDecoder (generate's CUDA path), it compiled, decode_step
decode_attention = "auto"  # model_decode: GPTConfig.attn_decode ('auto': the split-KV kernel where it applies)
train_config = "config/eda_125m.py"  # model_train: the EDA hybrid of this config vs its Transformer
train_shapes = [(8, 4096)]  # model_train: (batch, block_size) of the profiled training steps
train_compile = False      # model_train: torch.compile each layer and block, as train.py's compile=True does
train_overrides = {}       # model_train: GPTConfig fields over the config's, e.g. {'la_recompute_states': True}
chunk_size = kernel.CHUNK_TOKENS  # the kernel tables' chunk (model_decode and model_train run kernel.py's defaults)
shared_gpu = False   # True: time even while other processes hold the GPU (their work shares its time)
configure(globals())
# ----------------------------------------------------------------------------------------------------
DTYPE, DEV, T0, PROVENANCE = getattr(torch, dtype), "cuda", time.time(), {}
COMMAND = "python " + shlex.join(sys.argv)  # what every row of this run says made it


def emit(bench, **figures):
    PROVENANCE or PROVENANCE.update(result_rows.provenance(COMMAND))
    result_rows.append(results_file, dict(bench=bench, **PROVENANCE, **figures))
    print(f"  [{time.time() - T0:5.0f}s] {bench}: " + ", ".join(f"{k} {v}" for k, v in figures.items()), flush=True)


def load_fla():
    """FLA's (chunk_kda, fused_recurrent_kda), or None (optional: the rows lose FLA's cases)."""
    try:
        import fla
        from fla.ops.kda import chunk_kda, fused_recurrent_kda
    except Exception as err:
        return print(f"FLA not available ({type(err).__name__}: {err}); its rows are skipped")
    print(f"FLA {getattr(fla, '__version__', '?')} imported")
    return chunk_kda, fused_recurrent_kda


def fused(*args, launch=None, **kw):
    """eda.eda_triton with this run's chunk size and `launch`'s changes to kernel.LAUNCH (or chunk_size)."""
    launch = dict(launch or {})
    return eda.eda_triton(*args, chunk_size=launch.pop("chunk_size", chunk_size), launch=launch, **kw)


def make_inputs(B, T, H, HV, K=None, V=None, dt=None, erase=True, seed=0):
    """Layer-like inputs on the GPU: unit q, k, e; g from the safe gate in (-5, 0], fp32; gates in (0, 1)."""
    K, V, dt = K or head_k, V or head_v, dt or DTYPE
    gen = torch.Generator(device=DEV).manual_seed(seed)
    rn = lambda *s: torch.randn(*s, device=DEV, generator=gen)  # noqa: E731
    q, k, e = (F.normalize(rn(B, T, h, K), dim=-1).to(dt) for h in (H, H, HV))
    v = rn(B, T, HV, V).to(dt)
    A_log = torch.log(torch.empty(HV, device=DEV).uniform_(1, 16, generator=gen))
    g = eda.safe_gate(rn(B, T, HV, K), A_log, torch.zeros(HV, K, device=DEV))
    beta, gamma = (torch.rand(B, T, HV, device=DEV, generator=gen).to(dt) for _ in range(2))
    return q, k, v, e if erase else None, g, beta, gamma if erase else None


def rel(a, b):
    """a's relative L2 error against b; inf for NaN, so that a NaN is the worst error, never skipped by max()."""
    err = ((a.double() - b.double()).norm() / b.double().norm().clamp_min(1e-30)).item()
    return err if err == err else float("inf")


def nbytes(tensors):
    return sum(t.numel() * t.element_size() for t in tensors)


def leaves(inputs, cast=lambda x: x.detach().clone()):
    return [cast(x).requires_grad_() if x is not None else None for x in inputs]


def bench_ms(fn, grads=None, mode="median"):
    return do_bench(fn, warmup=warmup, rep=rep, grad_to_none=grads, return_mode=mode)


def capture(fn, warm):
    """(fn's CUDA graph, warm()'s result); warm() runs first on a side stream (compiled, autotuned, allocated)."""
    side, graph = torch.cuda.Stream(), torch.cuda.CUDAGraph()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        result = warm()
    torch.cuda.current_stream().wait_stream(side)
    with torch.cuda.graph(graph):
        fn()
    return graph, result


def event_ms(fn, n, warm):
    """ms per call of fn over n calls (CUDA events, queued after warm()'s work), peak memory counted from there."""
    warm()
    torch.cuda.reset_peak_memory_stats()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(n):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / n


def profiled(fn):
    with torch_profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return prof


# 1. correctness (small shapes, against eda_recurrent in float64 on the GPU) ----------------------------------
H0_DRAWS = 4
# d(gamma) is a sum that cancels: checked at twice the bf16 tolerance (its measured spread: notes/kernel.md)
TOL_SCALE = {"dgamma": 2}


def check_grads(checks, name, inputs, fn, tol, h0_seed=0):
    """fn's output, final state and gradients against eda_recurrent's in float64 from a random initial state."""
    (B, _, _, K), (_, _, HV, V) = inputs[0].shape, inputs[2].shape
    gen = torch.Generator(device=DEV).manual_seed(h0_seed)
    xs = list(inputs) + [torch.randn(B, HV, K, V, device=DEV, generator=gen)]
    xt, xr = leaves(xs, torch.clone), leaves(xs, torch.Tensor.double)
    o, ht = fn(*xt[:7], initial_state=xt[7], output_final_state=True)
    orf, htr = eda.eda_recurrent(*xr[:7], initial_state=xr[7], output_final_state=True)
    # the cotangents come from the draw's generator: every variant meets the same draws, and a rerun the same check
    do = torch.randn(o.shape, device=DEV, generator=gen).to(o.dtype)
    dht = torch.randn(ht.shape, device=DEV, generator=gen)
    ((o.float() * do.float()).sum() + (ht * dht).sum()).backward()
    ((orf * do.double()).sum() + (htr * dht.double()).sum()).backward()
    errs = {"o": rel(o, orf), "ht": rel(ht, htr)}
    names = ("q", "k", "v", "e", "g", "beta", "gamma", "h0")
    errs.update({"d" + n: rel(a.grad, b.grad) for n, a, b in zip(names, xt, xr) if a is not None})
    verdict(checks, name, max(x / TOL_SCALE.get(n, 1) for n, x in errs.items()), tol,
            f" (d(gamma) tol {TOL_SCALE['dgamma'] * tol:.0e}) " + " ".join(f"{n} {v:.1e}" for n, v in errs.items()))


def verdict(checks, name, err, tol, detail=""):
    checks[name] = err <= tol
    print(f"  {'PASS' if checks[name] else 'FAIL'} {name}: worst {err:.1e} (tol {tol:.0e}){detail}")


def check_all(fla):
    """Every check, each one's verdict in a 'check' row. False if any failed."""
    print("correctness vs eda_recurrent (float64):")
    checks = {}
    eda_in, kda_in = (lambda: make_inputs(2, 512, 2, 4, seed=1)), (lambda: make_inputs(2, 512, 2, 4, erase=False, seed=2))
    for s in range(H0_DRAWS):  # the initial state N(0, 1) dominates d(gamma)'s bf16 error at this length
        check_grads(checks, f"EDA bf16 B=2 T=512 H=2 HV=4, h0 draw {s}", eda_in(), fused, 1e-2, h0_seed=s)
    check_grads(checks, "KDA path (e=None) bf16 T=512", kda_in(), fused, 1e-2)
    for variant in list(sweep):  # the launch variants the sweep times compute the same thing
        try:
            for path, inputs in (("EDA", eda_in), ("KDA path", kda_in))[:1 + sweep_kda]:
                check_grads(checks, f"{path} bf16 B=2 T=512 H=2 HV=4, launch {variant}", inputs(),
                            lambda *a, **kw: fused(*a, launch=variant, **kw), 1e-2)
        except Exception as err:  # e.g. more shared memory than an SM has: not timed, not a wrong result
            print(f"  SKIP launch {variant}: it does not run here ({type(err).__name__}: {str(err)[:160]}); "
                  "left out of the sweep")
            sweep.remove(variant)
    if check >= 2:  # fp32 and GDN compile their own kernel variants (about 10 s each on the device)
        check_grads(checks, "EDA fp32 T=300 K=64 V=128", make_inputs(1, 300, 2, 2, 64, 128, torch.float32, seed=3),
                    fused, 1e-4)
        q, k, v, _, g, beta, _ = make_inputs(1, 300, 2, 2, 64, 64, torch.float32, erase=False, seed=4)
        check_grads(checks, "GDN scalar g fp32 T=300", (q, k, v, None, g[..., 0].contiguous(), beta, None), fused, 1e-4)
    # the decode kernel, one token at a time with its state updated in place
    ins, state = make_inputs(8, 64, 4, 8, seed=5), torch.randn(8, 8, head_k, head_v, device=DEV)
    ref, worst = state.double(), 0.0
    for t in range(64):
        xs = [x[:, t:t + 1] if x is not None else None for x in ins]
        o, state = kernel.eda_decode(*xs, state=state)
        orf, ref = eda.eda_recurrent(*[x.double() if x is not None else None for x in xs], initial_state=ref,
                                     output_final_state=True)
        worst = max(worst, rel(o, orf), rel(state, ref))
    verdict(checks, "decode, 64 tokens step by step, in place", worst, 1e-2)
    if fla is not None:  # same conventions: FLA's chunk_kda equals our KDA path
        q, k, v, _, g, beta, _ = make_inputs(2, 512, 2, 4, erase=False, seed=6)
        verdict(checks, "FLA chunk_kda vs our KDA path", rel(fused(q, k, v, None, g, beta, None)[0],
                                                               fla[0](q, k, v, g, beta, scale=head_k ** -0.5)[0]), 2e-2)
    ok = all(checks.values())
    print("correctness:", "ALL PASS" if ok else "SOME FAILED")
    emit("check", ok=ok, checks=checks)
    return ok


# 2. chunked kernels: fwd, fwd+bwd, peak memory; the launch sweep; per-kernel profiles ------------------------
def measure(fn, inputs):
    """(fwd ms, fwd+bwd ms, peak MiB) of fn(*inputs) -> output tensor, all float inputs requiring grad; times of
    CUDA-graph replays: the GPU's alone, not the host's launch path (whose load moved small shapes' timings)."""
    xs = leaves(inputs)
    grads = [x for x in xs if x is not None]
    do = torch.randn_like(fn(*xs))
    fwdbwd = lambda: fn(*xs).backward(do)  # noqa: E731  (the replays write the captured gradients again)
    t_f, t_fb = [bench_ms(capture(f, lambda f=f: [f(), f(), *(setattr(x, "grad", None) for x in grads)])[0].replay)
                 for f in (lambda: fn(*xs), fwdbwd)]
    for x in grads:
        x.grad = None
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()  # (the allocator counts on the host: no sync needed)
    base = torch.cuda.memory_allocated()
    fwdbwd()
    return t_f, t_fb, (torch.cuda.max_memory_allocated() - base) / 2 ** 20


def kernel_cases(fla, extra=True):
    """name -> fn(q, k, v, e, g, beta, gamma) -> o. Ours as model.py calls them (its gates bound g: check_g=False;
    the default check_g=True reads g back, a device sync no CUDA graph holds)."""
    chunk = torch.compile(eda.eda_chunk) if compile_eda_chunk else eda.eda_chunk
    safe = dict(safe_gate=True, lower_bound=-5.0)
    kda = lambda **kw: (lambda q, k, v, e, g, b, gm: fla[0](q, k, v, g, b, scale=head_k ** -0.5, **kw)[0])  # noqa: E731
    cases = {"eda_triton (EDA)": lambda *a: fused(*a, check_g=False)[0],
             "eda_triton KDA path (e=None)": lambda q, k, v, _, g, b, __: fused(q, k, v, None, g, b, None, check_g=False)[0],
             "eda_chunk (PyTorch)": bench_eda_chunk and (lambda *a: chunk(*a)[0])}
    if fla is not None:
        cases.update({"FLA chunk_kda": kda(), "FLA chunk_kda safe_gate": extra and kda(**safe)})
    return {name: fn for name, fn in cases.items() if fn}


def time_case(case, fn, shape, launch=None, erase=True):
    """A 'kernel' row of fn on make_inputs(*shape): fwd, fwd+bwd, peak (None: failed, e.g. out of memory); if it ran."""
    try:
        t_f, t_fb, peak = measure(fn, make_inputs(*shape, seed=7, erase=erase))
    except Exception as err:
        print(f"{case} {launch or ''} at {list(shape)} failed: {type(err).__name__}: {str(err)[:200]}")
        t_f = t_fb = peak = None
    torch.cuda.empty_cache()
    emit("kernel", case=case, shape=list(shape), launch=launch or {}, fwd_ms=t_f and round(t_f, 3),
         fwd_bwd_ms=t_fb and round(t_fb, 3), peak_mib=peak and round(peak))
    return t_f is not None


def bench_kernels(fla, ours):
    """Ours (then the launch sweep) or the references: a 'kernel' row per case and shape, with `profile` a 'profile'
    row each at profile_shapes (EDA, our KDA path; FLA's safe-gate chunk_kda). Ours run first (FLA autotunes)."""
    for i, s in enumerate(shapes):
        for name, fn in kernel_cases(fla, extra=i < fla_extra_shapes).items():
            if name.startswith("eda_triton") == ours:
                time_case(name, fn, s)
    cases = kernel_cases(fla)
    for s, name in itertools.product((profile_shapes or shapes[:1]) if profile else (),
                                     ("eda_triton (EDA)", "eda_triton KDA path (e=None)", "FLA chunk_kda safe_gate")):
        if name in cases and name.startswith("eda_triton") == ours:
            profile_one(name, cases[name], s)
    # the sweep: launch {} (this run's settings), then each variant, each profiled (which kernels it sped up)
    paths, sweep_at = (True, False)[:1 + sweep_kda], sweep_shapes or shapes[:1]
    for erase, s, variant in itertools.product(paths, sweep_at, [{}] + sweep) if ours and sweep else ():
        case = "eda_triton (EDA)" if erase else "eda_triton KDA path (e=None)"
        fn = lambda *a, v=variant: fused(*a, check_g=False, launch=v)[0]  # noqa: E731
        if time_case(case, fn, s, variant, erase) and profile:
            profile_one(case, fn, s, variant, erase)


def profile_one(case, fn, shape, launch=None, erase=True):
    """A 'profile' row: GPU ms of each kernel in a fwd+bwd of fn on make_inputs(*shape); a failure costs it only."""
    try:
        inputs = make_inputs(*shape, seed=7, erase=erase)
        do = torch.ones_like(fn(*inputs))
        for xs in (leaves(inputs), leaves(inputs)):  # compiled and autotuned before the profiled call
            fn(*xs).backward(do)
        xs, per = leaves(inputs), {}  # fresh: else the profiled backward adds to their gradients (kernels of its own)
        torch.cuda.synchronize()
        for evt in profiled(lambda: fn(*xs).backward(do)).key_averages():
            per[evt.key[:60]] = per.get(evt.key[:60], 0.0) + evt.self_device_time_total / 1e3
        emit("profile", case=case, shape=list(shape), launch=launch or {},
             kernels={k: round(ms, 3) for k, ms in sorted(per.items(), key=lambda x: -x[1]) if ms > 0})
    except Exception as err:
        print(f"profile failed: {type(err).__name__}: {str(err)[:200]}")
    torch.cuda.empty_cache()


# 3. decode step: one token against a [B, HV, K, V] fp32 state ------------------------------------------------
def bench_decode(fla):
    """A 'decode_kernel' row per case and batch: GPU time of a CUDA-graph replay (as generate runs it), the median of
    rounds of all cases in turn (clock drift hits all alike), the state's bytes moved, the eager call (host too)."""
    for B in decode_batches:
        q, k, v, e, g, beta, gamma = make_inputs(B, 1, 16, 16, seed=8)  # H = HV = 16
        state = torch.randn(B, 16, head_k, head_v, device=DEV)
        dec = lambda *a, **kw: (lambda: kernel.eda_decode(*a, state, **kw))  # noqa: E731
        cases = {"eda_decode (EDA, in place)": dec(q, k, v, e, g, beta, gamma),
                 "eda_decode (EDA, new state)": dec(q, k, v, e, g, beta, gamma, inplace=False),
                 "eda_decode KDA path (in place)": dec(q, k, v, None, g, beta, None)}
        if fla is not None:
            cases["FLA fused_recurrent_kda"] = lambda: fla[1](q, k, v, g, beta, scale=head_k ** -0.5,
                                                             initial_state=state, output_final_state=True)
        for name, fn in cases.items():  # from here on, a case is its graph and its eager time (the warm-up)
            cases[name] = capture(fn, lambda: bench_ms(fn))
        times = zip(*[[round(bench_ms(g.replay), 4) for g, _ in cases.values()] for _ in range(decode_rounds)])
        for (name, (_, eager)), ms in zip(cases.items(), map(sorted, times)):  # ms[len(ms) // 2]: the median
            emit("decode_kernel", case=name, B=B, H=16, HV=16, ms=ms[len(ms) // 2], ms_range=[ms[0], ms[-1]],
                 rounds=len(ms), gb_s=round(2 * state.numel() * 4e-6 / ms[len(ms) // 2]), eager_ms=round(eager, 4))


# 4. model decoding (sample.py's path) and 5. a model's training step (train.py's) -----------------------------
DECODE_TOL = 5e-2  # relative L2 error of a decode step's logits against eager's, bf16
FIELDS = {f.name for f in dataclasses.fields(GPTConfig)}  # what a config file sets of the model
KERNEL_KINDS = [  # (kind, substrings of a CUDA kernel name); the first match wins
    ("EDA (kernel.py)", ("_eda_",)), ("attention (SDPA)", ("flash", "fmha", "sdpa", "attention")),
    ("matmul (cuBLAS)", ("gemm", "nvjet", "cutlass", "xmma", "splitk")), ("fused (torch.compile)", ("triton_",))]


def io_floor_bytes(B, T, H, HV, erase, K=128, V=128):
    """The bytes one fwd+bwd must move at least: the inputs read twice (forward, backward), their gradients written
    once, o written and do read (bf16 but g, fp32); nothing the design keeps between the passes."""
    inputs = B * T * (2 * H * K * 2 + HV * V * 2 + HV * K * 4 + HV * 2 + (HV * K * 2 + HV * 2 if erase else 0))
    return 3 * inputs + 2 * B * T * HV * V * 2


@torch.no_grad()
def model_decode_table():
    """decode_config's EDA hybrid and Transformer, caches of random content up to each context, decode_steps tokens
    in each of decode_modes: a 'model_decode' row each (ms/step, tok/s, cache MiB a sequence, the bytes a step must
    read over its time against the copy bandwidth), then 'model_decode_check' (kernels a step, worst logits)."""
    if not decode_modes or set(decode_modes) - {"graph", "compiled", "eager"}:
        sys.exit(f"bench.py: decode_modes must be a non-empty list of 'graph', 'compiled', 'eager'; got {decode_modes!r}")
    base = {k: v for k, v in runpy.run_path(decode_config).items() if k in FIELDS}
    # the yardstick: a 1 GiB device-to-device copy (its buffer freed once timed)
    copy_bw = 2**31 / (bench_ms(torch.empty(2**29, dtype=torch.bfloat16, device=DEV).clone, mode="mean") * 1e-3)
    emit("copy_bandwidth", tb_s=round(copy_bw / 1e12, 2))
    launches, checks = {}, []
    for mixer, ctx_len, B in itertools.product(("eda", "transformer"), decode_contexts, decode_model_batches):
        torch.cuda.empty_cache()
        model = GPT(GPTConfig(**dict(base, mixer=mixer, block_size=ctx_len + decode_steps + 8,
                                     attn_decode=decode_attention))).to(DEV, DTYPE).eval()
        cache = new_cache(model, B, device=DEV, dtype=DTYPE)
        # random content, as if ctx_len tokens had been read (KV grows with ctx_len; conv tails and states do not)
        per_seq = nbytes(t.normal_() for layer in cache["layers"] for t in layer.values()) / B
        # what a step must read at least: every weight once, the linear states and conv tails, ctx_len cached K and V
        need = nbytes(model.parameters()) + sum(
            nbytes([t]) * (ctx_len / t.shape[2] if block.is_attention and name in "kv" else 1)
            for layer, block in zip(cache["layers"], model.blocks) for name, t in layer.items())
        tok = torch.randint(0, model.config.vocab_size, (B,), device=DEV)
        restore = decode_state_snapshot(model, cache)  # each mode starts from the same conv tails and states
        cache["pos"] = ctx_len
        ref = decode_step(model, tok.view(B, 1), cache)[0].float()
        for mode in decode_modes:
            restore()
            cache["pos"] = ctx_len
            if mode == "compiled":  # a fresh compile per model: no recompile limit, no stale graph
                torch._dynamo.reset()
            step = (GraphDecoder(model, cache, compile=mode == "compiled") if mode != "eager"
                    else (lambda t: decode_step(model, t, cache)[0]))

            def at_ctx(t=tok):  # a step at the cache's last position, which it leaves there
                cache["pos"] = ctx_len
                return step(t)
            checks.append((mixer, mode, ctx_len, B, rel(at_ctx(tok.view(B, 1)).float(), ref)))
            ms = event_ms(lambda: step(tok), decode_steps, lambda: (at_ctx(), at_ctx(), cache.update(pos=ctx_len)))
            emit("model_decode", config=decode_config, mixer=mixer, mode=mode, ctx=ctx_len, B=B, ms=round(ms, 3),
                 tok_s=round(B * 1000 / ms), mib_per_seq=round(per_seq / 2**20, 2),
                 floor_pct=round(100 * need / (ms * 1e-3) / copy_bw, 1))
            if (mixer, mode) not in launches and mode != "eager":  # the static step once, outside its graph
                step.pos.fill_(ctx_len)
                prof = profiled(lambda: step.step_fn(model, step.tok, cache, step.pos))
                launches[mixer, mode] = sum(e.device_type == torch.autograd.DeviceType.CUDA for e in prof.events())
            del step  # (its graph's memory, before the next mode captures one)
    worst = max(checks, key=lambda c: c[4])
    emit("model_decode_check", kernels_per_step={f"{m} {mode}": n for (m, mode), n in launches.items()},
         worst=float(f"{worst[4]:.1e}"), worst_at=dict(zip(("mixer", "mode", "ctx", "B"), worst[:4])),
         tol=DECODE_TOL, ok=worst[4] < DECODE_TOL)
    if not worst[4] < DECODE_TOL:
        sys.exit("bench.py: a decode mode's logits differ from eager decode_step's (the model_decode_check row)")


def model_train_table():
    """Per model and shape a 'model_train_layer' row per layer type: count, fwd+bwd ms, its core's alone (eda_triton,
    SDPA; graph replays), bytes a token its forward keeps for the backward; then 'model_train_step': ms a step (fp32
    weights, bf16 autocast, no optimizer, after two warm-up steps), tok/s, peak GiB, a profiled step's GPU ms by kind."""
    base = {k: v for k, v in runpy.run_path(train_config).items() if k in FIELDS}
    if unknown := sorted(set(train_overrides) - FIELDS):
        sys.exit(f"bench.py: train_overrides names {unknown}, which are not GPTConfig fields")
    for (B, T), mixer in itertools.product(train_shapes, ("eda", "transformer")):
        torch.cuda.empty_cache()
        model = GPT(GPTConfig(**dict(base, **train_overrides, mixer=mixer, block_size=T)), compile=train_compile).to(DEV)
        if train_compile:  # as train.py's compile: each block in place, one graph reused by every block of a kind
            for blk in model.blocks:
                blk.compile()
        row = lambda bench, **figures: emit(bench, config=train_config, mixer=mixer, overrides=train_overrides,  # noqa: E731
                                            B=B, T=T, compiled=train_compile, **figures)
        cfg, seen = model.config, {}
        for layer in (layer for blk in model.blocks for layer in (blk.mixer, blk.ffn)):
            name = type(layer).__name__ + (f" ({cfg.mixer})" if type(layer).__name__ == "LinearAttention" else "")
            seen.setdefault(name, [layer, 0])[1] += 1
        for name, (layer, count) in seen.items():
            h = torch.randn(B, T, cfg.n_embd, device=DEV, requires_grad=True)  # the fp32 residual stream
            dy = torch.randn(B, T, cfg.n_embd, device=DEV, dtype=DTYPE)
            layer_fn = torch.compile(layer) if train_compile else layer
            forward = lambda: torch.autocast(DEV, dtype=DTYPE)(layer_fn)(h)  # noqa: E731
            whole = bench_ms(lambda: forward().backward(dy), [h] + list(layer.parameters()))
            before, out = torch.cuda.memory_allocated(), forward()
            kept = (torch.cuda.memory_allocated() - before - nbytes([out])) / (B * T)
            del out
            core = None
            if name.startswith("LinearAttention"):
                ins = make_inputs(B, T, cfg.la_n_head, cfg.la_n_v_head, cfg.la_head_dim, cfg.la_v_head_dim,
                                  erase=cfg.mixer == "eda")
                la = lambda *a: eda.eda_triton(*a, check_g=False, recompute_states=cfg.la_recompute_states)[0]  # noqa: E731
                core = measure(la, ins)[1]
            elif name == "GatedAttention":
                ins = [torch.randn(B, n, T, cfg.head_dim, device=DEV, dtype=DTYPE)
                       for n in (cfg.n_head, cfg.kv_heads, cfg.kv_heads)]
                core = measure(lambda q, k, v: F.scaled_dot_product_attention(
                    q, k, v, is_causal=True, enable_gqa=cfg.kv_heads != cfg.n_head), ins)[1]
            row("model_train_layer", layer=name, count=count, fwd_bwd_ms=round(whole, 3),
                core_ms=round(core, 3) if core is not None else None, kept_bytes_per_token=round(kept))
        x, y = (torch.randint(0, model.config.vocab_size, (B, T), device=DEV) for _ in range(2))

        def step():
            with torch.autocast(DEV, dtype=DTYPE):
                _, loss, aux = model(x, y, chunked_loss=True)
            (loss + aux).backward()
            model.zero_grad(set_to_none=True)
        ms = event_ms(step, 3, lambda: (step(), step()))
        peak = torch.cuda.max_memory_allocated()
        events, kinds = profiled(step).key_averages(), {}
        for evt in [e for e in events if str(getattr(e, "device_type", "")).endswith("CUDA")] or events:
            kind = next((k for k, keys in KERNEL_KINDS if any(s in evt.key.lower() for s in keys)), "other")
            kinds[kind] = round(kinds.get(kind, 0.0) + evt.self_device_time_total / 1e3, 3)
        row("model_train_step", ms=round(ms, 1), tok_s=round(B * T * 1000 / ms), peak_gib=round(peak / 2**30, 1),
            gpu_ms_by_kind=kinds)
        del model, step


def main():
    if not torch.cuda.is_available():
        sys.exit("bench.py needs a CUDA GPU")
    if what not in ("kernels", "model_decode", "model_train", "all"):
        sys.exit(f"bench.py: what must be 'kernels', 'model_decode', 'model_train' or 'all', got {what!r}")
    free, total = torch.cuda.mem_get_info()  # held beyond ours, less ~1 GiB for our CUDA context:
    held = max(0.0, (total - free - torch.cuda.memory_reserved()) / 2**30 - 1.0)
    if held > 1.0:  # timings taken beside other work are of the two together, not of the kernels
        if not shared_gpu:
            sys.exit(f"bench.py: other processes hold {held:.1f} GiB of this GPU, so the timings would share it "
                     f"with their work; run alone, or pass --shared_gpu=True to time anyway")
        print(f"NOTE: other processes hold {held:.1f} GiB of this GPU (--shared_gpu=True): the timings share it")
    if what in ("model_train", "all"):
        model_train_table()
    if what in ("model_decode", "all"):
        model_decode_table()
    if what in ("kernels", "all"):
        fla = load_fla() if use_fla else None
        if check and not check_all(fla):  # timings of a kernel that computes the wrong thing are not to be quoted
            sys.exit("bench.py: the correctness check failed (the FAIL lines above); no timings")
        bench_decode(fla)
        bench_kernels(fla, ours=True)  # and the sweep, before the references: FLA's autotuning may outlast a limit
        bench_kernels(fla, ours=False)
    print(f"rows: {results_file}")


if __name__ == "__main__":
    main()
