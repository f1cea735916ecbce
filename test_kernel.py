"""Tests of kernel.py (eda_triton): every output and gradient against eda_recurrent in float64.

On a machine without CUDA the kernels run in Triton's interpreter (TRITON_INTERPRET=1, set before triton
is imported), on small shapes. The GPU tests (bf16, long sequences, decode) skip themselves there.
"""
import ctypes
import json
import os
import subprocess
import sys

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402

import eda  # noqa: E402
import kernel  # noqa: E402
from conftest import ROOT, as_a_process, load_script, make_inputs, rel  # noqa: E402

DEV = "cuda" if torch.cuda.is_available() else "cpu"
needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(),
                               reason="needs a CUDA GPU: bf16 tensor-core paths and long sequences")
NAMES = ("q", "k", "v", "e", "g", "beta", "gamma", "initial_state")


def compare(x, fn, tol, **kw):
    """Forward, final state and every gradient of fn (kernel) against eda_recurrent in fp64 on upcast inputs."""
    xt = {n: (t.clone().requires_grad_() if t is not None else None) for n, t in x.items()}
    xr = {n: (t.detach().double().cpu().requires_grad_() if t is not None else None) for n, t in x.items()}
    args = [xt[n] for n in NAMES[:7]]
    o, ht = fn(*args, initial_state=xt["initial_state"], output_final_state=True, **kw)
    orf, htr = eda.eda_recurrent(*[xr[n] for n in NAMES[:7]], initial_state=xr["initial_state"],
                                 output_final_state=True)
    assert o.dtype == x["v"].dtype and o.shape == orf.shape
    assert torch.isfinite(o).all() and torch.isfinite(ht).all()
    errs = {"o": rel(o, orf), "final_state": rel(ht, htr)}
    gen = torch.Generator().manual_seed(0)  # the same cotangents whatever tests ran before (the global RNG's state)
    do, dht = (torch.randn(t.shape, generator=gen).to(t) for t in (o, ht))
    ((o.float() * do.float()).sum() + (ht * dht).sum()).backward()
    ((orf * do.double().cpu()).sum() + (htr * dht.double().cpu()).sum()).backward()
    for n in NAMES:
        if xt[n] is not None:
            assert xt[n].grad is not None and xt[n].grad.dtype == xt[n].dtype, n
            assert torch.isfinite(xt[n].grad).all(), n
            errs["d" + n] = rel(xt[n].grad, xr[n].grad)
    # d(gamma) sums products that cancel (notes/kernel.md): in bf16 at T = 4096 its error spans 2.1e-3 to 1.2e-2
    # over seeds 11-14 (H200; every kernel since a114c97^ gives the same bits), so it gets bench.py's 2x there
    scale = {"dgamma": 2} if x["v"].dtype != torch.float32 else {}  # half inputs take bf16 products too
    bad = {n: f"{v:.2e}" for n, v in errs.items() if not v <= tol * scale.get(n, 1)}
    assert not bad, f"relative errors above {tol} (d(gamma) in bf16: {2 * tol}): {bad}"


# ----------------------------------------------------------------------------------------------------
# CI (interpreter on CPU, or the GPU): fp32, small shapes, small chunks, rel err <= 1e-4


def test_eda_matches_recurrence_single_token():
    compare(make_inputs(1, 1, 1, 1, 16, 16, device=DEV), kernel.eda_fused, 1e-4, chunk_size=8)


def test_eda_matches_recurrence_partial_chunks_T15():
    compare(make_inputs(1, 15, 1, 1, 16, 32, seed=1, device=DEV), kernel.eda_fused, 1e-4, chunk_size=8)


def test_eda_matches_recurrence_many_chunks_grouped_heads_T40():
    # 5 chunks, the last one partial; HV = 2 H (grouped value heads: dq, dk per value head, a pair summed after by
    # _group_sum_kernel); K != V; two V-blocks in every kernel (the backward's K-side sums run over them;
    # FILL_PROGRAMS=1 keeps the walks from narrowing to 16 columns, as two programs would)
    compare(make_inputs(1, 40, 1, 2, 32, 64, seed=2, device=DEV), kernel.eda_fused, 1e-4, chunk_size=8,
            launch=dict(FWD_BV=32, DH_BV=32, BWD_BV=32, FILL_PROGRAMS=1))


def test_the_backward_takes_128_wide_v_blocks_only_where_they_were_measured_to_win():
    # EDA at K = 128, grouped heads or not (notes/kernel.md); K = 256 (7 KB of spills a thread) and the unmeasured
    # K = 64 stay at 64
    L = kernel.LAUNCH
    assert kernel._bwd_width(L, True, 128) == L["BWD_BV_K128"] == 128
    assert kernel._bwd_width(L, True, 64) == L["BWD_BV"] == 64
    assert kernel._bwd_width(L, True, 256) == 64
    assert kernel._bwd_width(L, False, 128) == L["BWD_BV_KDA"]


@pytest.mark.parametrize("erase", [True, False])
def test_four_value_heads_per_key_head_sum_their_dq_dk(erase):
    # HV = 4 H: each group's four dq, dk rows summed in fp32 by _group_sum_kernel
    compare(make_inputs(2, 23, 1, 4, 16, 32, seed=5, erase=erase, device=DEV), kernel.eda_fused, 1e-4,
            chunk_size=8 if erase else 16)


def test_walks_narrow_their_v_blocks_down_to_16_columns_where_few_programs_run():
    # programs = B * HV: (1, 32768, 16, 16) takes 16 columns, the 125M layer's (8, 4096, 3, 6) 64 (96 programs:
    # 32 columns would take 192, past a wave of 132 SMs); both walks run 8 warps at 128 columns, 4 on narrower blocks
    for walk in ("FWD", "DH"):
        assert [kernel._walk_blocks(kernel.LAUNCH, walk, 128, 128, p)[1:] for p in (128, 64, 48, 16, 6)] == \
            [(128, 8), (64, 4), (64, 4), (16, 4), (16, 4)]
    # B * HV = 2, V = 64: both walks in four 16-column blocks, grouped heads
    compare(make_inputs(1, 23, 1, 2, 16, 64, seed=41, device=DEV), kernel.eda_fused, 1e-4, chunk_size=8)


def test_one_value_head_per_key_head_uses_plain_stores_and_matches_recurrence():
    # HV = H: dq, dk straight from the kernel, in two V-blocks (K = 32: BWD_BV's width, not 128)
    compare(make_inputs(2, 37, 2, 2, 32, 64, seed=12, device=DEV), kernel.eda_fused, 1e-4, chunk_size=8,
            launch=dict(BWD_BV=32))


def test_sixteen_token_chunks_with_a_partial_chunk_match_recurrence():
    # the default chunk (32 sub-steps, two anchor blocks), a partial chunk, an initial state
    compare(make_inputs(1, 21, 1, 1, 16, 16, seed=31, device=DEV), kernel.eda_fused, 1e-4, chunk_size=16)


@pytest.mark.parametrize("erase", [True, False])
def test_prep_without_reusing_its_first_pass_tiles_matches_recurrence(erase):
    # PREP_REUSE=0: the second pass reloads k', q' and G, as it must where K takes several blocks (the default
    # reuses them when one block covers K, as in every other test here); grouped heads
    compare(make_inputs(1, 23, 1, 2, 16, 16, erase=erase, seed=32, device=DEV), kernel.eda_fused, 1e-4,
            chunk_size=8 if erase else 16, launch=dict(PREP_REUSE=0))


@pytest.mark.parametrize("erase", [True, False])
def test_the_register_cap_reaches_edas_forward_prep_alone(erase, monkeypatch):
    # PREP_MAXNREG took EDA's forward prep 11-13% faster and the KDA path's 9-12% slower (notes/kernel.md): the
    # launch hands the cap to EDA's prep alone, and what it computes is the recurrence's either way
    caps, real = [], kernel._eda_prep_kernel

    class Spy:  # the prep kernel, recording the maxnreg of each launch
        def __getitem__(self, grid):
            def launch(*args, **kw):
                caps.append(kw.get("maxnreg"))
                return real[grid](*args, **kw)
            return launch

    monkeypatch.setattr(kernel, "_eda_prep_kernel", Spy())
    compare(make_inputs(1, 19, 1, 2, 16, 16, erase=erase, seed=43, device=DEV), kernel.eda_fused, 1e-4,
            chunk_size=16)
    assert caps == [kernel.LAUNCH["PREP_MAXNREG"] if erase else None] and kernel.LAUNCH["PREP_MAXNREG"] == 168


@pytest.mark.parametrize("late", [0, 128])
def test_forward_walk_storing_the_chunk_states_early_or_late_matches_recurrence(late):
    # FWD_LATE_BV: a forward walk step stores its chunk's state first thing or after its products (the same values)
    compare(make_inputs(1, 37, 1, 2, 16, 32, seed=44, device=DEV), kernel.eda_fused, 1e-4, chunk_size=8,
            launch=dict(FWD_LATE_BV=late))


def test_eda_without_initial_state_through_eda_triton():
    # the public wrapper in eda.py, default chunk, no initial state
    x = make_inputs(2, 20, 1, 1, 16, 16, h0=False, seed=3, device=DEV)
    compare(x, eda.eda_triton, 1e-4)


@pytest.mark.parametrize("erase", [True, False])
def test_several_anchor_blocks_per_chunk_match_recurrence(erase, monkeypatch):
    # 2-token anchor blocks in 8/16-token chunks: in-block pairs use the block's middle anchor, cross-block
    # pairs the boundary anchor (the path that makes 32-token chunks safe under the safe gate)
    monkeypatch.setattr(kernel, "ANCHOR_TOKENS", 2 if erase else 4)
    compare(make_inputs(1, 37, 1, 2, 16, 32, erase=erase, seed=17, device=DEV), kernel.eda_fused, 1e-4,
            chunk_size=8 if erase else 16)


@pytest.mark.parametrize("wrows, scalar_g", [(1, False), (1, True), (0, False)])
def test_per_chunk_backward_on_the_write_rows_or_all_rows_matches_recurrence(wrows, scalar_g, monkeypatch):
    # BWD_WROWS: q', dO, dq' and Qk on the 16 write rows of 16-token chunks (0: on all 32 sub-steps). A partial
    # chunk, HV = 2 H (dq per value head), K = 48 (masked key columns), two V-blocks, 4-token anchor blocks
    monkeypatch.setattr(kernel, "ANCHOR_TOKENS", 4)
    x = make_inputs(1, 21, 1, 2, 48, 32, scalar_g=scalar_g, seed=33, device=DEV)
    compare(x, kernel.eda_fused, 1e-4, chunk_size=16, launch=dict(BWD_WROWS=wrows, BWD_BV=16))


def test_long_chunks_with_strongest_decay_stay_exact():
    # 32-token chunks, every log decay at the safe gate's floor on half the channels: without local anchors
    # exp(-G) would reach exp(160) and overflow; here every exponentiated difference stays bounded
    x = make_inputs(1, 70, 1, 1, 16, 16, erase=True, seed=18, device=DEV)
    x["g"] = torch.where(torch.rand(x["g"].shape, generator=torch.Generator().manual_seed(0)) < 0.5,
                         -4.999, -0.01).to(x["g"])
    compare(x, kernel.eda_fused, 1e-4, chunk_size=32)


@pytest.mark.parametrize("erase", [True, False])
def test_one_anchor_block_chunks_at_the_lowest_decay_stay_exact(erase):
    # 16-token chunks (one anchor block, anchored at G_C / 2) with g just above G_MIN on half the channels: G_C
    # reaches -160, so an anchor at 0 or at G_C would put exp(160) in a factor; at G_C / 2 every one is <= exp(80)
    x = make_inputs(1, 70, 1, 1, 16, 16, erase=erase, seed=18, device=DEV)
    x["g"] = torch.where(torch.rand(x["g"].shape, generator=torch.Generator().manual_seed(0)) < 0.5,
                         kernel.G_MIN + 0.01, -0.01).to(x["g"])
    compare(x, kernel.eda_fused, 1e-4, chunk_size=16)


def test_kda_special_case_e_none_matches_recurrence():
    compare(make_inputs(1, 40, 1, 2, 16, 16, erase=False, seed=4, device=DEV), kernel.eda_fused, 1e-4, chunk_size=16)


def test_gdn_special_case_scalar_g_matches_recurrence():
    compare(make_inputs(1, 40, 1, 1, 16, 16, erase=False, scalar_g=True, seed=5, device=DEV), kernel.eda_fused, 1e-4,
            chunk_size=16)


@pytest.mark.parametrize("erase", [True, False])
def test_scalar_g_from_an_unbounded_log_gate_is_exact(erase):
    # per-head log decays down to -40 (a GDN log gate is unbounded below): the scalar path exponentiates
    # only masked differences G_i - G_j <= 0, so nothing overflows even far beyond the safe gate's range
    x = make_inputs(1, 40, 1, 2, 16, 16, erase=erase, scalar_g=True, g_low=-40.0, seed=19, device=DEV)
    compare(x, kernel.eda_fused, 1e-4, chunk_size=16)


def test_eda_with_scalar_g_matches_recurrence():
    compare(make_inputs(1, 24, 1, 1, 16, 16, scalar_g=True, seed=6, device=DEV), kernel.eda_fused, 1e-4, chunk_size=8)


@pytest.mark.parametrize("erase,scalar_g", [(True, False), (False, False), (True, True)])
def test_key_columns_in_several_prep_blocks_match_recurrence(erase, scalar_g):
    # the prep kernels take K in blocks of columns; K = 48 in 32-column blocks: two passes, the second one
    # partial (masked)
    x = make_inputs(1, 21, 1, 2, 48, 16, erase=erase, scalar_g=scalar_g, seed=20, device=DEV)
    compare(x, kernel.eda_fused, 1e-4, chunk_size=8 if erase else 16, launch=dict(PREP_BK=32, DH_PREP_BK=32))


@pytest.mark.parametrize("hv", [1, 3])
def test_head_dims_not_powers_of_two(hv):
    # K = 48 in 64-wide blocks; HV = 3: a group of three, summed by _group_sum_kernel with its columns masked
    compare(make_inputs(1, 12, 1, hv, 48, 80, seed=7, device=DEV), kernel.eda_fused, 1e-4, chunk_size=8)


def test_ut_solve_stable_when_erase_address_equals_write_key():
    # e = k and beta = gamma = 0.99, decay 0: the chunk's triangular system is as ill-conditioned as it gets
    # (the series form of its inverse would cancel catastrophically); forward substitution stays exact
    x = make_inputs(1, 32, 1, 1, 16, 16, g_low=0.0, seed=16, device=DEV)
    x["k"] = x["k"][:, :1].expand_as(x["k"]).contiguous()  # one key repeated
    x["e"] = x["k"].clone()
    x["beta"] = torch.full_like(x["beta"], 0.99)
    x["gamma"] = torch.full_like(x["gamma"], 0.99)
    compare(x, kernel.eda_fused, 1e-4, chunk_size=16)


@pytest.mark.parametrize("erase", [True, False])
def test_recomputing_the_chunk_states_in_backward_gives_the_same_gradients(erase):
    """recompute_states=True: the forward keeps no S_0, T, Qk (the op returns them empty) and the backward runs it
    again; every output and gradient still matches the float64 recurrence (grouped heads, partial chunk, h0)."""
    x = make_inputs(2, 37, 1, 2, 16, 16, erase=erase, seed=28, device=DEV)
    chunk = 8 if erase else 16  # 16 sub-steps either way (the GPU's dots need >= 16)
    compare(x, kernel.eda_fused, 1e-4, chunk_size=chunk, recompute_states=True)
    xs = [t.clone().requires_grad_() if t is not None else None for t in (x[n] for n in NAMES)]
    outs = torch.ops.nanoeda.eda_chunk_fwd(*xs, 0.25, chunk, False, True, False, False, True, kernel.launch_settings())
    assert [t.numel() for t in outs[2:]] == [0, 0, 0]


@pytest.mark.parametrize("use", ["output", "final_state"])
def test_the_backward_makes_no_zero_gradients_for_what_it_was_not_given(use):
    """Autograd fills a zero gradient for every op output the loss did not reach unless told not to: for the chunk
    states the forward keeps ([B, HV, NT, K, V], ~1 GB at (8, 4096, 16, 16)), for T and Qk, and for the final
    state when the loss leaves it out. None is filled, and the gradients still match the recurrence."""
    from torch.profiler import ProfilerActivity, profile
    x = make_inputs(1, 21, 1, 2, 16, 16, seed=29, device=DEV)
    xt = {n: t.clone().requires_grad_() for n, t in x.items()}
    xr = {n: t.detach().double().cpu().requires_grad_() for n, t in x.items()}
    o, ht = kernel.eda_fused(*[xt[n] for n in NAMES[:7]], initial_state=xt["initial_state"], output_final_state=True,
                             chunk_size=8)
    orf, htr = eda.eda_recurrent(*[xr[n] for n in NAMES[:7]], initial_state=xr["initial_state"],
                                 output_final_state=True)
    pick = (lambda a, b: a) if use == "output" else (lambda a, b: b)  # noqa: E731
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True) as prof:
        pick(o, ht).float().square().sum().backward()
    pick(orf, htr).square().sum().backward()
    # [B, HV, NT, K, V] of the kept states, [B * HV, NT, BT, BT] of T and Qk (T = 21 in 8-token chunks), and the
    # final state [B, HV, K, V] when the loss leaves it out (when it leaves o out, the kernels still read a dO: the
    # backward fills one, o's size)
    unused = [[1, 2, 3, 16, 16], [2, 3, 16, 16]] + ([[1, 2, 16, 16]] if use == "output" else [])
    filled = [e.input_shapes[0] for e in prof.events() if e.name in ("aten::zero_", "aten::fill_") and e.input_shapes]
    assert not [shape for shape in filled if shape in unused], filled
    for n in NAMES:
        ref = xr[n].grad if xr[n].grad is not None else torch.zeros_like(xr[n])  # q does not reach the final state
        assert rel(xt[n].grad, ref) <= 1e-4, n


def test_no_grad_forward_matches_and_stores_no_states():
    x = make_inputs(1, 20, 1, 1, 16, 16, seed=8, device=DEV)
    with torch.no_grad():
        o, ht = eda.eda_triton(*[x[n] for n in NAMES[:7]], initial_state=x["initial_state"],
                               output_final_state=True)
        orf, htr = eda.eda_recurrent(*[x[n].double() if x[n] is not None else None for n in NAMES[:7]],
                                     initial_state=x["initial_state"].double(), output_final_state=True)
    assert rel(o, orf) <= 1e-4 and rel(ht, htr) <= 1e-4
    o2, ht2 = eda.eda_triton(*[x[n] for n in NAMES[:7]])
    assert ht2 is None and rel(o2, eda.eda_recurrent(*[x[n] for n in NAMES[:7]])[0]) <= 1e-4


def test_decode_kernel_matches_recurrence_step_by_step_in_place():
    B, T, H, HV, K, V = 2, 6, 1, 2, 16, 32
    for erase, scalar_g in ((True, False), (False, False), (True, True)):
        x = make_inputs(B, T, H, HV, K, V, erase=erase, scalar_g=scalar_g, seed=9, device=DEV)
        state = x["initial_state"].clone()
        ptr = state.data_ptr()
        ref_state = x["initial_state"].double()
        for t in range(T):
            step = [x[n][:, t:t + 1] if x[n] is not None else None for n in NAMES[:7]]
            o, state = kernel.eda_decode(*step, state=state, inplace=True)
            orf, ref_state = eda.eda_recurrent(*[s.double() if s is not None else None for s in step],
                                               initial_state=ref_state, output_final_state=True)
            assert state.data_ptr() == ptr
            assert rel(o, orf) <= 1e-5 and rel(state, ref_state) <= 1e-5, (erase, scalar_g, t)
    # several tokens in one call, not in place
    x = make_inputs(B, T, H, HV, K, V, seed=10, device=DEV)
    s_in = x["initial_state"].clone()
    o, s_out = kernel.eda_decode(*[x[n] for n in NAMES[:7]], state=s_in, inplace=False)
    orf, srf = eda.eda_recurrent(*[x[n] for n in NAMES[:7]], initial_state=x["initial_state"],
                                 output_final_state=True)
    assert torch.equal(s_in, x["initial_state"])
    assert rel(o, orf) <= 1e-5 and rel(s_out, srf) <= 1e-5


def test_bad_inputs_raise_value_errors_naming_them():
    x = make_inputs(1, 4, 1, 1, 16, 16, device=DEV)
    args = [x[n] for n in NAMES[:7]]

    def call(**over):
        a = dict(zip(NAMES[:7], args))
        a.update(over)
        return eda.eda_triton(**a)

    with pytest.raises(ValueError, match="float64"):
        call(q=x["q"].double(), k=x["k"].double(), v=x["v"].double(), e=x["e"].double())
    with pytest.raises(ValueError, match="head dim K"):
        bad = make_inputs(1, 4, 1, 1, 24, 16, device=DEV)
        eda.eda_triton(*[bad[n] for n in NAMES[:7]])
    with pytest.raises(ValueError, match="head dim V"):
        bad = make_inputs(1, 4, 1, 1, 16, 272, device=DEV)
        eda.eda_triton(*[bad[n] for n in NAMES[:7]])
    with pytest.raises(ValueError, match="gamma"):
        call(gamma=None)
    with pytest.raises(ValueError, match="beta"):
        call(beta=x["beta"][:, :2])
    with pytest.raises(ValueError, match="HV"):
        bad = make_inputs(1, 4, 2, 3, 16, 16, device=DEV)
        eda.eda_triton(*[bad[n] for n in NAMES[:7]])
    with pytest.raises(ValueError, match="initial_state"):
        eda.eda_triton(*args, initial_state=x["initial_state"][:, :, :8])
    with pytest.raises(ValueError, match="chunk_size"):
        kernel.eda_fused(*args, chunk_size=12)
    with pytest.raises(ValueError, match="state must be float32"):
        kernel.eda_decode(*args, state=x["initial_state"].half())
    if DEV == "cpu":
        os.environ["TRITON_INTERPRET"] = "0"
        try:
            with pytest.raises(ValueError, match="TRITON_INTERPRET"):
                call()
        finally:
            os.environ["TRITON_INTERPRET"] = "1"
        # the interpreter's bf16 products are wrong: half inputs to the chunk kernels are refused there
        with pytest.raises(ValueError, match="float32 inputs, got torch.bfloat16"):
            call(**{n: x[n].bfloat16() for n in ("q", "k", "v", "e")})


def test_bad_input_is_still_a_value_error_under_torch_compile():
    """The checks run on the host before the ops, also while torch.compile traces: train.py's compile (no
    fullgraph) hands the frame back to Python, which raises the ValueError; with fullgraph=True torch's own
    error carries its message."""
    x = make_inputs(1, 4, 1, 1, 16, 16, device=DEV)
    bad = dict(x, beta=x["beta"][:, :2])
    torch._dynamo.reset()
    with pytest.raises(ValueError, match="beta must have shape"):
        torch.compile(eda.eda_triton, backend="aot_eager")(**bad)
    with pytest.raises(Exception, match="beta must have shape"):
        torch.compile(eda.eda_triton, backend="aot_eager", fullgraph=True)(**bad)


def op_sample(name):
    """(op, args) for torch.library.opcheck: tiny shapes, every float input of a differentiable op requiring
    grad. eda_chunk_fwd twice: EDA (grouped heads, a partial chunk, initial and final state, the g check) and
    the per-head-decay KDA path with the optional tensors and outputs absent."""
    ops = torch.ops.nanoeda

    def grads(x):
        return {n: (t.requires_grad_() if t is not None else None) for n, t in x.items()}

    if name in ("eda_chunk_fwd", "eda_chunk_bwd"):
        x = grads(make_inputs(1, 5, 1, 2, 16, 16, seed=21, device=DEV))
        args = [x[n] for n in NAMES] + [0.25, 8, False, True, True, True, False, kernel.launch_settings()]
        if name == "eda_chunk_fwd":
            return ops.eda_chunk_fwd.default, args
        with torch.no_grad():
            o, ht, hs, Tm, Qk = ops.eda_chunk_fwd(*args)
        gen = torch.Generator().manual_seed(22)
        do, dht = (torch.randn(t.shape, generator=gen).to(t.device) for t in (o, ht))  # CPU generator
        detached = [t.detach() if t is not None else None for t in args[:7]]
        return ops.eda_chunk_bwd.default, detached + [hs, Tm, Qk, do, dht, 0.25, 8, False, True, args[-1]]
    if name == "eda_chunk_fwd_kda_per_head_decay":
        x = make_inputs(1, 5, 1, 1, 16, 16, erase=False, scalar_g=True, h0=False, seed=23, device=DEV)
        x["g"] = x["g"].unsqueeze(-1).expand(1, 5, 1, 16).contiguous()  # what eda_fused hands the op
        x = grads(x)
        return ops.eda_chunk_fwd.default, [x[n] for n in NAMES] + [0.25, 16, True, False, True, False, False,
                                                                   kernel.launch_settings()]
    if name == "eda_chunk_fwd_recomputing_states":  # no states kept: the autograd formula runs the forward again
        x = grads(make_inputs(1, 5, 1, 2, 16, 16, seed=27, device=DEV))
        return ops.eda_chunk_fwd.default, [x[n] for n in NAMES] + [0.25, 8, False, True, False, True, True,
                                                                   kernel.launch_settings()]
    if name == "eda_decode_":
        x = make_inputs(2, 1, 1, 2, 16, 16, seed=24, device=DEV)
        return ops.eda_decode_.default, [x[n] for n in NAMES[:7]] + [x["initial_state"], 0.25]
    heads = (1, 2, 16, 16)
    u, w = conv_inputs(1, 5, heads, seed=25)
    w = w.reshape(w.shape[0], w.shape[-1])  # as short_conv hands it the weight
    if name == "short_conv_fwd":
        return ops.short_conv_fwd.default, [u.requires_grad_(), w.requires_grad_(), *heads, 1e-6]
    outs = ops.short_conv_fwd(u, w, *heads, 1e-6)
    gen = torch.Generator().manual_seed(26)
    return ops.short_conv_bwd.default, [u, w, *(torch.randn(o.shape, generator=gen).to(o.device) for o in outs), *heads,
                                        1e-6]


@pytest.mark.parametrize("name", ["eda_chunk_fwd", "eda_chunk_fwd_kda_per_head_decay", "eda_chunk_fwd_recomputing_states",
                                  "eda_chunk_bwd", "eda_decode_", "short_conv_fwd", "short_conv_bwd"])
def test_each_kernel_op_passes_torch_library_opcheck(name):
    """kernel.py's PyTorch operators: their schemas (the decode op mutates its state, nothing else), fake
    implementations (shapes, dtypes, strides of the real results), autograd registrations, and a traced call
    (AOT autograd, dynamic shapes) agree with eager calls. What torch.compile relies on to trace through them."""
    op, args = op_sample(name)
    torch.library.opcheck(op, args)


def test_kernel_py_imports_nothing_of_this_repo_but_its_gluon_walk():
    """The import graph runs one way: eda.py may import kernel.py (lazily), never the reverse; kernel.py's
    imports, at the top or inside functions, name no module or folder of this repository but walk_gluon.py
    (its forward walk in Gluon), which imports none."""
    import ast
    here = os.path.dirname(os.path.abspath(__file__))
    ours = {n[:-3] if n.endswith(".py") else n for n in os.listdir(here)
            if n.endswith(".py") or os.path.isdir(os.path.join(here, n))}
    assert {"eda", "model", "train", "conftest"} <= ours  # the list is the repository's
    for name, allowed in (("kernel.py", {"walk_gluon"}), ("walk_gluon.py", set())):
        imported = set()
        for node in ast.walk(ast.parse(open(os.path.join(here, name)).read())):
            if isinstance(node, ast.Import):
                imported |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                assert node.level == 0, "a relative import"
                imported.add(node.module.split(".")[0])
            elif isinstance(node, ast.Name):
                assert node.id not in ("__import__", "importlib"), "an import by name"
        assert "triton" in imported  # what it does import was seen
        assert imported & ours == allowed, (name, sorted(imported & ours))


def test_the_gluon_walk_runs_only_where_it_was_written_and_measured():
    """_gluon_walk: EDA's 16-token chunks, K = V = 128, bf16 operands, <= 64 columns, on CUDA with triton 3.6's Gluon;
    never under the interpreter, never with FWD_GLUON=0."""
    L = dict(zip(kernel.LAUNCH, kernel.launch_settings()))
    q = torch.zeros(1, device=DEV, dtype=torch.bfloat16)
    gluon = DEV == "cuda" and kernel.walk_gluon is not None and torch.cuda.get_device_capability()[0] >= 9
    assert kernel._gluon_walk(L, q, True, 32, 128, 128, 16) == gluon
    assert kernel._gluon_walk(L, q, True, 32, 128, 128, 64) == gluon
    for args in ((True, 32, 128, 128, 128), (False, 16, 128, 128, 16), (True, 64, 128, 128, 16),
                 (True, 32, 64, 128, 16), (True, 32, 128, 80, 16), (True, 32, 128, 256, 64)):
        assert not kernel._gluon_walk(L, q, *args), args
    assert not kernel._gluon_walk(L, q.float(), True, 32, 128, 128, 16)
    assert not kernel._gluon_walk(dict(L, FWD_GLUON=0), q, True, 32, 128, 128, 16)


# ----------------------------------------------------------------------------------------------------
# GPU: bf16 at T = 4096, long sequences, decode over 64 tokens


@needs_gpu
@pytest.mark.parametrize("launch, chunk, hv", [({}, None, 4), ({}, None, 2),
                                               ({"FWD_STAGES": 2, "DH_STAGES": 2}, 32, 4), ({"SUB_BLOCK": 8}, None, 4),
                                               ({"PREP_REUSE": 0}, None, 4), ({"BWD_WROWS": 0}, None, 4), ({}, None, 8),
                                               ({"FWD_LATE_BV": 0}, None, 4), ({"FILL_PROGRAMS": 8}, None, 4),
                                               ({"FILL_PROGRAMS": 4}, None, 4), ({"FWD_GLUON": 0}, None, 4),
                                               ({"FILL_PROGRAMS": 16}, None, 4)])
def test_gpu_bf16_T4096_matches_fp64_reference(launch, chunk, hv):
    # the shipped launch settings, grouped (HV = 4: a pair's dq, dk added; HV = 8: four summed) and not (HV = H = 2),
    # 32-token chunks (whose walks fit a Hopper SM's shared memory at 2 stages), the UT solve in 8-row substitution
    # blocks (the default before 4), the prep's second pass reloading its tiles and the per-chunk backward on all
    # 32 sub-steps of a chunk, the forward walk storing each chunk's state first thing in a step, the walks on 64- and
    # 128-column V-blocks (where more heads run: B * HV = 4 narrows them to 16 columns), the forward walk in Gluon (on
    # Hopper, triton 3.6) at 16, 32 and 64 columns or Triton's at 16
    x = make_inputs(1, 4096, 2, hv, 128, 128, dtype=torch.bfloat16, seed=11, device=DEV)
    compare(x, eda.eda_triton, 1e-2, launch=launch, chunk_size=chunk)


@needs_gpu
@pytest.mark.parametrize("fill, dtype", [(128, torch.bfloat16), (16, torch.bfloat16), (128, torch.float16),
                                         (16, torch.float16)])
def test_gpu_gluon_walk_odd_length_grouped_heads_matches_fp64_reference(fill, dtype):
    # the Gluon forward walk (where kernel._gluon_walk allows it) at 16 and 64 columns (its two chains): a partial
    # last chunk, grouped value heads, an initial state, the final state and every gradient (the backward reads the
    # states it stored); float16 inputs too (bf16 operands, the states and o stored in float16)
    x = make_inputs(2, 999, 1, 3, 128, 128, dtype=dtype, seed=17, device=DEV)
    compare(x, eda.eda_triton, 1e-2, launch=dict(FILL_PROGRAMS=fill))


@needs_gpu
def test_gpu_grouped_backward_gives_the_same_gradients_every_run():
    # no atomic adds: grouped value heads' dq, dk are summed after the kernel, so two runs agree to the bit
    x = make_inputs(2, 1024, 2, 4, 128, 128, dtype=torch.bfloat16, seed=15, device=DEV)
    grads = []
    for _ in range(2):
        xt = {n: (t.clone().requires_grad_() if t is not None else None) for n, t in x.items()}
        o, _ = eda.eda_triton(*[xt[n] for n in NAMES[:7]], initial_state=xt["initial_state"])
        o.float().square().sum().backward()
        grads.append([t.grad for t in xt.values() if t is not None])
    assert len(grads[0]) == 8 and all(torch.equal(a, b) for a, b in zip(*grads))


@needs_gpu
def test_gpu_bf16_kda_T4096_matches_fp64_reference():
    x = make_inputs(1, 4096, 2, 2, 128, 128, erase=False, dtype=torch.bfloat16, seed=12, device=DEV)
    compare(x, eda.eda_triton, 1e-2)


@needs_gpu
def test_gpu_fp32_matches_fp64_reference():
    compare(make_inputs(2, 1000, 2, 4, 64, 128, seed=13, device=DEV), eda.eda_triton, 1e-4)


@needs_gpu
def test_gpu_decode_64_tokens_step_by_step():
    B, T, H, HV, K, V = 8, 64, 4, 8, 128, 128
    x = make_inputs(B, T, H, HV, K, V, dtype=torch.bfloat16, seed=14, device=DEV)
    state = x["initial_state"].clone()
    ref = x["initial_state"].double()
    for t in range(T):
        step = [x[n][:, t:t + 1] if x[n] is not None else None for n in NAMES[:7]]
        o, state = kernel.eda_decode(*step, state=state)
        orf, ref = eda.eda_recurrent(*[s.double() if s is not None else None for s in step],
                                     initial_state=ref, output_final_state=True)
        assert rel(o, orf) <= 1e-2 and rel(state, ref) <= 1e-4, t


@needs_gpu
def test_gpu_bf16_T32768_extreme_decays_stay_finite():
    # g at the safe gate's floor on every channel, or 0: the hardest case for the anchored decay factors
    x = make_inputs(1, 32768, 2, 2, 128, 128, dtype=torch.bfloat16, seed=15, device=DEV)
    x["g"] = torch.where(torch.rand_like(x["g"]) < 0.5, -4.999, 0.0)
    xt = {n: (t.clone().requires_grad_() if t is not None else None) for n, t in x.items()}
    o, ht = eda.eda_triton(*[xt[n] for n in NAMES[:7]], initial_state=xt["initial_state"],
                           output_final_state=True)
    (o.float().square().sum() + ht.square().sum()).backward()
    assert torch.isfinite(o).all() and torch.isfinite(ht).all()
    for n in NAMES:
        if xt[n] is not None:
            assert torch.isfinite(xt[n].grad).all(), n


@needs_gpu
@pytest.mark.parametrize("percent", [31, 0])
def test_gpu_per_chunk_backward_holds_the_carveout_it_asks_for(percent):
    # BWD_CARVEOUT: the driver reports the asked shared-memory carveout for the compiled per-chunk backward
    compare(make_inputs(1, 64, 1, 2, 64, 64, dtype=torch.bfloat16, seed=16, device=DEV), eda.eda_triton, 1e-2,
            launch=dict(BWD_CARVEOUT=percent))
    asked = [fn for fn, p in kernel._CARVEOUTS.items() if p == percent]
    assert asked, "no compiled per-chunk backward was given the carveout"
    for fn in asked:
        got = ctypes.c_int()
        assert ctypes.CDLL("libcuda.so.1").cuFuncGetAttribute(
            ctypes.byref(got), kernel.CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, ctypes.c_void_p(fn)) == 0
        assert got.value == percent


def test_channel_wise_decay_below_the_kernels_range_is_a_clear_error():
    x = make_inputs(B=1, T=5, H=1, HV=1, K=16, V=16, seed=77, device=DEV)
    x["g"][0, 2, 0, 3] = -11.0  # an unbounded log gate can go here; the safe gate cannot
    with pytest.raises(ValueError, match="below -10"):
        eda.eda_triton(**x)


def test_check_g_false_skips_the_decay_check_and_still_matches_in_range():
    # check_g=False is for callers whose gate bounds g by construction (model.py's safe/KDA gates): the
    # result is the same as with the check when g is in range
    x = make_inputs(B=1, T=9, H=1, HV=1, K=16, V=16, seed=78, device=DEV)
    o1 = eda.eda_triton(**x)[0]
    o2 = eda.eda_triton(**x, check_g=False)[0]
    assert torch.equal(o1, o2)


@pytest.mark.parametrize("scalar_g", [False, True])
def test_a_positive_or_nan_log_decay_is_the_same_value_error_in_every_version(scalar_g):
    x = make_inputs(B=1, T=9, H=1, HV=1, K=16, V=16, scalar_g=scalar_g, seed=2041, device=DEV)
    for g, got in ((x["g"].abs() * 0.01, "values up to"), (x["g"].clone().fill_(float("nan")), "NaN")):
        for fn in (eda.eda_recurrent, eda.eda_chunk, eda.eda_triton):
            with pytest.raises(ValueError, match=f"^g is a log decay and must be ≤ 0.*{got}"):
                fn(**dict(x, g=g))


def test_a_minus_inf_per_head_log_decay_is_refused_by_the_kernels_naming_g():
    # the reference paths take -inf (the memory cleared: test_eda.py); the kernels take a finite g
    x = make_inputs(B=1, T=9, H=1, HV=1, K=16, V=16, scalar_g=True, seed=2042, device=DEV)
    x["g"][0, 4] = float("-inf")
    with pytest.raises(ValueError, match="^g holds NaN or inf values"):
        eda.eda_triton(**x)


def test_an_empty_sequence_gives_empty_outputs_and_the_initial_state_in_every_version():
    x = make_inputs(B=2, T=0, H=1, HV=2, K=16, V=16, seed=2043, device=DEV)
    for fn in (eda.eda_recurrent, eda.eda_chunk, eda.eda_triton):
        o, s = fn(**x, output_final_state=True)
        assert o.shape == (2, 0, 2, 16) and torch.equal(s, x["initial_state"]), fn.__name__
        o, s = fn(**dict(x, e=None, gamma=None, initial_state=None), output_final_state=True)
        assert o.shape == (2, 0, 2, 16) and not s.any(), fn.__name__


def test_launch_settings_are_arguments_and_an_unknown_name_is_a_value_error():
    # bench.py and the tests pass launch settings to the call (kernel.py's module values stay the defaults)
    x = make_inputs(B=1, T=9, H=1, HV=1, K=16, V=16, seed=79, device=DEV)
    assert kernel.launch_settings(dict(FWD_BV=32)) == list(dict(kernel.LAUNCH, FWD_BV=32).values())
    assert kernel.launch_settings() == list(kernel.LAUNCH.values())
    with pytest.raises(ValueError, match="unknown launch settings \\['FWD_BW'\\]"):
        eda.eda_triton(**x, launch=dict(FWD_BW=32))


@pytest.mark.parametrize("name, value", [("SUB_BLOCK", 3), ("FWD_BV", 48), ("BWD_BV", 8), ("PREP_BK", 8),
                                         ("BWD_WARPS", 3), ("WALK_MIN_BV", 0)])
def test_launch_settings_that_cannot_run_are_refused_by_name(name, value):
    # SUB_BLOCK=3 gave a wrong UT inverse silently (o off by 1e-2); the others stopped inside Triton's compiler
    x = make_inputs(1, 21, 1, 1, 16, 16, seed=33, device=DEV)
    with pytest.raises(ValueError, match=f"launch settings that cannot run: {name}={value}, not a power of 2"):
        eda.eda_triton(**x, launch={name: value})


@pytest.mark.parametrize("erase, chunk, launch", [(True, 32, dict(FWD_STAGES=1)), (True, 32, dict(DH_STAGES=1)),
                                                  (False, 64, dict(FWD_STAGES=1, DH_STAGES=1))])
def test_one_stage_walks_at_64_row_steps_are_refused(erase, chunk, launch):
    # on an H200 (triton 3.6) such walks gave NaN outputs (forward) and illegal memory accesses (reverse); 32-row
    # steps at one stage (16-token EDA chunks, 32-token KDA ones) ran and matched
    x = make_inputs(1, 21, 1, 1, 16, 16, erase=erase, seed=34, device=DEV)
    with pytest.raises(ValueError, match=f"{chunk}-token chunks take 64-row walk steps.*must be >= 2"):
        kernel.eda_fused(**x, chunk_size=chunk, launch=launch)
    kernel.eda_fused(**x, chunk_size=chunk // 2, launch=launch)  # 32-row steps: allowed


# ----------------------------------------------------------------------------------------------------
# short_conv: the linear layers' input path (conv + SiLU + q/k norms), against model.la_conv in float64


def conv_inputs(B, T, heads, ks=4, dtype=torch.float32, seed=0, extra=8):
    """u as the layer makes it: a [q | k | v] slice of a wider projection output (row stride > width)."""
    H, HV, K, V = heads
    gen = torch.Generator().manual_seed(seed)
    C = 2 * H * K + HV * V
    p = torch.randn(B, T, C + extra, generator=gen).to(DEV, dtype)
    w = (torch.rand(C, 1, ks, generator=gen) - 0.5).to(DEV)
    return p[..., :C], w


def check_short_conv(u, w, heads, tol, seed=1):
    import model
    gen = torch.Generator().manual_seed(seed)
    ut, wt = u.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    ur, wr = u.detach().double().cpu().requires_grad_(), w.detach().double().cpu().requires_grad_()
    out = kernel.short_conv(ut, wt, heads)
    ref = model.la_conv(ur, wr, heads)[:3]  # (its 4th result is the next call's conv tail)
    cots = [torch.randn(r.shape, generator=gen, dtype=torch.float64) for r in ref]
    sum((o.double().cpu() * c).sum() for o, c in zip(out, cots)).backward()
    sum((r * c).sum() for r, c in zip(ref, cots)).backward()
    errs = {n: rel(o, r) for n, o, r in zip("qkv", out, ref)}
    errs.update(du=rel(ut.grad, ur.grad), dw=rel(wt.grad, wr.grad))
    assert all(o.dtype == u.dtype and o.shape == r.shape for o, r in zip(out, ref))
    assert max(errs.values()) <= tol, errs


def test_short_conv_matches_la_conv_grouped_heads_odd_length_two_row_blocks():
    # T = 70 spans two of the kernel's 64-row blocks (the conv window crosses the border); K != V, V = 24 not
    # a power of 2 (masked columns); grouped value heads; rows 10-19 of u zero: silu(0) = 0, so rows 13-19 of
    # q and k have norm 0 < eps and take F.normalize's other branch
    heads = (2, 4, 16, 24)
    u, w = conv_inputs(2, 70, heads, seed=3)
    u[:, 10:20] = 0.
    check_short_conv(u, w, heads, 1e-5)


def test_short_conv_single_token_and_kernel_size_two():
    heads = (1, 2, 16, 16)
    u, w = conv_inputs(1, 1, heads, ks=2, seed=4)
    check_short_conv(u, w, heads, 1e-5)


def test_short_conv_bad_inputs_raise_value_errors():
    heads = (1, 1, 16, 16)
    u, w = conv_inputs(1, 5, heads)
    with pytest.raises(ValueError, match="2\\*H\\*K"):
        kernel.short_conv(u[..., :40], w, heads)
    with pytest.raises(ValueError, match="weight"):
        kernel.short_conv(u, w[:40], heads)
    with pytest.raises(ValueError, match="float64"):
        kernel.short_conv(u.double(), w, heads)


@needs_gpu
def test_gpu_short_conv_bf16_125m_layer_shape():
    heads = (3, 6, 128, 128)
    u, w = conv_inputs(2, 4096 + 7, heads, dtype=torch.bfloat16, seed=5)
    check_short_conv(u, w, heads, 1e-2)


def run_bench_stubbed(argv, stubs="", others_hold_gib=0):
    """bench.py's main run as a process would run it (conftest.as_a_process) on the CPU, with argv, CUDA reported
    present (an 80 GiB GPU of which other processes hold others_hold_gib), versions() stubbed and the lines `stubs`
    run first (`bench` bound): its control flow without a GPU. Returns the CompletedProcess."""
    with pytest.MonkeyPatch.context() as mp, as_a_process([os.path.join(ROOT, "bench.py"), *argv]) as done:
        mp.setattr(torch.cuda, "is_available", lambda: True)
        mp.setattr(torch.cuda, "mem_get_info", lambda: ((79 - others_hold_gib) * 2**30, 80 * 2**30))
        mp.setattr(torch.cuda, "memory_reserved", lambda: 0)
        bench = load_script("bench.py", ["bench.py", *argv])
        bench.versions = lambda: "stub"
        exec(stubs, {"bench": bench})
        bench.main()
    return done


def test_bench_exits_non_zero_without_timing_when_its_correctness_check_fails():
    """bench.py's control flow on CPU: CUDA and the checks stubbed, a failed check must stop it (exit != 0)
    before any timing runs."""
    p = run_bench_stubbed(["--use_fla=False"], "bench.check_all = lambda fla: False\n"
                          "def timed(*a, **k): raise AssertionError('timing ran after a failed check')\n"
                          "bench.bench_decode = bench.bench_kernels = timed\n")
    assert p.returncode != 0 and "correctness check failed" in p.stderr, p.stdout + p.stderr


def test_bench_refuses_to_time_a_gpu_that_other_processes_hold_unless_told():
    """Other processes holding 12 GiB of the GPU (a training run beside it): bench.py stops before any check or
    timing and says why; --shared_gpu=True times anyway and says the timings share the GPU. 1 GiB held by others
    passes (what a CUDA context and driver take)."""
    stop = ("def timed(*a, **k): raise SystemExit('reached the checks')\n"
            "bench.check_all = timed\n")
    p = run_bench_stubbed(["--use_fla=False"], stop, others_hold_gib=12)
    assert p.returncode != 0 and "other processes hold 12.0 GiB" in p.stderr, p.stdout + p.stderr
    assert "reached the checks" not in p.stderr
    p = run_bench_stubbed(["--use_fla=False", "--shared_gpu=True"], stop, others_hold_gib=12)
    assert "reached the checks" in p.stderr and "the timings share it" in p.stdout, p.stdout + p.stderr
    p = run_bench_stubbed(["--use_fla=False"], stop, others_hold_gib=1)
    assert "reached the checks" in p.stderr, p.stdout + p.stderr


def test_bench_rejects_a_train_override_that_is_not_a_model_setting():
    """bench.py --what=model_train --train_overrides={...}: a name that is not a GPTConfig field stops the run
    with the name, before any model is built (CUDA stubbed: the check must come first)."""
    p = run_bench_stubbed(["--what=model_train", "--train_overrides={'la_recompute': True}"])
    assert p.returncode != 0 and "train_overrides names ['la_recompute']" in p.stderr, p.stdout + p.stderr


def test_bench_rows_carry_command_date_commit_and_device(tmp_path):
    bench = load_script('bench.py', ['bench.py', f'--results_file={tmp_path / "b.jsonl"}', '--use_fla=False'])
    bench.emit('kernel', case='x', fwd_ms=1.0)
    bench.emit('kernel', case='y', fwd_ms=2.0)
    rows = [json.loads(x) for x in open(tmp_path / "b.jsonl")]
    assert [r['case'] for r in rows] == ['x', 'y'] and rows[0]['run'] == rows[1]['run']
    assert rows[0]['command'].startswith('python bench.py --results_file=') and rows[0]['device'] and \
        rows[0]['date'] and 'commit' in rows[0] and rows[0]['torch']


KERNEL_REGS_CHECK = """
import sys
sys.path.insert(0, 'scripts')
import kernel, kernel_regs as regs
fn, consts = kernel._eda_decode_kernel, dict(H=2, HV=2, K=64, V=64, BK=64, BV=32, EDA=True, SCALAR_G=False)
ops = regs.instructions(regs.disassemble(fn, consts, dict(num_warps=2, num_stages=1), 'cuobjdump', '-sass')[0])
def export(ops):  # an ncu source export: every sample on the exp instructions
    with open(sys.argv[1], 'w') as f:
        f.write('"Kernel Name","x"\\n"Address","Source","Warp Stall Sampling (All Samples)"\\n' + ''.join(
            f'"0x{a + 4096:x}","{op} R1, R2","{int(op == "MUFU.EX2")}"\\n' for a, op, _ in ops))
    return sys.argv[1]
column = sys.argv[2]  # the export's column to read: a missing one is refused by name
opt = dict(num_warps=2, num_stages=1)
regs.stalls_by_line(fn, consts, opt, export(ops), column)
regs.stalls_by_line(fn, consts, opt, export(ops[:-1]), column)
"""


def test_kernel_regs_puts_a_profiles_stall_samples_on_the_lines_that_made_them(tmp_path):
    # the decode kernel compiled for sm_90a (a process without the interpreter) and an ncu source export of it with
    # every sample on its exp instructions: the lines printed are tl.exp's; an export of other code is refused, and
    # so is a column (--ncu_metric) the export lacks
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    runs = [subprocess.run([sys.executable, "-c", KERNEL_REGS_CHECK, str(tmp_path / "ncu.csv"), column], cwd=ROOT,
                           env=env, capture_output=True, text=True, timeout=300)
            for column in ("Warp Stall Sampling (All Samples)", "L1 Wavefronts Shared Excessive")]
    printed = [line for line in runs[0].stdout.splitlines() if not line.startswith("  0.0%")]
    assert printed and all("tl.exp" in line for line in printed), runs[0].stdout + runs[0].stderr
    assert abs(sum(float(line.split("%")[0]) for line in printed) - 100) < 0.5
    assert runs[0].returncode == 1 and "of this compile's code" in runs[0].stderr, runs[0].stderr
    assert runs[1].returncode == 1 and "no column 'L1 Wavefronts Shared Excessive'" in runs[1].stderr, runs[1].stderr
