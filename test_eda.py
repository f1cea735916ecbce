"""eda.py: the chunked form equals the step-by-step reference, and the paper's properties of the rule hold."""
import pytest
import torch
import torch.nn.functional as F

import eda
from conftest import make_inputs, rel
from eda import (double_sequence, eda_chunk, eda_recurrent, gdn2_chunk, gdn2_recurrent, kda_gate, log_gate,
                 safe_gate)

B, H, HV, K, V = 2, 2, 4, 32, 16  # grouped value heads (2 per query/key head), K != V
F64 = torch.float64


# --- the chunked form equals the reference ----------------------------------------------------------

@pytest.mark.parametrize("T,chunk_size", [(1, 16), (15, 4), (63, 16), (100, 32)])
@pytest.mark.parametrize("with_state", [False, True])
def test_chunk_matches_recurrent_fp64(T, chunk_size, with_state):
    x = make_inputs(B, T, H, HV, K, V, h0=with_state, seed=1000 + T + chunk_size + with_state, dtype=F64)
    o_ref, s_ref = eda_recurrent(**x, output_final_state=True)
    o, s = eda_chunk(**x, output_final_state=True, chunk_size=chunk_size)
    assert o.shape == (B, T, HV, V) and s.shape == (B, HV, K, V)
    assert o.dtype == s.dtype == torch.float64
    assert rel(o, o_ref) <= 1e-10
    assert rel(s, s_ref) <= 1e-10


@pytest.mark.parametrize("case", ["kda", "gdn", "deltanet"])
def test_chunk_matches_recurrent_without_erase(case):
    x = make_inputs(B, 37, H, HV, K, V, seed=7, erase=False, scalar_g=(case == "gdn"), dtype=F64)
    if case == "deltanet":
        x["g"] = torch.zeros_like(x["g"])
    o_ref, s_ref = eda_recurrent(**x, output_final_state=True)
    o, s = eda_chunk(**x, output_final_state=True, chunk_size=16)
    assert rel(o, o_ref) <= 1e-10 and rel(s, s_ref) <= 1e-10


def test_chunk_fp32_matches_fp64_reference():
    x64 = make_inputs(B, 100, H, HV, K, V, seed=11, dtype=F64)
    o_ref, s_ref = eda_recurrent(**x64, output_final_state=True)
    x32 = {n: t.float() for n, t in x64.items()}
    o, s = eda_chunk(**x32, output_final_state=True, chunk_size=32)
    assert o.dtype == s.dtype == torch.float32
    assert rel(o.double(), o_ref) <= 1e-5
    assert rel(s.double(), s_ref) <= 1e-5


def test_chunk_survives_extreme_decay_over_long_chunks():
    # the safe gate's floor on every channel: a 64-step chunk decays by exp(-320), far below fp32's range;
    # the chunked form must only exponentiate non-positive decay differences (notes/chunk_form.md §2)
    x = make_inputs(B, 130, H, HV, K, V, seed=12, dtype=torch.float32)
    x["g"] = torch.full_like(x["g"], -5.0)
    o, s = eda_chunk(**x, output_final_state=True, chunk_size=64)
    o_ref, s_ref = eda_recurrent(**{n: t.double() for n, t in x.items()}, output_final_state=True)
    assert torch.isfinite(o).all() and torch.isfinite(s).all()
    assert rel(o.double(), o_ref) <= 1e-5 and rel(s.double(), s_ref) <= 1e-5


def test_low_precision_inputs_give_outputs_in_v_dtype_and_fp32_state():
    x = make_inputs(B, 20, H, HV, K, V, h0=False, seed=13, dtype=F64)
    x = {n: t.bfloat16() for n, t in x.items() if t is not None}  # every input, the gates too
    for fn in (eda_recurrent, eda_chunk):
        o, s = fn(**x, output_final_state=True)
        assert o.dtype == torch.bfloat16 and s.dtype == torch.float32


def test_scale_multiplies_q():
    x = make_inputs(B, 9, H, HV, K, V, h0=False, seed=14, dtype=F64)
    o_default, _ = eda_recurrent(**x)
    o_one, _ = eda_recurrent(**x, scale=1.0)
    assert rel(o_default, o_one * K ** -0.5) <= 1e-12


# --- gradients --------------------------------------------------------------------------------------

@pytest.mark.parametrize("T,chunk_size,scalar_g", [(15, 4, False), (63, 16, False), (100, 32, False), (23, 8, True)])
def test_chunk_gradients_match_recurrent_fp64(T, chunk_size, scalar_g):
    x = make_inputs(B, T, H, HV, K, V, seed=2000 + T, scalar_g=scalar_g, dtype=F64)
    S0 = x.pop("initial_state")
    leaves = {n: t.clone().requires_grad_() for n, t in x.items()}
    S0 = S0.clone().requires_grad_()
    gen = torch.Generator().manual_seed(T)
    do = torch.randn(B, T, HV, V, generator=gen, dtype=torch.float64)
    ds = torch.randn(B, HV, K, V, generator=gen, dtype=torch.float64)

    def grads(fn, **kw):
        o, s = fn(**leaves, initial_state=S0, output_final_state=True, **kw)
        return torch.autograd.grad((o * do).sum() + (s * ds).sum(), [*leaves.values(), S0])

    ref = grads(eda_recurrent)
    got = grads(eda_chunk, chunk_size=chunk_size)
    for name, r, c in zip([*leaves, "initial_state"], ref, got):
        assert rel(c, r) <= 1e-10, name


def test_chunk_gradients_in_fp32_match_the_fp64_reference():
    x = make_inputs(B, 63, H, HV, K, V, seed=2100, dtype=F64)
    S0 = x.pop("initial_state")
    gen = torch.Generator().manual_seed(63)
    do = torch.randn(B, 63, HV, V, generator=gen, dtype=torch.float64)
    ds = torch.randn(B, HV, K, V, generator=gen, dtype=torch.float64)

    def grads(fn, dtype, **kw):
        leaves = {n: t.to(dtype).requires_grad_() for n, t in x.items()}
        s0 = S0.to(dtype).requires_grad_()
        o, s = fn(**leaves, initial_state=s0, output_final_state=True, **kw)
        return torch.autograd.grad((o * do.to(dtype)).sum() + (s * ds.to(dtype)).sum(), [*leaves.values(), s0])

    ref = grads(eda_recurrent, torch.float64)
    got = grads(eda_chunk, torch.float32, chunk_size=16)
    for name, r, c in zip([*x, "initial_state"], ref, got):
        assert c.dtype == torch.float32
        assert rel(c.double(), r) <= 1e-5, name


def test_chunk_passes_gradcheck():
    x = make_inputs(1, 5, 1, 2, 4, 3, seed=3, dtype=F64)
    S0 = x.pop("initial_state")
    names = list(x)

    def f(*args):
        kw = dict(zip(names, args[:-1]))
        o, s = eda_chunk(**kw, initial_state=args[-1], output_final_state=True, chunk_size=2)
        return o, s

    args = [t.clone().requires_grad_() for t in x.values()] + [S0.clone().requires_grad_()]
    assert torch.autograd.gradcheck(f, args)


# --- properties of the rule (paper, Sec. 3.3) --------------------------------------------------------

def one_step(S, e, g, gamma, k=None, beta=0.0, v=None):
    """One EDA step through eda_recurrent on a single head, from state S [K, V]."""
    k = torch.zeros(K, dtype=torch.float64) if k is None else k
    v = torch.zeros(V, dtype=torch.float64) if v is None else v
    t = lambda x: x.reshape(1, 1, 1, -1)  # noqa: E731
    s = lambda x: torch.tensor(x, dtype=torch.float64).reshape(1, 1, 1)  # noqa: E731
    _, S1 = eda_recurrent(t(torch.zeros(K, dtype=torch.float64)), t(k), t(v), t(e), t(g), s(beta), s(gamma),
                          initial_state=S.reshape(1, 1, K, V), output_final_state=True)
    return S1.reshape(K, V)


def test_a_step_is_the_cross_term_expansion():
    # Eq. expansion: (I - b k k^T)(I - c e e^T) = I - c e e^T - b k k^T + c b (k^T e) k e^T, the transition
    # one step of eda_recurrent applies to the state (no decay, v = 0: no write)
    gen = torch.Generator().manual_seed(4)
    k = F.normalize(torch.randn(K, generator=gen, dtype=torch.float64), dim=0)
    e = F.normalize(torch.randn(K, generator=gen, dtype=torch.float64), dim=0)
    S = torch.randn(K, V, generator=gen, dtype=torch.float64)
    b, c = 0.7, 0.4
    I = torch.eye(K, dtype=torch.float64)
    rhs = I - c * torch.outer(e, e) - b * torch.outer(k, k) + c * b * (k @ e) * torch.outer(k, e)
    assert rel(one_step(S, e, torch.zeros(K, dtype=torch.float64), c, k=k, beta=b), rhs @ S) <= 1e-14


def test_erase_readout_identity():
    # Eq. erase_readout: a query orthogonal to e reads the same as before the erase; q = e reads (1 - gamma) x
    gen = torch.Generator().manual_seed(5)
    S = torch.randn(K, V, generator=gen, dtype=torch.float64)
    e = F.normalize(torch.randn(K, generator=gen, dtype=torch.float64), dim=0)
    q = torch.randn(K, generator=gen, dtype=torch.float64)
    q_perp = q - (q @ e) * e
    gamma = 0.35
    S_erased = one_step(S, e, torch.zeros(K, dtype=torch.float64), gamma)  # no decay, no write (beta = 0)
    assert rel(S_erased.T @ q_perp, S.T @ q_perp) <= 1e-14
    assert rel(S_erased.T @ e, (1 - gamma) * (S.T @ e)) <= 1e-14
    expected = S.T @ q - gamma * (q @ e) * (S.T @ e)
    assert rel(S_erased.T @ q, expected) <= 1e-14


def test_erase_at_the_write_key_is_a_stronger_same_address_correction():
    # e = k: (I - b k k^T)(I - c k k^T) = I - (b + c - b c) k k^T for a unit k, with the write b k v^T unchanged
    gen = torch.Generator().manual_seed(6)
    S = torch.randn(K, V, generator=gen, dtype=torch.float64)
    k = F.normalize(torch.randn(K, generator=gen, dtype=torch.float64), dim=0)
    v = torch.randn(V, generator=gen, dtype=torch.float64)
    g = -torch.rand(K, generator=gen, dtype=torch.float64)
    b, c = 0.6, 0.3
    got = one_step(S, k, g, c, k=k, beta=b, v=v)
    strength = b + c - b * c
    assert strength > b
    D_S = g.exp()[:, None] * S
    expected = D_S - strength * torch.outer(k, k @ D_S) + b * torch.outer(k, v)
    assert rel(got, expected) <= 1e-13


def test_erase_before_delta_keeps_the_new_write():
    # Erase first, then write (Eq. ed): erasing at the very address being written cannot remove the new
    # content. The reversed order (delta, then erase) would wipe it.
    gen = torch.Generator().manual_seed(8)
    S = torch.randn(K, V, generator=gen, dtype=torch.float64)
    k = F.normalize(torch.randn(K, generator=gen, dtype=torch.float64), dim=0)
    v = torch.randn(V, generator=gen, dtype=torch.float64)
    zero_g = torch.zeros(K, dtype=torch.float64)
    eda = one_step(S, k, zero_g, 1.0, k=k, beta=1.0, v=v)
    assert rel(eda.T @ k, v) <= 1e-13  # memory at k returns exactly the new value
    I = torch.eye(K, dtype=torch.float64)
    P = I - torch.outer(k, k)
    reversed_order = P @ (P @ S + torch.outer(k, v))
    assert (reversed_order.T @ k).norm() <= 1e-12  # ... whereas delta-then-erase erased it
    assert rel(eda, reversed_order) > 0.1


def test_erase_and_delta_do_not_commute_for_random_addresses():
    x = make_inputs(B, 6, H, HV, K, V, seed=9, dtype=F64)
    o, _ = eda_recurrent(**x)
    swapped = dict(x, k=x["e"][:, :, ::2].contiguous(), e=x["k"].repeat_interleave(HV // H, dim=2),
                   beta=x["gamma"], gamma=x["beta"])  # write at e, erase at k
    o_swapped, _ = eda_recurrent(**swapped)
    assert rel(o, o_swapped) > 1e-2


def test_zero_erase_gate_equals_kda():
    x = make_inputs(B, 40, H, HV, K, V, seed=10, dtype=F64)
    x["gamma"] = torch.zeros_like(x["gamma"])
    o, s = eda_recurrent(**x, output_final_state=True)
    o_kda, s_kda = eda_recurrent(**dict(x, e=None, gamma=None), output_final_state=True)
    assert rel(o, o_kda) <= 1e-14 and rel(s, s_kda) <= 1e-14
    o_c, s_c = eda_chunk(**x, output_final_state=True, chunk_size=16)
    assert rel(o_c, o_kda) <= 1e-10 and rel(s_c, s_kda) <= 1e-10


def test_delta_rule_on_doubled_sequence_equals_eda():
    # Eq. double_data / double_kda: plain delta rule (KDA form) over [e_1, k_1, e_2, k_2, ...]
    x = make_inputs(B, 33, H, HV, K, V, seed=15, dtype=F64)
    S0 = x.pop("initial_state")
    o, s = eda_recurrent(**x, initial_state=S0, output_final_state=True)
    q2, k2, v2, g2, beta2 = double_sequence(**x)
    assert q2.shape == (B, 66, HV, K) and beta2.shape == (B, 66, HV)
    o2, s2 = eda_recurrent(q2, k2, v2, None, g2, beta2, None, scale=K ** -0.5, initial_state=S0,
                           output_final_state=True)
    assert rel(o2[:, 1::2], o) <= 1e-12 and rel(s2, s) <= 1e-12
    assert o2[:, 0::2].abs().max() == 0  # q' = 0 at the erase sub-steps


# --- gates --------------------------------------------------------------------------------------------

def test_safe_gate_stays_in_its_range():
    gen = torch.Generator().manual_seed(16)
    a = 30 * torch.randn(4, 64, 3, 8, generator=gen)
    A_log = torch.randn(3, generator=gen)
    dt_bias = torch.randn(3, 8, generator=gen)
    for lower in (-5.0, -1.0):
        g = safe_gate(a, A_log, dt_bias, lower_bound=lower)
        assert g.dtype == torch.float32 and g.shape == a.shape
        # (l, 0] in exact arithmetic; in fp32 a saturated coordinate may round onto l, never below
        assert (g >= lower).all() and (g <= 0).all()
        assert (safe_gate(a / 10, A_log, dt_bias, lower_bound=lower) > lower).all()
    huge = safe_gate(torch.full((2, 3, 8), 1e4), A_log, dt_bias)
    assert torch.allclose(huge, torch.full_like(huge, -5.0), atol=1e-5)  # saturates at l, never -inf


def test_safe_gate_matches_log_gate_near_zero():
    # Taylor limit at Delta -> 0: g = -A * Delta + O(A^2 Delta^2 / |l|)
    A_log = torch.tensor([0.3, -1.0, 1.2], dtype=torch.float64)
    dt_bias = torch.zeros(3, 4, dtype=torch.float64)
    for delta in (1e-2, 1e-3):
        a = torch.full((3, 4), delta, dtype=torch.float64).expm1().log()  # softplus(a) = delta
        g = safe_gate(a, A_log, dt_bias).double()
        linear = log_gate(a, A_log, dt_bias).double()  # -A * Delta
        A = A_log.exp()[:, None]
        err = (g - linear).abs()
        assert (err <= (A * delta) ** 2 / 5 * 0.51 + 1e-6).all()  # the second-order term, A^2 D^2 / (2|l|)
        assert (err / linear.abs()).max() < 0.02


def test_kda_and_log_gates_have_their_ranges():
    gen = torch.Generator().manual_seed(17)
    a = 10 * torch.randn(5, 3, 8, generator=gen)
    A_log, dt_bias = torch.randn(3, generator=gen), torch.randn(3, 8, generator=gen)
    g = kda_gate(a, A_log, dt_bias)
    assert (g >= -5).all() and (g <= 0).all()  # (l, 0) in exact arithmetic, closed after fp32 rounding
    assert (kda_gate(a / 10, A_log, dt_bias) > -5).all()
    g_head = log_gate(a[..., 0], A_log, dt_bias[:, 0])  # GDN: one scalar per head
    assert g_head.shape == (5, 3) and (g_head <= 0).all()


# --- bad input -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("fn", [eda_recurrent, eda_chunk])
def test_bad_inputs_raise_value_errors_that_name_the_problem(fn):
    x = make_inputs(B, 5, H, HV, K, V, seed=18, dtype=F64)
    S0 = x.pop("initial_state")
    bad = [
        (dict(k=x["k"][:, :4]), "k must have shape"),
        (dict(v=x["v"][:, :4]), r"v must have shape \(2, 5, 4, 16\), got \(2, 4, 4, 16\)"),
        (dict(v=x["v"][:, :, :3]), "multiple of the query/key heads"),
        (dict(gamma=None), "e and gamma go together"),
        (dict(beta=x["beta"].long()), "beta must be a floating-point"),
        (dict(g=x["g"][..., :5]), "g must have shape"),
        (dict(e=x["e"][..., :5]), "e must have shape"),
        (dict(q=x["q"][0]), r"q must be \[B, T, H, K\]"),
        (dict(beta=x["beta"].to("meta")), "all inputs must share a device"),
    ]
    for change, message in bad:
        with pytest.raises(ValueError, match=message):
            fn(**dict(x, **change))
    with pytest.raises(ValueError, match="initial_state must have shape"):
        fn(**x, initial_state=S0[:, :, :3])


def test_empty_batch_is_a_clear_value_error():
    from eda import eda_triton
    x = make_inputs(0, 20, H, HV, 16, 16, h0=False, seed=19, dtype=torch.float32)
    for fn in (eda_recurrent, eda_chunk, eda_triton):  # eda_triton: checked before it needs a device
        with pytest.raises(ValueError, match=r"q has batch size B = 0"):
            fn(**x)


@pytest.mark.parametrize("scalar_g", [False, True])
def test_reference_paths_refuse_a_positive_log_decay_naming_g(scalar_g):
    x = make_inputs(B, 9, H, HV, K, V, scalar_g=scalar_g, seed=2031, dtype=F64)
    for g, got in ((x["g"].abs() * 0.01, "values up to"), (x["g"].clone().fill_(float("nan")), "NaN")):
        for fn in (eda_recurrent, eda_chunk):
            with pytest.raises(ValueError, match=f"g is a log decay and must be ≤ 0.*{got}"):
                fn(**dict(x, g=g))


@pytest.mark.parametrize("erase", [True, False])
@pytest.mark.parametrize("scalar_g", [False, True])
def test_a_minus_inf_log_decay_clears_the_memory_in_the_chunked_form_as_in_the_reference(erase, scalar_g):
    x = make_inputs(B, 37, H, HV, K, V, erase=erase, scalar_g=scalar_g, seed=2032 + 2 * erase + scalar_g, dtype=F64)
    for t in (0, 5, 6, 16, 36):  # first token, two in a row, a chunk's first token, the last token
        x["g"][0, t] = float("-inf")
    x["g"][1, 20, 1] = float("-inf")  # one head of one sequence
    o_ref, s_ref = eda_recurrent(**x, output_final_state=True)
    assert torch.isfinite(o_ref).all() and torch.isfinite(s_ref).all()
    for chunk_size in (4, 16):
        o, s = eda_chunk(**x, output_final_state=True, chunk_size=chunk_size)
        assert rel(o, o_ref) < 1e-12 and rel(s, s_ref) < 1e-12
    x32 = {n: None if t is None else t.float() for n, t in x.items()}
    o, s = eda_chunk(**x32, output_final_state=True, chunk_size=16)
    assert rel(o, o_ref) < 1e-4 and rel(s, s_ref) < 1e-4
    # after the reset nothing of what came before is left: the last token's outputs ignore the earlier ones
    x2 = dict(x, v=x["v"].clone(), initial_state=x["initial_state"] * 7)
    x2["v"][:, :36] += 1.0
    assert torch.equal(eda_chunk(**x2, chunk_size=16)[0][0, 36], eda_chunk(**x, chunk_size=16)[0][0, 36])


@pytest.mark.parametrize("dim,shape", [("H", (B, 5, 0, K)), ("K", (B, 5, H, 0)), ("HV", (B, 5, 0, V)),
                                       ("V", (B, 5, HV, 0))])
def test_a_zero_head_or_channel_dimension_is_the_same_value_error_in_every_version(dim, shape):
    from eda import eda_triton
    Bq, Tq, Hq, Kq = shape if dim in ("H", "K") else (B, 5, H, K)
    HVv, Vv = (shape[2], shape[3]) if dim in ("HV", "V") else (HV, V)
    x = dict(q=torch.zeros(Bq, Tq, Hq, Kq), k=torch.zeros(Bq, Tq, Hq, Kq), v=torch.zeros(B, 5, HVv, Vv),
             e=torch.zeros(B, 5, HVv, Kq), g=torch.zeros(B, 5, HVv, Kq), beta=torch.zeros(B, 5, HVv),
             gamma=torch.zeros(B, 5, HVv))
    for fn in (eda_recurrent, eda_chunk, eda_triton):  # eda_triton: checked before it needs a device
        with pytest.raises(ValueError, match=f"^{dim} = .* = 0: every dimension but T must be >= 1"):
            fn(**x)


@pytest.mark.parametrize("fn", [eda_recurrent, eda_chunk])
def test_nan_or_inf_in_an_input_is_a_value_error_naming_it(fn):
    x = make_inputs(B, 11, H, HV, K, V, seed=2034, dtype=F64)
    for name in ("q", "k", "v", "e", "beta", "gamma", "initial_state"):
        for bad in (float("nan"), float("inf")):
            t = x[name].clone()
            t.view(-1)[7] = bad
            with pytest.raises(ValueError, match=f"^{name} holds NaN or inf values"):
                fn(**dict(x, **{name: t}))
    fn(**x)  # (the unchanged inputs pass)


@pytest.mark.parametrize("fn", [eda_recurrent, eda_chunk])
def test_check_false_skips_the_value_checks_and_changes_nothing_else(fn):
    # for callers that check what comes out (the model: train.py stops on a non-finite loss)
    x = make_inputs(B, 11, H, HV, K, V, seed=2035, dtype=F64)
    assert all(torch.equal(a, b) for a, b in zip(fn(**x, output_final_state=True),
                                                 fn(**x, output_final_state=True, check=False)))
    x["v"][0, 3, 0, 0] = float("nan")
    o, _ = fn(**x, check=False)
    assert o[0, 3:, 0, 0].isnan().all() and not o[1].isnan().any()  # NaN in, NaN out, no word


# ----------------------------------------------------------------------------------------------------
# GDN-2's rule (Eq. gdn2_prelim): the chunked form against its recurrence, and the recurrence against KDA's


def _gdn2_inputs(B=2, T=37, H=2, HV=4, K=8, V=6, seed=0, dtype=torch.float64):
    g_ = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g_, dtype=dtype)
    q = F.normalize(r(B, T, H, K), dim=-1)
    k = F.normalize(r(B, T, H, K), dim=-1)
    v = r(B, T, HV, V)
    g = -5 * torch.rand(B, T, HV, K, generator=g_, dtype=dtype)
    b = torch.rand(B, T, HV, K, generator=g_, dtype=dtype)
    w = torch.rand(B, T, HV, V, generator=g_, dtype=dtype)
    S0 = r(B, HV, K, V)
    return q, k, v, g, b, w, S0


def test_gdn2_chunk_matches_its_recurrence():
    q, k, v, g, b, w, S0 = _gdn2_inputs()
    o_r, S_r = gdn2_recurrent(q, k, v, g, b, w, initial_state=S0, output_final_state=True)
    for C in (8, 16, 64):
        o_c, S_c = gdn2_chunk(q, k, v, g, b, w, initial_state=S0, output_final_state=True, chunk_size=C)
        assert rel(o_c, o_r) < 1e-10 and rel(S_c, S_r) < 1e-10
    # per-head (scalar) decay is accepted too
    o_r, _ = gdn2_recurrent(q, k, v, g[..., 0], b, w)
    o_c, _ = gdn2_chunk(q, k, v, g[..., 0], b, w, chunk_size=8)
    assert rel(o_c, o_r) < 1e-10


def test_gdn2_recurrence_is_the_gated_delta_rule_when_b_and_w_equal_beta():
    """S = (I - k (b*k)^T) D S + k (w*v)^T with b = w = beta is KDA's rule: ties gdn2_recurrent to eda.py's spec."""
    q, k, v, g, b, w, S0 = _gdn2_inputs()
    beta = torch.rand(*v.shape[:3], dtype=v.dtype)
    o2, S2 = gdn2_recurrent(q, k, v, g, beta[..., None].expand_as(b), beta[..., None].expand_as(w),
                            initial_state=S0, output_final_state=True)
    o1, S1 = eda_recurrent(q, k, v, None, g, beta, None, initial_state=S0, output_final_state=True)
    assert rel(o2, o1) < 1e-12 and rel(S2, S1) < 1e-12


def test_gdn2_chunk_is_differentiable_like_the_recurrence():
    q, k, v, g, b, w, S0 = _gdn2_inputs(T=19)
    grads = []
    for fn in (gdn2_recurrent, lambda *a, **kw: gdn2_chunk(*a, chunk_size=8, **kw)):
        xs = [t.clone().requires_grad_() for t in (q, k, v, g, b, w)]
        o, _ = fn(*xs, initial_state=S0)
        (o * torch.linspace(-1, 1, o.numel(), dtype=o.dtype).view_as(o)).sum().backward()
        grads.append(torch.cat([x.grad.flatten() for x in xs]))
    assert rel(grads[1], grads[0]) < 1e-9


# ----------------------------------------------------------------------------------------------------
# Policy: which implementation a layer runs (eda.rule_backend, rule_chunk, triton_problem, auto_backend_problem)


def test_each_backend_runs_its_own_chunk_and_auto_means_the_kernels_on_cuda_except_for_gdn2():
    """la_chunk_size is the chunked PyTorch rule's chunk: on CUDA the Triton rule runs kernel.CHUNK_TOKENS whatever
    it says; GDN-2 (no Triton rule) and la_backend='chunk' run la_chunk_size everywhere; the recurrent form 1."""
    CHUNK_TOKENS = eda.kernels().CHUNK_TOKENS
    assert CHUNK_TOKENS != 64  # else the checks below cannot fail

    def chunk(la_backend, mixer, on_cuda):
        return eda.rule_chunk(eda.rule_backend(la_backend, mixer, on_cuda), 64)
    assert (chunk("auto", "eda", True), chunk("auto", "eda", False)) == (CHUNK_TOKENS, 64)
    for la_backend, mixer in (("auto", "gdn2"), ("chunk", "eda")):
        assert chunk(la_backend, mixer, True) == chunk(la_backend, mixer, False) == 64
    assert chunk("recurrent", "eda", True) == 1
    assert [eda.rule_backend("auto", m, True) for m in ("eda", "kda", "gdn", "gdn2")] == ["triton"] * 3 + ["chunk"]


def test_triton_problem_names_a_head_dim_the_kernels_cannot_take_and_auto_stops_only_on_cuda():
    for K, V, name in ((24, 16, "la_head_dim=24"), (16, 8, "la_v_head_dim=8"), (512, 16, "la_head_dim=512")):
        assert f"Triton kernels cannot take {name}" in eda.triton_problem("eda", K, V)
    assert eda.triton_problem("eda", 16, 16) is None
    assert eda.triton_problem("transformer", 24, 16) is None and eda.triton_problem(None, 24, 16) is None
    assert "la_head_dim=24" in eda.auto_backend_problem("auto", True, "eda", 24, 16)
    assert eda.auto_backend_problem("auto", False, "eda", 24, 16) is None  # the chunked path takes it
    assert eda.auto_backend_problem("chunk", True, "eda", 24, 16) is None
    assert eda.auto_backend_problem("auto", True, "eda", 16, 16) is None


def test_gdn2_refuses_a_positive_log_decay_and_bad_shapes_as_the_eda_paths_do():
    q, k, v, g, b, w, S0 = _gdn2_inputs(T=9)
    x = dict(q=q, k=k, v=v, g=g, b=b, w=w)
    bad = [
        (dict(g=0.3 * torch.rand_like(g)), "g is a log decay and must be ≤ 0.*values up to"),
        (dict(g=g[..., :5]), "g must have shape"),
        (dict(b=b[..., :5]), "b must have shape"),
        (dict(w=w[:, :4]), "w must have shape"),
        (dict(k=k[:, :4]), "k must have shape"),
        (dict(v=v[:, :, :3]), "multiple of the query/key heads"),
        (dict(w=w.long()), "w must be a floating-point"),
        (dict(b=None), "b must be a torch.Tensor"),
        (dict(v=v.clone().fill_(float("nan"))), "^v holds NaN or inf"),
        ({n: t[:0] for n, t in x.items()}, "q has batch size B = 0"),
    ]
    for fn in (gdn2_recurrent, gdn2_chunk):
        for change, message in bad:
            with pytest.raises(ValueError, match=message):
                fn(**dict(x, **change))
        with pytest.raises(ValueError, match="initial_state must have shape"):
            fn(**x, initial_state=S0[:, :, :3])
    with pytest.raises(ValueError, match="chunk_size must be a positive int"):
        gdn2_chunk(**x, chunk_size=0)
    g_pos = dict(x, g=0.3 * torch.rand_like(g))  # unchecked (the model's callers): computed as given
    assert torch.isfinite(gdn2_chunk(**g_pos, check=False)[0]).all()


def test_kda_gate_refuses_a_non_negative_lower_bound_as_the_safe_gate_does():
    a, A_log, dt_bias = torch.randn(2, 3, 8), torch.randn(3), torch.randn(3, 8)
    for gate in (safe_gate, kda_gate):
        for bound in (1.0, 0.0):
            with pytest.raises(ValueError, match=f"lower_bound must be negative, got {bound}"):
                gate(a, A_log, dt_bias, lower_bound=bound)
