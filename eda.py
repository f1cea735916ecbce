"""
Erase-then-Delta Attention (EDA), the update rule three ways, side by side.

Paper: "Erase-then-Delta Attention", Method section (Eq. numbers refer to its labels). Per value head, a recurrent
memory S (K x V) is updated right to left: decay D_t = Diag(exp(g_t)), erase at the address e_t (Eq. erase_step),
then the usual delta correction and write at k_t (Eq. eda_two_stage):
    S_t = (I - beta_t k_t k_t^T) (I - gamma_t e_t e_t^T) D_t S_{t-1} + beta_t k_t v_t^T      (Eq. ed)
    o_t = S_t^T q_t

1. eda_recurrent: one token at a time. Dead simple; it is the spec.
2. eda_chunk:     the chunk-parallel form of Sec. 3.4 in plain PyTorch: the erase and write sub-steps interleaved
                  into one delta-rule (DPLR) sequence (Eq. double_data), solved chunk by chunk (chunk_delta_rule).
3. eda_triton:    the same signature, running kernel.py's fused Triton kernels (eda_triton_decode: decoding).
The three agree on the same inputs, or refuse them with the same ValueError (check_inputs, check_values): g > 0
everywhere; a NaN or inf input in the reference paths 1 and 2 only (a host sync per call). GDN-2's rule
(gdn2_recurrent, gdn2_chunk; Eq. gdn2_prelim), the comparison mixer, shares the chunked form's chunk_delta_rule.

Conventions (those of flash-linear-attention, so other libraries can serve as oracles):
    q, k: [B, T, H, K]      v: [B, T, HV, V]      e: [B, T, HV, K]
    g (log decay, <= 0): [B, T, HV, K] channel-wise (KDA/EDA) or [B, T, HV] one per head (GDN)
    beta, gamma: [B, T, HV]        initial_state / final_state: [B, HV, K, V]
HV is a multiple of H: value head i reads query/key head i // (HV // H) (grouped value heads). e=None, gamma=None
is KDA exactly; a per-head g is GDN; g = 0 is DeltaNet. Inputs are used as given (the layer normalizes q, k, e);
`scale` (default K^-0.5) multiplies q.
"""

import math

import torch
import torch.nn.functional as F


# Gates: map the layer's decay projection `a` to a log decay g <= 0 --------------------------------------------
def _amplitude(A_log, dt_bias):
    """A = exp(A_log), shaped to broadcast against dt_bias: one per channel ([HV, K], Eq. safe_gate's A_i) or one
    per head ([HV]: GDN's scalar gate, and checkpoints written before A was per channel)."""
    A = A_log.float().exp()
    return A.reshape(A.shape + (1,) * (dt_bias.dim() - A.dim()))


def safe_gate(a, A_log, dt_bias, lower_bound=-5.0):
    """EDA's bounded safe gate (Eq. safe_gate): g = l + (-l) * exp(-(A / |l|) * softplus(a + dt_bias)), in (l, 0],
    fp32; a: [..., HV, K], A_log: [HV, K] (or [HV]), dt_bias: [HV, K]. Saturates at l where the log gate -> -inf."""
    if lower_bound >= 0:
        raise ValueError(f"safe_gate: lower_bound must be negative, got {lower_bound}")
    l = float(lower_bound)
    return l + (-l) * torch.exp(-(_amplitude(A_log, dt_bias) / abs(l)) * F.softplus(a.float() + dt_bias.float()))


def log_gate(a, A_log, dt_bias):
    """Mamba2 / Gated DeltaNet log-space gate (Eq. log_gate): g = -A * softplus(a + dt_bias), fp32, unbounded
    below. GDN uses it per head: a: [..., HV], A_log: [HV], dt_bias: [HV]."""
    return -_amplitude(A_log, dt_bias) * F.softplus(a.float() + dt_bias.float())


def kda_gate(a, A_log, dt_bias, lower_bound=-5.0):
    """Kimi Delta Attention's sigmoid gate: g = l * sigmoid(A * (a + dt_bias)), in (l, 0), fp32.
    a: [..., HV, K], A_log: [HV, K] (or [HV]), dt_bias: [HV, K]."""
    if lower_bound >= 0:  # a positive bound would give g > 0: a growing memory
        raise ValueError(f"kda_gate: lower_bound must be negative, got {lower_bound}")
    return lower_bound * torch.sigmoid(_amplitude(A_log, dt_bias) * (a.float() + dt_bias.float()))


# Input checks shared by the three versions (kernel.py adds its own): a ValueError naming the argument ---------
def check_inputs(q, k, v, e, g, beta, gamma, initial_state=None, b=None, w=None):
    """Validate shapes, dtypes and devices; return (B, T, H, HV, K, V). b, w: GDN-2's gates, in place of beta."""
    if (e is None) != (gamma is None):
        raise ValueError("e and gamma go together: pass both (EDA) or neither (KDA/GDN); "
                         f"got e={'None' if e is None else 'tensor'}, gamma={'None' if gamma is None else 'tensor'}")
    gates = dict(beta=beta) if b is None and w is None else dict(b=b, w=w)
    optional = {n: x for n, x in dict(e=e, gamma=gamma, initial_state=initial_state).items() if x is not None}
    named = dict(q=q, k=k, v=v, g=g, **gates, **optional)
    for name, x in named.items():
        if not isinstance(x, torch.Tensor):
            raise ValueError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
        if not x.is_floating_point():
            raise ValueError(f"{name} must be a floating-point tensor, got dtype {x.dtype}")
        if x.device != q.device:
            raise ValueError(f"{name} is on {x.device} but q is on {q.device}: all inputs must share a device")
    for name, x, dims in (("q", q, "B, T, H, K"), ("v", v, "B, T, HV, V")):
        if x.dim() != 4:
            raise ValueError(f"{name} must be [{dims}], got shape {tuple(x.shape)}")
    B, T, H, K = q.shape
    if B == 0:  # (T = 0 is fine: an empty sequence; an empty batch is a slip upstream)
        raise ValueError(f"q has batch size B = 0 (shape {tuple(q.shape)}): pass at least one sequence")
    HV, V = v.shape[2], v.shape[3]
    for name, d, where in (("H", H, "q.shape[2]"), ("K", K, "q.shape[3]"), ("HV", HV, "v.shape[2]"),
                           ("V", V, "v.shape[3]")):
        if d == 0:  # (no heads or no channels: nothing to compute, and K = 0 has no default scale K^-0.5)
            raise ValueError(f"{name} = {where} = 0: every dimension but T must be >= 1")
    if HV % H != 0:
        raise ValueError(f"the value heads HV={HV} (v.shape[2]) must be a multiple of the query/key heads H={H}")
    if tuple(g.shape) not in ((B, T, HV, K), (B, T, HV)):
        raise ValueError(f"g must have shape {(B, T, HV, K)} (channel-wise) or {(B, T, HV)} (per head), "
                         f"got {tuple(g.shape)}")
    shapes = dict(k=(B, T, H, K), v=(B, T, HV, V), beta=(B, T, HV), b=(B, T, HV, K), w=(B, T, HV, V),
                  e=(B, T, HV, K), gamma=(B, T, HV), initial_state=(B, HV, K, V))
    for name, x in named.items():
        if name in shapes and tuple(x.shape) != shapes[name]:
            raise ValueError(f"{name} must have shape {shapes[name]}, got {tuple(x.shape)}")
    return B, T, H, HV, K, V


def check_values(g, finite=None):
    """The checks that read values: g <= 0 everywhere (-inf, which clears the memory, included); no NaN or inf in
    `finite` ({name: tensor or None}). One host sync; skipped while compiling or capturing (nothing can be read)."""
    if torch.compiler.is_compiling() or (g.is_cuda and torch.cuda.is_current_stream_capturing()):
        return
    finite = {n: x for n, x in (finite or {}).items() if x is not None}
    ok = torch.stack([(g <= 0).all(), *(torch.isfinite(x).all() for x in finite.values())]).tolist()
    if not ok[0]:
        bad = g[~(g <= 0)]
        got = "NaN" if bad.isnan().any() else f"values up to {bad.max().item():.3g}"
        raise ValueError(f"g is a log decay and must be ≤ 0 (-inf included), got {got}")
    for (name, x), fine in zip(finite.items(), ok[1:]):
        if not fine:
            raise ValueError(f"{name} holds NaN or inf values; every value must be finite")


def _prepare(q, k, v, e, g, beta, gamma, scale, initial_state, check=True, chunk_size=1, b=None, w=None):
    """Common preamble of the reference paths (b, w: GDN-2's gates in place of beta): checks (chunk_size, then
    values unless check=False), compute dtype, grouped heads expanded, channel-wise g, initial state."""
    if not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive int, got {chunk_size!r}")
    B, T, H, HV, K, V = check_inputs(q, k, v, e, g, beta, gamma, initial_state, b=b, w=w)
    if check:
        check_values(g, dict(q=q, k=k, v=v, e=e, beta=beta, gamma=gamma, b=b, w=w, initial_state=initial_state))
    # fp64 in -> fp64 math (the reference for tests); anything else accumulates in fp32
    acc = torch.float64 if q.dtype == torch.float64 else torch.float32
    scale = K ** -0.5 if scale is None else scale
    G = HV // H  # value head i reads query/key head i // G
    q = q.to(acc).repeat_interleave(G, dim=2) * scale
    k = k.to(acc).repeat_interleave(G, dim=2)
    g = g.to(acc)
    if g.dim() == 3:  # one decay per head (GDN): the same on every key channel
        g = g.unsqueeze(-1).expand(B, T, HV, K)
    v, e, beta, gamma = (None if x is None else x.to(acc) for x in (v, e, beta, gamma))
    S = q.new_zeros(B, HV, K, V) if initial_state is None else initial_state.to(acc)
    return q, k, v, e, g, beta, gamma, S


# 1. The reference: one token at a time ------------------------------------------------------------------------
def eda_recurrent(q, k, v, e, g, beta, gamma, scale=None, initial_state=None, output_final_state=False,
                  trace=None, check=True):
    """Step-by-step EDA (Eq. ed in its two-stage form, Eq. decayed_memory, erase_step, eda_two_stage).
    Returns (o [B, T, HV, V] in v's dtype, final_state [B, HV, K, V] or None). check: check_values (a host sync);
    False for callers that check what comes out instead (model.py: train.py stops on a non-finite loss).
    trace: None, or trace(t, S_hat, S_tilde, S) after each token, the states [B, HV, K, V] (compute dtype) after
    the decay, the erase (S_hat itself without one) and the write: what the probes (probe.py) read."""
    out_dtype = v.dtype
    q, k, v, e, g, beta, gamma, S = _prepare(q, k, v, e, g, beta, gamma, scale, initial_state, check)
    outs = []
    for t in range(q.shape[1]):
        S_hat = g[:, t].exp().unsqueeze(-1) * S  # decay: S^ = D_t S_{t-1}   (Eq. decayed_memory)
        S_tilde = S_hat                          # erase at e_t: S~ = (I - gamma e e^T) S^   (Eq. erase_step)
        if e is not None:
            e_t = e[:, t]
            S_tilde = S_hat - (gamma[:, t, :, None, None] * e_t.unsqueeze(-1)
                               * torch.einsum("bhk,bhkv->bhv", e_t, S_hat).unsqueeze(-2))
        k_t = k[:, t]                            # delta: S = (I - beta k k^T) S~ + beta k v^T   (Eq. eda_two_stage)
        residual = v[:, t] - torch.einsum("bhk,bhkv->bhv", k_t, S_tilde)
        S = S_tilde + beta[:, t, :, None, None] * k_t.unsqueeze(-1) * residual.unsqueeze(-2)
        outs.append(torch.einsum("bhk,bhkv->bhv", q[:, t], S))  # o_t = S_t^T q_t
        if trace is not None:
            trace(t, S_hat, S_tilde, S)
    o = torch.stack(outs, dim=1) if outs else v.new_zeros(v.shape)
    return o.to(out_dtype), (S if output_final_state else None)


# 2. Chunk-parallel form (Sec. 3.4) ----------------------------------------------------------------------------
def double_sequence(q, k, v, e, g, beta, gamma):
    """Interleave the erase and write sub-steps into one delta-rule sequence of length 2T (Eq. double_data):
    Sub-step 2t (0-based: erase of step t): (q', k', v', beta', g') = (0, e_t, 0, gamma_t, g_t)
    Sub-step 2t+1 (write of step t):        (q', k', v', beta', g') = (q_t, k_t, v_t, beta_t, 0)
    q, k are expanded to the HV value heads (e is per value head). The plain delta rule with decay (KDA form) on
    this sequence equals EDA at the write sub-steps (Eq. double_kda)."""
    B, T, H, HV, K, V = check_inputs(q, k, v, e, g, beta, gamma)
    if e is None:
        raise ValueError("double_sequence needs the erase address e and gate gamma")
    q, k = q.repeat_interleave(HV // H, dim=2), k.repeat_interleave(HV // H, dim=2)
    if g.dim() == 3:
        g = g.unsqueeze(-1).expand(B, T, HV, K)

    def interleave(erase, write):  # [B, T, ...] x2 -> [B, 2T, ...] as erase_1, write_1, erase_2, ...
        return torch.stack([erase, write], dim=2).flatten(1, 2)

    return (interleave(torch.zeros_like(q), q), interleave(e.to(k.dtype), k), interleave(torch.zeros_like(v), v),
            interleave(g, torch.zeros_like(g)), interleave(gamma.to(beta.dtype), beta))


def _causal_decayed_dots(x, y, G, strict, sub=16):
    """P_ij = sum_d x_id y_jd exp(G_id - G_jd) for j <= i (j < i if strict), zero above; x, y, G: [..., C, K]:
    the paper's (A*X)(Y/A)^T of Eq. ut_transformation, anchored locally so that nothing overflows: for a block of
    `sub` rows starting at s, exp(G_i - G_j) = exp(G_i - G_{s-1}) * exp(G_{s-1} - G_j) for every column j < s, both
    factors <= 1 as G only decreases; inside the diagonal block the masked G_i - G_j (<= 0) are exponentiated."""
    C = x.shape[-2]
    rows, G_prev = [], None
    for s, xs, ys, Gs in zip(range(0, C, sub), x.split(sub, -2), y.split(sub, -2), G.split(sub, -2)):
        n = xs.shape[-2]
        mask = torch.ones(n, n, dtype=torch.bool, device=x.device).tril(-1 if strict else 0)
        decay = torch.exp((Gs.unsqueeze(-2) - Gs.unsqueeze(-3)).masked_fill(~mask[..., None], float("-inf")))
        diag = torch.einsum("...ik,...jk,...ijk->...ij", xs, ys, decay)
        parts = [diag, x.new_zeros(*x.shape[:-2], n, C - s - n)]
        if s > 0:
            anchor = G_prev[..., -1:, :]  # G_{s-1}; columns j >= s are clamped here and dropped below
            left = (xs * torch.exp(Gs - anchor)) @ (y * torch.exp((anchor - G).clamp(max=0))).transpose(-1, -2)
            parts.insert(0, left[..., :s])
        rows.append(torch.cat(parts, dim=-1))
        G_prev = Gs
    return torch.cat(rows, dim=-2)


def chunk_delta_rule(q, k, v, g, beta, S, C, read=None):
    """Chunked gated delta rule S_i = (I - b_i k_i k_i^T) D_i S_{i-1} + b_i k_i v_i^T, o_i = S_i^T q_i: the engine of
    eda_chunk (on the doubled sequence for EDA, the tokens themselves for KDA/GDN) and gdn2_chunk. Unchecked, on
    _prepare's inputs (compute dtype, grouped heads expanded, q scaled, g channel-wise): q, k, g: [B, N, HV, K],
    v: [B, N, HV, V], beta: [B, N, HV], S (the initial state): [B, HV, K, V].
    Returns (o [B, N, HV, V], S_N). C: sub-steps per chunk (any positive int; N need not divide).
    `read` [B, N, HV, K] replaces k on the right (S_i = (I - b_i k_i read_i^T) ...): GDN-2's asymmetric step.
    Within a chunk, with G_i the cumulative log decay and Gamma_ij = exp(G_i - G_j) (i >= j), the UT transform
    (Eq. wy_representation, ut_transformation; notes/chunk_form.md §1) gives [U~ | W], the written values
    U = U~ - W S_0, and (Eq. chunk_wise_eda)
          O   = (exp(G) * Q) S_0 + Tril(Q_i^T Diag(Gamma_ij) k_j) U
          S_C = exp(G_C) * S_0 + sum_j (exp(G_C - G_j) * k_j) u_j^T
    Only non-positive log decays are exponentiated (notes/chunk_form.md §2)."""
    B, N, HV, K = k.shape
    V = v.shape[-1]
    if N == 0:  # an empty sequence: no outputs, the state as it was
        return v.new_zeros(B, 0, HV, V), S
    # g = -inf clears the memory (exp(g) = 0); the differences of cumulative sums below would make it
    # -inf - (-inf) = NaN, so g is floored where exp underflows to exactly 0 in the compute dtype anyway
    fi = torch.finfo(g.dtype)
    g = g.clamp(min=math.log(fi.tiny * fi.eps) - 2)
    pad = (-N) % C
    read = k if read is None else read
    if pad:  # zero keys, values and decay after the end change neither outputs nor the final state
        q, k, v, g, read = (F.pad(x, (0, 0, 0, 0, 0, pad)) for x in (q, k, v, g, read))
        beta = F.pad(beta, (0, 0, 0, pad))
    NC = (N + pad) // C
    q, k, v, g, read = (x.reshape(B, NC, C, HV, -1).permute(0, 3, 1, 2, 4).contiguous() for x in (q, k, v, g, read))
    beta = beta.view(B, NC, C, HV).permute(0, 3, 1, 2).contiguous()

    Gc = g.cumsum(dim=-2)                                     # G_i, cumulative log decay in the chunk
    A = _causal_decayed_dots(read, k, Gc, strict=True)        # read_i^T Diag(Gamma_ij) k_j, j < i
    Qk = _causal_decayed_dots(q, k, Gc, strict=False)         # q_i^T Diag(Gamma_ij) k_j, j <= i
    L = torch.eye(C, dtype=q.dtype, device=q.device) + beta.unsqueeze(-1) * A  # I + StrictTril(Diag(b) A)
    rhs = beta.unsqueeze(-1) * torch.cat([v, Gc.exp() * read], dim=-1)
    UW = torch.linalg.solve_triangular(L, rhs, upper=False, unitriangular=True)  # UT transform
    U_tilde, W = UW[..., :V], UW[..., V:]
    q_decayed = Gc.exp() * q                                  # exp(G_i) * q_i
    k_to_end = torch.exp(Gc[..., -1:, :] - Gc) * k            # exp(G_C - G_j) * k_j
    chunk_decay = Gc[..., -1, :].exp()                        # exp(G_C)

    outs = []
    for c in range(NC):  # chunk-wise state passing: the only sequential part
        U = U_tilde[:, :, c] - W[:, :, c] @ S
        outs.append(q_decayed[:, :, c] @ S + Qk[:, :, c] @ U)
        S = chunk_decay[:, :, c].unsqueeze(-1) * S + k_to_end[:, :, c].transpose(-1, -2) @ U
    o = torch.stack(outs, dim=2)                              # [B, HV, NC, C, V]
    return o.permute(0, 2, 3, 1, 4).reshape(B, NC * C, HV, V)[:, :N], S


def eda_chunk(q, k, v, e, g, beta, gamma, scale=None, initial_state=None, output_final_state=False,
              chunk_size=64, check=True):
    """Chunk-parallel EDA (Sec. 3.4): the delta rule over the doubled sequence (Eq. double_data) in chunks of
    `chunk_size` tokens (2 * chunk_size sub-steps), outputs read at the write sub-steps. Same arguments (check too)
    and results as eda_recurrent. With e=None no sub-steps are doubled (KDA / GDN)."""
    out_dtype = v.dtype
    q, k, v, e, g, beta, gamma, S = _prepare(q, k, v, e, g, beta, gamma, scale, initial_state, check, chunk_size)
    if e is None:
        o, S = chunk_delta_rule(q, k, v, g, beta, S, chunk_size)
    else:
        o, S = chunk_delta_rule(*double_sequence(q, k, v, e, g, beta, gamma), S, 2 * chunk_size)
        o = o[:, 1::2]  # the write sub-steps carry the outputs
    return o.to(out_dtype), (S if output_final_state else None)


# GDN-2's update rule (Eq. gdn2_prelim), the comparison mixer --------------------------------------------------
#     S_t = (I - k_t (b_t*k_t)^T) D_t S_{t-1} + k_t (w_t*v_t)^T,      o_t = S_t^T q_t
# with a key-side erase gate b_t in (0,1)^K and a value-side write gate w_t in (0,1)^V. Its rank-1 vectors differ
# (k left, b*k right), so kernel.py's symmetric kernels do not apply: chunk_delta_rule with a read direction.
# Shapes as above; b [B,T,HV,K], w [B,T,HV,V].
def _gdn2_prepare(q, k, v, g, b, w, scale, initial_state, check, chunk_size=1):
    """_prepare for GDN-2: the compute-dtype q, k, the erase/read direction b*k, the written value w*v, g, S."""
    q, k, v, _, g, _, _, S = _prepare(q, k, v, None, g, None, None, scale, initial_state, check, chunk_size, b=b, w=w)
    return q, k, b.to(q.dtype) * k, w.to(q.dtype) * v, g, S


def gdn2_recurrent(q, k, v, g, b, w, scale=None, initial_state=None, output_final_state=False, check=True):
    """GDN-2 one token at a time: the spec. Returns (o [B,T,HV,V] in v's dtype, final state or None).
    check: as eda_recurrent's (g <= 0, no NaN or inf input; a host sync)."""
    q, k, kb, z, g, S = _gdn2_prepare(q, k, v, g, b, w, scale, initial_state, check)
    outs = []
    for t in range(q.shape[1]):
        S = g[:, t].exp().unsqueeze(-1) * S                                       # D_t S_{t-1}
        u = z[:, t] - torch.einsum("bhk,bhkv->bhv", kb[:, t], S)                   # w*v - S^T (b*k)
        S = S + k[:, t].unsqueeze(-1) * u.unsqueeze(-2)                            # + k u^T
        outs.append(torch.einsum("bhk,bhkv->bhv", q[:, t], S))
    o = torch.stack(outs, dim=1) if outs else z.new_zeros(z.shape)
    return o.to(v.dtype), (S if output_final_state else None)


def gdn2_chunk(q, k, v, g, b, w, scale=None, initial_state=None, output_final_state=False, chunk_size=64, check=True):
    """GDN-2 chunk-parallel: chunk_delta_rule with the read direction b*k in place of k on the right, the value
    w*v and strength 1 (u_i = w_i*v_i - S_{i-1}^T D_i (b_i*k_i), unrolled in the chunk). check: as gdn2_recurrent's."""
    q, k, kb, z, g, S = _gdn2_prepare(q, k, v, g, b, w, scale, initial_state, check, chunk_size)
    o, S = chunk_delta_rule(q, k, z, g, z.new_ones(z.shape[:3]), S, chunk_size, read=kb)
    return o.to(v.dtype), (S if output_final_state else None)


# 3. Triton (kernel.py) ----------------------------------------------------------------------------------------
def eda_triton(q, k, v, e, g, beta, gamma, scale=None, initial_state=None, output_final_state=False,
               check_g=True, chunk_size=None, launch=None, recompute_states=False):
    """Fused Triton EDA: same arguments and results as eda_recurrent (the final state fp32), differentiable in every
    tensor input. check_g=True checks g's values after the launch (a device sync per call): g <= 0 (check_values),
    finite (the kernels take no -inf) and, channel-wise, >= kernel.G_MIN; False for callers whose gate bounds g.
    Other values are not looked at (NaN in, NaN out). chunk_size, launch, recompute_states: kernel.eda_fused's."""
    check_inputs(q, k, v, e, g, beta, gamma, initial_state)
    out = kernels().eda_fused(q, k, v, e, g, beta, gamma, scale=scale, initial_state=initial_state,
                              output_final_state=output_final_state, check_g=check_g, chunk_size=chunk_size,
                              launch=launch, recompute_states=recompute_states)
    if check_g:  # after the launch: the sync waits for queued work, the GPU does not idle
        check_values(g, dict(g=g))
    return out


def eda_triton_decode(q, k, v, e, g, beta, gamma, state, scale=None, inplace=True):
    """kernel.eda_decode (decoding: o, the new state) after check_inputs; no value checks (a sync per token)."""
    check_inputs(q, k, v, e, g, beta, gamma, state)
    return kernels().eda_decode(q, k, v, e, g, beta, gamma, state, scale=scale, inplace=inplace)


# Policy: which implementation of the rule a layer runs, why the kernels cannot run it (model.py asks) ---------
def kernels():
    """kernel.py, imported on first use: eda.py runs without Triton, and its import (~1 s) the PyTorch forms skip."""
    import kernel
    return kernel


def rule_backend(la_backend, mixer, on_cuda):
    """The update rule's implementation for a forward without a cache, 'triton', 'chunk' or 'recurrent', from the
    model's la_backend: 'auto' runs the Triton kernels on CUDA (GDN-2 has none), the chunked form elsewhere."""
    if la_backend == "auto":
        return "triton" if on_cuda and mixer != "gdn2" else "chunk"
    return la_backend


def rule_chunk(backend, chunk_size):
    """Tokens per chunk of the rule as `backend` runs it (the model's FLOP estimate counts them): the kernels'
    own kernel.CHUNK_TOKENS (whatever chunk_size says), chunk_size for the chunked form, 1 for the recurrent."""
    return kernels().CHUNK_TOKENS if backend == "triton" else (chunk_size if backend == "chunk" else 1)


def triton_problem(mixer, head_dim, v_head_dim):
    """Why the Triton kernels cannot run the linear layers of `mixer` with these head dims, or None. Only EDA, KDA
    and GDN call them (mixer None: a model without linear layers)."""
    if mixer not in ("eda", "kda", "gdn"):
        return None
    for name, d in (("la_head_dim", head_dim), ("la_v_head_dim", v_head_dim)):
        if problem := kernels().head_dim_problem(d):
            return f"the Triton kernels cannot take {name}={d}: it {problem}"
    return None


def auto_backend_problem(la_backend, on_cuda, mixer, head_dim, v_head_dim):
    """la_backend='auto' on CUDA means the Triton kernels: why they cannot run this model, or None. The scripts
    stop on it rather than fall back unasked to the chunked form (several times slower on a GPU)."""
    problem = triton_problem(mixer, head_dim, v_head_dim) if la_backend == "auto" and on_cuda else None
    return problem and f"la_backend='auto' on CUDA runs the Triton kernels, but {problem}; pass --la_backend=chunk"


def triton_checks_g(gate, lower_bound):
    """Whether the Triton rule must check the log decay's range (a host sync per call): not where the gate keeps
    g >= lower_bound (the safe and KDA gates) and that is >= kernel.G_MIN, so that the check can only pass."""
    return not (gate in ("safe", "kda") and lower_bound >= kernels().G_MIN)
