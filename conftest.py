"""Helpers shared by the tests (pytest puts this directory on sys.path: `from conftest import rel`)."""
import contextlib
import dataclasses
import importlib.util
import io
import os
import runpy
import signal
import subprocess
import sys
import traceback
import warnings

import torch
import torch.nn.functional as F

import configurator
from data.synthetic import FILLER, NONE

ROOT = os.path.dirname(os.path.abspath(__file__))
# under pytest-xdist (one test process a core) torch's own pool of a thread a core would put cores x cores threads on
# the CPU: the float64 references of the GPU tests then crawl. Each process gets its share of the cores instead.
if workers := int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0")):
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // workers))


def rel(a, b):
    """Relative error |a - b| / |b| in float64 on the CPU (any dtype, any device)."""
    a, b = a.detach().double().cpu(), b.detach().double().cpu()
    return ((a - b).norm() / b.norm().clamp_min(1e-300)).item()


def make_inputs(B, T, H, HV, K, V, erase=True, scalar_g=False, h0=True, dtype=torch.float32, g_low=-5.0, seed=0,
                device="cpu"):
    """The update rule's inputs as a layer gives them, by eda_recurrent's argument names: unit q, k, e; v and the
    initial state N(0, 1); log decay g in (g_low, 0] (the safe gate's range; scalar_g: one per head, GDN);
    beta, gamma in (0, 1). erase=False: no e, gamma (KDA); h0=False: no initial state. Drawn in float64, then
    q, k, v, e in `dtype` and g, the gates and the state in float32 (float64 for float64 inputs)."""
    gen = torch.Generator().manual_seed(seed)

    def rnd(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float64)

    def uni(*shape):
        return torch.rand(*shape, generator=gen, dtype=torch.float64)

    x = dict(q=F.normalize(rnd(B, T, H, K), dim=-1), k=F.normalize(rnd(B, T, H, K), dim=-1), v=rnd(B, T, HV, V),
             e=F.normalize(rnd(B, T, HV, K), dim=-1) if erase else None,
             g=g_low * uni(B, T, HV) if scalar_g else g_low * uni(B, T, HV, K),
             beta=uni(B, T, HV), gamma=uni(B, T, HV) if erase else None,
             initial_state=rnd(B, HV, K, V) if h0 else None)
    rest = torch.float64 if dtype == torch.float64 else torch.float32
    return {n: None if t is None else t.to(device, dtype if n in ("q", "k", "v", "e") else rest)
            for n, t in x.items()}


def tiny_config(mixer="eda", **kw):
    """GPTConfig of a small model of `mixer` (4 layers: 3 linear + 1 full attention; 2 q/k heads, 4 value heads,
    16-token chunks, the chunked backend); kw overrides fields."""
    from model import GPTConfig
    base = dict(mixer=mixer, vocab_size=256, block_size=128, n_layer=4, n_embd=32, n_head=2, n_kv_head=1,
                head_dim=16, la_n_head=2, la_n_v_head=4, la_head_dim=16, la_v_head_dim=8, la_chunk_size=16,
                ffn_hidden=128, init_std=0.1, la_backend="chunk")
    return GPTConfig(**dict(base, **kw))


def build(cfg, seed=0, compile=False):
    """GPT(cfg, compile), initialized from `seed`."""
    from model import GPT
    torch.manual_seed(seed)
    return GPT(cfg, compile)


def tiny_gpt(mixer="eda", seed=0, **kw):
    """build(tiny_config(mixer, **kw), seed), in eval mode, float32 on the CPU."""
    return build(tiny_config(mixer, **kw), seed).eval()


def tokens(B=2, T=20, vocab=64, seed=1):
    """Random token ids [B, T] in [0, vocab)."""
    return torch.randint(0, vocab, (B, T), generator=torch.Generator().manual_seed(seed))


def save_checkpoint(model, out_dir, encoding="bytes", dataset="stdlib"):
    """out_dir/ckpt.pt with the keys of train.py's checkpoints that the reading scripts use (model,
    model_args, encoding, data_position). Returns out_dir."""
    os.makedirs(out_dir, exist_ok=True)
    torch.save({"model": model.state_dict(), "model_args": dataclasses.asdict(model.config), "encoding": encoding,
                "data_position": {"dataset": dataset, "block_size": model.config.block_size, "iter": 0}},
               os.path.join(out_dir, "ckpt.pt"))
    return out_dir


def load_script(path, argv=None):
    """A script of the repository (its path from the root) as a module, run with sys.argv = argv (or just its
    name): the scripts read their settings from the command line when they load."""
    old = sys.argv
    sys.argv = argv or [os.path.basename(path)]
    try:
        name = os.path.basename(path)[:-3] + '_under_test'
        spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, path))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.argv = old
    return module


@contextlib.contextmanager
def as_a_process(argv, cwd=None):
    """Code run within is a script run as `python *argv` in cwd (default the root) would run, in this process, the
    imports already paid: sys.argv, the script's folder first on sys.path, stdout and stderr captured. Yields the
    CompletedProcess filled in at the end as the interpreter would: SystemExit's code (a message: printed to stderr,
    code 1), an uncaught exception's traceback and code 1. What the process's exit would let go is let go then: the
    locks the run took (configurator.hold_lock), its SIGINT and SIGTERM handlers. Runs that need a process of their
    own (a kill, a fault injected into torch, an os._exit, torchrun) start one."""
    done = subprocess.CompletedProcess(argv, 0)
    out, err = io.StringIO(), io.StringIO()
    saved = sys.argv, sys.path[:], os.getcwd()
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}  # train.py sets its own
    hold_lock, held = configurator.hold_lock, []
    # each lock the run takes, recorded (train.py and sweep.py import hold_lock from configurator as they run)
    configurator.hold_lock = lambda path: held.append(hold_lock(path)) or held[-1]
    sys.argv, sys.path[0:0] = list(argv), [os.path.dirname(argv[0])]
    try:
        os.chdir(cwd or ROOT)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
            try:
                yield done
            except SystemExit as e:
                if e.code is None or isinstance(e.code, int):
                    done.returncode = e.code or 0
                else:  # sys.exit(message): the interpreter prints it and exits 1
                    print(e.code, file=sys.stderr)
                    done.returncode = 1
            except Exception:
                traceback.print_exc()
                done.returncode = 1
    finally:
        sys.argv, sys.path[:] = saved[:2]
        os.chdir(saved[2])
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
        configurator.hold_lock = hold_lock
        for fd, _ in held:
            os.close(fd)
        done.stdout, done.stderr = out.getvalue(), err.getvalue()


def run_script(path, *args, cwd=None):
    """`python path *args` (path from the repository root) run as_a_process -> its CompletedProcess."""
    full = os.path.join(ROOT, path)
    with as_a_process([full, *map(str, args)], cwd) as done:
        runpy.run_path(full, run_name='__main__')
    return done


def final_bindings(tokens, unique_values=False):
    """The ground truth the tests check the generators against: replay a stream of `key value` pairs up to the
    first pair holding a filler (the query region) -> {key: final value or NONE}. unique_values (evict): binding a
    value to a key unbinds the value's previous key."""
    binding, owner = {}, {}
    for i in range(0, len(tokens) - 1, 2):
        k, v = int(tokens[i]), int(tokens[i + 1])
        if FILLER in (k, v):
            break
        if unique_values and v in owner:
            binding[owner[v]] = NONE
        binding[k], owner[v] = v, k
    return binding
