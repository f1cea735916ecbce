"""
The forward chunk walk (launch (2) of notes/chunk_form.md §4, Eq. chunk_wise_eda) with warps in roles, in Gluon.

kernel.py's Triton walk runs one instruction stream: each step's state chain (U = U_0 - W S, S = D S + Ke^T U), the
state's store for the backward and the output o = Qg S + Qk U take turns on the same warps, one warp per scheduler.
Here the chain runs on 4 warps of its own, fed by a ring of cp.async copies (W, Ke, U_0, exp(G_C)), and hands each
step's S and U through a ring of shared-memory slots (mbarriers: `ready` when filled, `empty` when read) to worker warps
that store S and form o. At 64 columns the chain holds S^T, whose rows a warp owns, so its products need no shared
memory between them (`_chain_t`).
EDA's 16-token chunks (BT = 32 rows, outputs on the 16 write rows), K = 128, bf16 operands, V-blocks of BV dividing V.
kernel._gluon_walk runs it on Hopper at K = V = 128, as tested (notes/kernel.md, "The forward walk in Gluon, and the
next design"); the CPU interpreter and every other case run the Triton walk, which tests hold it to.
"""
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy, mma_v2
from triton.experimental.gluon.language.nvidia.hopper import mbarrier

NS = gl.constexpr(3)  # slots of every ring: the operands' (2 chunks in flight) and the S, U handed to the workers


@gluon.jit
def _ring_copy(ring, X, off, base0, i, NT, SX: gl.constexpr, NS: gl.constexpr):
    """Start copying chunk i's tile of X (the last chunk's past the end) into its ring's slot i % NS (not committed)."""
    async_copy.async_copy_global_to_shared(ring.index(i % NS), X + (base0 + gl.minimum(i, NT - 1)) * SX + off)


@gluon.jit
def _chain_fill(w_ring, k_ring, u0_ring, g_ring, Win, Kein, U0in, eGNin, off_k, off_u0, off_g, base0, i, NT,
                K: gl.constexpr, V: gl.constexpr, BT: gl.constexpr, NS: gl.constexpr):
    """The chain's operands of chunk i, W, Ke, U_0 (its V-block) and exp(G_C), as one commit group."""
    _ring_copy(w_ring, Win, off_k, base0, i, NT, BT * K, NS)
    _ring_copy(k_ring, Kein, off_k, base0, i, NT, BT * K, NS)
    _ring_copy(u0_ring, U0in, off_u0, base0, i, NT, BT * V, NS)
    _ring_copy(g_ring, eGNin, off_g, base0, i, NT, K, NS)
    async_copy.commit_group()


@gluon.jit
def _workers_fill(q_ring, qk_ring, Qgin, Qkin, off_q, off_qk, base0, i, NT, K: gl.constexpr, BT: gl.constexpr,
                  NS: gl.constexpr):
    """The workers' operands of chunk i, Qg's and Qk's write rows, as one commit group."""
    _ring_copy(q_ring, Qgin, off_q, base0, i, NT, BT * K, NS)
    _ring_copy(qk_ring, Qkin, off_qk, base0, i, NT, BT * BT, NS)
    async_copy.commit_group()


@gluon.jit
def _chain_offsets(i_v, K: gl.constexpr, V: gl.constexpr, BT: gl.constexpr, BV: gl.constexpr):
    """The chain's copy offsets: W's and Ke's [BT, K] tiles, U_0's [BT, BV] block, exp(G_C)'s K entries."""
    ld: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
    off_k = (gl.arange(0, BT, layout=gl.SliceLayout(1, ld))[:, None] * K
             + gl.arange(0, K, layout=gl.SliceLayout(0, ld))[None, :])
    VT: gl.constexpr = 8 if BV >= 32 else 4  # U_0's V-block in 16- or 8-byte copies, one tile of 4 warps
    ldu: gl.constexpr = gl.BlockedLayout([1, VT], [32 * VT // BV, BV // VT], [4, 1], [1, 0])
    off_u0 = (gl.arange(0, BT, layout=gl.SliceLayout(1, ldu))[:, None] * V
              + i_v * BV + gl.arange(0, BV, layout=gl.SliceLayout(0, ldu))[None, :])
    return off_k, off_u0, gl.arange(0, K, layout=gl.BlockedLayout([1], [32], [4], [0]))


@gluon.jit
def _chain(Win, U0in, Kein, eGNin, h0, ht, s_buf, u_buf, w_ring, k_ring, u0_ring, g_ring, ready, empty, NT,
           K: gl.constexpr, V: gl.constexpr, BT: gl.constexpr, BV: gl.constexpr, NS: gl.constexpr,
           HAS_H0: gl.constexpr, STORE_HT: gl.constexpr):
    """The state chain on 4 warps, V-blocks under 64 columns: per chunk U = U_0 - W S_0, S_C = exp(G_C) S_0 + Ke^T U;
    S_0 and U to a slot. S [K, BV] is spread over the warps by rows, so both products read it through shared memory."""
    i_v, i_bh = gl.program_id(0), gl.program_id(1)
    mmaW: gl.constexpr = gl.NVMMADistributedLayout(version=[2, 0], warps_per_cta=[2, 2], instr_shape=[16, 8])
    mmaS: gl.constexpr = gl.NVMMADistributedLayout(version=[2, 0], warps_per_cta=[4, 1], instr_shape=[16, 8])
    off_k, off_u0, off_g = _chain_offsets(i_v, K, V, BT, BV)
    ks = gl.arange(0, K, layout=gl.SliceLayout(1, mmaS))
    off_s = ks[:, None] * V + i_v * BV + gl.arange(0, BV, layout=gl.SliceLayout(0, mmaS))[None, :]
    base0 = i_bh.to(gl.int64) * NT
    for i in gl.static_range(NS - 1):
        _chain_fill(w_ring, k_ring, u0_ring, g_ring, Win, Kein, U0in, eGNin, off_k, off_u0, off_g, base0, i, NT,
                    K, V, BT, NS)
    S = gl.zeros([K, BV], gl.float32, mmaS)
    if HAS_H0:
        S = gl.load(h0 + i_bh.to(gl.int64) * K * V + off_s).to(gl.float32)
    for c in range(NT):
        async_copy.wait_group(NS - 2)  # chunk c's copies landed (this thread's)
        gl.thread_barrier()  # everyone's; and every chain warp is done with the slot the next copy overwrites
        _chain_fill(w_ring, k_ring, u0_ring, g_ring, Win, Kein, U0in, eGNin, off_k, off_u0, off_g, base0,
                    c + NS - 1, NT, K, V, BT, NS)
        slot = c % NS
        U0 = u0_ring.index(slot).load(mmaW).to(gl.float32)  # before the wait, not after: 0.379 -> 0.348 ms (H200)
        eGN = g_ring.index(slot).load(gl.SliceLayout(1, mmaS))
        mbarrier.wait(empty.index(slot), ((c // NS) & 1) ^ 1)  # the workers are done with the slot (free at first)
        s_slot, u_slot = s_buf.index(slot), u_buf.index(slot)
        s_slot.store(S.to(gl.bfloat16))  # S_0 rounded once: the product's operand, the store's and the output's
        Wd = w_ring.index(slot).load(gl.DotOperandLayout(0, mmaW, 2))
        U = U0 - mma_v2(Wd, s_slot.load(gl.DotOperandLayout(1, mmaW, 2)), gl.zeros([BT, BV], gl.float32, mmaW))
        u_slot.store(U.to(gl.bfloat16))
        Ud = u_slot.load(gl.DotOperandLayout(1, mmaS, 2))
        KeT = k_ring.index(slot).permute((1, 0)).load(gl.DotOperandLayout(0, mmaS, 2))
        mbarrier.arrive(ready.index(slot), count=1)
        S = S * eGN[:, None] + mma_v2(KeT, Ud, gl.zeros([K, BV], gl.float32, mmaS))
    async_copy.wait_group(0)
    if STORE_HT:
        gl.store(ht + i_bh.to(gl.int64) * K * V + off_s, S)


@gluon.jit
def _chain_t(Win, U0in, Kein, eGNin, h0, ht, s_buf, u_buf, w_ring, k_ring, u0_ring, g_ring, ready, empty, NT,
             K: gl.constexpr, V: gl.constexpr, BT: gl.constexpr, BV: gl.constexpr, NS: gl.constexpr,
             HAS_H0: gl.constexpr, STORE_HT: gl.constexpr):
    """_chain on S^T [BV, K] for 64-column V-blocks, 16 rows a warp, in two key halves (S^T is 64 fp32 registers a
    thread): U^T = U_0^T - S_0^T W^T, S_C^T = S_0^T exp(G_C) + U^T Ke. Each warp's rows of S_0^T and U^T are both the
    accumulator it holds and the A operand of the next product, so the chain's path skips shared memory (the walk
    alone 0.342 -> 0.332 ms at (8, 4096, 3, 6), H200; at 16 columns, 4 warps on 16 rows: 1.37 -> 2.12)."""
    i_v, i_bh = gl.program_id(0), gl.program_id(1)
    KH: gl.constexpr = K // 2
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[2, 0], warps_per_cta=[4, 1], instr_shape=[16, 8])
    A: gl.constexpr = gl.DotOperandLayout(0, mma, 2)
    B: gl.constexpr = gl.DotOperandLayout(1, mma, 2)
    off_k, off_u0, off_g = _chain_offsets(i_v, K, V, BT, BV)
    vs = i_v * BV + gl.arange(0, BV, layout=gl.SliceLayout(1, mma))
    off_s = gl.arange(0, KH, layout=gl.SliceLayout(0, mma))[None, :] * V + vs[:, None]  # S^T[v, k] at S[k, v]
    base0 = i_bh.to(gl.int64) * NT
    for i in gl.static_range(NS - 1):
        _chain_fill(w_ring, k_ring, u0_ring, g_ring, Win, Kein, U0in, eGNin, off_k, off_u0, off_g, base0, i, NT,
                    K, V, BT, NS)
    S0 = gl.zeros([BV, KH], gl.float32, mma)
    S1 = gl.zeros([BV, KH], gl.float32, mma)
    if HAS_H0:
        S0 = gl.load(h0 + i_bh.to(gl.int64) * K * V + off_s).to(gl.float32)
        S1 = gl.load(h0 + i_bh.to(gl.int64) * K * V + KH * V + off_s).to(gl.float32)
    for c in range(NT):
        async_copy.wait_group(NS - 2)
        gl.thread_barrier()
        _chain_fill(w_ring, k_ring, u0_ring, g_ring, Win, Kein, U0in, eGNin, off_k, off_u0, off_g, base0,
                    c + NS - 1, NT, K, V, BT, NS)
        slot = c % NS
        U0T = u0_ring.index(slot).permute((1, 0)).load(mma).to(gl.float32)
        g0 = g_ring.index(slot).slice(0, KH).load(gl.SliceLayout(0, mma))
        g1 = g_ring.index(slot).slice(KH, KH).load(gl.SliceLayout(0, mma))
        mbarrier.wait(empty.index(slot), ((c // NS) & 1) ^ 1)
        S0d, S1d = S0.to(gl.bfloat16), S1.to(gl.bfloat16)
        s_slot = s_buf.index(slot)  # the workers read S_0 [K, BV]: stored transposed
        s_slot.slice(0, KH).permute((1, 0)).store(S0d)
        s_slot.slice(KH, KH).permute((1, 0)).store(S1d)
        w_t = w_ring.index(slot).permute((1, 0))
        WS = mma_v2(gl.convert_layout(S0d, A), w_t.slice(0, KH).load(B), gl.zeros([BV, BT], gl.float32, mma))
        UTd = (U0T - mma_v2(gl.convert_layout(S1d, A), w_t.slice(KH, KH).load(B), WS)).to(gl.bfloat16)
        u_buf.index(slot).permute((1, 0)).store(UTd)
        gl.thread_barrier()  # every chain warp's S_0, U in the slot before one thread arrives
        mbarrier.arrive(ready.index(slot), count=1)
        UA = gl.convert_layout(UTd, A)
        ke = k_ring.index(slot)
        S0 = S0 * g0[None, :] + mma_v2(UA, ke.slice(0, KH, dim=1).load(B), gl.zeros([BV, KH], gl.float32, mma))
        S1 = S1 * g1[None, :] + mma_v2(UA, ke.slice(KH, KH, dim=1).load(B), gl.zeros([BV, KH], gl.float32, mma))
    async_copy.wait_group(0)
    if STORE_HT:
        gl.store(ht + i_bh.to(gl.int64) * K * V + off_s, S0)
        gl.store(ht + i_bh.to(gl.int64) * K * V + KH * V + off_s, S1)


@gluon.jit
def _workers(Qgin, Qkin, o, hs, s_buf, u_buf, q_ring, qk_ring, ready, empty, T, NT, HV: gl.constexpr,
             K: gl.constexpr, V: gl.constexpr, BT: gl.constexpr, BV: gl.constexpr, NS: gl.constexpr,
             WW: gl.constexpr, STORE_HS: gl.constexpr):
    """WW warps: per chunk, S_0 to hs (for the backward) and o = Qg S_0 + Qk U on the write rows 2t + 1."""
    i_v, i_bh = gl.program_id(0), gl.program_id(1)
    i_b, i_hv = i_bh // HV, i_bh % HV
    NQ: gl.constexpr = BT // 2
    mmaO: gl.constexpr = gl.NVMMADistributedLayout(version=[2, 0], warps_per_cta=[1, WW], instr_shape=[16, 8])
    ld: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [WW, 1], [1, 0])
    rq = 2 * gl.arange(0, NQ, layout=gl.SliceLayout(1, ld)) + 1
    off_q = rq[:, None] * K + gl.arange(0, K, layout=gl.SliceLayout(0, ld))[None, :]
    off_qk = rq[:, None] * BT + gl.arange(0, BT, layout=gl.SliceLayout(0, ld))[None, :]
    off_s = (gl.arange(0, K, layout=gl.SliceLayout(1, ld))[:, None] * V
             + i_v * BV + gl.arange(0, BV, layout=gl.SliceLayout(0, ld))[None, :])
    to = gl.arange(0, NQ, layout=gl.SliceLayout(1, mmaO))
    co = i_v * BV + gl.arange(0, BV, layout=gl.SliceLayout(0, mmaO))
    base0 = i_bh.to(gl.int64) * NT
    for i in gl.static_range(NS - 1):
        _workers_fill(q_ring, qk_ring, Qgin, Qkin, off_q, off_qk, base0, i, NT, K, BT, NS)
    for c in range(NT):
        async_copy.wait_group(NS - 2)
        gl.thread_barrier()
        _workers_fill(q_ring, qk_ring, Qgin, Qkin, off_q, off_qk, base0, c + NS - 1, NT, K, BT, NS)
        slot = c % NS
        mbarrier.wait(ready.index(slot), (c // NS) & 1)
        s_slot = s_buf.index(slot)
        if STORE_HS:
            gl.store(hs + (base0 + c) * K * V + off_s, s_slot.load(ld).to(hs.dtype.element_ty))
        Sd = s_slot.load(gl.DotOperandLayout(1, mmaO, 2))
        Ud = u_buf.index(slot).load(gl.DotOperandLayout(1, mmaO, 2))
        mbarrier.arrive(empty.index(slot), count=1)
        out = mma_v2(q_ring.index(slot).load(gl.DotOperandLayout(0, mmaO, 2)), Sd,
                     gl.zeros([NQ, BV], gl.float32, mmaO))
        out = mma_v2(qk_ring.index(slot).load(gl.DotOperandLayout(0, mmaO, 2)), Ud, out)
        t_abs = c * NQ + to
        gl.store(o + ((i_b.to(gl.int64) * T + t_abs) * HV + i_hv)[:, None] * V + co[None, :],
                 out.to(o.dtype.element_ty), mask=(t_abs < T)[:, None] & (co < V)[None, :])
    async_copy.wait_group(0)


@gluon.jit
def eda_fwd_ws_kernel(Win, U0in, Kein, Qgin, eGNin, Qkin, h0, o, ht, hs, T, NT, HV: gl.constexpr, K: gl.constexpr,
                      V: gl.constexpr, BT: gl.constexpr, BV: gl.constexpr, HAS_H0: gl.constexpr,
                      STORE_HT: gl.constexpr, STORE_HS: gl.constexpr, WW: gl.constexpr, WW_REGS: gl.constexpr):
    """Per (V-block, batch x value head): kernel._eda_fwd_kernel's results, the chain and the workers in parallel."""
    bf: gl.constexpr = gl.bfloat16  # rings in the layout tensor-core operands are read from
    s_buf = gl.allocate_shared_memory(bf, [NS, K, BV], gl.NVMMASharedLayout.get_default_for([K, BV], bf))
    u_buf = gl.allocate_shared_memory(bf, [NS, BT, BV], gl.NVMMASharedLayout.get_default_for([BT, BV], bf))
    w_ring = gl.allocate_shared_memory(bf, [NS, BT, K], gl.NVMMASharedLayout.get_default_for([BT, K], bf))
    k_ring = gl.allocate_shared_memory(bf, [NS, BT, K], gl.NVMMASharedLayout.get_default_for([BT, K], bf))
    q_ring = gl.allocate_shared_memory(bf, [NS, BT // 2, K], gl.NVMMASharedLayout.get_default_for([BT // 2, K], bf))
    qk_ring = gl.allocate_shared_memory(bf, [NS, BT // 2, BT], gl.NVMMASharedLayout.get_default_for([BT // 2, BT], bf))
    u0_ring = gl.allocate_shared_memory(bf, [NS, BT, BV], gl.SwizzledSharedLayout(1, 1, 1, [1, 0]))
    g_ring = gl.allocate_shared_memory(gl.float32, [NS, K], gl.SwizzledSharedLayout(1, 1, 1, [0]))
    ready = gl.allocate_shared_memory(gl.int64, [NS, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [NS, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(NS):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=1)
    gl.warp_specialize([  # the chain on S^T where each warp can hold whole rows of it, 16 rows a warp
        (_chain_t if BV >= 64 else _chain, (Win, U0in, Kein, eGNin, h0, ht, s_buf, u_buf, w_ring, k_ring, u0_ring,
                                            g_ring, ready, empty, NT, K, V, BT, BV, NS, HAS_H0, STORE_HT)),
        (_workers, (Qgin, Qkin, o, hs, s_buf, u_buf, q_ring, qk_ring, ready, empty, T, NT, HV, K, V, BT, BV, NS, WW,
                    STORE_HS)),
    ], [WW], [WW_REGS])
