"""
Registers and spills of kernel.py's Triton kernels (and walk_gluon.py's), compiled for Hopper (sm_90a) without a GPU.

    python scripts/kernel_regs.py [prep fwd fwd_gluon dh_prep bwd_dh bwd] [--sass] [--kda] [--heads=H,HV] [--warps=N]
                                  [--chunk=TOKENS] [--set=NAME=VALUE] [--ncu=FILE] [--ncu_metric=COLUMN]

Compiles what the model and bench.py run (EDA, bf16, K = V = 128, the module's launch settings, no g check in the
prep) for the kernels named (default: all). --heads: H, HV (default 8, 16: grouped value heads); --kda: the KDA path
(e = None: one sub-step per token); --set: a kernel.LAUNCH setting. Prints cuobjdump's resource line per kernel (REG:
registers per thread, STACK: bytes per thread, mostly spills) and the shared memory a program takes (an SM has 228 KB);
--sass adds the SASS instruction count of each kernel and of its largest loop (a walk's chunk step, the per-chunk
backward's V-block step) with its commonest opcodes. These follow the local Triton's ptxas and say nothing about time;
--ncu=FILE does (one kernel named): FILE is `ncu --page source --csv --print-source sass` of a GPU profile of that very
compile (the same Triton, --heads, --kda), its warp-stall samples (or --ncu_metric's column, e.g. "L1 Wavefronts
Shared Excessive": bank conflicts) by kernel.py line (notes/kernel.md). On the GPU, for the per-chunk backward:

    ncu --set full -k regex:_eda_bwd_kernel -c 1 -o rep python bench.py --check=0 --use_fla=False --profile=False \
        --bench_eda_chunk=False "--shapes=[(8, 4096, 16, 16)]" "--decode_batches=[]"
    ncu -i rep.ncu-rep --page source --csv --print-source sass > FILE     # then, here:
    python scripts/kernel_regs.py bwd --heads=16,16 --ncu=FILE
"""
import collections
import csv
import gzip
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

# fp32 pointers (the rest bf16)
FP32_POINTERS = {"g", "gmin", "ht", "h0", "dht", "dh0", "dg", "s_in", "s_out", "eGNout", "eGNin"}
SCALARS = {"scale": "fp32", "T": "i32", "NT": "i32"}


def aligned(sig):
    """What Triton's launcher tells the compiler at a real call: every pointer 16-byte aligned (torch's
    allocations are), and T, NT multiples of 16 (T = 4096 and its 256 chunks). Without it the compiler must
    assume unaligned rows and emits one load per element."""
    return {(i,): [["tt.divisibility", 16]] for i, (p, t) in enumerate(sig.items())
            if t.startswith("*") or p in ("T", "NT")}


def disassemble(fn, consts, opt, *tool):
    """The output of `tool` (a program of Triton's and its flags, e.g. cuobjdump -sass) on fn compiled for sm_90a as
    a real launch would compile it, and the shared memory a program takes (bytes)."""
    params = inspect.signature(fn.fn).parameters
    consts = {n: c for n, c in consts.items() if n in params}  # one table serves kernel versions that differ
    sig = {p: "constexpr" if p in consts else SCALARS.get(p, "*fp32" if p in FP32_POINTERS else "*bf16")
           for p in params}  # each parameter's type for Triton's compiler: constexprs, SCALARS, else pointers
    gluon = fn.__class__.__name__ == "GluonJITFunction"
    if gluon:  # walk_gluon.py's kernel has Gluon's own source class, in an experimental module: imported for it alone
        from triton.experimental.gluon._runtime import GluonASTSource
    src = (GluonASTSource if gluon else ASTSource)(fn=fn, signature=sig, constexprs=consts, attrs=aligned(sig))
    compiled = triton.compile(src, target=GPUTarget("cuda", 90, 32), options=opt)  # num_warps, num_stages, maxnreg
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(compiled.asm["cubin"])
    path = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", tool[0])
    out = subprocess.run([path, *tool[1:], f.name], capture_output=True, text=True).stdout
    os.unlink(f.name)
    return out, compiled.metadata.shared


def instructions(sass):
    """[(address, opcode, operands)] of a disassembly, the opcode without its predicate."""
    return [(int(a, 16), op, rest) for a, op, rest in
            re.findall(r"/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P\w+\s+)?([^;\s]+)([^;\n]*);", sass)]


def instruction_mix(fn, consts, opt, top=12):
    """SASS instructions of the kernel, of its largest loop (the span of its longest backward branch), and the
    loop's commonest opcodes (modifiers dropped)."""
    ins = instructions(disassemble(fn, consts, opt, "cuobjdump", "-sass")[0])
    spans = [(int(m.group(1), 16), a) for a, op, rest in ins
             for m in [re.search(r"0x([0-9a-f]+)", rest)] if op == "BRA" and m and int(m.group(1), 16) < a]
    lo, hi = max(spans, key=lambda s: s[1] - s[0], default=(0, -1))
    loop = [op.split(".")[0] for a, op, _ in ins if lo <= a <= hi]
    mix = ", ".join(f"{op} {n}" for op, n in collections.Counter(loop).most_common(top))
    return f"{len(ins)} instructions, largest loop {len(loop)}: {mix}"


def stalls_by_line(fn, consts, opt, path, column, top=30):
    """An ncu source export's column (path, gzip or not; warp-stall samples, wavefronts) by the source line (kernel.py's
    or walk_gluon.py's) of each instruction, from this compile's line table (nvdisasm -g; Triton inlines the helpers,
    a line may be a helper's)."""
    path_py = inspect.getsourcefile(fn.fn)
    table, line = [], 0  # (opcode, its source line) per instruction, in address order
    for text in disassemble(fn, consts, opt, "nvdisasm", "-g", "-c")[0].splitlines():
        m = re.search(re.escape(os.path.basename(path_py)) + r'", line (\d+)', text)
        line = int(m.group(1)) if m else line
        table += [(op, line) for _, op, _ in instructions(text)]
    with (gzip.open if path.endswith(".gz") else open)(path, "rt") as f:
        rows = list(csv.reader(f))
    if not (head := next((r for r in rows if "Source" in r), None)) or column not in head:
        sys.exit(f"kernel_regs.py: {path} has no column {column!r} (ncu --page source --csv --print-source sass)")
    got = [(instructions(f"/*0000*/ {r[head.index('Source')]};")[0][1], r[head.index(column)]) for r in rows
           if r[0][:2] == "0x"]
    if not got or [op for op, _ in got] != [op for op, _ in table]:
        sys.exit(f"kernel_regs.py: {path} is not ncu's source export of this compile's code ({len(got)} instructions "
                 f"against {len(table)}): the profile must come from the same Triton, --heads and --kda")
    counts = collections.Counter()
    for (_, n), (_, line) in zip(got, table):
        counts[line] += int(n or 0)
    src, name = ["", *open(path_py).read().splitlines()], os.path.basename(path_py)
    for line, n in counts.most_common(top):  # line 0: code before the table's first line
        print(f"{100 * n / sum(counts.values()):5.1f}%  {name}:{line:<5d} {src[line].strip()[:90]}")


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    opts = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--") and "=" in a)  # --set's: below
    warps, ncu, eda = opts.get("warps") and int(opts["warps"]), opts.get("ncu"), "--kda" not in sys.argv[1:]
    (H, HV), K = map(int, opts.get("heads", "8,16").split(",")), 128  # K = V = 128
    chunk = int(opts.get("chunk", kernel.CHUNK_TOKENS))
    if ncu and len(args) != 1:
        sys.exit("kernel_regs.py: --ncu reads the profile of one kernel: name it (e.g. bwd)")
    BT = 2 * chunk if eda else chunk
    sets = dict(a[len("--set="):].split("=") for a in sys.argv[1:] if a.startswith("--set="))  # --set=NAME=VALUE
    L = dict(zip(kernel.LAUNCH, kernel.launch_settings(sets)))  # a ValueError names a bad or unknown setting
    common = dict(H=H, HV=HV, K=K, V=K, BT=BT, BK=K, BKC=min(L["PREP_BK"], K), BVP=64, EDA=eda,
                  DT=tl.bfloat16, PREC="tf32")
    SB, AB = min(L["SUB_BLOCK"], BT), kernel._anchor_rows(eda, BT)
    fwd, dh = (kernel._walk_blocks(L, w, K, K, L["FILL_PROGRAMS"]) for w in ("FWD", "DH"))  # at *_BV, unnarrowed
    gw = kernel._gluon_workers(64)  # the Gluon walk's workers at 64 columns (num_warps: its chain's)
    kernels = {  # name: (jit function, constexprs, num_warps, num_stages[, maxnreg]), as kernel.py launches them
        "prep": (kernel._eda_prep_kernel, dict(common, SB=SB, NLVL=(BT // SB).bit_length() - 1, AB=AB, SCALAR_G=False,
                                               CHECK_G=False, REUSE=bool(L["PREP_REUSE"]) and common["BKC"] >= K),
                 L["PREP_WARPS"], L["PREP_STAGES"], (L["PREP_MAXNREG"] or None) if eda else None),
        "fwd": (kernel._eda_fwd_kernel, dict(common, BV=fwd[1], HAS_H0=True, STORE_HT=True, STORE_HS=True,
                                             LATE=fwd[1] <= L["FWD_LATE_BV"]), fwd[2], L["FWD_STAGES"]),
        "dh_prep": (kernel._eda_dh_prep_kernel, dict(common, BKC=min(L["DH_PREP_BK"], K)), L["PREP_WARPS"],
                    L["PREP_STAGES"]),
        "bwd_dh": (kernel._eda_bwd_dh_kernel, dict(common, BV=dh[1], HAS_DHT=True, STORE_DH0=True), dh[2],
                   L["DH_STAGES"]),
        # the forward walk the model runs on Hopper at <= 64 columns (kernel._gluon_walk), at the 125M layer's 64
        "fwd_gluon": (kernel.walk_gluon and kernel.walk_gluon.eda_fwd_ws_kernel, dict(
            HV=HV, K=K, V=K, BT=BT, BV=64, HAS_H0=True, STORE_HT=True, STORE_HS=True, **gw), gw["num_warps"], 1),
        "bwd": (kernel._eda_bwd_kernel, dict(common, BV=kernel._bwd_width(L, eda, K), AB=AB, SCALAR_G=False,
                                             WR=kernel._write_rows(L, eda, BT)), L["BWD_WARPS"], L["BWD_STAGES"])}
    print(f"triton {triton.__version__}, sm_90a, {'EDA' if eda else 'KDA path'} bf16, H = {H}, HV = {HV}, "
          f"K = V = {K}, chunk {chunk} tokens (BT = {BT})")
    for name, (fn, consts, w, s, *cap) in kernels.items():
        if args and name not in args:
            continue
        if name == "fwd_gluon" and not (fn and eda and BT == 32):
            print(f"{name:10s} not compiled: walk_gluon.py runs with triton 3.6 (this is {triton.__version__}), EDA, "
                  "16-token chunks", flush=True)
            continue
        opt = dict(num_warps=warps or w, num_stages=s, maxnreg=(cap or [None])[0])
        out, smem = disassemble(fn, consts, opt, "cuobjdump", "--dump-resource-usage")
        line = next((line.strip() for line in out.splitlines() if "REG:" in line), out.strip()[-300:])
        print(f"{name:10s} warps {opt['num_warps']} stages {s}: {line} | shared memory {smem} B", flush=True)
        if "--sass" in sys.argv[1:]:
            print(f"{'':10s} {instruction_mix(fn, consts, opt)}", flush=True)
        if ncu:
            stalls_by_line(fn, consts, opt, ncu, opts.get("ncu_metric", "Warp Stall Sampling (All Samples)"))


if __name__ == "__main__":
    main()
