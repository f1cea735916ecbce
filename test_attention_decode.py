"""kernel.attention_decode (split-KV attention decode) against SDPA, and its use in the model.

Without CUDA the kernels run in Triton's interpreter (TRITON_INTERPRET=1, set before triton is imported) on
tiny shapes; split_len=64 (one key block per split) makes a few hundred keys span several splits.
"""
import os
import re

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import kernel  # noqa: E402
import model as M  # noqa: E402
from conftest import rel, tiny_gpt  # noqa: E402
from decode import GraphDecoder, decode_step, new_cache, prefill  # noqa: E402

DEV = "cuda" if torch.cuda.is_available() else "cpu"
TOL = {torch.float32: 1e-5, torch.bfloat16: 2e-2}  # bf16: the cache and P are rounded to 8 bits of mantissa


def random_cache(B, nh, nkv, L, hd, dtype, seed=0):
    gen = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(*s, generator=gen) for s in ((B, nh, 1, hd), (B, nkv, L, hd), (B, nkv, L, hd)))
    return q.to(DEV, dtype), k.to(DEV, dtype), (2 * v).to(DEV, dtype)


def reference(q, k, v, pos):
    """SDPA in float64 over slots 0..pos, each KV head repeated for its G query heads."""
    G = q.shape[1] // k.shape[1]
    kr, vr = (t[:, :, :pos + 1].double().cpu().repeat_interleave(G, dim=1) for t in (k, v))
    return F.scaled_dot_product_attention(q.double().cpu(), kr, vr)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("G", [1, 2, 3, 4])
@pytest.mark.parametrize("n_keys, split_len", [(1, None), (127, None), (127, 64), (300, 64)])
def test_split_kv_decode_matches_sdpa_on_odd_lengths_gqa_ratios_and_dtypes(n_keys, split_len, G, dtype):
    nkv = 2
    q, k, v = random_cache(2, nkv * G, nkv, n_keys + 5, 64, dtype, seed=n_keys + G)
    out = kernel.attention_decode(q, k, v, n_keys - 1, split_len=split_len)
    assert out.shape == q.shape and out.dtype == dtype
    assert rel(out, reference(q, k, v, n_keys - 1)) < TOL[dtype]


@pytest.mark.skipif(DEV != "cuda", reason="long caches: too slow for Triton's interpreter")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("G, hd", [(1, 64), (3, 128), (4, 128)])
@pytest.mark.parametrize("n_keys", [4097, 32768])
def test_split_kv_decode_matches_sdpa_on_long_caches(n_keys, G, hd, dtype):
    q, k, v = random_cache(1, 2 * G, 2, n_keys + 31, hd, dtype, seed=G)
    ref = reference(q, k, v, n_keys - 1)
    assert rel(kernel.attention_decode(q, k, v, n_keys - 1), ref) < TOL[dtype]
    assert rel(kernel.attention_decode(q, k, v, torch.tensor([n_keys - 1], device=DEV)), ref) < TOL[dtype]


@pytest.mark.parametrize("hd", [16, 48, 128])
def test_split_kv_decode_takes_every_head_dim_multiple_of_16(hd):
    q, k, v = random_cache(1, 4, 2, 70, hd, torch.float32, seed=hd)
    assert rel(kernel.attention_decode(q, k, v, 69, split_len=64), reference(q, k, v, 69)) < 1e-5


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_split_kv_decode_with_device_pos_reads_slots_up_to_pos_only(dtype):
    """The CUDA-graph path: pos is a device tensor, the launch covers the whole cache whatever its value, and
    the slots after pos hold garbage (NaN, inf) that must not leak into the output."""
    L = 200
    q, k, v = random_cache(2, 4, 2, L, 64, dtype, seed=7)
    for p in (0, 63, 64, 150, L - 1):
        kg, vg = k.clone(), v.clone()
        kg[:, :, p + 1:], vg[:, :, p + 1:] = float("nan"), float("inf")
        ref = reference(q, k, v, p)
        for split_len in (None, 64):
            out = kernel.attention_decode(q, kg, vg, torch.tensor([p], device=DEV), split_len=split_len)
            assert torch.isfinite(out).all(), (p, split_len)
            assert rel(out, ref) < TOL[dtype], (p, split_len)
        assert torch.equal(out, kernel.attention_decode(q, kg, vg, p, split_len=64))  # same as the int pos


def test_split_kv_decode_launch_does_not_depend_on_a_device_pos(monkeypatch):
    """One captured graph serves every position: with a device pos the grid comes from max_len alone."""
    grids, real = [], kernel._attn_decode_split_kernel

    class Recorder:
        def __getitem__(self, grid):
            grids.append(grid)
            return real[grid]

    monkeypatch.setattr(kernel, "_attn_decode_split_kernel", Recorder())
    q, k, v = random_cache(1, 2, 1, 300, 16, torch.float32)
    for p in (0, 100, 299):
        kernel.attention_decode(q, k, v, torch.tensor([p], device=DEV))
    assert len(set(grids)) == 1 and grids[0][0] > 1  # several splits, the same ones at every position
    kernel.attention_decode(q, k, v, 0)
    assert grids[-1][0] == 1  # an int pos launches for the keys there are
    for L, rows in ((1, 1), (127, 4), (4097, 2), (32768, 2), (32768, 128)):
        S, split_len = kernel._attn_decode_splits(L, rows, torch.device(DEV), 64)
        assert split_len % 64 == 0 and (S - 1) * split_len < L <= S * split_len
        assert S <= kernel.ATTN_DECODE_MAX_SPLITS


def test_split_kv_decode_rejects_bad_inputs_with_a_value_error():
    q, k, v = random_cache(2, 4, 2, 16, 32, torch.float32)
    cases = [
        ((q, k, v[:, :, :8], 3), "k and v must both be"),
        ((q, k[0], v[0], 3), "k and v must both be"),
        ((q.expand(2, 4, 2, 32), k, v, 3), "one query per head"),
        ((q[:1], k, v, 3), "q must be"),
        ((q[..., :16], k, v, 3), "q must be"),
        ((q[:, :3], k, v, 3), "not a multiple of n_kv_head"),
        ((q.double(), k.double(), v.double(), 3), "dtype"),
        ((q.bfloat16(), k, v, 3), "dtype"),
        ((q[..., :24], k[..., :24], v[..., :24], 3), "head_dim = 24"),
        ((q[..., :8], k[..., :8], v[..., :8], 3), "head_dim = 8"),
        ((q, k.transpose(2, 3).contiguous().transpose(2, 3), v, 3), "contiguous in head_dim"),
        ((q, k, v, 16), "pos must be an int in [0, 16)"),
        ((q, k, v, -1), "pos must be"),
        ((q, k, v, True), "pos must be"),
        ((q, k, v, 2.0), "pos must be"),
        ((q, k, v, torch.tensor([1.0], device=DEV)), "a tensor pos"),
        ((q, k, v, torch.tensor([1, 2], device=DEV)), "a tensor pos"),
    ]
    if DEV == "cuda":
        cases.append(((q, k, v, torch.tensor([1])), "a tensor pos"))
    for args, msg in cases:
        with pytest.raises(ValueError, match="attention_decode: .*" + re.escape(msg)):
            kernel.attention_decode(*args)
    with pytest.raises(ValueError, match="split_len must be a positive multiple of 64"):
        kernel.attention_decode(q, k, v, 3, split_len=40)


def test_split_kv_decode_on_cpu_without_the_interpreter_is_a_value_error(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    q, k, v = (t.cpu() for t in random_cache(1, 2, 1, 8, 16, torch.float32))
    with pytest.raises(ValueError, match="TRITON_INTERPRET"):
        kernel.attention_decode(q, k, v, 3)


def decode_logits(model, prompt, steps, static):
    """Logits of `steps` greedy decode steps after the prompt, through decode_step or the static (graph) step."""
    with torch.no_grad():
        cache = new_cache(model, prompt.shape[0], max_len=prompt.shape[1] + steps + 3)
        logits, _ = prefill(model, prompt, cache)
        step = GraphDecoder(model, cache, capture=False) if static else None
        out = []
        for _ in range(steps):
            nxt = logits[:, -1].argmax(-1)
            logits = step(nxt).clone() if static else decode_step(model, nxt, cache)[0]
            out.append(logits)
    return torch.cat(out, dim=1)


@pytest.mark.parametrize("static", [False, True])
def test_model_decode_with_split_kv_matches_the_sdpa_path(static):
    """The same weights (same seed), attn_decode='sdpa' against 'split_kv': the same logits step after step."""
    kw = dict(vocab_size=97, block_size=96, n_embd=64, n_head=4, n_kv_head=2, la_v_head_dim=16, la_chunk_size=8,
              init_std=0.02)
    prompt = torch.randint(0, 97, (2, 11), generator=torch.Generator().manual_seed(1)).to(DEV)
    ref = decode_logits(tiny_gpt("eda", attn_decode="sdpa", **kw).to(DEV), prompt, 5, static)
    out = decode_logits(tiny_gpt("eda", attn_decode="split_kv", **kw).to(DEV), prompt, 5, static)
    assert rel(out, ref) < 1e-5


def test_attention_decode_operator_passes_torch_library_opcheck():
    """The graphed step's path (pos a device tensor) is the operator nanoeda::attention_decode_at: its schema,
    fake (shape, dtype, strides of the real result) and a traced call agree with eager ones."""
    q, k, v = random_cache(2, 4, 2, 130, 16, torch.float32, seed=5)
    torch.library.opcheck(torch.ops.nanoeda.attention_decode_at.default,
                          (q, k, v, torch.tensor([100], device=DEV), 16 ** -0.5, 64))


def test_graphed_decode_step_compiles_as_one_graph_and_matches_eager():
    """decode.static_decode_step through torch.compile(fullgraph=True) with the kernels in it (the hybrid's
    split-KV attention layer and its linear layers' Triton decode step), as decode.GraphDecoder(compile=...)
    runs it (here without the CUDA graph, and AOT autograd's eager backend in place of Inductor): one graph,
    the same logits and the same cache as the eager static step, step after step."""
    torch._dynamo.reset()
    model = tiny_gpt("eda", vocab_size=97, la_v_head_dim=16, la_backend="triton", attn_decode="split_kv").to(DEV)
    assert any(b.is_attention for b in model.blocks) and not all(b.is_attention for b in model.blocks)
    prompt = torch.randint(0, 97, (2, 9), generator=torch.Generator().manual_seed(2)).to(DEV)
    runs = []
    for compile in (False, "aot_eager"):
        with torch.no_grad():
            cache = new_cache(model, 2, max_len=16)
            prefill(model, prompt, cache)
            step = GraphDecoder(model, cache, capture=False, compile=compile)
            logits = [step(prompt[:, i]).clone() for i in range(3)]
        runs.append((torch.stack(logits), cache, cache["pos"]))
    (eager, cache_e, pos_e), (compiled, cache_c, pos_c) = runs
    assert pos_c == pos_e == prompt.shape[1] + 3
    with pytest.raises(ValueError, match="compile must be"):
        GraphDecoder(model, cache, capture=False, compile=1)
    assert rel(compiled, eager) < 1e-6
    for layer_e, layer_c in zip(cache_e["layers"], cache_c["layers"]):
        for name in layer_e:
            assert rel(layer_c[name], layer_e[name]) < 1e-6, name


def test_decode_attention_setting_is_checked():
    with pytest.raises(ValueError, match="unknown attn_decode 'flash'; choose one of auto, split_kv, sdpa"):
        M.GPTConfig(attn_decode="flash")
