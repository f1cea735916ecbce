# prototype harness: the shipped Triton walk against the warp-specialized Gluon walk on the same prep outputs
import sys, json, torch, triton
sys.path.insert(0, '.')
sys.path.insert(0, 'scripts/proto')
import kernel, eda, gluon_walk as gwalk
import torch.nn.functional as F
dev = 'cuda'
real = kernel._eda_fwd_kernel
cap = {}
class Grab:
    def __getitem__(self, grid):
        def launch(*args, **kw):
            cap.update(grid=grid, args=args, kw=kw)
            return real[grid](*args, **kw)
        return launch
kernel._eda_fwd_kernel = Grab()
def inputs(B, T, H, HV, K=128, V=128):
    g = torch.Generator(device=dev).manual_seed(0)
    q, k, e = (F.normalize(torch.randn(B, T, h, K, device=dev, generator=g), dim=-1).bfloat16() for h in (H, H, HV))
    v = torch.randn(B, T, HV, V, device=dev, generator=g).bfloat16()
    gg = (-torch.rand(B, T, HV, K, device=dev, generator=g) * 0.5).float()
    beta, gamma = (torch.rand(B, T, HV, device=dev, generator=g).bfloat16() for _ in range(2))
    return [x.requires_grad_() for x in (q, k, v, e, gg, beta, gamma)]
for shape in [tuple(map(int, s.split(','))) for s in sys.argv[1:]]:
    xs = inputs(*shape)
    o_ref = eda.eda_triton(*xs, check_g=False)
    a, kw = cap['args'], cap['kw']
    W, U0, Ke, Qg, eGN, Qk, _, o, _, hs, T, NT = a
    BV, HV, K, V, BT = kw['BV'], kw['HV'], kw['K'], kw['V'], kw['BT']
    o2, hs2 = torch.zeros_like(o), torch.zeros_like(hs)
    res = dict(shape=shape, BV=BV)
    for ww, tm, sp, regs in ((4, False, False, 128), (4, False, True, 128), (4, False, True, 96), (2, False, False, 128),
                             (2, False, True, 128), (2, False, True, 96)):
        if (ww == 2) != (BV == 16):
            continue
        try:
            o2.zero_(); hs2.zero_()
            f = lambda: gwalk.walk_ws(W, U0, Ke, Qg, eGN, Qk, o2, hs2, T, NT, HV, K, V, BT, BV, 3, regs,
                                      nvs=True, ns=3, ww=ww, o2=True, tma_store=tm, split=sp)
            f(); torch.cuda.synchronize()
            err_o = ((o2.float() - o.float()).abs().max() / o.float().abs().max()).item()
            err_s = ((hs2.float() - hs.float()).abs().max() / hs.float().abs().max()).item()
            t = triton.testing.do_bench(f, warmup=50, rep=300)
            res[f"ww {ww} split {sp} regs {regs}"] = dict(ms=round(t, 4), err_o=round(err_o, 5), err_hs=round(err_s, 5))
        except Exception as err:
            res[f"ww {ww} split {sp} regs {regs}"] = f"{type(err).__name__}: {str(err)[:800]}"
    t0 = triton.testing.do_bench(lambda: real[cap['grid']](*a, **kw), warmup=50, rep=300)
    res['triton walk ms'] = round(t0, 4)
    print(json.dumps(res), flush=True)
