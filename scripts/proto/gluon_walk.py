# Prototype (not product): EDA's forward walk with the state store and the output on warps of their own
# (Gluon warp_specialize). EDA, bf16, BT = 32 rows a chunk (16 write rows), K = 128, V-blocks of BV.
import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import mma_v2, async_copy
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma, fence_async_shared
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor


@gluon.jit
def _chain(Win, U0in, Kein, eGNin, s_buf, u_buf, w_sm, k_sm, ready, empty, NT,
           K: gl.constexpr, V: gl.constexpr, BT: gl.constexpr, BV: gl.constexpr, NBUF: gl.constexpr):
    i_v = gl.program_id(0)
    i_bh = gl.program_id(1)
    mmaW: gl.constexpr = gl.NVMMADistributedLayout(version=[2, 0], warps_per_cta=[2, 2], instr_shape=[16, 8])
    mmaS: gl.constexpr = gl.NVMMADistributedLayout(version=[2, 0], warps_per_cta=[4, 1], instr_shape=[16, 8])
    ld: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
    r = gl.arange(0, BT, layout=gl.SliceLayout(1, ld))
    ck = gl.arange(0, K, layout=gl.SliceLayout(0, ld))
    off_k = r[:, None] * K + ck[None, :]
    ru = gl.arange(0, BT, layout=gl.SliceLayout(1, mmaW))
    cu = i_v * BV + gl.arange(0, BV, layout=gl.SliceLayout(0, mmaW))
    off_u = ru[:, None] * V + cu[None, :]
    ks = gl.arange(0, K, layout=gl.SliceLayout(1, mmaS))
    base0 = i_bh.to(gl.int64) * NT
    W = gl.load(Win + base0 * BT * K + off_k)
    Ke = gl.load(Kein + base0 * BT * K + off_k)
    U0 = gl.load(U0in + base0 * BT * V + off_u).to(gl.float32)
    eGN = gl.load(eGNin + base0 * K + ks)
    S = gl.zeros([K, BV], gl.float32, mmaS)
    for c in range(NT):
        base = base0 + c
        nb = base0 + gl.minimum(c + 1, NT - 1)  # the next chunk's operands, in flight during this step
        W_n = gl.load(Win + nb * BT * K + off_k)
        Ke_n = gl.load(Kein + nb * BT * K + off_k)
        U0_n = gl.load(U0in + nb * BT * V + off_u).to(gl.float32)
        eGN_n = gl.load(eGNin + nb * K + ks)
        w_sm.store(W)
        k_sm.store(Ke)
        slot = c % NBUF
        mbarrier.wait(empty.index(slot), ((c // NBUF) & 1) ^ 1)
        s_slot = s_buf.index(slot)
        u_slot = u_buf.index(slot)
        s_slot.store(S.to(gl.bfloat16))
        Sd = s_slot.load(gl.DotOperandLayout(1, mmaW, 2))
        Wd = w_sm.load(gl.DotOperandLayout(0, mmaW, 2))
        U = U0 - mma_v2(Wd, Sd, gl.zeros([BT, BV], gl.float32, mmaW))
        u_slot.store(U.to(gl.bfloat16))
        Ud = u_slot.load(gl.DotOperandLayout(1, mmaS, 2))
        KeT = k_sm.permute((1, 0)).load(gl.DotOperandLayout(0, mmaS, 2))
        mbarrier.arrive(ready.index(slot), count=1)
        S = S * eGN[:, None] + mma_v2(KeT, Ud, gl.zeros([K, BV], gl.float32, mmaS))
        W, Ke, U0, eGN = W_n, Ke_n, U0_n, eGN_n


@gluon.jit
def _chain2(Win, U0in, Kein, eGNin, s_buf, u_buf, w_ring, k_ring, ready, empty, NT,
            K: gl.constexpr, V: gl.constexpr, BT: gl.constexpr, BV: gl.constexpr, NBUF: gl.constexpr,
            NS: gl.constexpr):
    i_v = gl.program_id(0)
    i_bh = gl.program_id(1)
    mmaW: gl.constexpr = gl.NVMMADistributedLayout(version=[2, 0], warps_per_cta=[2, 2], instr_shape=[16, 8])
    mmaS: gl.constexpr = gl.NVMMADistributedLayout(version=[2, 0], warps_per_cta=[4, 1], instr_shape=[16, 8])
    ld: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
    r = gl.arange(0, BT, layout=gl.SliceLayout(1, ld))
    ck = gl.arange(0, K, layout=gl.SliceLayout(0, ld))
    off_k = r[:, None] * K + ck[None, :]
    ru = gl.arange(0, BT, layout=gl.SliceLayout(1, mmaW))
    cu = i_v * BV + gl.arange(0, BV, layout=gl.SliceLayout(0, mmaW))
    off_u = ru[:, None] * V + cu[None, :]
    ks = gl.arange(0, K, layout=gl.SliceLayout(1, mmaS))
    base0 = i_bh.to(gl.int64) * NT
    for i in gl.static_range(NS - 1):
        nb = base0 + gl.minimum(i, NT - 1)
        async_copy.async_copy_global_to_shared(w_ring.index(i), Win + nb * BT * K + off_k)
        async_copy.async_copy_global_to_shared(k_ring.index(i), Kein + nb * BT * K + off_k)
        async_copy.commit_group()
    U0 = gl.load(U0in + base0 * BT * V + off_u).to(gl.float32)
    eGN = gl.load(eGNin + base0 * K + ks)
    S = gl.zeros([K, BV], gl.float32, mmaS)
    for c in range(NT):
        nb1 = base0 + gl.minimum(c + 1, NT - 1)
        U0_n = gl.load(U0in + nb1 * BT * V + off_u).to(gl.float32)
        eGN_n = gl.load(eGNin + nb1 * K + ks)
        gl.thread_barrier()  # every warp is done reading the slot the next copy overwrites
        i_n = c + NS - 1
        nb = base0 + gl.minimum(i_n, NT - 1)
        async_copy.async_copy_global_to_shared(w_ring.index(i_n % NS), Win + nb * BT * K + off_k)
        async_copy.async_copy_global_to_shared(k_ring.index(i_n % NS), Kein + nb * BT * K + off_k)
        async_copy.commit_group()
        async_copy.wait_group(NS - 1)
        gl.thread_barrier()
        slot = c % NBUF
        mbarrier.wait(empty.index(slot), ((c // NBUF) & 1) ^ 1)
        s_slot = s_buf.index(slot)
        u_slot = u_buf.index(slot)
        s_slot.store(S.to(gl.bfloat16))
        Sd = s_slot.load(gl.DotOperandLayout(1, mmaW, 2))
        Wd = w_ring.index(c % NS).load(gl.DotOperandLayout(0, mmaW, 2))
        U = U0 - mma_v2(Wd, Sd, gl.zeros([BT, BV], gl.float32, mmaW))
        u_slot.store(U.to(gl.bfloat16))
        Ud = u_slot.load(gl.DotOperandLayout(1, mmaS, 2))
        KeT = k_ring.index(c % NS).permute((1, 0)).load(gl.DotOperandLayout(0, mmaS, 2))
        fence_async_shared()  # the S slot's generic stores before the output partition's TMA store reads it
        mbarrier.arrive(ready.index(slot), count=1)
        S = S * eGN[:, None] + mma_v2(KeT, Ud, gl.zeros([K, BV], gl.float32, mmaS))
        U0, eGN = U0_n, eGN_n
    async_copy.wait_group(0)


@gluon.jit
def _output(Qgin, Qkin, o, hs, s_buf, u_buf, ready, empty, T, NT, HV: gl.constexpr,
            K: gl.constexpr, V: gl.constexpr, BT: gl.constexpr, BV: gl.constexpr, NBUF: gl.constexpr,
            WORK: gl.constexpr):
    i_v = gl.program_id(0)
    i_bh = gl.program_id(1)
    i_b = i_bh // HV
    i_hv = i_bh % HV
    NQ: gl.constexpr = BT // 2
    mmaO: gl.constexpr = gl.NVMMADistributedLayout(version=[2, 0], warps_per_cta=[1, 4], instr_shape=[16, 8])
    ld: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
    rq = 2 * gl.arange(0, NQ, layout=gl.SliceLayout(1, ld)) + 1
    ck = gl.arange(0, K, layout=gl.SliceLayout(0, ld))
    cb = gl.arange(0, BT, layout=gl.SliceLayout(0, ld))
    off_q = rq[:, None] * K + ck[None, :]
    off_qk = rq[:, None] * BT + cb[None, :]
    st: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
    rs = gl.arange(0, K, layout=gl.SliceLayout(1, st))
    cs = i_v * BV + gl.arange(0, BV, layout=gl.SliceLayout(0, st))
    off_s = rs[:, None] * V + cs[None, :]
    to = gl.arange(0, NQ, layout=gl.SliceLayout(1, mmaO))
    co = i_v * BV + gl.arange(0, BV, layout=gl.SliceLayout(0, mmaO))
    base0 = i_bh.to(gl.int64) * NT
    Qg = gl.load(Qgin + base0 * BT * K + off_q)
    Qk = gl.load(Qkin + base0 * BT * BT + off_qk)
    for c in range(NT):
        base = base0 + c
        nb = base0 + gl.minimum(c + 1, NT - 1)
        Qg_n = gl.load(Qgin + nb * BT * K + off_q)
        Qk_n = gl.load(Qkin + nb * BT * BT + off_qk)
        slot = c % NBUF
        mbarrier.wait(ready.index(slot), (c // NBUF) & 1)
        s_slot = s_buf.index(slot)
        u_slot = u_buf.index(slot)
        if WORK:
            gl.store(hs + base * K * V + off_s, s_slot.load(st))
            Sd = s_slot.load(gl.DotOperandLayout(1, mmaO, 2))
            Ud = u_slot.load(gl.DotOperandLayout(1, mmaO, 2))
        mbarrier.arrive(empty.index(slot), count=1)
        if WORK:
            out = mma_v2(gl.convert_layout(Qg, gl.DotOperandLayout(0, mmaO, 2)), Sd,
                         gl.zeros([NQ, BV], gl.float32, mmaO))
            out = mma_v2(gl.convert_layout(Qk, gl.DotOperandLayout(0, mmaO, 2)), Ud, out)
            t_abs = c * NQ + to
            gl.store(o + ((i_b.to(gl.int64) * T + t_abs) * HV + i_hv)[:, None] * V + co[None, :],
                     out.to(gl.bfloat16), mask=(t_abs < T)[:, None] & (co < V)[None, :])
        Qg, Qk = Qg_n, Qk_n


@gluon.jit
def _output2(Qgin, Qkin, o, hs, hs_desc, s_buf, u_buf, q_ring, qk_ring, ready, empty, T, NT, HV: gl.constexpr,
             K: gl.constexpr, V: gl.constexpr, BT: gl.constexpr, BV: gl.constexpr, NBUF: gl.constexpr,
             NS: gl.constexpr, WW: gl.constexpr, TMA: gl.constexpr, SPLIT: gl.constexpr):
    i_v = gl.program_id(0)
    i_bh = gl.program_id(1)
    i_b = i_bh // HV
    i_hv = i_bh % HV
    NQ: gl.constexpr = BT // 2
    mmaO: gl.constexpr = gl.NVMMADistributedLayout(version=[2, 0], warps_per_cta=[1, WW], instr_shape=[16, 8])
    ld: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [WW, 1], [1, 0])
    rq = 2 * gl.arange(0, NQ, layout=gl.SliceLayout(1, ld)) + 1
    ck = gl.arange(0, K, layout=gl.SliceLayout(0, ld))
    cb = gl.arange(0, BT, layout=gl.SliceLayout(0, ld))
    off_q = rq[:, None] * K + ck[None, :]
    off_qk = rq[:, None] * BT + cb[None, :]
    rs = gl.arange(0, K, layout=gl.SliceLayout(1, ld))
    cs = i_v * BV + gl.arange(0, BV, layout=gl.SliceLayout(0, ld))
    off_s = rs[:, None] * V + cs[None, :]
    to = gl.arange(0, NQ, layout=gl.SliceLayout(1, mmaO))
    co = i_v * BV + gl.arange(0, BV, layout=gl.SliceLayout(0, mmaO))
    base0 = i_bh.to(gl.int64) * NT
    for i in gl.static_range(NS - 1):
        nb = base0 + gl.minimum(i, NT - 1)
        async_copy.async_copy_global_to_shared(q_ring.index(i), Qgin + nb * BT * K + off_q)
        async_copy.async_copy_global_to_shared(qk_ring.index(i), Qkin + nb * BT * BT + off_qk)
        async_copy.commit_group()
    for c in range(NT):
        base = base0 + c
        gl.thread_barrier()
        i_n = c + NS - 1
        nb = base0 + gl.minimum(i_n, NT - 1)
        async_copy.async_copy_global_to_shared(q_ring.index(i_n % NS), Qgin + nb * BT * K + off_q)
        async_copy.async_copy_global_to_shared(qk_ring.index(i_n % NS), Qkin + nb * BT * BT + off_qk)
        async_copy.commit_group()
        async_copy.wait_group(NS - 1)
        gl.thread_barrier()
        slot = c % NBUF
        mbarrier.wait(ready.index(slot), (c // NBUF) & 1)
        s_slot = s_buf.index(slot)
        u_slot = u_buf.index(slot)
        if SPLIT:
            pass
        elif TMA:
            tma.async_copy_shared_to_global(hs_desc, [(base * K).to(gl.int32), i_v * BV], s_slot)
        else:
            gl.store(hs + base * K * V + off_s, s_slot.load(ld))
        Sd = s_slot.load(gl.DotOperandLayout(1, mmaO, 2))
        Ud = u_slot.load(gl.DotOperandLayout(1, mmaO, 2))
        if TMA:
            tma.store_wait(0)
        mbarrier.arrive(empty.index(slot), count=1)
        Qg = q_ring.index(c % NS).load(gl.DotOperandLayout(0, mmaO, 2))
        Qk = qk_ring.index(c % NS).load(gl.DotOperandLayout(0, mmaO, 2))
        out = mma_v2(Qg, Sd, gl.zeros([NQ, BV], gl.float32, mmaO))
        out = mma_v2(Qk, Ud, out)
        t_abs = c * NQ + to
        gl.store(o + ((i_b.to(gl.int64) * T + t_abs) * HV + i_hv)[:, None] * V + co[None, :],
                 out.to(gl.bfloat16), mask=(t_abs < T)[:, None] & (co < V)[None, :])
    async_copy.wait_group(0)


@gluon.jit
def _store_part(hs, s_buf, ready, empty, NT, K: gl.constexpr, V: gl.constexpr, BV: gl.constexpr,
                NBUF: gl.constexpr, SW: gl.constexpr):
    i_v = gl.program_id(0)
    i_bh = gl.program_id(1)
    st: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [SW, 1], [1, 0])
    rs = gl.arange(0, K, layout=gl.SliceLayout(1, st))
    cs = i_v * BV + gl.arange(0, BV, layout=gl.SliceLayout(0, st))
    off_s = rs[:, None] * V + cs[None, :]
    base0 = i_bh.to(gl.int64) * NT
    for c in range(NT):
        slot = c % NBUF
        mbarrier.wait(ready.index(slot), (c // NBUF) & 1)
        Sv = s_buf.index(slot).load(st)
        mbarrier.arrive(empty.index(slot), count=1)
        gl.store(hs + (base0 + c) * K * V + off_s, Sv)


@gluon.jit
def _walk_ws(Win, U0in, Kein, Qgin, eGNin, Qkin, o, hs, hs_desc, T, NT, HV: gl.constexpr, K: gl.constexpr, V: gl.constexpr,
             BT: gl.constexpr, BV: gl.constexpr, NBUF: gl.constexpr, OUT_REGS: gl.constexpr, WORK: gl.constexpr,
             NVS: gl.constexpr, NS: gl.constexpr, WW: gl.constexpr, O2: gl.constexpr, TMA: gl.constexpr,
             SPLIT: gl.constexpr):
    if NVS:
        s_buf = gl.allocate_shared_memory(gl.bfloat16, [NBUF, K, BV], gl.NVMMASharedLayout.get_default_for([K, BV], gl.bfloat16))
        u_buf = gl.allocate_shared_memory(gl.bfloat16, [NBUF, BT, BV], gl.NVMMASharedLayout.get_default_for([BT, BV], gl.bfloat16))
        w_sm = gl.allocate_shared_memory(gl.bfloat16, [BT, K], gl.NVMMASharedLayout.get_default_for([BT, K], gl.bfloat16))
        k_sm = gl.allocate_shared_memory(gl.bfloat16, [BT, K], gl.NVMMASharedLayout.get_default_for([BT, K], gl.bfloat16))
    else:
        s_buf = gl.allocate_shared_memory(gl.bfloat16, [NBUF, K, BV], gl.SwizzledSharedLayout(8, 1, 8, [1, 0]))
        u_buf = gl.allocate_shared_memory(gl.bfloat16, [NBUF, BT, BV], gl.SwizzledSharedLayout(8, 1, 8, [1, 0]))
        w_sm = gl.allocate_shared_memory(gl.bfloat16, [BT, K], gl.SwizzledSharedLayout(8, 1, 8, [1, 0]))
        k_sm = gl.allocate_shared_memory(gl.bfloat16, [BT, K], gl.SwizzledSharedLayout(8, 1, 8, [1, 0]))
    ready = gl.allocate_shared_memory(gl.int64, [NBUF, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [NBUF, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(NBUF):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=2 if SPLIT else 1)
    if NS > 0:
        w_ring = gl.allocate_shared_memory(gl.bfloat16, [NS, BT, K], gl.NVMMASharedLayout.get_default_for([BT, K], gl.bfloat16))
        k_ring = gl.allocate_shared_memory(gl.bfloat16, [NS, BT, K], gl.NVMMASharedLayout.get_default_for([BT, K], gl.bfloat16))
        if O2:
            q_ring = gl.allocate_shared_memory(gl.bfloat16, [NS, BT // 2, K], gl.NVMMASharedLayout.get_default_for([BT // 2, K], gl.bfloat16))
            qk_ring = gl.allocate_shared_memory(gl.bfloat16, [NS, BT // 2, BT], gl.NVMMASharedLayout.get_default_for([BT // 2, BT], gl.bfloat16))
            if SPLIT:
                gl.warp_specialize([
                    (_chain2, (Win, U0in, Kein, eGNin, s_buf, u_buf, w_ring, k_ring, ready, empty, NT, K, V, BT, BV, NBUF, NS)),
                    (_output2, (Qgin, Qkin, o, hs, hs_desc, s_buf, u_buf, q_ring, qk_ring, ready, empty, T, NT, HV, K, V,
                                BT, BV, NBUF, NS, WW, TMA, SPLIT)),
                    (_store_part, (hs, s_buf, ready, empty, NT, K, V, BV, NBUF, WW)),
                ], [WW, WW], [OUT_REGS, OUT_REGS])
            else:
                gl.warp_specialize([
                    (_chain2, (Win, U0in, Kein, eGNin, s_buf, u_buf, w_ring, k_ring, ready, empty, NT, K, V, BT, BV, NBUF, NS)),
                    (_output2, (Qgin, Qkin, o, hs, hs_desc, s_buf, u_buf, q_ring, qk_ring, ready, empty, T, NT, HV, K, V,
                                BT, BV, NBUF, NS, WW, TMA, SPLIT)),
                ], [WW], [OUT_REGS])
        else:
            gl.warp_specialize([
                (_chain2, (Win, U0in, Kein, eGNin, s_buf, u_buf, w_ring, k_ring, ready, empty, NT, K, V, BT, BV, NBUF, NS)),
                (_output, (Qgin, Qkin, o, hs, s_buf, u_buf, ready, empty, T, NT, HV, K, V, BT, BV, NBUF, WORK)),
            ], [4], [OUT_REGS])
    else:
      gl.warp_specialize([
        (_chain, (Win, U0in, Kein, eGNin, s_buf, u_buf, w_sm, k_sm, ready, empty, NT, K, V, BT, BV, NBUF)),
        (_output, (Qgin, Qkin, o, hs, s_buf, u_buf, ready, empty, T, NT, HV, K, V, BT, BV, NBUF, WORK)),
      ], [4], [OUT_REGS])


def walk_ws(W, U0, Ke, Qg, eGN, Qk, o, hs, T, NT, HV, K, V, BT, BV, nbuf=2, out_regs=128, maxnreg=None, work=True,
            nvs=False, ns=0, ww=4, o2=False, tma_store=False, split=False):
    B_HV = W.shape[0]
    desc = TensorDescriptor.from_tensor(hs.view(-1, V), [K, BV], gl.NVMMASharedLayout.get_default_for([K, BV], gl.bfloat16))
    _walk_ws[(triton.cdiv(V, BV), B_HV)](W, U0, Ke, Qg, eGN, Qk, o, hs, desc, T, NT, HV=HV, K=K, V=V, BT=BT, BV=BV,
                                          NBUF=nbuf, OUT_REGS=out_regs, WORK=work, NVS=nvs, NS=ns, WW=ww, O2=o2, TMA=tma_store, SPLIT=split, num_warps=4,
                                          maxnreg=maxnreg)
