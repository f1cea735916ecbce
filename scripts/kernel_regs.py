"""
Registers and spills of kernel.py's Triton kernels, compiled for Hopper (sm_90a) on a machine without a GPU.

    python scripts/kernel_regs.py [prep fwd dh_prep bwd_dh bwd] [--sass] [--kda] [--heads=H,HV] [--warps=N]
                                  [--chunk=TOKENS] [--set=NAME=VALUE]

Compiles what the model and bench.py run (EDA, bf16, K = V = 128, the module's launch settings, no g check in the
prep) for the kernels named (default: all). --heads: H, HV (default 8, 16: the backward adds dq, dk atomically;
H = HV stores them); --kda: the KDA path (e = None: one sub-step per token); --set: a kernel.LAUNCH setting.
Prints cuobjdump's resource line per kernel (REG: registers per thread, STACK: bytes per thread, mostly spills)
and the shared memory a program takes (an SM has 228 KB); --sass adds the SASS instruction count of each kernel
and of its largest loop (a walk's chunk step, the per-chunk backward's V-block step) with its commonest opcodes.
The figures follow the local Triton's ptxas and say nothing about time (notes/kernel.md).
"""
import collections
import inspect
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")  # Triton's default (and the device's); silences a warning
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

import kernel  # noqa: E402

FP32_POINTERS = {"g", "gmin", "ht", "h0", "dht", "dh0", "dq", "dk", "dg", "de", "dbeta", "dgamma",
                 "s_in", "s_out", "eGNout", "eGNin"}
SCALARS = {"scale": "fp32", "T": "i32", "NT": "i32"}


def aligned(sig):
    """What Triton's launcher tells the compiler at a real call: every pointer 16-byte aligned (torch's
    allocations are), and T, NT multiples of 16 (T = 4096 and its 256 chunks). Without it the compiler must
    assume unaligned rows and emits one load per element."""
    return {(i,): [["tt.divisibility", 16]] for i, (p, t) in enumerate(sig.items())
            if t.startswith("*") or p in ("T", "NT")}


def cuobjdump(fn, consts, warps, stages, flag):
    """cuobjdump's output (flag: what to dump) for fn compiled for sm_90a as a real launch would compile it, and
    the shared memory a program takes (bytes)."""
    params = inspect.signature(fn.fn).parameters
    consts = {n: c for n, c in consts.items() if n in params}  # one table serves kernel versions that differ
    sig = {p: "constexpr" if p in consts else SCALARS.get(p, "*fp32" if p in FP32_POINTERS else "*bf16")
           for p in params}  # each parameter's type for Triton's compiler: constexprs, SCALARS, else pointers
    src = ASTSource(fn=fn, signature=sig, constexprs=consts, attrs=aligned(sig))
    compiled = triton.compile(src, target=GPUTarget("cuda", 90, 32), options=dict(num_warps=warps, num_stages=stages))
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(compiled.asm["cubin"])
    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    out = subprocess.run([tool, flag, f.name], capture_output=True, text=True).stdout
    os.unlink(f.name)
    return out, compiled.metadata.shared


def instruction_mix(fn, consts, warps, stages, top=12):
    """SASS instructions of the kernel, of its largest loop (the span of its longest backward branch), and the
    loop's commonest opcodes (predicates and modifiers dropped)."""
    sass, _ = cuobjdump(fn, consts, warps, stages, "-sass")
    ins = [(int(a, 16), t.strip()) for a, t in re.findall(r"/\*([0-9a-f]{4,})\*/\s+([^;]*);", sass)]
    spans = [(int(m.group(1), 16), a) for a, t in ins
             for m in [re.search(r"BRA\s+0x([0-9a-f]+)", t)] if m and int(m.group(1), 16) < a]
    lo, hi = max(spans, key=lambda s: s[1] - s[0], default=(0, -1))
    loop = [re.sub(r"^@!?U?P\w+\s+", "", t).split()[0].split(".")[0] for a, t in ins if lo <= a <= hi]
    mix = ", ".join(f"{op} {n}" for op, n in collections.Counter(loop).most_common(top))
    return f"{len(ins)} instructions, largest loop {len(loop)}: {mix}"


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    warps = next((int(a.split("=")[1]) for a in sys.argv[1:] if a.startswith("--warps=")), None)
    H, HV = next((tuple(map(int, a.split("=")[1].split(","))) for a in sys.argv[1:] if a.startswith("--heads=")),
                 (8, 16))
    K = V = 128
    chunk = next((int(a.split("=")[1]) for a in sys.argv[1:] if a.startswith("--chunk=")), kernel.CHUNK_TOKENS)
    eda = "--kda" not in sys.argv[1:]
    BT = 2 * chunk if eda else chunk
    BK = triton.next_power_of_2(K)
    sets = dict(a[len("--set="):].split("=") for a in sys.argv[1:] if a.startswith("--set="))  # --set=NAME=VALUE
    L = dict(zip(kernel.LAUNCH, kernel.launch_settings(sets)))  # a ValueError names an unknown setting
    common = dict(H=H, HV=HV, K=K, V=V, BT=BT, BK=BK, BKC=min(L["PREP_BK"], BK), BVP=64, EDA=eda,
                  DT=tl.bfloat16, PREC="tf32")
    SB = min(L["SUB_BLOCK"], BT)
    AB = kernel._anchor_rows(eda, BT)
    kernels = {  # name: (jit function, constexprs, num_warps, num_stages), as kernel.py launches them
        "prep": (kernel._eda_prep_kernel, dict(common, SB=SB, NLVL=(BT // SB).bit_length() - 1, AB=AB,
                                               SCALAR_G=False, CHECK_G=False,
                                               REUSE=bool(L["PREP_REUSE"]) and common["BKC"] >= K),
                 L["PREP_WARPS"], 1),
        "fwd": (kernel._eda_fwd_kernel, dict(common, BV=L["FWD_BV"], HAS_H0=True, STORE_HT=True, STORE_HS=True),
                L["FWD_WARPS"], L["FWD_STAGES"]),
        "dh_prep": (kernel._eda_dh_prep_kernel, dict(common, BKC=min(L["DH_PREP_BK"], BK)), L["PREP_WARPS"], 1),
        "bwd_dh": (kernel._eda_bwd_dh_kernel, dict(common, BV=L["DH_BV"], HAS_DHT=True, STORE_DH0=True),
                   L["DH_WARPS"], L["DH_STAGES"]),
        "bwd": (kernel._eda_bwd_kernel, dict(common, BV=L["BWD_BV"] if eda else L["BWD_BV_KDA"], AB=AB, SCALAR_G=False,
                                             ATOMIC_QK=HV > H, WR=kernel._write_rows(L, eda, BT)),
                L["BWD_WARPS"], L["BWD_STAGES"]),
    }
    print(f"triton {triton.__version__}, sm_90a, {'EDA' if eda else 'KDA path'} bf16, H = {H}, HV = {HV}, "
          f"K = V = {K}, chunk {chunk} tokens (BT = {BT})")
    for name, (fn, consts, w, s) in kernels.items():
        if args and name not in args:
            continue
        w = warps or w
        out, smem = cuobjdump(fn, consts, w, s, "--dump-resource-usage")
        line = next((line.strip() for line in out.splitlines() if "REG:" in line), out.strip()[-300:])
        print(f"{name:10s} warps {w} stages {s}: {line} | shared memory {smem} B", flush=True)
        if "--sass" in sys.argv[1:]:
            print(f"{'':10s} {instruction_mix(fn, consts, w, s)}", flush=True)


if __name__ == "__main__":
    main()
