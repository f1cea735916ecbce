"""
Fused Triton kernels for Erase-then-Delta Attention (EDA), forward, backward and decode.

Paper: "Erase-then-Delta Attention", Method section (Eq. labels below refer to it). eda.py holds the reference
(`eda_recurrent`, the spec), the chunked PyTorch form (`eda_chunk`), and checks shapes before calling this module, which
imports nothing of the repository. The chunked training kernels' design (Sec. 3.4: launches (1)-(5), decay numerics):
notes/chunk_form.md §4; why they are shaped as they are, with measurements: notes/kernel.md.

Chapters, in file order, each under a banner comment: Triton building blocks, Forward, Backward, Decode, Short conv,
Python side, PyTorch operators, Entry points (eda_fused, eda_decode, short_conv), Split-KV attention decode.
"""
import ctypes
import os
from typing import List, Optional, Tuple

import torch
import triton
import triton.language as tl

if triton.__version__.startswith("3.6."):  # Gluon is experimental: walk_gluon.py uses 3.6's calls (3.9 renames some)
    import walk_gluon
else:
    walk_gluon = None

# tokens per chunk (eda_fused's default), and per anchor block: anchored halfway down a 16-token block's log decay,
# every decay factor stays within exp(5 * 8) = exp(40) under the safe gate (-5 per step)
CHUNK_TOKENS = 16
ANCHOR_TOKENS = 16
# channel-wise log decays must stay above this: a factor spans up to 8 steps, exp(8 * 10) < fp32's largest exp(88.7)
G_MIN = -10.0
_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


# ----------------------------------------------------------------------------------------------------
# Triton building blocks: sub-step tiles of a chunk, the unit-lower inverse, anchored decay products


@triton.jit
def _exp(x):
    """exp(x): ex2.approx.ftz, 2 instructions to tl.exp's 5 (its fix-ups of results below 2^-126, which flush to 0)."""
    return tl.exp2(x * 1.4426950408889634)


@triton.jit
def _chunk_keys(q, k, e, g, beta, gamma, i_b, i_h, i_hv, c, T, scale, H: tl.constexpr, HV: tl.constexpr,
                K: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr, EDA: tl.constexpr, k0=0,
                SCAN_MMA: tl.constexpr = False):
    """Chunk c's sub-step tiles (Eq. double_data), key columns k0 .. k0 + BK: k', q' (scaled), beta', G, rows, masks."""
    ck = k0 + tl.arange(0, BK)
    mk = ck < K
    bb, row_bt, wrow, erow = _chunk_rows(beta, gamma, i_b, i_hv, c, T, HV, BT, EDA)
    off_qk = (row_bt * H + i_h) * K
    off_hk = (row_bt * HV + i_hv) * K
    kk = tl.load(k + off_qk[:, None] + ck[None, :], mask=wrow[:, None] & mk[None, :], other=0.).to(tl.float32)
    qq = tl.load(q + off_qk[:, None] + ck[None, :], mask=wrow[:, None] & mk[None, :], other=0.).to(tl.float32)
    if EDA:
        kk += tl.load(e + off_hk[:, None] + ck[None, :], mask=erow[:, None] & mk[None, :], other=0.).to(tl.float32)
    gmask = erow if EDA else wrow  # the decay rides on the erase sub-step; the write sub-step has identity decay
    gg = tl.load(g + off_hk[:, None] + ck[None, :], mask=gmask[:, None] & mk[None, :], other=0.).to(tl.float32)
    if SCAN_MMA:  # the per-chunk backward's: G on tensor cores (4584 -> 4192 instructions; the preps' lose: stack,
        hi = gg.to(tl.bfloat16)  # registers), the lower-triangular ones times g's three bf16 parts (fp32's 24 bits),
        mid = (gg - hi.to(tl.float32)).to(tl.bfloat16)  # not tl.cumsum's scan across warps through shared memory
        tri = (tl.arange(0, BT)[:, None] >= tl.arange(0, BT)[None, :]).to(tl.bfloat16)
        lo = (gg - hi.to(tl.float32) - mid.to(tl.float32)).to(tl.bfloat16)
        G = tl.dot(tri, hi, tl.dot(tri, mid, tl.dot(tri, lo)))  # the small parts first
    else:
        G = tl.cumsum(gg, axis=0)
    return kk, qq * scale, bb, G, row_bt, wrow, erow


@triton.jit
def _sub_steps(BT: tl.constexpr, EDA: tl.constexpr):
    """Token (in the chunk) of every sub-step row, and which rows write: EDA's row 2t erases, 2t+1 writes; else all."""
    r = tl.arange(0, BT)
    if EDA:
        return r // 2, (r % 2) == 1
    return r, r >= 0


@triton.jit
def _chunk_rows(beta, gamma, i_b, i_hv, c, T, HV: tl.constexpr, BT: tl.constexpr, EDA: tl.constexpr):
    """Chunk c's beta' [BT] (beta on write rows, gamma on erase rows), (b, t) rows, write and erase masks (< T)."""
    r = tl.arange(0, BT)
    tok, is_w = _sub_steps(BT, EDA)
    tok += c * (BT // 2 if EDA else BT)
    valid = tok < T
    wrow, erow = valid & is_w, valid & (r % 2 == 0)
    row_bt = i_b.to(tl.int64) * T + tok  # (b, t) row of every [B, T, ...] tensor
    off_b = row_bt * HV + i_hv
    bb = tl.load(beta + off_b, mask=wrow, other=0.).to(tl.float32)
    if EDA:
        bb += tl.load(gamma + off_b, mask=erow, other=0.).to(tl.float32)
    return bb, row_bt, wrow, erow


@triton.jit
def _heads(i_bh, H: tl.constexpr, HV: tl.constexpr):
    """Program index over batch x value heads -> (batch, value head, its q/k head: HV = G * H, grouped)."""
    i_hv = i_bh % HV
    return i_bh // HV, i_hv, i_hv // (HV // H)


@triton.jit
def _state_block(i_v, K: tl.constexpr, V: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr):
    """Key and value columns of V-block i_v of a [K, V] state, their masks, and offsets inside one state."""
    ck = tl.arange(0, BK)
    cv = i_v * BV + tl.arange(0, BV)
    mk, mv = ck < K, cv < V
    return ck, cv, mk, mv, mk[:, None] & mv[None, :], ck[:, None] * V + cv[None, :]


@triton.jit
def _row(X, r, i):
    """Row i of a [BT, BK] tile as a [BK] vector."""
    return tl.sum(tl.where(r[:, None] == i, X, 0.), axis=0)


@triton.jit
def _unit_lower_inverse(M, BT: tl.constexpr, SB: tl.constexpr, NLVL: tl.constexpr, DT: tl.constexpr,
                        PREC: tl.constexpr):
    """(I + M)^-1, M [BT, BT] strictly lower (Eq. ut_transformation): forward substitution in all SB-blocks (a Neumann
    series cancels when keys repeat), then merges of pairs L = D + N: L^-1 = D^-1 - D^-1 N D^-1, as (D^-1 N)^2 = 0."""
    r = tl.arange(0, BT)
    rb = r // SB
    Tm = (r[:, None] == r[None, :]).to(tl.float32)
    Mb = tl.where(rb[:, None] == rb[None, :], M, 0.)
    for i in range(1, SB):
        m_i = tl.sum(tl.where((r % SB)[:, None] == i, Mb, 0.), axis=0)  # row i of every block (disjoint columns)
        t_i = tl.sum(m_i[:, None] * Tm, axis=0)                         # sum_j M_ij row_j(T), per block
        sel = ((r % SB)[:, None] == i) & (rb[:, None] == rb[None, :])
        Tm = Tm - tl.where(sel, t_i[None, :], 0.)
    for lvl in tl.static_range(NLVL):  # block size s = SB * 2^lvl doubles up to BT
        pr = r // (SB * 2 ** (lvl + 1))  # pair index
        half = (r // (SB * 2 ** lvl)) % 2  # 0: first block of its pair, 1: second
        N = tl.where((pr[:, None] == pr[None, :]) & (half[:, None] == 1) & (half[None, :] == 0), M, 0.)
        NT_ = tl.dot(N.to(DT), Tm.to(DT), input_precision=PREC)
        Tm = Tm - tl.dot(Tm.to(DT), NT_.to(DT), input_precision=PREC)
    return Tm


@triton.jit
def _anchored(kk, qq, G, BT: tl.constexpr, AB: tl.constexpr, SCALAR_G: tl.constexpr, DT: tl.constexpr,
              PREC: tl.constexpr):
    """A = StrictTril(K' Gamma K'^T), Qk = Tril(Q' Gamma K'^T) [BT, BT], anchored (notes/chunk_form.md §4), and the
    in-block factors Kp = k' exp(G - G_a), Kn = k' exp(G_a - G), Qp = q' exp(G - G_a), Ea, En (SCALAR_G: exact)."""
    r = tl.arange(0, BT)
    rb = r // AB
    if SCALAR_G:
        D = _scalar_decay(G, r, G, r)
        kd = kk.to(DT)
        A = tl.where(r[:, None] > r[None, :], tl.dot(kd, tl.trans(kd), input_precision=PREC) * D, 0.)
        Qk = tl.dot(qq.to(DT), tl.trans(kd), input_precision=PREC) * D
        Kp, Kn, Qp = kk, kk, qq
        Ea = tl.full(G.shape, 1.0, tl.float32)  # unused on this path
        En = Ea
    else:
        Ganc = _anchors(G, r, G, r, AB)
        Ea, En = _exp(G - Ganc), _exp(Ganc - G)
        Kp, Kn, Qp = kk * Ea, kk * En, qq * Ea
        Knt = tl.trans(Kn.to(DT))
        same = rb[:, None] == rb[None, :]
        A = tl.where(same & (r[:, None] > r[None, :]), tl.dot(Kp.to(DT), Knt, input_precision=PREC), 0.)
        Qk = tl.where(same & (r[:, None] >= r[None, :]), tl.dot(Qp.to(DT), Knt, input_precision=PREC), 0.)
        for I in tl.static_range(1, BT // AB):
            KpI, KnI, QpI, EpI, EnI = _cross_block(kk, qq, G, r, I, AB)
            KnIt = tl.trans(KnI.to(DT))
            A += tl.dot(KpI.to(DT), KnIt, input_precision=PREC)
            Qk += tl.dot(QpI.to(DT), KnIt, input_precision=PREC)
    return A, Qk, Kp, Kn, Qp, Ea, En


@triton.jit
def _anchors(Gi, ri, G, r, AB: tl.constexpr):
    """Each AB-row block's anchor (its middle row's G) on the rows ri of Gi; one block: G_C / 2 (one reduction less)."""
    if AB == G.shape[0]:
        return tl.zeros_like(Gi) + (_row(G, r, AB - 1) * 0.5)[None, :]
    Ganc = tl.zeros_like(Gi)
    for I in tl.static_range(G.shape[0] // AB):
        Ganc = tl.where((ri // AB == I)[:, None], _row(G, r, I * AB + AB // 2)[None, :], Ganc)
    return Ganc


@triton.jit
def _scalar_decay(Gi, ri, G, r):
    """exp(G_i - G_j) for j <= i (rows ri of Gi, r of G), else 0, of a per-head decay (G's columns equal): masked
    first, any g is safe."""
    Gs = tl.sum(tl.where((tl.arange(0, G.shape[1]) == 0)[None, :], G, 0.), axis=1)
    Gsi = tl.sum(tl.where((tl.arange(0, G.shape[1]) == 0)[None, :], Gi, 0.), axis=1)
    return _exp(tl.where(ri[:, None] >= r[None, :], Gsi[:, None] - Gs[None, :], float("-inf")))


@triton.jit
def _cross_block(kk, qq, G, r, I: tl.constexpr, AB: tl.constexpr):
    """Pairs (i in block I, j before it) anchored at the row before block I: exponents <= 0, -inf masked before exp."""
    Gb = _row(G, r, I * AB - 1)
    EpI = _exp(tl.where((r // AB == I)[:, None], G - Gb[None, :], float("-inf")))
    EnI = _exp(tl.where((r < I * AB)[:, None], Gb[None, :] - G, float("-inf")))
    return kk * EpI, kk * EnI, qq * EpI, EpI, EnI


# ----------------------------------------------------------------------------------------------------
# Forward: (1) per chunk, in parallel: T = (I + diag(b') A)^-1 and Qk; (2) per head, the chunk loop.


@triton.jit
def _eda_prep_kernel(q, k, v, e, g, beta, gamma, Tout, Qkout, Wout, U0out, Keout, Qgout, eGNout, gmin, scale, T, NT,
                     H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr,
                     BKC: tl.constexpr, BVP: tl.constexpr, SB: tl.constexpr, NLVL: tl.constexpr, AB: tl.constexpr,
                     EDA: tl.constexpr, SCALAR_G: tl.constexpr, CHECK_G: tl.constexpr, REUSE: tl.constexpr,
                     DT: tl.constexpr, PREC: tl.constexpr):
    """Launch (1) of notes/chunk_form.md §4: T, Qk, U_0 = T diag(b') V' and _key_operands'. CHECK_G: also store the
    chunk's smallest log decay (the wrapper rejects g < G_MIN without a pass of its own over g)."""
    c = tl.program_id(0)
    i_bh = tl.program_id(1)
    i_b, i_hv, i_h = _heads(i_bh, H, HV)
    r = tl.arange(0, BT)
    base = i_bh.to(tl.int64) * NT + c
    bb, row_bt, wrow, erow = _chunk_rows(beta, gamma, i_b, i_hv, c, T, HV, BT, EDA)
    if not EDA:  # v first, in flight while the keys load: the KDA path's prep 6-8% faster (EDA's spills, no gain)
        v0 = tl.load(v + (row_bt * HV + i_hv)[:, None] * V + tl.arange(0, BVP)[None, :],
                     mask=wrow[:, None] & (tl.arange(0, BVP) < V)[None, :], other=0.)
    # K in BKC-column blocks, twice: A and Qk sum over K before T exists; REUSE (one block covers K) keeps the tiles
    if REUSE:
        kk, qq, _, G, _, _, _ = _chunk_keys(q, k, e, g, beta, gamma, i_b, i_h, i_hv, c, T, scale,
                                            H, HV, K, BT, BKC, EDA)
        A, Qk, _, _, _, _, _ = _anchored(kk, qq, G, BT, AB, SCALAR_G, DT, PREC)
    else:
        A = tl.zeros([BT, BT], dtype=tl.float32)
        Qk = tl.zeros([BT, BT], dtype=tl.float32)
        for kb in range(tl.cdiv(K, BKC)):
            kk, qq, _, G, _, _, _ = _chunk_keys(q, k, e, g, beta, gamma, i_b, i_h, i_hv, c, T, scale,
                                                H, HV, K, BT, BKC, EDA, kb * BKC)
            A_b, Qk_b, _, _, _, _, _ = _anchored(kk, qq, G, BT, AB, SCALAR_G, DT, PREC)
            A += A_b
            Qk += Qk_b
    Tm = _unit_lower_inverse(bb[:, None] * A, BT, SB, NLVL, DT, PREC)
    off = base * BT * BT + r[:, None] * BT + r[None, :]
    tl.store(Tout + off, Tm.to(Tout.dtype.element_ty))
    tl.store(Qkout + off, Qk.to(Qkout.dtype.element_ty))
    Td = (Tm * bb[None, :]).to(DT)  # then the walk's operands from T diag(b'): b' over [BT, K] tiles costs smem
    if REUSE:
        low = _key_operands(kk, qq, G, bb, Td, g, Wout, Keout, Qgout, eGNout, base, i_b, i_hv, c, T, 0,
                            HV, K, BT, BKC, EDA, False, CHECK_G, DT, PREC)
    else:
        low = tl.zeros([1], dtype=tl.float32)
        for kb in range(tl.cdiv(K, BKC)):
            kk, qq, _, G, _, _, _ = _chunk_keys(q, k, e, g, beta, gamma, i_b, i_h, i_hv, c, T, scale,
                                                H, HV, K, BT, BKC, EDA, kb * BKC)
            low = tl.minimum(low, _key_operands(kk, qq, G, bb, Td, g, Wout, Keout, Qgout, eGNout, base, i_b, i_hv,
                                                c, T, kb * BKC, HV, K, BT, BKC, EDA, False, CHECK_G, DT, PREC))
    for i_v in range(tl.cdiv(V, BVP)):  # U_0 = T diag(b') V', V in blocks (the KDA path's: one, v0; BVP >= V)
        cv = i_v * BVP + tl.arange(0, BVP)
        mv = cv < V
        vv = v0 if not EDA else tl.load(v + (row_bt * HV + i_hv)[:, None] * V + cv[None, :],
                                        mask=wrow[:, None] & mv[None, :], other=0.).to(tl.float32)
        U0 = tl.dot(Td, vv.to(DT), input_precision=PREC)
        tl.store(U0out + base * BT * V + r[:, None] * V + cv[None, :], U0.to(U0out.dtype.element_ty),
                 mask=(r >= 0)[:, None] & mv[None, :])
    if CHECK_G:
        tl.store(gmin + base + tl.arange(0, 1), low)


@triton.jit
def _key_operands(kk, qq, G, bb, Td, g, Xout, Yout, Qgout, eGNout, base, i_b, i_hv, c, T, k0, HV: tl.constexpr,
                  K: tl.constexpr, BT: tl.constexpr, BKC: tl.constexpr, EDA: tl.constexpr, BWD: tl.constexpr,
                  CHECK_G: tl.constexpr, DT: tl.constexpr, PREC: tl.constexpr):
    """Key columns k0 .. k0 + BKC of a walk's operands (Td: T diag(b'); BWD: T^T): X = W = Td exp(G) K', Y = Ke =
    exp(G_C - G) K'; BWD: X = W2 = T^T exp(G_C - G) K', Y = Kg = diag(b') exp(G) K'; Qg = exp(G) Q', exp(G_C)."""
    r = tl.arange(0, BT)
    ck = k0 + tl.arange(0, BKC)
    off_k = base * BT * K + r[:, None] * K + ck[None, :]
    m_k = (ck < K)[None, :] & (r >= 0)[:, None]
    GN = _row(G, r, BT - 1)
    eG = tl.exp(G) if BWD else _exp(G)  # the dh prep at _exp took 168 registers, not 128 (3 programs an SM): +7-11%
    kg = bb[:, None] * kk * eG if BWD else kk * eG
    kn = kk * (tl.exp(GN[None, :] - G) if BWD else _exp(GN[None, :] - G))
    X = tl.dot(Td, (kn if BWD else kg).to(DT), input_precision=PREC)
    tl.store(Xout + off_k, X.to(Xout.dtype.element_ty), mask=m_k)
    tl.store(Yout + off_k, (kg if BWD else kn).to(Yout.dtype.element_ty), mask=m_k)
    tl.store(Qgout + off_k, (qq * eG).to(Qgout.dtype.element_ty), mask=m_k)
    tl.store(eGNout + base * K + ck, _exp(GN), mask=ck < K)
    low = tl.zeros([1], dtype=tl.float32)
    if CHECK_G:
        tok = c * (BT // 2 if EDA else BT) + tl.arange(0, BT // 2 if EDA else BT)
        off_g = ((i_b.to(tl.int64) * T + tok) * HV + i_hv)[:, None] * K + ck[None, :]
        gg = tl.load(g + off_g, mask=(tok < T)[:, None] & (ck < K)[None, :], other=0.)
        low = tl.minimum(low, tl.min(tl.min(gg, axis=1), axis=0))
    return low


@triton.jit
def _eda_fwd_kernel(Win, U0in, Kein, Qgin, eGNin, Qkin, h0, o, ht, hs, T, NT, HV: tl.constexpr, K: tl.constexpr,
                    V: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, EDA: tl.constexpr,
                    HAS_H0: tl.constexpr, STORE_HT: tl.constexpr, STORE_HS: tl.constexpr,
                    LATE: tl.constexpr, DT: tl.constexpr, PREC: tl.constexpr):
    """Launch (2) of notes/chunk_form.md §4: per (V-block, batch x value head) the chunk walk of Eq. chunk_wise_eda."""
    i_v = tl.program_id(0)
    i_bh = tl.program_id(1)
    i_b, i_hv, _ = _heads(i_bh, HV, HV)
    r = tl.arange(0, BT)
    ck, cv, mk, mv, m_s, off_s = _state_block(i_v, K, V, BK, BV)
    m_k = (r >= 0)[:, None] & mk[None, :]
    m_u = (r >= 0)[:, None] & mv[None, :]
    # outputs from EDA's write rows 2t + 1 of Qg, Qk (rq), not masked rows (forward 13% faster at HV = 6, 1-3% else)
    WR: tl.constexpr = EDA and BT >= 32  # 8-token chunks: 8 write rows, under a tensor-core product's 16
    tok, is_w = _sub_steps(BT // 2 if WR else BT, EDA and not WR)
    rq = 2 * tok + 1 if WR else r
    S = tl.zeros([BK, BV], dtype=tl.float32)
    if HAS_H0:
        S = tl.load(h0 + i_bh.to(tl.int64) * K * V + off_s, mask=m_s, other=0.).to(tl.float32)
    for c in range(NT):
        base = i_bh.to(tl.int64) * NT + c
        if STORE_HS and not LATE:  # S_0 of every chunk, for the backward
            tl.store(hs + base * K * V + off_s, S.to(hs.dtype.element_ty), mask=m_s)
        off_k = base * BT * K + r[:, None] * K + ck[None, :]
        W = tl.load(Win + off_k, mask=m_k, other=0.).to(DT)
        Ke = tl.load(Kein + off_k, mask=m_k, other=0.).to(DT)
        if WR:
            Qg = tl.load(Qgin + base * BT * K + rq[:, None] * K + ck[None, :], mask=(rq >= 0)[:, None] & mk[None, :],
                         other=0.).to(DT)
        else:  # the KDA path's load as it was (with broadcast masks its walk took 12% longer at HV = 6)
            Qg = tl.load(Qgin + off_k, mask=m_k, other=0.).to(DT)
        U0 = tl.load(U0in + base * BT * V + r[:, None] * V + cv[None, :], mask=m_u, other=0.).to(tl.float32)
        Qk = tl.load(Qkin + base * BT * BT + rq[:, None] * BT + r[None, :]).to(DT)
        eGN = tl.load(eGNin + base * K + ck, mask=mk, other=0.)
        Sd = S.to(DT)
        U = U0 - tl.dot(W, Sd, input_precision=PREC)
        Ud = U.to(DT)
        out = tl.dot(Qg, Sd, input_precision=PREC) + tl.dot(Qk, Ud, input_precision=PREC)
        t_abs = c * (BT // 2 if EDA else BT) + tok
        m_o = (is_w & (t_abs < T))[:, None] & mv[None, :]
        tl.store(o + ((i_b.to(tl.int64) * T + t_abs) * HV + i_hv)[:, None] * V + cv[None, :],
                 out.to(o.dtype.element_ty), mask=m_o)
        if STORE_HS and LATE:  # after the products: the store's layout change waits on a barrier
            tl.store(hs + base * K * V + off_s, S.to(hs.dtype.element_ty), mask=m_s)
        S = S * eGN[:, None] + tl.dot(tl.trans(Ke), Ud, input_precision=PREC)
    if STORE_HT:
        tl.store(ht + i_bh.to(tl.int64) * K * V + off_s, S, mask=m_s)


# ----------------------------------------------------------------------------------------------------
# Backward: (3), (4) the reverse chunk walk for dS only; (5) per chunk, in parallel, all gradients.


@triton.jit
def _eda_dh_prep_kernel(q, k, e, g, beta, gamma, Tin, Qkin, W2out, Mout, Qgout, Kgout, eGNout, scale, T, NT,
                        H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr,
                        BKC: tl.constexpr, EDA: tl.constexpr, DT: tl.constexpr, PREC: tl.constexpr):
    """The reverse walk's operands, per chunk (the prep's twin): M = T^T Qk^T [BT, BT], W2, Kg, Qg, exp(G_C)."""
    c = tl.program_id(0)
    i_bh = tl.program_id(1)
    i_b, i_hv, i_h = _heads(i_bh, H, HV)
    r = tl.arange(0, BT)
    base = i_bh.to(tl.int64) * NT + c
    off_t = base * BT * BT + r[:, None] * BT + r[None, :]
    Tt = tl.trans(tl.load(Tin + off_t).to(DT))
    Qk = tl.load(Qkin + off_t).to(DT)
    M = tl.dot(Tt, tl.trans(Qk), input_precision=PREC)  # stored once rounded; the walk's M dO is fp32
    tl.store(Mout + off_t, M.to(Mout.dtype.element_ty))
    bb, _, _, _ = _chunk_rows(beta, gamma, i_b, i_hv, c, T, HV, BT, EDA)
    for kb in range(tl.cdiv(K, BKC)):  # K in blocks of BKC columns (as in the prep kernel)
        kk, qq, _, G, _, _, _ = _chunk_keys(q, k, e, g, beta, gamma, i_b, i_h, i_hv, c, T, scale,
                                            H, HV, K, BT, BKC, EDA, kb * BKC)
        _key_operands(kk, qq, G, bb, Tt, g, W2out, Kgout, Qgout, eGNout, base, i_b, i_hv, c, T, kb * BKC,
                      HV, K, BT, BKC, EDA, True, False, DT, PREC)

@triton.jit
def _eda_bwd_dh_kernel(W2in, Min, Qgin, Kgin, eGNin, do, dht, dhs, dh0, T, NT, HV: tl.constexpr, K: tl.constexpr,
                       V: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, EDA: tl.constexpr,
                       HAS_DHT: tl.constexpr, STORE_DH0: tl.constexpr, DT: tl.constexpr, PREC: tl.constexpr):
    """Launch (4) of notes/chunk_form.md §4: the reverse walk of dS alone, storing dS_C of every chunk. dX = T^T dU is
    not kept: bf16 costs d(gamma) ~2e-2 relative at T = 4096, fp32 too much memory."""
    i_v = tl.program_id(0)
    i_bh = tl.program_id(1)
    i_b, i_hv, _ = _heads(i_bh, HV, HV)
    r = tl.arange(0, BT)
    ck, cv, mk, mv, m_s, off_s = _state_block(i_v, K, V, BK, BV)
    m_k = (r >= 0)[:, None] & mk[None, :]
    tok, is_w = _sub_steps(BT, EDA)  # dO at the write sub-steps only
    dS = tl.zeros([BK, BV], dtype=tl.float32)
    if HAS_DHT:
        dS = tl.load(dht + i_bh.to(tl.int64) * K * V + off_s, mask=m_s, other=0.).to(tl.float32)
    for cc in range(NT):
        c = NT - 1 - cc
        base = i_bh.to(tl.int64) * NT + c
        off_k = base * BT * K + r[:, None] * K + ck[None, :]
        W2 = tl.load(W2in + off_k, mask=m_k, other=0.).to(DT)
        Qg = tl.load(Qgin + off_k, mask=m_k, other=0.).to(DT)
        Kg = tl.load(Kgin + off_k, mask=m_k, other=0.).to(DT)
        Mt = tl.load(Min + base * BT * BT + r[:, None] * BT + r[None, :]).to(DT)
        eGN = tl.load(eGNin + base * K + ck, mask=mk, other=0.)
        t_abs = c * (BT // 2 if EDA else BT) + tok
        dO = tl.load(do + ((i_b.to(tl.int64) * T + t_abs) * HV + i_hv)[:, None] * V + cv[None, :],
                     mask=(is_w & (t_abs < T))[:, None] & mv[None, :], other=0.).to(DT)
        dX = tl.dot(Mt, dO, input_precision=PREC) + tl.dot(W2, dS.to(DT), input_precision=PREC)
        dXd = dX.to(DT)
        tl.store(dhs + base * K * V + off_s, dS.to(dhs.dtype.element_ty), mask=m_s)  # after dX: off its chain
        dS = dS * eGN[:, None] + tl.dot(tl.trans(Qg), dO, input_precision=PREC) \
            - tl.dot(tl.trans(Kg), dXd, input_precision=PREC)
    if STORE_DH0:
        tl.store(dh0 + i_bh.to(tl.int64) * K * V + off_s, dS, mask=m_s)


@triton.jit
def _eda_bwd_kernel(q, k, v, e, g, beta, gamma, Tin, Qkin, hs, dhs, do, dq, dk, dv, de, dg, dbeta, dgamma, scale, T, NT,
                    H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr,
                    BK: tl.constexpr, BV: tl.constexpr, AB: tl.constexpr, EDA: tl.constexpr, SCALAR_G: tl.constexpr,
                    WR: tl.constexpr, DT: tl.constexpr, PREC: tl.constexpr):
    """Launch (5) of notes/chunk_form.md §4: every input gradient of one chunk (V-blocks of BV looped inside). From S_0
    and T: R = V' - (exp(G) K') S_0, U = T diag(b') R; from dS_C: dU = Qk^T dO + (exp(G_C - G) K') dS_C, dX = T^T dU,
    dV' = b' dX, dL = -StrictTril(dX U^T), dQk = Tril(dO U^T) (summed over the V-blocks). Through S_0 and S_C:
    dk' += exp(G) (-dV' S_0^T) + exp(G_C - G) (U dS_C^T), dq' += exp(G) (dO S_0^T), db' += rowsum(dX R), their share
    of dg (G = cumsum(g')); then the in-chunk terms (_in_chunk_grads) and one store (dq, dk per value head).
    WR: q', dO, dq' and Qk's rows exist on EDA's write rows alone, so their tiles take those 16 (rows rq = 2t + 1)."""
    c = tl.program_id(0)
    i_bh = tl.program_id(1)
    i_b, i_hv, i_h = _heads(i_bh, H, HV)
    r = tl.arange(0, BT)
    kk, qq, bb, G, row_bt, wrow, erow = _chunk_keys(q, k, e, g, beta, gamma, i_b, i_h, i_hv, c, T, scale,
                                                    H, HV, K, BT, BK, EDA, 0, DT == tl.bfloat16)
    if WR:  # the tokens' own q' and G (a cumsum of their g: G[2t + 1] = G[2t]), row_q their (b, t) rows
        _, qq_q, _, G_q, row_q, m_q, _ = _chunk_keys(q, k, e, g, beta, gamma, i_b, i_h, i_hv, c, T, scale,
                                                     H, HV, K, BT // 2, BK, False, 0, DT == tl.bfloat16)
        rq = 2 * tl.arange(0, BT // 2) + 1
    else:
        qq_q, G_q, row_q, m_q, rq = qq, G, row_bt, wrow, r
    base_t = (i_bh.to(tl.int64) * NT + c) * BT * BT
    Tm = tl.load(Tin + (base_t + r[:, None] * BT + r[None, :])).to(DT)
    Qk = tl.load(Qkin + (base_t + rq[:, None] * BT + r[None, :])).to(DT)
    GN = _row(G, r, BT - 1)
    eNG = _exp(GN[None, :] - G)
    kg32 = kk * _exp(G)
    kg = kg32.to(DT)
    kg_lo = (kg32 - kg.to(tl.float32)).to(DT)  # what rounding kg lost (zero for fp32 inputs)
    kn = (kk * eNG).to(DT)
    # the K-side results accumulate over the V-blocks of this program (no atomics between programs)
    pos = tl.zeros([BT, BK], dtype=tl.float32)
    neg = tl.zeros([BT, BK], dtype=tl.float32)
    dqq = tl.zeros_like(qq_q)
    dL = tl.zeros([BT, BT], dtype=tl.float32)
    dQk = tl.zeros(Qk.shape, dtype=tl.float32)
    db = tl.zeros([BT], dtype=tl.float32)
    sds = tl.zeros([BK], dtype=tl.float32)
    for i_v in range(tl.cdiv(V, BV)):
        ck, cv, mk, mv, m_s, off_s = _state_block(i_v, K, V, BK, BV)
        off_s += (i_bh.to(tl.int64) * NT + c) * K * V
        # S_0 and dS_C only feed products: kept in the dot dtype (as stored), never as fp32 tiles
        Sd = tl.load(hs + off_s, mask=m_s, other=0.).to(DT)
        dSd = tl.load(dhs + off_s, mask=m_s, other=0.).to(DT)
        dX, dR, Ud, dOd, db_v = _chunk_v_block(v, do, dv, Sd, dSd, kg, kg_lo, kn, Tm, Qk, bb, row_bt, wrow, row_q,
                                               m_q, i_hv, cv, mv, HV, V, DT, PREC)
        db += db_v
        dL += tl.dot(dX.to(DT), tl.trans(Ud), input_precision=PREC)
        dQk += tl.dot(dOd, tl.trans(Ud), input_precision=PREC)
        pos += tl.dot(dR.to(DT), tl.trans(Sd), input_precision=PREC)
        neg += tl.dot(Ud, tl.trans(dSd), input_precision=PREC)
        dqq += tl.dot(dOd, tl.trans(Sd), input_precision=PREC)
        sds += tl.sum(Sd.to(tl.float32) * dSd.to(tl.float32), axis=1)
    # through S_0 (R = V' - exp(G) K' S_0, O = exp(G) Q' S_0) and S_C (S_C = ... + (exp(G_C - G) K')^T U)
    ck = tl.arange(0, BK)
    # k' and the query rows' q', G reloaded, exp(G), exp(G_C - G) re-formed: not held over the V loop (they spilled:
    # stack 584 -> 112 B, fwd+bwd 5-9% faster); exp2(2x log2(e)/2), not _exp: the compiler would merge it with the above
    if WR:
        _, qq_q, _, G_q, _, _, _ = _chunk_keys(q, k, e, g, beta, gamma, i_b, i_h, i_hv, c, T, scale,
                                               H, HV, K, BT // 2, BK, False)
    kk = _chunk_keys(q, k, e, g, beta, gamma, i_b, i_h, i_hv, c, T, scale, H, HV, K, BT, BK, EDA)[0]
    pos = -pos * tl.exp2(2 * G * 0.7213475204444817)  # d/dk' via exp(+G)
    neg = neg * tl.exp2(2 * (GN[None, :] - G) * 0.7213475204444817)  # d/dk' via exp(-G)
    dqq = dqq * _exp(G_q)
    dkk = pos + neg
    dG = kk * (pos - neg)
    if not WR:  # WR: q' dq' joins the tokens' sums below
        dG += qq * dqq
    dGN = _exp(GN) * sds + tl.sum(neg * kk, axis=0)
    dG = dG + tl.where(r[:, None] == BT - 1, dGN[None, :], 0.)
    dL = tl.where(r[:, None] > r[None, :], -dL, 0.)  # inside the chunk: through T (dL) and Qk (dQk)
    dQk = tl.where(rq[:, None] >= r[None, :], dQk, 0.)
    dkk_i, dqq_i, dG_i, db_i = _in_chunk_grads(kk, qq, G, bb, dL, dQk, r, qq_q, G_q, rq, ck, BT, AB, SCALAR_G, WR,
                                               DT, PREC)
    dgg = dG + dG_i
    row_g, m_g = row_bt, erow if EDA else wrow
    if WR:  # per token (its erase and write rows summed: g rides on the erase row, G[2t + 1] = G[2t]), plus q' dq'
        dgg = tl.sum(tl.reshape(dgg, (BT // 2, 2, BK)), axis=1) + qq_q * (dqq + dqq_i)
        row_g, m_g = row_q, m_q
    dgg = tl.sum(dgg, axis=0)[None, :] - tl.cumsum(dgg, axis=0) + dgg  # G = cumsum(g'): reverse cumsum
    _scatter(dq, dk, de, dg, dbeta, dgamma, (dqq + dqq_i) * scale, dkk + dkk_i, dgg, db + db_i, row_bt, wrow, erow,
             row_q, m_q, row_g, m_g, i_hv, ck, ck < K, HV, K, EDA)


@triton.jit
def _chunk_v_block(v, do, dv, Sd, dSd, kg, kg_lo, kn, Tm, Qk, bb, row_bt, wrow, row_q, m_q, i_hv, cv, mv,
                   HV: tl.constexpr, V: tl.constexpr, DT: tl.constexpr, PREC: tl.constexpr):
    """One V-block (Sd, dSd: S_0's, dS_C's [BK, BV]) of _eda_bwd_kernel's R, U, dU, dX; stores dv = diag(b') dX.
    dO and Qk on the query rows (row_q, m_q)."""
    off_v = (row_bt * HV + i_hv)[:, None] * V + cv[None, :]
    m_v = wrow[:, None] & mv[None, :]
    vv = tl.load(v + off_v, mask=m_v, other=0.).to(tl.float32)
    # db' = rowsum(dX R) cancels: R's and dX's fp32 operands enter as bf16 hi + lo parts (notes/kernel.md)
    R = vv - tl.dot(kg, Sd, input_precision=PREC) - tl.dot(kg_lo, Sd, input_precision=PREC)
    Ud = tl.dot(Tm, (bb[:, None] * R).to(DT), input_precision=PREC).to(DT)
    dOd = tl.load(do + ((row_q * HV + i_hv)[:, None] * V + cv[None, :]), mask=m_q[:, None] & mv[None, :],
                  other=0.).to(DT)
    dU = tl.dot(tl.trans(Qk), dOd, input_precision=PREC) + tl.dot(kn, dSd, input_precision=PREC)
    dU_hi = dU.to(DT)
    dX = tl.dot(tl.trans(Tm), dU_hi, input_precision=PREC) + \
        tl.dot(tl.trans(Tm), (dU - dU_hi.to(tl.float32)).to(DT), input_precision=PREC)
    db = tl.sum(dX * R, axis=1)
    dR = bb[:, None] * dX
    tl.store(dv + off_v, dR.to(dv.dtype.element_ty), mask=m_v)
    return dX, dR, Ud, dOd, db


@triton.jit
def _in_chunk_grads(kk, qq, G, bb, dL, dQk, r, qq_q, G_q, rq, ck, BT: tl.constexpr, AB: tl.constexpr,
                    SCALAR_G: tl.constexpr, WR: tl.constexpr, DT: tl.constexpr, PREC: tl.constexpr):
    """In-chunk gradient terms (dk', dq', dG, db') from dL (through T) and dQk: db' = rowsum(dL A), dA = diag(b') dL.
    dQk, q' (qq_q), G_q and dq' are on the query rows rq; WR (the write rows alone): dG leaves out q' dq'."""
    A, Qk, Kp, Kn, Qp, Ea, En = _anchored(kk, qq, G, BT, AB, SCALAR_G, DT, PREC)
    db = tl.sum(dL * A, axis=1)
    dA = bb[:, None] * dL
    # dA and dQk feed dG, whose reverse cumsum cancels pairwise terms: fp32 operands (tf32) keep dg's error < 1e-2
    if SCALAR_G:  # A = (K' K'^T) * D, D_ij = exp(G_i - G_j): dG_m = rowsum_m(P) - colsum_m(P), P = dA A + dQk Qk
        D = _scalar_decay(G, r, G, r)
        Dq = _scalar_decay(G_q, rq, G, r)
        dAD = dA * D
        dQkD = dQk * Dq
        dkk = tl.dot(dAD, kk, input_precision=PREC) + tl.dot(tl.trans(dAD), kk, input_precision=PREC) + \
            tl.dot(tl.trans(dQkD), qq_q, input_precision=PREC)
        dqq = tl.dot(dQkD, kk, input_precision=PREC)
        P = dA * A
        if WR:  # rowsum(dQk Qk) = q' dq' summed over the channels: the caller adds it on the write rows
            dGs = tl.sum(P, axis=1) - tl.sum(P, axis=0) - \
                tl.sum(dQk * tl.dot(qq_q.to(DT), tl.trans(kk.to(DT)), input_precision=PREC) * Dq, axis=0)
        else:
            P += dQk * Qk
            dGs = tl.sum(P, axis=1) - tl.sum(P, axis=0)
        # one decay per head: the wrapper sums the channels, so each column block's share goes in its first column
        dG = tl.where((tl.arange(0, ck.shape[0]) == 0)[None, :], dGs[:, None], 0.)
    else:
        # in-block pairs (A = Kp Kn^T, Qk = Qp Kn^T). Every factor of k' (q') is k' (q') times exp(+G)
        # ("pos") or exp(-G) ("neg") up to constants, so dG = k' (pos - neg) + q' dq' and dk' = pos + neg.
        Ea_q, Qp_q = Ea, Qp
        if WR:
            Ea_q = _exp(G_q - _anchors(G_q, rq, G, r, AB))
            Qp_q = qq_q * Ea_q
        same = (r // AB)[:, None] == (r // AB)[None, :]
        same_q = (rq // AB)[:, None] == (r // AB)[None, :]
        dAs = tl.where(same, dA, 0.)
        dQks = tl.where(same_q, dQk, 0.)
        pos = tl.dot(dAs, Kn, input_precision=PREC) * Ea
        neg = (tl.dot(tl.trans(dAs), Kp, input_precision=PREC) +
               tl.dot(tl.trans(dQks), Qp_q, input_precision=PREC)) * En
        dqq = tl.dot(dQks, Kn, input_precision=PREC) * Ea_q
        for I in tl.static_range(1, BT // AB):  # cross-block pairs, anchored at block I's boundary
            KpI, KnI, _, EpI, EnI = _cross_block(kk, qq, G, r, I, AB)
            _, _, QpI, EpI_q, _ = _cross_block(qq_q, qq_q, G_q, rq, I, AB)
            dAI = tl.where((r // AB == I)[:, None] & ~same, dA, 0.)
            dQkI = tl.where((rq // AB == I)[:, None] & ~same_q, dQk, 0.)
            pos += tl.dot(dAI, KnI, input_precision=PREC) * EpI
            neg += (tl.dot(tl.trans(dAI), KpI, input_precision=PREC) +
                    tl.dot(tl.trans(dQkI), QpI, input_precision=PREC)) * EnI
            dqq += tl.dot(dQkI, KnI, input_precision=PREC) * EpI_q
        dkk = pos + neg
        dG = kk * (pos - neg)
        if not WR:
            dG += qq * dqq
    return dkk, dqq, dG, db


@triton.jit
def _scatter(dq, dk, de, dg, dbeta, dgamma, dqq, dkk, dgg, db, row_bt, wrow, erow, row_q, m_q, row_g, m_g, i_hv, ck,
             mk, HV: tl.constexpr, K: tl.constexpr, EDA: tl.constexpr):
    """Sub-step gradients to the tokens: write rows -> q, k, beta; erase rows -> e, gamma; g on the decay's rows.
    dqq on rows row_q (mask m_q), dgg on row_g (m_g); dq, dk per value head (_bwd sums a group's): one writer."""
    off_hk = (row_bt * HV + i_hv)[:, None] * K + ck[None, :]
    off_q = (row_q * HV + i_hv)[:, None] * K + ck[None, :]
    m_qk = m_q[:, None] & mk[None, :]
    m_w, m_e = wrow[:, None] & mk[None, :], erow[:, None] & mk[None, :]
    tl.store(dq + off_q, dqq.to(dq.dtype.element_ty), mask=m_qk)
    tl.store(dk + off_hk, dkk.to(dk.dtype.element_ty), mask=m_w)
    tl.store(dg + ((row_g * HV + i_hv)[:, None] * K + ck[None, :]), dgg.to(dg.dtype.element_ty),
             mask=m_g[:, None] & mk[None, :])
    tl.store(dbeta + row_bt * HV + i_hv, db.to(dbeta.dtype.element_ty), mask=wrow)
    if EDA:
        tl.store(de + off_hk, dkk.to(de.dtype.element_ty), mask=m_e)
        tl.store(dgamma + row_bt * HV + i_hv, db.to(dgamma.dtype.element_ty), mask=erow)


@triton.jit
def _group_sum_kernel(x, y, N, G: tl.constexpr, K: tl.constexpr, BK: tl.constexpr, BN: tl.constexpr):
    """y [N, K]: x [N, G, K] summed over its G members in fp32, rounded once (dq, dk per value head -> per key head)."""
    n, ck = (tl.program_id(0) * BN + tl.arange(0, BN)).to(tl.int64)[:, None], tl.arange(0, BK)[None, :]
    acc = tl.zeros([BN, BK], dtype=tl.float32)
    for j in tl.static_range(G):
        acc += tl.load(x + (n * G + j) * K + ck, mask=(n < N) & (ck < K), other=0.).to(tl.float32)
    tl.store(y + n * K + ck, acc.to(y.dtype.element_ty), mask=(n < N) & (ck < K))


# ----------------------------------------------------------------------------------------------------
# Decode: fused recurrent (Eq. ed, one token at a time, state in HBM)


@triton.jit
def _add3(a0, a1, a2, b0, b1, b2):
    return a0 + b0, a1 + b1, a2 + b2


@triton.jit
def _eda_decode_kernel(q, k, v, e, g, beta, gamma, s_in, s_out, o, scale, T, H: tl.constexpr, HV: tl.constexpr,
                       K: tl.constexpr, V: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, EDA: tl.constexpr,
                       SCALAR_G: tl.constexpr):
    # one axis, a state's V-blocks adjacent: neighbouring programs read neighbouring columns of one state's rows
    pid = tl.program_id(0)
    i_bh, i_v = pid // tl.cdiv(V, BV), pid % tl.cdiv(V, BV)
    i_b, i_hv, i_h = _heads(i_bh, H, HV)
    ck, cv, mk, mv, m_s, off_s = _state_block(i_v, K, V, BK, BV)
    off_s += i_bh.to(tl.int64) * K * V
    S = tl.load(s_in + off_s, mask=m_s, other=0.).to(tl.float32)
    for t in range(T):
        row = i_b.to(tl.int64) * T + t
        # q, k, g, e: read by each V-block and grouped head, kept in L2; v, o pass once (FLA's hints: -8% at B = 64)
        qv = tl.load(q + (row * H + i_h) * K + ck, mask=mk, other=0., eviction_policy='evict_last')
        qv = qv.to(tl.float32) * scale
        kv = tl.load(k + (row * H + i_h) * K + ck, mask=mk, other=0., eviction_policy='evict_last').to(tl.float32)
        vv = tl.load(v + (row * HV + i_hv) * V + cv, mask=mv, other=0., eviction_policy='evict_first').to(tl.float32)
        off_g = row * HV + i_hv + 0 * ck if SCALAR_G else (row * HV + i_hv) * K + ck  # SCALAR_G: one g a head
        eg = _exp(tl.load(g + off_g, mask=mk, other=0., eviction_policy='evict_last').to(tl.float32))
        bt = tl.load(beta + row * HV + i_hv).to(tl.float32)
        # one pass over S (2-4% faster at B = 64, notes/decode.md): the decay (Eq. decayed_memory) rides on the read
        # vectors; k^T, q^T of the erased state (Eq. erase_step) follow from a = e^T D S; the write (Eq. eda_two_stage)
        if EDA:
            ev = tl.load(e + (row * HV + i_hv) * K + ck, mask=mk, other=0., eviction_policy='evict_last').to(tl.float32)
            gm = tl.load(gamma + row * HV + i_hv).to(tl.float32)
            a, b, c = tl.reduce(((ev * eg)[:, None] * S, (kv * eg)[:, None] * S, (qv * eg)[:, None] * S), 0, _add3)
            b, c = b - gm * tl.sum(kv * ev, axis=0) * a, c - gm * tl.sum(qv * ev, axis=0) * a
            S = S * eg[:, None] - (gm * ev)[:, None] * a[None, :]
        else:  # two sums: 2% faster than a three-way reduction with a dummy (H200)
            b, c = tl.sum((kv * eg)[:, None] * S, axis=0), tl.sum((qv * eg)[:, None] * S, axis=0)
            S = S * eg[:, None]
        res = vv - b
        S = S + (bt * kv)[:, None] * res[None, :]
        ov = c + bt * tl.sum(qv * kv, axis=0) * res
        tl.store(o + (row * HV + i_hv) * V + cv, ov.to(o.dtype.element_ty), mask=mv, eviction_policy='evict_first')
    tl.store(s_out + off_s, S, mask=m_s)


# ----------------------------------------------------------------------------------------------------
# Short conv, model.py's input path: causal depthwise conv + SiLU (+ L2 norm for q, k), fused (notes/kernel.md)


@triton.jit
def _conv_block(c0, T, NH: tl.constexpr, W: tl.constexpr, BT: tl.constexpr, BW: tl.constexpr):
    """This program's batch b, row block i_t, rows, column mask, channels ch of u, offsets in its [B, T, NH, W] tile."""
    i_t, i_bh = tl.program_id(0), tl.program_id(1)
    b, h = i_bh // NH, i_bh % NH
    rows = i_t * BT + tl.arange(0, BT)
    cols = tl.arange(0, BW)
    off_h = ((b.to(tl.int64) * T + rows) * NH + h)[:, None] * W + cols[None, :]
    return b, i_t, rows, cols < W, c0 + h * W + cols, off_h


@triton.jit
def _conv_tap(u, b, rows, j, ch, mc, T, su_b, su_t, KS: tl.constexpr):
    """u at rows - (KS-1) + j (tap j of the causal window; zero left context), fp32."""
    src = rows - (KS - 1) + j
    return tl.load(u + b.to(tl.int64) * su_b + src.to(tl.int64)[:, None] * su_t + ch[None, :],
                   mask=((src >= 0) & (src < T))[:, None] & mc[None, :], other=0.).to(tl.float32)


@triton.jit
def _conv_pre(u, w, b, rows, ch, mc, T, su_b, su_t, KS: tl.constexpr, BT: tl.constexpr, BW: tl.constexpr):
    """Pre-activation z[t] = sum_j w[c, j] u[t - (KS-1) + j] at rows `rows`, fp32."""
    z = tl.zeros([BT, BW], dtype=tl.float32)
    for j in tl.static_range(KS):
        z += _conv_tap(u, b, rows, j, ch, mc, T, su_b, su_t, KS) * \
            tl.load(w + ch * KS + j, mask=mc, other=0.).to(tl.float32)[None, :]
    return z


@triton.jit
def _conv_fwd_kernel(u, w, y, T, su_b, su_t, c0, eps, NH: tl.constexpr, W: tl.constexpr, KS: tl.constexpr,
                     BT: tl.constexpr, BW: tl.constexpr, NORM: tl.constexpr):
    """One head of one segment ([q | k | v]) on BT rows: y = silu(conv(u)), L2-normalized per row if NORM."""
    b, _, rows, mc, ch, off_h = _conv_block(c0, T, NH, W, BT, BW)
    z = _conv_pre(u, w, b, rows, ch, mc, T, su_b, su_t, KS, BT, BW)
    s = z * tl.sigmoid(z)
    if NORM:  # F.normalize: s / max(|s|, eps)
        s = s / tl.maximum(tl.sqrt(tl.sum(s * s, axis=1)), eps)[:, None]
    tl.store(y + off_h, s.to(y.dtype.element_ty), mask=(rows < T)[:, None] & mc[None, :])


@triton.jit
def _conv_bwd_dz_kernel(u, w, dy, dz, dwp, T, NTB, su_b, su_t, c0, C, eps, NH: tl.constexpr, W: tl.constexpr,
                        KS: tl.constexpr, KSP: tl.constexpr, BT: tl.constexpr, BW: tl.constexpr, NORM: tl.constexpr):
    """Backward part 1: dz (fp32) through L2 norm and SiLU (z recomputed); the row block's dw into dwp (no atomics)."""
    b, i_t, rows, mc, ch, off_h = _conv_block(c0, T, NH, W, BT, BW)
    inside = (rows < T)[:, None] & mc[None, :]
    z = _conv_pre(u, w, b, rows, ch, mc, T, su_b, su_t, KS, BT, BW)
    sg = tl.sigmoid(z)
    g = tl.load(dy + off_h, mask=inside, other=0.).to(tl.float32)
    if NORM:  # through s / max(|s|, eps): (g - s_hat (s_hat . g)) / |s| when |s| > eps, else g / eps
        s = z * sg
        n = tl.sqrt(tl.sum(s * s, axis=1))
        inv = 1. / tl.maximum(n, eps)
        sh = s * inv[:, None]
        g = inv[:, None] * (g - tl.where((n > eps)[:, None], sh * tl.sum(sh * g, axis=1)[:, None], 0.))
    dzt = tl.where(inside, g * sg * (1. + z * (1. - sg)), 0.)  # silu'(z) = sg (1 + z (1 - sg))
    tl.store(dz + (b.to(tl.int64) * T + rows)[:, None] * C + ch[None, :], dzt, mask=inside)
    dw = tl.zeros([KSP, BW], dtype=tl.float32)  # dw[c, j] = sum_t dz[t] u[t - (KS-1) + j], tap j in row j
    for j in tl.range(KS, loop_unroll_factor=1):  # a runtime loop: one tap tile live at a time
        x = _conv_tap(u, b, rows, j, ch, mc, T, su_b, su_t, KS)
        dw += tl.where((tl.arange(0, KSP) == j)[:, None], tl.sum(dzt * x, axis=0)[None, :], 0.)
    kj = tl.arange(0, KSP)
    tl.store(dwp + ((b.to(tl.int64) * NTB + i_t) * C + ch[None, :]) * KS + kj[:, None], dw,
             mask=(kj < KS)[:, None] & mc[None, :])


@triton.jit
def _conv_bwd_du_kernel(dz, w, du, T, C, KS: tl.constexpr, BT: tl.constexpr, BC: tl.constexpr):
    """Backward of _conv_fwd_kernel, part 2: du[t] = sum_j w[c, j] dz[t + (KS-1) - j] (the conv's transpose)."""
    i_t = tl.program_id(0)
    b = tl.program_id(1)
    ch = tl.program_id(2) * BC + tl.arange(0, BC)
    mc = ch < C
    rows = i_t * BT + tl.arange(0, BT)
    acc = tl.zeros([BT, BC], dtype=tl.float32)
    for j in tl.static_range(KS):
        r2 = rows + (KS - 1 - j)
        d = tl.load(dz + (b.to(tl.int64) * T + r2)[:, None] * C + ch[None, :], mask=(r2 < T)[:, None] & mc[None, :],
                    other=0.)
        acc += d * tl.load(w + ch * KS + j, mask=mc, other=0.).to(tl.float32)[None, :]
    tl.store(du + (b.to(tl.int64) * T + rows)[:, None] * C + ch[None, :], acc.to(du.dtype.element_ty),
             mask=(rows < T)[:, None] & mc[None, :])


# ----------------------------------------------------------------------------------------------------
# Python side: checks, launches, autograd


def _device_problem(device):
    """Why the kernels cannot run on `device`, or None: CUDA, or the CPU under Triton's interpreter."""
    if device.type == "cpu" and os.environ.get("TRITON_INTERPRET", "0") != "1":
        return "CPU tensors need TRITON_INTERPRET=1 (Triton's interpreter); otherwise pass CUDA tensors"
    if device.type not in ("cpu", "cuda"):
        return f"tensors on {device} are not supported (CUDA, or CPU under TRITON_INTERPRET=1)"
    return None


def head_dim_problem(d):
    """Why the kernels cannot take head dim d, or None: tiles step by 16; a [K, V] state block fits registers."""
    return None if d % 16 == 0 and 16 <= d <= 256 else "must be a multiple of 16 in [16, 256]"


def _check_kernel_inputs(q, k, v, e, scale):
    """The kernels' own checks (dtype, head dims, device, scale) after eda.check_inputs': a ValueError names it."""
    for name, x in dict(q=q, k=k, v=v, e=e).items():
        if x is not None and x.dtype not in _DTYPES:
            raise ValueError(f"eda_triton: {name} has dtype {x.dtype}; the kernels take float32, bfloat16 or "
                             "float16 (use eda_recurrent for float64)")
    for name, d in (("K (q.shape[-1])", q.shape[-1]), ("V (v.shape[-1])", v.shape[-1])):
        if head_dim_problem(d):
            raise ValueError(f"eda_triton: head dim {name} = {d} {head_dim_problem(d)}")
    if _device_problem(q.device):
        raise ValueError(f"eda_triton: {_device_problem(q.device)}")
    if scale is not None and not isinstance(scale, (int, float)):
        raise ValueError(f"eda_triton: scale must be a number or None, got {type(scale).__name__}")


def _dot_types(x):
    """Dot operand dtype, precision, stored matrices' dtype: exact fp32, else bf16 (fp16 overflows exp(40) factors)."""
    return (tl.float32, "ieee", torch.float32) if x.dtype == torch.float32 else (tl.bfloat16, "tf32", torch.bfloat16)


def _blocks(K, V, bv):
    """Block sizes: K whole (padded), V in blocks of <= bv."""
    return triton.next_power_of_2(K), min(triton.next_power_of_2(V), bv)


# launch settings, chosen for K = V = 128 on Hopper (the measurements behind each: notes/kernel.md, "Launch
# settings and fusions"); eda_fused(..., launch=dict(FWD_BV=64)) changes them by name (bench.py's sweep, the tests)
LAUNCH = dict(
    # SUB_BLOCK: rows per substitution block of the prep's UT solve (4: prep 6-7% faster than 8, same bf16 error);
    # PREP_STAGES: both preps' software pipelining (Triton's default); PREP_BK: the forward's takes all of K at once;
    # PREP_REUSE: with one K block the second pass reuses the tiles; PREP_MAXNREG: EDA's cap (3 programs an SM; 0: none)
    PREP_WARPS=4, SUB_BLOCK=4, PREP_STAGES=3, PREP_BK=128, DH_PREP_BK=64, PREP_REUSE=1, PREP_MAXNREG=168,
    # the two walks: *_WARPS for 128-wide V-blocks (narrower ones take 4); 3 stages keep the next chunks in flight
    FWD_BV=128, FWD_WARPS=8, FWD_STAGES=3, DH_BV=128, DH_WARPS=8, DH_STAGES=3,
    FWD_LATE_BV=16,  # forward walks this narrow store a step's state after its products (wider ones spill)
    # the per-chunk backward's V-blocks: EDA's 32 rows a chunk take 128 columns at K = 128 (_bwd_width; 0-4% faster
    # than 64), 64 at other K; the KDA path: 128
    BWD_BV=64, BWD_BV_K128=128, BWD_BV_KDA=128, BWD_WARPS=8, BWD_STAGES=1,
    BWD_WROWS=1,  # 1: the per-chunk backward's q', dO, dq', Qk tiles on EDA's 16 write rows alone (fwd+bwd 3-5% faster)
    BWD_CARVEOUT=0,  # the per-chunk backward's shared memory, % of an SM's (-1: Triton's, the largest); the rest is L1
    # walks narrow their V-blocks while the grid stays within a wave of SMs, to 16 columns (long sequences 8-12%
    # faster than 32); past a wave they lose: the 125M layer's 48 walks run 64 columns, not 32 (fwd+bwd 2% faster)
    FILL_PROGRAMS=128, WALK_MIN_BV=16,
    FWD_GLUON=1)  # 1: forward walks of <= 64 columns run walk_gluon.py's where they can (_gluon_walk), 0: Triton's
_POW2 = dict(SUB_BLOCK=1, PREP_BK=16, DH_PREP_BK=8, FWD_BV=8, DH_BV=8, BWD_BV=16, BWD_BV_K128=16, BWD_BV_KDA=16,
             WALK_MIN_BV=8, **{n: 1 for n in LAUNCH if n.endswith("WARPS")})  # tensor cores: K >= 16, N >= 8


def _walk_blocks(L, walk, K, V, programs):
    """A walk's (BK, BV, warps): V-blocks narrowed (to WALK_MIN_BV) while the narrower grid has at most
    FILL_PROGRAMS programs, on *_WARPS at 128 columns, else 4."""
    BK, BV = _blocks(K, V, L[walk + "_BV"])
    while BV > L["WALK_MIN_BV"] and 2 * programs * triton.cdiv(V, BV) <= L["FILL_PROGRAMS"]:
        BV //= 2
    return BK, BV, L[walk + "_WARPS"] if BV >= 128 else 4


def _gluon_walk(L, q, eda, BT, K, V, BV):
    """Whether the forward walk runs walk_gluon.py's (warps in roles), as written and tested on the GPU: EDA's 16-token
    chunks, K = V = 128, bf16 operands, V-blocks of <= 64 columns (not run at 128), on Hopper or later, triton 3.6."""
    return (walk_gluon is not None and bool(L["FWD_GLUON"]) and q.is_cuda and eda and BT == 32 and K == V == 128
            and _dot_types(q)[2] == torch.bfloat16 and BV <= 64 and torch.cuda.get_device_capability(q.device)[0] >= 9)


def _gluon_workers(BV):
    """walk_gluon.py's launch beyond its grid: worker warps (2 at 16 columns, 4 wider, as measured), their register
    cap, and the state chain's 4 warps."""
    return dict(WW=2 if BV == 16 else 4, WW_REGS=128, num_warps=4)


def launch_settings(changes=None):
    """LAUNCH's values in its order (as the chunk ops take them), but those named in `changes` (a dict), checked."""
    if unknown := sorted(set(changes or {}) - set(LAUNCH)):
        raise ValueError(f"eda_triton: unknown launch settings {unknown}; they are {', '.join(LAUNCH)}")
    L = {n: int((changes or {}).get(n, v)) for n, v in LAUNCH.items()}
    if bad := [f"{n}={L[n]}, not a power of 2 >= {m}" for n, m in _POW2.items() if L[n] < m or L[n] & (L[n] - 1)]:
        raise ValueError(f"eda_triton: launch settings that cannot run: {'; '.join(bad)}")
    return list(L.values())


_CARVEOUTS = {}  # compiled kernel (CUfunction handle) -> the carveout asked for it
CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT = 9  # the CUDA driver API's enum value


def _ask_carveout(compiled, percent):
    """Ask the CUDA driver for a compiled kernel's shared-memory carveout (percent, rounded up to what the kernel
    takes; -1: Triton's), once per compiled kernel and value, from its next launch on. No-op under the interpreter."""
    fn = getattr(compiled, "function", None)
    if not fn or _CARVEOUTS.get(fn, -1) == percent:
        return
    err = ctypes.CDLL("libcuda.so.1").cuFuncSetAttribute(
        ctypes.c_void_p(fn), CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, ctypes.c_int(percent))
    if err:
        raise RuntimeError(f"eda_triton: the CUDA driver refused a shared-memory carveout of {percent}% "
                           f"(CUresult {err}); launch=dict(BWD_CARVEOUT=-1) leaves Triton's")
    _CARVEOUTS[fn] = percent


def _geometry(q, v, e, chunk_tokens):
    (B, T, H, K), (HV, V) = q.shape, v.shape[2:]
    eda = e is not None
    BT = 2 * chunk_tokens if eda else chunk_tokens
    return B, T, H, HV, K, V, eda, BT, (T + chunk_tokens - 1) // chunk_tokens  # (also on a traced call's sizes)


def _anchor_rows(eda, BT):
    """Rows per anchor block: ANCHOR_TOKENS tokens (notes/chunk_form.md §4, 'Decay numerics')."""
    return min(BT, ANCHOR_TOKENS * (2 if eda else 1))


def _write_rows(L, eda, BT):
    """BWD_WROWS where it applies: 16-token chunks (8-token ones have 8 write rows, below the 16 a GPU product
    needs; 32-token ones would take 237,568 B of shared memory a program, over a Hopper SM's 232,448)."""
    return bool(L["BWD_WROWS"]) and eda and BT == 32


def _bwd_width(L, eda, BK):
    """The per-chunk backward's V-block width; EDA's 128 at K = 128 alone, as measured (256: 7 KB of spills)."""
    return L["BWD_BV_KDA"] if not eda else L["BWD_BV_K128"] if BK == 128 else L["BWD_BV"]


def _absent(q):
    """What an op returns in place of an output it was not asked for (an op returns a fixed tuple of tensors)."""
    return q.new_empty(0)


def _key_buffers(q, rows, NT, BT, K):
    """_key_operands' outputs for B*HV rows: X, Y, Qg [rows, NT, BT, K], exp(G_C) [rows, NT, K]."""
    X, Y, Qg = (torch.empty(rows, NT, BT, K, dtype=_dot_types(q)[2], device=q.device) for _ in range(3))
    return X, Y, Qg, q.new_empty(rows, NT, K, dtype=torch.float32)


def _fwd_outputs(q, v, e, chunk_tokens, output_final_state, need_states):
    """The forward op's results, allocated (the real op fills them, the fake op returns them): o, ht, hs, T, Qk."""
    B, T, H, HV, K, V, eda, BT, NT = _geometry(q, v, e, chunk_tokens)
    o = torch.empty(B, T, HV, V, dtype=v.dtype, device=v.device)
    ht = torch.empty(B, HV, K, V, dtype=torch.float32, device=q.device) if output_final_state else _absent(q)
    if not need_states:
        return o, ht, _absent(q), _absent(q), _absent(q)
    hs = torch.empty(B, HV, NT, K, V, dtype=q.dtype, device=q.device)
    Tm, Qk = (torch.empty(B * HV, NT, BT, BT, dtype=_dot_types(q)[2], device=q.device) for _ in range(2))
    return o, ht, hs, Tm, Qk


def _fwd(q, k, v, e, g, beta, gamma, scale, h0, output_final_state, need_states, chunk_tokens, scalar_g, check_g, L):
    """Launches (1), (2) of notes/chunk_form.md §4 (check_g: each chunk's smallest g too); L: launch settings."""
    B, T, H, HV, K, V, eda, BT, NT = _geometry(q, v, e, chunk_tokens)
    DT, PREC, tdt = _dot_types(q)
    outs = o, ht, hs, Tm, Qk = _fwd_outputs(q, v, e, chunk_tokens, output_final_state, need_states)
    if not need_states:  # T and Qk only live through the forward (the op returns them absent, as the fake op)
        Tm, Qk = (torch.empty(B * HV, NT, BT, BT, dtype=tdt, device=q.device) for _ in range(2))
    SB, BKC = min(L["SUB_BLOCK"], BT), min(L["PREP_BK"], triton.next_power_of_2(K))
    (W, Ke, Qg, eGN), U0 = _key_buffers(q, B * HV, NT, BT, K), q.new_empty(B * HV, NT, BT, V, dtype=tdt)
    gmin = q.new_empty(B * HV * NT, dtype=torch.float32) if check_g else Tm
    _eda_prep_kernel[(NT, B * HV)](
        q, k, v, e if eda else k, g, beta, gamma if eda else beta, Tm, Qk, W, U0, Ke, Qg, eGN, gmin, scale, T, NT,
        H=H, HV=HV, K=K, V=V, BT=BT, BKC=BKC, BVP=triton.next_power_of_2(min(64, V) if eda else V),
        SB=SB, NLVL=(BT // SB).bit_length() - 1, AB=_anchor_rows(eda, BT), EDA=eda, SCALAR_G=scalar_g,
        CHECK_G=check_g, REUSE=bool(L["PREP_REUSE"]) and BKC >= K, DT=DT, PREC=PREC, num_warps=L["PREP_WARPS"],
        num_stages=L["PREP_STAGES"], maxnreg=(L["PREP_MAXNREG"] or None) if eda else None)
    BK, BV, warps = _walk_blocks(L, "FWD", K, V, B * HV)
    args = (W, U0, Ke, Qg, eGN, Qk, h0 if h0 is not None else q, o, ht if output_final_state else o,
            hs if need_states else o, T, NT)
    flags = dict(HV=HV, K=K, V=V, BT=BT, BV=BV, HAS_H0=h0 is not None, STORE_HT=output_final_state,
                 STORE_HS=need_states)
    if _gluon_walk(L, q, eda, BT, K, V, BV):
        walk_gluon.eda_fwd_ws_kernel[(V // BV, B * HV)](*args, **flags, **_gluon_workers(BV))
    else:
        _eda_fwd_kernel[(triton.cdiv(V, BV), B * HV)](*args, **flags, BK=BK, EDA=eda, LATE=BV <= L["FWD_LATE_BV"],
                                                      DT=DT, PREC=PREC, num_warps=warps, num_stages=L["FWD_STAGES"])
    if check_g and (low := gmin.min().item()) < G_MIN:  # after every launch: the GPU never idles for the sync
        raise ValueError(f"eda_triton: channel-wise log decay g has values below {G_MIN} (min {low:.3g}); the "
                         "kernels' anchored decay factors would overflow. Bound it with eda.safe_gate / eda.kda_gate, "
                         "or use a per-head g [B, T, HV] (exact for any g)")
    return outs


def _bwd_grads(q, k, v, e, g, beta, gamma):
    """The backward op's gradients, each of its input's shape and dtype (one writer a row rounds once; the op's g is
    channel-wise), absent ones empty. Real and fake op, as _fwd_outputs."""
    # new_empty, not empty_like: contiguous whatever the input's layout (the fake op sees the caller's strides)
    return tuple(_absent(q) if x is None else x.new_empty(x.shape) for x in (q, k, v, e, g, beta, gamma))


def _bwd(q, k, v, e, g, beta, gamma, scale, hs, Tm, Qk, do, dht, need_dh0, chunk_tokens, scalar_g, L):
    B, T, H, HV, K, V, eda, BT, NT = _geometry(q, v, e, chunk_tokens)
    BK, BVd, warps = _walk_blocks(L, "DH", K, V, B * HV)
    DT, PREC, _ = _dot_types(q)
    # (3) the state gradient at every chunk end, walking backwards on operands prepared in parallel
    dhs, dh0 = torch.empty_like(hs), q.new_empty(B, HV, K, V, dtype=torch.float32) if need_dh0 else _absent(q)
    (W2, Kg, Qg, eGN), M = _key_buffers(q, B * HV, NT, BT, K), torch.empty_like(Tm)
    _eda_dh_prep_kernel[(NT, B * HV)](
        q, k, e if eda else k, g, beta, gamma if eda else beta, Tm, Qk, W2, M, Qg, Kg, eGN, scale, T, NT,
        H=H, HV=HV, K=K, V=V, BT=BT, BKC=min(L["DH_PREP_BK"], BK), EDA=eda, DT=DT, PREC=PREC, num_warps=L["PREP_WARPS"],
        num_stages=L["PREP_STAGES"])
    _eda_bwd_dh_kernel[(triton.cdiv(V, BVd), B * HV)](
        W2, M, Qg, Kg, eGN, do, dht if dht is not None else do, dhs, dh0 if need_dh0 else dhs, T, NT,
        HV=HV, K=K, V=V, BT=BT, BK=BK, BV=BVd, EDA=eda, HAS_DHT=dht is not None, STORE_DH0=need_dh0, DT=DT, PREC=PREC,
        num_warps=warps, num_stages=L["DH_STAGES"])
    del W2, M, Qg, Kg, eGN  # before the gradient buffers: the peak stays the gradient phase's
    _, BV = _blocks(K, V, _bwd_width(L, eda, BK))  # (5) every chunk's input gradients, in parallel
    dq, dk, dv, de, dg, dbeta, dgamma = _bwd_grads(q, k, v, e, g, beta, gamma)
    # grouped value heads: dq, dk per value head, each group's summed after (no atomic adds: the same bits every run)
    dqv, dkv = (dq, dk) if HV == H else (x.new_empty(B, T, HV, K) for x in (q, k))
    compiled = _eda_bwd_kernel[(NT, B * HV)](
        q, k, v, e if eda else k, g, beta, gamma if eda else beta, Tm, Qk, hs, dhs, do, dqv, dkv, dv,
        de if eda else dq, dg, dbeta, dgamma if eda else dbeta, scale, T, NT, H=H, HV=HV, K=K, V=V, BT=BT, BK=BK,
        BV=BV, AB=_anchor_rows(eda, BT), EDA=eda, SCALAR_G=scalar_g, WR=_write_rows(L, eda, BT), DT=DT, PREC=PREC,
        num_warps=L["BWD_WARPS"], num_stages=L["BWD_STAGES"])
    _ask_carveout(compiled, L["BWD_CARVEOUT"])
    for x, out in ((dqv, dq), (dkv, dk)) if HV > H else ():  # at the copy bandwidth (torch's strided add: half)
        _group_sum_kernel[(triton.cdiv(B * T * H, 32),)](x, out, B * T * H, G=HV // H, K=K, BK=BK, BN=32)
    return dq, dk, dv, de, dg, dbeta, dgamma, dh0


def _decode(q, k, v, e, g, beta, gamma, state, scale):
    """The decode kernel's launch: o [B, T, HV, V] (v's dtype); `state` updated in place."""
    (B, T, H, K), (HV, V) = q.shape, v.shape[2:]
    eda = e is not None
    o = torch.empty(B, T, HV, V, dtype=v.dtype, device=v.device)
    BK, BV = _blocks(K, V, 32 if K <= 128 else 16)
    _eda_decode_kernel[(B * HV * triton.cdiv(V, BV),)](
        q, k, v, e if eda else k, g, beta, gamma if eda else beta, state, state, o, scale, T, H=H, HV=HV, K=K, V=V,
        BK=BK, BV=BV, EDA=eda, SCALAR_G=g.dim() == 3, num_warps=2)  # 2: 2-3% faster than 4 at B = 64, 256
    return o


CONV_BT, CONV_BWD_BT, CONV_BWD_WARPS = 64, 32, 4  # rows per program of the short-conv kernels (fwd, bwd)


def _conv_segments(heads):
    """[q | k | v] channel segments of the conv input: (first channel, heads, head width, L2-normalized)."""
    H, HV, K, V = heads
    return ((0, H, K, True), (H * K, H, K, True), (2 * H * K, HV, V, False))


def _conv_outputs(u, heads):
    """short_conv's q, k, v, allocated (real and fake op, as _fwd_outputs)."""
    B, T, _ = u.shape
    return tuple(u.new_empty(B, T, nh, width) for _, nh, width, _ in _conv_segments(heads))


def _conv_fwd(u, w, heads, eps):
    (B, T, _), outs = u.shape, _conv_outputs(u, heads)
    for (c0, nh, width, norm), y in zip(_conv_segments(heads), outs):
        _conv_fwd_kernel[(triton.cdiv(T, CONV_BT), B * nh)](
            u, w, y, T, u.stride(0), u.stride(1), c0, eps, NH=nh, W=width, KS=w.shape[-1], BT=CONV_BT,
            BW=triton.next_power_of_2(width), NORM=norm, num_warps=4)
    return outs


def _conv_bwd(u, w, grads, heads, eps):
    (B, T, C), KS, NTB = u.shape, w.shape[-1], triton.cdiv(u.shape[1], CONV_BWD_BT)
    dz, dwp = (torch.empty(*shape, dtype=torch.float32, device=u.device) for shape in ((B, T, C), (B * NTB, C, KS)))
    for (c0, nh, width, norm), dy in zip(_conv_segments(heads), grads):
        _conv_bwd_dz_kernel[(NTB, B * nh)](
            u, w, dy, dz, dwp, T, NTB, u.stride(0), u.stride(1), c0, C, eps, NH=nh, W=width, KS=KS,
            KSP=triton.next_power_of_2(KS), BT=CONV_BWD_BT, BW=triton.next_power_of_2(width), NORM=norm,
            num_warps=CONV_BWD_WARPS)
    du = torch.empty(B, T, C, dtype=u.dtype, device=u.device)
    _conv_bwd_du_kernel[(triton.cdiv(T, 32), B, triton.cdiv(C, 128))](dz, w, du, T, C, KS=KS, BT=32, BC=128)
    return du, dwp.sum(0)


# ----------------------------------------------------------------------------------------------------
# PyTorch operators (torch.library.custom_op), so that torch.compile traces through the kernels. The ops trust their
# inputs (the entry points below check them) and make them contiguous whatever layout a compiler hands them.

Tensor, Opt = torch.Tensor, Optional[torch.Tensor]


@torch.library.custom_op("nanoeda::eda_chunk_fwd", mutates_args=())
def _eda_chunk_fwd(q: Tensor, k: Tensor, v: Tensor, e: Opt, g: Tensor, beta: Tensor, gamma: Opt, h0: Opt,
                   scale: float, chunk_tokens: int, scalar_g: bool, output_final_state: bool, need_states: bool,
                   check_g: bool, recompute_states: bool, launch: List[int]
                   ) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """The chunked forward (Eq. chunk_wise_eda) on a channel-wise g (scalar_g: columns equal, the exact per-head path):
    (o, final state, S_0 of every chunk, T, Qk), absent ones empty; recompute_states: the backward reruns it."""
    q, k, v, e, g, beta, gamma, h0 = (None if x is None else x.contiguous() for x in (q, k, v, e, g, beta, gamma, h0))
    return _fwd(q, k, v, e, g, beta, gamma, scale, h0, output_final_state, need_states, chunk_tokens, scalar_g,
                check_g, dict(zip(LAUNCH, launch)))


@_eda_chunk_fwd.register_fake
def _(q, k, v, e, g, beta, gamma, h0, scale, chunk_tokens, scalar_g, output_final_state, need_states, check_g,
      recompute_states, launch):
    return _fwd_outputs(q, v, e, chunk_tokens, output_final_state, need_states)


@torch.library.custom_op("nanoeda::eda_chunk_bwd", mutates_args=())
def _eda_chunk_bwd(q: Tensor, k: Tensor, v: Tensor, e: Opt, g: Tensor, beta: Tensor, gamma: Opt, hs: Tensor,
                   Tm: Tensor, Qk: Tensor, do: Tensor, dht: Opt, scale: float, chunk_tokens: int, scalar_g: bool,
                   need_dh0: bool, launch: List[int]
                   ) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    """Gradients of the chunked forward: _bwd_grads' buffers and dh0 (fp32), absent ones empty; dg is channel-wise."""
    q, k, v, g, beta, hs, Tm, Qk, do = (x.contiguous() for x in (q, k, v, g, beta, hs, Tm, Qk, do))
    e, gamma, dht = (None if x is None else x.contiguous() for x in (e, gamma, dht))
    return _bwd(q, k, v, e, g, beta, gamma, scale, hs, Tm, Qk, do, dht, need_dh0, chunk_tokens, scalar_g,
                dict(zip(LAUNCH, launch)))


@_eda_chunk_bwd.register_fake
def _(q, k, v, e, g, beta, gamma, hs, Tm, Qk, do, dht, scale, chunk_tokens, scalar_g, need_dh0, launch):
    dh0 = q.new_empty(q.shape[0], v.shape[2], q.shape[3], v.shape[3], dtype=torch.float32) if need_dh0 else _absent(q)
    return (*_bwd_grads(q, k, v, e, g, beta, gamma), dh0)


def _eda_chunk_setup(ctx, inputs, output):
    (q, k, v, e, g, beta, gamma, h0, scale, chunk_tokens, scalar_g, output_final_state, need_states, _, recompute,
     launch) = inputs
    _, _, hs, Tm, Qk = output
    # no zero gradients for outputs the loss did not reach: hs's alone would be ~1 GB, written and never read
    ctx.set_materialize_grads(False)
    ctx.save_for_backward(q, k, v, e, g, beta, gamma, h0 if recompute else None, hs, Tm, Qk)
    ctx.meta = (scale, chunk_tokens, scalar_g, output_final_state, need_states, recompute,
                None if h0 is None else h0.dtype, launch)


def _eda_chunk_backward(ctx, do, dht, *_):
    q, k, v, e, g, beta, gamma, h0, hs, Tm, Qk = ctx.saved_tensors
    scale, chunk_tokens, scalar_g, output_final_state, need_states, recompute, h0_dtype, launch = ctx.meta
    if recompute:  # the forward again, this time storing what the backward reads (one layer's worth at a time)
        _, _, hs, Tm, Qk = torch.ops.nanoeda.eda_chunk_fwd(q, k, v, e, g, beta, gamma, h0, scale, chunk_tokens,
                                                           scalar_g, False, True, False, False, launch)
    elif not need_states:
        raise RuntimeError("eda_triton: backward through a forward that ran without gradients (call it with "
                           "grad mode on and an input that requires grad)")
    if do is None:  # the loss used only the final state
        do = torch.zeros_like(v)  # o's shape and dtype
    dq, dk, dv, de, dg, dbeta, dgamma, dh0 = torch.ops.nanoeda.eda_chunk_bwd(
        q, k, v, e, g, beta, gamma, hs, Tm, Qk, do, dht if output_final_state else None, scale, chunk_tokens, scalar_g,
        h0_dtype is not None, launch)
    return (dq, dk, dv, None if e is None else de, dg, dbeta, None if gamma is None else dgamma,  # inputs' dtypes
            None if h0_dtype is None else dh0.to(h0_dtype), None, None, None, None, None, None, None, None)


_eda_chunk_fwd.register_autograd(_eda_chunk_backward, setup_context=_eda_chunk_setup)


@torch.library.custom_op("nanoeda::eda_decode_", mutates_args=("state",))
def _eda_decode_(q: Tensor, k: Tensor, v: Tensor, e: Opt, g: Tensor, beta: Tensor, gamma: Opt, state: Tensor,
                 scale: float) -> Tensor:
    """The fused recurrent step(s) of decoding: o, with the fp32 state updated in place."""
    q, k, v, e, g, beta, gamma = (None if x is None else x.contiguous() for x in (q, k, v, e, g, beta, gamma))
    return _decode(q, k, v, e, g, beta, gamma, state, scale)


@_eda_decode_.register_fake
def _(q, k, v, e, g, beta, gamma, state, scale):
    return torch.empty(*q.shape[:2], *v.shape[2:], dtype=v.dtype, device=v.device)


@torch.library.custom_op("nanoeda::short_conv_fwd", mutates_args=())
def _short_conv_fwd(u: Tensor, w: Tensor, H: int, HV: int, K: int, V: int, eps: float) -> Tuple[Tensor, Tensor, Tensor]:
    """short_conv's forward on u [B, T, C] (any row stride) and w [C, KS]: q, k, v."""
    return _conv_fwd(u if u.stride(-1) == 1 else u.contiguous(), w.contiguous(), (H, HV, K, V), eps)


@_short_conv_fwd.register_fake
def _(u, w, H, HV, K, V, eps):
    return _conv_outputs(u, (H, HV, K, V))


@torch.library.custom_op("nanoeda::short_conv_bwd", mutates_args=())
def _short_conv_bwd(u: Tensor, w: Tensor, dq: Tensor, dk: Tensor, dv: Tensor, H: int, HV: int, K: int, V: int,
                    eps: float) -> Tuple[Tensor, Tensor]:
    """short_conv's backward: du [B, T, C] (u's dtype) and dw [C, KS] (fp32)."""
    u = u if u.stride(-1) == 1 else u.contiguous()
    return _conv_bwd(u, w.contiguous(), [d.contiguous() for d in (dq, dk, dv)], (H, HV, K, V), eps)


@_short_conv_bwd.register_fake
def _(u, w, dq, dk, dv, H, HV, K, V, eps):
    return u.new_empty(u.shape), w.new_empty(w.shape, dtype=torch.float32)


def _short_conv_setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs[:2])  # u, w
    ctx.meta = inputs[2:]  # H, HV, K, V, eps


def _short_conv_backward(ctx, dq, dk, dv):
    u, w = ctx.saved_tensors
    du, dw = torch.ops.nanoeda.short_conv_bwd(u, w, dq, dk, dv, *ctx.meta)
    return du, dw.to(w.dtype), None, None, None, None, None


_short_conv_fwd.register_autograd(_short_conv_backward, setup_context=_short_conv_setup)


# ----------------------------------------------------------------------------------------------------
# Entry points: checks on the host (a ValueError, never a Triton crash), then the ops


def eda_fused(q, k, v, e, g, beta, gamma, scale=None, initial_state=None, output_final_state=False, chunk_size=None,
              check_g=True, launch=None, recompute_states=False):
    """Chunked fused EDA (Eq. ed; Sec. 3.4): eda.eda_recurrent's arguments, results (final state fp32), differentiable
    in every tensor input. chunk_size: a power of 2, chunk_size * (2 if e else 1) >= 16 (default CHUNK_TOKENS; 32 fits
    Hopper with launch FWD_STAGES=2, DH_STAGES=2). check_g: reject a channel-wise g below G_MIN (a device sync after the
    forward); False only where the gate bounds g. launch: changes to LAUNCH by name. recompute_states: keep no chunk
    states (S_0, T, Qk: ~14 KB a token at K = V = 128, HV = 6) for the backward."""
    _check_kernel_inputs(q, k, v, e, scale)
    if q.device.type == "cpu" and q.dtype != torch.float32:
        # the interpreter's bf16 tl.dot is wrong (errors ~1e10, _attn_decode), and half inputs take bf16 products
        raise ValueError(f"eda_triton: under TRITON_INTERPRET=1 (CPU) the chunk kernels take float32 inputs, got "
                         f"{q.dtype}: the interpreter's bf16 products are wrong; pass float32, or use eda_chunk")
    (B, T, _, K), (HV, V) = q.shape, v.shape[2:]
    chunk_size = CHUNK_TOKENS if chunk_size is None else chunk_size
    launch = launch_settings(launch)
    if B * HV > 65535:  # grid axis 1 of the chunk kernels
        raise ValueError(f"eda_triton: B * HV = {B * HV} exceeds 65535; split the batch")
    if (not isinstance(chunk_size, int) or chunk_size & (chunk_size - 1)
            or chunk_size * (2 if e is not None else 1) < 16):
        raise ValueError(f"eda_triton: chunk_size must be a power of 2 giving >= 16 sub-steps, got {chunk_size!r}")
    L = dict(zip(LAUNCH, launch))  # 64-row walk steps at one stage: NaNs, illegal accesses (notes/kernel.md)
    if chunk_size * (2 if e is not None else 1) >= 64 and min(L["FWD_STAGES"], L["DH_STAGES"]) < 2:
        raise ValueError(f"eda_triton: {chunk_size}-token chunks take 64-row walk steps, which compute NaNs or fault "
                         "at one stage (triton 3.6, Hopper): launch FWD_STAGES and DH_STAGES must be >= 2")
    scale = K ** -0.5 if scale is None else float(scale)
    if T == 0:  # no outputs, the state as it was
        h0 = q.new_zeros(B, HV, K, V, dtype=torch.float32) if initial_state is None else initial_state.float().clone()
        return v.new_zeros(v.shape), (h0 if output_final_state else None)
    scalar_g = g.dim() == 3  # GDN: one decay per head, the same on every key channel (an exact kernel path)
    gx = g.unsqueeze(-1).expand(*g.shape, K) if scalar_g else g
    # the backward's states are stored only when a gradient can flow (the forward op cannot ask autograd)
    grad = torch.is_grad_enabled() and any(
        x is not None and x.requires_grad for x in (q, k, v, e, g, beta, gamma, initial_state))
    need_states = grad and not recompute_states
    # contiguous here, not only inside the op: what autograd saves for the backward is then the copy
    q, k, v, gx, beta, e, gamma, h0 = (None if x is None else x.contiguous()
                                       for x in (q, k, v, gx, beta, e, gamma, initial_state))
    o, ht, _, _, _ = torch.ops.nanoeda.eda_chunk_fwd(q, k, v, e, gx, beta, gamma, h0, scale, chunk_size, scalar_g,
                                                     output_final_state, need_states, bool(check_g) and not scalar_g,
                                                     grad and bool(recompute_states), launch)
    return o, (ht if output_final_state else None)


def eda_decode(q, k, v, e, g, beta, gamma, state, scale=None, inplace=True):
    """Fused recurrent EDA for decoding (Eq. ed token by token): a few tokens ([B, T, ...]) against `state` [B, HV,
    K, V] (fp32) in HBM: (o, new_state; `state` itself, updated, if inplace). No autograd; eda_triton_decode checks."""
    _check_kernel_inputs(q, k, v, e, scale)
    if state.dtype != torch.float32:
        raise ValueError(f"eda_decode: state must be float32, got {state.dtype}")
    if not state.is_contiguous():
        raise ValueError("eda_decode: state must be contiguous (it is updated in place)")
    scale = q.shape[-1] ** -0.5 if scale is None else float(scale)
    out_state = state if inplace else state.clone()
    return torch.ops.nanoeda.eda_decode_(q, k, v, e, g, beta, gamma, out_state, scale), out_state


def short_conv(u, weight, heads, eps=1e-6):
    """model.la_conv fused, fp32 math: u [B, T, C = 2 H K + HV V] = [q | k | v], weight [C, 1, KS] -> causal depthwise
    conv -> SiLU -> q, k [B, T, H, K] L2-normalized (eps as F.normalize), v [B, T, HV, V]; heads = (H, HV, K, V)."""
    H, HV, K, V = heads
    if u.dim() != 3 or u.shape[-1] != 2 * H * K + HV * V or u.stride(-1) != 1:
        raise ValueError(f"short_conv: u must be [B, T, 2*H*K + HV*V = {2 * H * K + HV * V}] with unit channel "
                         f"stride, got shape {tuple(u.shape)} strides {u.stride()}")
    if weight.dim() != 3 or weight.shape[:2] != (u.shape[-1], 1):
        raise ValueError(f"short_conv: weight must be [{u.shape[-1]}, 1, KS], got {tuple(weight.shape)}")
    if u.dtype not in _DTYPES:
        raise ValueError(f"short_conv: u has dtype {u.dtype}; float32, bfloat16 or float16")
    if _device_problem(u.device):
        raise ValueError(f"short_conv: {_device_problem(u.device)}")
    return torch.ops.nanoeda.short_conv_fwd(u, weight.reshape(weight.shape[0], weight.shape[-1]), H, HV, K, V,
                                            float(eps))


# ----------------------------------------------------------------------------------------------------
# Split-KV attention decode (flash-decoding): so that few rows (B=1) fill the GPU, one program per (batch, KV head,
# split of the cache) reads K/V once for the head's G queries; a second launch merges the splits by log-sum-exp.

ATTN_DECODE_BLOCK_N = 64         # keys per inner step of a split program
ATTN_DECODE_MAX_SPLITS = 128     # bounds the partial buffers and the merge's width
ATTN_DECODE_PROGRAMS = None      # programs to aim for (None: 4 per SM on CUDA, 8 elsewhere)


# pos, the split length and the split count vary from call to call: no recompiling for their values
@triton.jit(do_not_specialize=["pos_int", "SPLIT_LEN", "S", "L"])
def _attn_decode_split_kernel(q, k, v, o_part, lse_part, pos_ptr, pos_int, scale_log2e, SPLIT_LEN, S, L, sq_b, sq_h,
                              sk_b, sk_h, sk_t, sv_b, sv_h, sv_t, NKV: tl.constexpr, G: tl.constexpr, HD: tl.constexpr,
                              BLOCK_G: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_N: tl.constexpr,
                              POS_IN_MEMORY: tl.constexpr, PRECISION: tl.constexpr, DOT_UPCAST: tl.constexpr):
    """Program (split s, batch b x KV head h): online softmax of KV head h's G queries over split s's keys <= pos: the
    normalized partial output (fp32) and its log2-sum-exp2; a split wholly after pos stores 0 and -inf (no weight)."""
    i_s, i_bh = tl.program_id(0), tl.program_id(1)
    i_b, i_h = i_bh // NKV, i_bh % NKV
    # the valid length is read on the device when pos lives there (a CUDA graph replays this at every pos)
    n = (tl.load(pos_ptr) + 1).to(tl.int32) if POS_IN_MEMORY else pos_int + 1
    n = tl.minimum(n, L)  # never past the cache (the host checks pos; this keeps a bad one from reading out of it)
    rg, rd = tl.arange(0, BLOCK_G), tl.arange(0, BLOCK_D)
    mg, md = rg < G, rd < HD
    qb = tl.load(q + i_b * sq_b + (i_h * G + rg)[:, None] * sq_h + rd[None, :], mask=mg[:, None] & md[None, :],
                 other=0.0)
    if DOT_UPCAST:
        qb = qb.to(tl.float32)
    m_i = tl.full([BLOCK_G], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_G], tl.float32)
    acc = tl.zeros([BLOCK_G, BLOCK_D], tl.float32)
    start = i_s * SPLIT_LEN
    end = tl.minimum(start + SPLIT_LEN, n)  # <= start for a split past pos: the loop does not run
    kb, vb = k + i_b * sk_b + i_h * sk_h, v + i_b * sv_b + i_h * sv_h
    for t0 in range(start, end, BLOCK_N):
        rt = t0 + tl.arange(0, BLOCK_N)
        mt = rt < end
        # masked loads: slots after pos may hold anything (NaN included) and are never read
        kt = tl.load(kb + rt[None, :] * sk_t + rd[:, None], mask=mt[None, :] & md[:, None], other=0.0)
        if DOT_UPCAST:
            kt = kt.to(tl.float32)
        s = tl.dot(qb, kt, input_precision=PRECISION) * scale_log2e  # [BLOCK_G, BLOCK_N], fp32, log2 units
        s = tl.where(mt[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))  # finite: every step has at least one valid key
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        vt = tl.load(vb + rt[:, None] * sv_t + rd[None, :], mask=mt[:, None] & md[None, :], other=0.0)
        pv = p.to(vt.dtype)  # P V on the tensor cores in the cache's dtype, as flash attention does
        if DOT_UPCAST:
            pv, vt = pv.to(tl.float32), vt.to(tl.float32)
        acc = acc * alpha[:, None] + tl.dot(pv, vt, input_precision=PRECISION)
        m_i = m_new
    some = l_i > 0
    out = tl.where(some[:, None], acc / tl.where(some, l_i, 1.0)[:, None], 0.0)
    lse = tl.where(some, m_i + tl.log2(tl.where(some, l_i, 1.0)), float("-inf"))
    row = i_bh * G + rg  # o_part [B * NKV * G, S, HD], lse_part [B * NKV * G, S]
    tl.store(o_part + (row[:, None] * S + i_s) * HD + rd[None, :], out, mask=mg[:, None] & md[None, :])
    tl.store(lse_part + row * S + i_s, lse, mask=mg)


@triton.jit(do_not_specialize=["S"])
def _attn_decode_merge_kernel(o_part, lse_part, o, so_r, S, HD: tl.constexpr, BLOCK_S: tl.constexpr,
                              BLOCK_D: tl.constexpr):
    """Program r (one query row): o = sum_s 2^(lse_s - max) o_s / sum_s 2^(lse_s - max)."""
    r = tl.program_id(0)
    rs, rd = tl.arange(0, BLOCK_S), tl.arange(0, BLOCK_D)
    ms, md = rs < S, rd < HD
    lse = tl.load(lse_part + r * S + rs, mask=ms, other=float("-inf"))
    w = tl.exp2(lse - tl.max(lse, 0))  # split 0 always holds key 0, so the max is finite
    part = tl.load(o_part + (r * S + rs[:, None]) * HD + rd[None, :], mask=ms[:, None] & md[None, :], other=0.0)
    out = tl.sum(w[:, None] * part, 0) / tl.sum(w, 0)
    tl.store(o + r * so_r + rd, out.to(o.dtype.element_ty), mask=md)


def attention_decode_problem(q, k, v, pos):
    """Why attention_decode cannot take these inputs (a sentence), or None."""
    if not all(isinstance(x, torch.Tensor) for x in (q, k, v)):
        return "q, k and v must be tensors"
    if k.dim() != 4 or v.shape != k.shape:
        return f"k and v must both be [B, n_kv_head, max_len, head_dim], got {tuple(k.shape)} and {tuple(v.shape)}"
    B, nkv, L, hd = k.shape
    if q.dim() == 4 and q.shape[2] != 1:
        return f"q must hold one query per head ([B, n_head, 1, head_dim]), got {tuple(q.shape)}"
    if q.dim() not in (3, 4) or q.shape[0] != B or q.shape[-1] != hd:
        return f"q must be [B, n_head, 1, head_dim] with B = {B} and head_dim = {hd}, got {tuple(q.shape)}"
    if q.shape[1] % nkv:
        return f"n_head = {q.shape[1]} is not a multiple of n_kv_head = {nkv}"
    if q.dtype not in _DTYPES or k.dtype != q.dtype or v.dtype != q.dtype:
        return (f"q, k, v must share one dtype of float32, bfloat16, float16; got {q.dtype}, {k.dtype}, {v.dtype}")
    if head_dim_problem(hd):
        return f"head_dim = {hd} {head_dim_problem(hd)}"
    if q.device != k.device or v.device != k.device:
        return f"q, k, v must be on one device, got {q.device}, {k.device}, {v.device}"
    if _device_problem(q.device):
        return _device_problem(q.device)
    if k.stride(-1) != 1 or v.stride(-1) != 1:
        return "the cache's k and v must be contiguous in head_dim (stride 1 in the last dim)"
    if isinstance(pos, torch.Tensor):
        if pos.numel() != 1 or pos.dtype not in (torch.int32, torch.int64) or pos.device != q.device:
            return (f"a tensor pos must be one int32/int64 element on {q.device}, got {pos.dtype} "
                    f"{tuple(pos.shape)} on {pos.device}")
    elif isinstance(pos, bool) or not isinstance(pos, int) or not 0 <= pos < L:
        return f"pos must be an int in [0, {L}) (the cache's max_len) or a device tensor, got {pos!r}"
    return None


def _attn_decode_splits(n_keys, rows, device, block_n):
    """(number of splits, keys per split, a multiple of block_n) for n_keys keys and rows = B * n_kv_head."""
    target = ATTN_DECODE_PROGRAMS
    if target is None:
        target = 4 * torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 8
    blocks = triton.cdiv(n_keys, block_n)
    splits = max(1, min(triton.cdiv(target, rows), blocks, ATTN_DECODE_MAX_SPLITS))
    split_len = triton.cdiv(blocks, splits) * block_n
    return triton.cdiv(n_keys, split_len), split_len


def attention_decode(q, k, v, pos, scale=None, split_len=None):
    """Softmax attention of one query per head against a KV cache, split across the cached sequence: q [B, n_head, 1,
    head_dim] (or [B, n_head, head_dim]); k, v [B, n_kv_head, max_len, head_dim] (model.py's cache; GQA: query head i
    reads KV head i // (n_head / n_kv_head)); the query at pos sees slots 0..pos. pos: an int, or a one-element int
    tensor on q's device (the CUDA-graph path: the launch covers all of max_len, splits past pos store an empty
    partial). scale: default 1 / sqrt(head_dim), as SDPA. split_len: keys per split (a multiple of ATTN_DECODE_BLOCK_N;
    default: enough to fill the GPU). fp32 softmax; returns q's shape and dtype."""
    if problem := attention_decode_problem(q, k, v, pos):
        raise ValueError(f"attention_decode: {problem}")
    B, nkv, L, hd = k.shape
    block_n = ATTN_DECODE_BLOCK_N
    if split_len is not None:
        if split_len < 1 or split_len % block_n:
            raise ValueError(f"attention_decode: split_len must be a positive multiple of {block_n}, got {split_len}")
        S = triton.cdiv(L if isinstance(pos, torch.Tensor) else pos + 1, split_len)
        if S > 4 * ATTN_DECODE_MAX_SPLITS:
            raise ValueError(f"attention_decode: split_len={split_len} gives {S} splits, more than "
                             f"{4 * ATTN_DECODE_MAX_SPLITS}")
    scale = hd ** -0.5 if scale is None else float(scale)
    if isinstance(pos, torch.Tensor):  # the graphed step's path: an operator torch.compile traces through
        return torch.ops.nanoeda.attention_decode_at(q, k, v, pos, scale, split_len or 0)
    return _attn_decode(q, k, v, pos, scale, split_len)


def _attn_decode(q, k, v, pos, scale, split_len):
    """attention_decode's launches, on checked inputs (split_len None or 0: chosen here)."""
    B, nkv, L, hd = k.shape
    nh = q.shape[1]
    G = nh // nkv
    static = isinstance(pos, torch.Tensor)
    n_keys = L if static else pos + 1
    split_len = split_len or _attn_decode_splits(n_keys, B * nkv, q.device, ATTN_DECODE_BLOCK_N)[1]
    S = triton.cdiv(n_keys, split_len)
    q3 = q.reshape(B, nh, hd)  # a view for [B, nh, 1, hd] of any strides in dims 0, 1
    q3 = q3 if q3.stride(-1) == 1 else q3.contiguous()
    o_part = torch.empty(B * nh, S, hd, device=q.device, dtype=torch.float32)
    lse_part = torch.empty(B * nh, S, device=q.device, dtype=torch.float32)
    # tl.dot needs tiles of at least 16: the G query rows are padded (decode is bound by reading K/V anyway)
    BLOCK_G = max(16, triton.next_power_of_2(G))
    BLOCK_D = triton.next_power_of_2(hd)
    # Triton's interpreter (3.9) multiplies bf16 tiles wrongly in tl.dot (errors ~1e10): under it the operands are
    # upcast to fp32 after the same roundings (bf16 K, V and P), so the CPU checks the same math
    upcast = q.device.type == "cpu" and q.dtype == torch.bfloat16
    _attn_decode_split_kernel[(S, B * nkv)](
        q3, k, v, o_part, lse_part, pos if static else q3, 0 if static else pos, scale * 1.4426950408889634,
        split_len, S, L, q3.stride(0), q3.stride(1), *k.stride()[:3], *v.stride()[:3],
        NKV=nkv, G=G, HD=hd, BLOCK_G=BLOCK_G, BLOCK_D=BLOCK_D, BLOCK_N=ATTN_DECODE_BLOCK_N, POS_IN_MEMORY=static,
        PRECISION="ieee" if q.dtype == torch.float32 or upcast else "tf32", DOT_UPCAST=upcast, num_warps=4)
    o = torch.empty(B, nh, hd, device=q.device, dtype=q.dtype)
    _attn_decode_merge_kernel[(B * nh,)](o_part, lse_part, o, hd, S, HD=hd,
                                         BLOCK_S=triton.next_power_of_2(S), BLOCK_D=BLOCK_D, num_warps=4)
    return o.view(q.shape)


@torch.library.custom_op("nanoeda::attention_decode_at", mutates_args=())
def _attention_decode_at(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, pos: torch.Tensor, scale: float,
                         split_len: int) -> torch.Tensor:
    """attention_decode with pos a device tensor (split_len 0: chosen from the shapes)."""
    return _attn_decode(q, k, v, pos, scale, split_len)


@_attention_decode_at.register_fake
def _(q, k, v, pos, scale, split_len):
    return q.new_empty(q.shape)
