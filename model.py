"""
nanoEDA model, a 3:1 hybrid of linear attention (EDA, KDA, GDN or GDN-2) and gated full attention, dense or MoE, read
top to bottom: GPTConfig; RMSNorm, SwiGLU; LinearAttention; GatedAttention; MoE; the chunked loss head; Block and GPT
(an optional cache: decode.py); checkpoints. Paper Sec. 2-3 (the rules), Appendix A and Tables 6-7 (the sizes); open
choices follow Kimi Linear's KDA and Qwen3-Next's GDN, checked against Table 7 (notes/params.md); why: notes/model.md.
"""
import math
import os
import pickle
import random
import zlib
from contextlib import suppress
from dataclasses import dataclass, fields

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.checkpoint import checkpoint

import eda

MIXERS = ("eda", "kda", "gdn", "gdn2", "transformer")
LA_BACKENDS = ("auto", "triton", "chunk", "recurrent")
LA_GATES = ("auto", "safe", "kda", "log")
# the decay gate each mixer uses with la_gate='auto' (Eq. safe_gate / KDA's sigmoid gate / Eq. log_gate)
DEFAULT_GATE = {"eda": "safe", "kda": "kda", "gdn": "log", "gdn2": "log"}
# A's init (LinearAttention.init_gates): 'unit' A = 1, 'mamba2' A ~ U(1, 16); la_A_init='auto' takes the gate's
LA_A_INITS = ("auto", "unit", "mamba2")
DEFAULT_A_INIT = {"safe": "unit", "kda": "mamba2", "log": "unit"}
# the attention decode step's kernel: 'auto' runs kernel.attention_decode (split-KV: one sequence fills the GPU) on
# CUDA where it takes the inputs, else SDPA; 'split_kv' always (a ValueError where it cannot); 'sdpa' never
ATTN_DECODES = ("auto", "split_kv", "sdpa")


# Config ------------------------------------------------------------------------------------------------------
@dataclass
class GPTConfig:
    """The architecture; the defaults are the toy model `python train.py` trains on a CPU, config/*.py the paper's
    sizes. Plain bool/int/float/str fields (train.py's settings, checkpoints' values). la_backend, la_chunk_size,
    la_recompute_states, attn_decode and head_chunk_rows choose only how the same function runs."""
    vocab_size: int = 256
    block_size: int = 128          # max sequence length: KV-cache size and the generate() limit
    n_layer: int = 4
    n_embd: int = 128
    mixer: str = "eda"             # eda | kda | gdn | gdn2 | transformer
    attn_every: int = 4            # every attn_every-th layer is full attention (3:1 hybrid)
    norm_eps: float = 1e-6
    init_std: float = 0.02
    tie_embeddings: bool = False
    # full attention (Gated Attention)
    n_head: int = 4
    n_kv_head: int = 2
    head_dim: int = 16
    rope_theta: float = 10000.0
    rope_frac: float = 1.0         # fraction of head_dim that is rotated (partial RoPE, Qwen3-Next: 0.25)
    qk_norm: bool = True           # RMSNorm on q and k per head (Qwen3-Next); False: plain q.k / sqrt(head_dim)
    attn_conv_size: int = 0        # >0: a short causal depthwise conv on the attention layer's input (0: the paper's)
    attn_decode: str = "auto"      # auto | split_kv | sdpa: the attention decode step's kernel (ATTN_DECODES)
    # linear attention
    la_n_head: int = 2             # H: query/key heads
    la_n_v_head: int = 4           # HV: value heads, a multiple of H (grouped value heads)
    la_head_dim: int = 16          # K
    la_v_head_dim: int = 16        # V
    la_conv_size: int = 4          # short causal depthwise conv on q, k, v
    la_gate_rank: int = 4          # rank per value head of the channel-wise decay projection (paper: 16)
    la_erase_rank: int = 4         # rank per q/k head of EDA's erase address and GDN-2's b, w gates (paper: 16)
    la_gate: str = "auto"          # auto | safe | kda | log  (auto: eda safe, kda kda, gdn/gdn2 log)
    la_gate_lower_bound: float = -5.0  # l of the safe / KDA gates
    la_A_init: str = "auto"        # auto | unit | mamba2: the gate's A at init (auto: kda mamba2, safe/log unit)
    la_erase_bias: float = 0.0     # EDA: a constant added to the erase gate's logit, gamma = sigmoid(W_g x + this)
    la_backend: str = "auto"       # auto | triton | chunk | recurrent (auto: triton on CUDA, chunk on CPU and GDN-2)
    la_chunk_size: int = 16        # tokens per chunk of the PyTorch chunk rule (16: ~6x faster than 64 on a CPU)
    la_recompute_states: bool = False  # Triton rule: the backward recomputes the chunk states (memory for time)
    # FFN: SwiGLU of width ffn_hidden, or MoE
    ffn_hidden: int = 256
    moe: bool = False
    n_expert: int = 8
    moe_topk: int = 2
    expert_hidden: int = 32
    shared_expert_hidden: int = 32  # 0: no shared expert
    moe_aux_coef: float = 0.001     # load-balancing loss weight (Switch / Qwen MoE use 1e-3 .. 1e-2)
    # the dense Transformer's parameter alignment (Appendix A): n_kv_head / ffn_hidden for mixer 'transformer' (0: same)
    transformer_n_kv_head: int = 0
    transformer_ffn_hidden: int = 0
    head_chunk_rows: int = 4096    # rows of logits the chunked loss head forms at a time (4096 x 50k vocab: 0.8 GB)

    def __post_init__(self):
        for f in fields(self):  # plain types only (an int is fine for a float)
            val = getattr(self, f.name)
            want = {"int": int, "float": float, "str": str, "bool": bool}.get(f.type, f.type)
            if want is float and type(val) is int:
                setattr(self, f.name, float(val))
            elif type(val) is not want:
                raise ValueError(f"GPTConfig.{f.name} must be {want.__name__}, got {type(val).__name__} {val!r}")

        def need(cond, msg):
            if not cond:
                raise ValueError(f"GPTConfig: {msg}")
        for name, choices in (("mixer", MIXERS), ("la_backend", LA_BACKENDS), ("la_gate", LA_GATES),
                              ("la_A_init", LA_A_INITS), ("attn_decode", ATTN_DECODES)):
            need(getattr(self, name) in choices,
                 f"unknown {name} {getattr(self, name)!r}; choose one of {', '.join(choices)}")
        positive = ["vocab_size", "block_size", "n_layer", "n_embd", "attn_every", "n_head", "n_kv_head", "head_dim",
                    "la_n_head", "la_n_v_head", "la_head_dim", "la_v_head_dim", "la_conv_size", "la_gate_rank",
                    "la_erase_rank", "la_chunk_size", "head_chunk_rows"]
        positive += ["n_expert", "moe_topk", "expert_hidden"] if self.moe else []
        for name in positive:
            need(getattr(self, name) > 0, f"{name} must be positive, got {getattr(self, name)}")
        for name in ("transformer_n_kv_head", "transformer_ffn_hidden", "shared_expert_hidden", "attn_conv_size"):
            need(getattr(self, name) >= 0, f"{name} must be >= 0, got {getattr(self, name)}")
        need(self.attn_conv_size != 1, "attn_conv_size must be 0 (no conv) or >= 2, got 1")
        need(0 < self.rope_frac <= 1, f"rope_frac must be in (0, 1], got {self.rope_frac}")
        need(self.n_head % self.kv_heads == 0,
             f"n_head={self.n_head} must be a multiple of the KV heads ({self.kv_heads}) for GQA")
        need(self.la_n_v_head % self.la_n_head == 0,
             f"la_n_v_head={self.la_n_v_head} must be a multiple of la_n_head={self.la_n_head} (grouped value heads)")
        need(self.rope_dim % 2 == 0 and self.rope_dim > 0,
             f"rope_frac * head_dim = {self.rope_frac} * {self.head_dim} must be a positive even number of dims")
        need(self.la_gate_lower_bound < 0, f"la_gate_lower_bound must be negative, got {self.la_gate_lower_bound}")
        need(self.norm_eps > 0 and self.init_std > 0, "norm_eps and init_std must be positive")
        need(self.mixer != "gdn2" or self.la_backend != "triton", "la_backend='triton' has no GDN-2 kernel (eda_triton "
             "runs EDA/KDA/GDN); use 'auto', 'chunk' or 'recurrent'")
        if self.la_backend == "triton":  # 'auto' is checked where the device is known (auto_backend_problem)
            problem = eda.triton_problem(self.rule_mixer, self.la_head_dim, self.la_v_head_dim)
            need(problem is None, f"{problem}; use la_backend='chunk'")
        if self.moe:
            need(self.moe_topk <= self.n_expert, f"moe_topk must be <= n_expert={self.n_expert}, got {self.moe_topk}")
            need(self.moe_aux_coef >= 0, f"moe_aux_coef must be >= 0, got {self.moe_aux_coef}")
        else:
            need(self.ffn_width > 0, f"ffn_hidden must be positive, got {self.ffn_width}")

    # resolved values: properties, not fields (neither settings nor checkpoints hold them), so never stale
    @property
    def kv_heads(self):
        return (self.mixer == "transformer" and self.transformer_n_kv_head) or self.n_kv_head

    @property
    def ffn_width(self):
        return (self.mixer == "transformer" and self.transformer_ffn_hidden) or self.ffn_hidden

    @property
    def rope_dim(self):
        return int(round(self.head_dim * self.rope_frac))

    @property
    def gate(self):
        return DEFAULT_GATE.get(self.mixer, "log") if self.la_gate == "auto" else self.la_gate

    @property
    def A_init(self):
        return DEFAULT_A_INIT[self.gate] if self.la_A_init == "auto" else self.la_A_init

    def is_attention_layer(self, i):
        return self.mixer == "transformer" or (i + 1) % self.attn_every == 0

    @property
    def rule_mixer(self):
        """The mixer whose update rule the model runs: None where every layer is full attention."""
        return None if all(map(self.is_attention_layer, range(self.n_layer))) else self.mixer

    def auto_backend_problem(self, on_cuda):
        return eda.auto_backend_problem(self.la_backend, on_cuda, self.rule_mixer, self.la_head_dim, self.la_v_head_dim)


# Small pieces ------------------------------------------------------------------------------------------------
class RMSNorm(nn.Module):
    """RMSNorm over the last dim (eps 1e-6, Appendix A), computed in fp32."""

    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight.float()).to(x.dtype)


class SwiGLU(nn.Module):
    """FFN with SiLU gating (Appendix A): down(silu(gate(x)) * up(x))."""

    def __init__(self, dim, hidden):
        super().__init__()
        self.gate = nn.Linear(dim, hidden, bias=False)
        self.up = nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)
        self.down.residual = True

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


def l2norm(x, eps=1e-6):
    """L2-normalize the last dim in fp32 (q, k, e are unit vectors; the rules assume it)."""
    return F.normalize(x.float(), dim=-1, eps=eps).to(x.dtype)


def causal_conv(u, weight, tail=None):
    """Short causal depthwise conv over time: u [B, T, C], weight [C, ks], left context tail [B, ks-1, C] or zeros ->
    (y, the newest ks-1 inputs). Shifted multiply-adds (F.conv1d's sum), so that a compiler fuses them."""
    T, ks = u.shape[1], weight.shape[-1]
    up = F.pad(u, (0, 0, ks - 1, 0)) if tail is None else torch.cat([tail, u], dim=1)
    y = up[:, :T] * weight[:, 0]
    for j in range(1, ks):
        y = y + up[:, j:j + T] * weight[:, j]
    return y, up[:, T:]


def param_generator(seed, name):
    """The CPU generator a parameter's init draws from, seeded from (seed, its full name) (why: notes/model.md)."""
    return torch.Generator().manual_seed(zlib.crc32(f"{seed}/{name}".encode()))


def init_draw(p, draw, generator=None):
    """p <- draw(t, generator), t a CPU fp32 tensor of p's shape: the values do not depend on p's device; nothing
    on the meta device; an FSDP shard (a DTensor) takes its part of the full tensor each rank draws alike."""
    if p.is_meta:
        return
    t = draw(torch.empty(p.shape, device="cpu"), generator)
    if hasattr(p, "placements"):
        from torch.distributed.tensor import distribute_tensor  # (torch's distributed package: FSDP runs only)
        t = distribute_tensor(t.to(p.device), p.device_mesh, p.placements, src_data_rank=None)
    p.copy_(t)


def init_uniform_conv(weight, generator=None):
    """A short conv's weight [channels, (1,) width] ~ U(+-1/sqrt(width))."""
    bound = 1 / math.sqrt(weight.shape[-1])
    init_draw(weight, lambda t, g: t.uniform_(-bound, bound, generator=g), generator)


# Linear attention: one recipe, the mixers' differences named where they occur --------------------------------
_compiled = {}  # (fn, backend) -> torch.compile(fn), built on first use (importing the compiler costs ~2 s)


def check_compile(compile):
    """A `compile` argument (GPT's, decode's): False, True (Inductor) or a torch.compile backend name."""
    if not isinstance(compile, (bool, str)):
        raise ValueError(f"compile must be a bool or a torch.compile backend name, got {compile!r}")


def maybe_compiled(fn, compile):
    """fn as written (compile False), or torch.compile(fn, fullgraph=True) with Inductor (True) or the named backend:
    la_conv, la_gates, la_output and the loss head's _head_chunk, in a forward without a cache (notes/model.md)."""
    if not compile:
        return fn
    backend = "inductor" if compile is True else compile
    if (fn, backend) not in _compiled:
        _compiled[fn, backend] = torch.compile(fn, fullgraph=True, backend=backend)
    return _compiled[fn, backend]


def la_conv(u, conv_weight, heads, tail=None):
    """q, k, v from the [q | k | v] projections u [B, T, 2*H*K + HV*V]: causal_conv + SiLU, q and k L2-normalized
    per head; fp32 inside, u's dtype out, and the next call's tail (fp32). The spec of kernel.short_conv."""
    H, HV, K, V = heads
    B, T, _ = u.shape
    y, tail = causal_conv(u.float(), conv_weight.reshape(-1, conv_weight.shape[-1]).float(),
                          None if tail is None else tail.float())
    q, k, v = F.silu(y).split([H * K, H * K, HV * V], dim=-1)
    return l2norm(q.reshape(B, T, H, K)).to(u.dtype), l2norm(k.reshape(B, T, H, K)).to(u.dtype), \
        v.reshape(B, T, HV, V).to(u.dtype), tail


def la_gates(a, beta_logit, gamma_logit, e_low, b_low, w_low, A_log, dt_bias, heads, gate, lower_bound, dtype):
    """The rule's gates: a -> the fp32 log decay g; beta, gamma = sigmoid of their logits; e_low -> EDA's erase
    address, L2-normalized per q/k head, shared by its value heads; b_low, w_low -> GDN-2's fp32 sigmoid gates.
    Unused inputs are None; beta, gamma, e in `dtype`, computed in fp32."""
    H, HV, K, V = heads
    G = HV // H
    B, T = a.shape[:2]
    if dt_bias.dim() == 2:  # channel-wise decay (dt_bias [HV, K]); GDN's is per head (a, dt_bias [.., HV])
        a = a.reshape(B, T, HV, K)
    if gate == "log":
        g = eda.log_gate(a, A_log, dt_bias)
    else:
        g = (eda.safe_gate if gate == "safe" else eda.kda_gate)(a, A_log, dt_bias, lower_bound)
    beta = torch.sigmoid(beta_logit.float()).to(dtype) if beta_logit is not None else None
    gamma = torch.sigmoid(gamma_logit.float()).to(dtype) if gamma_logit is not None else None
    e = l2norm(e_low.float().reshape(B, T, H, K)).repeat_interleave(G, dim=2).to(dtype) if e_low is not None else None
    b = torch.sigmoid(b_low.float()).reshape(B, T, H, K).repeat_interleave(G, dim=2) if b_low is not None else None
    w = torch.sigmoid(w_low.float()).reshape(B, T, H, V).repeat_interleave(G, dim=2) if w_low is not None else None
    return g, beta, gamma, e, b, w


def la_output(o, norm_weight, eps, gate_logit):
    """Per-head RMSNorm of the rule's output o [B, T, HV, V] times the sigmoid output gate (gate_logit [B, T, HV*V]);
    fp32 inside, [B, T, HV*V] in o's dtype."""
    of = o.float()
    of = of * torch.rsqrt(of.pow(2).mean(-1, keepdim=True) + eps) * norm_weight.float()
    return (of.flatten(2) * torch.sigmoid(gate_logit.float())).to(o.dtype)


class LinearAttention(nn.Module):
    """EDA / KDA / GDN / GDN-2 layer (paper Fig. eda_arch; Kimi Linear's KDA; Qwen3-Next's GDN); Table 7's shapes.
    x -> q, k [H heads], v [HV heads] -> short causal depthwise conv + SiLU; q, k L2-normalized.
    beta = sigmoid(W_b x)                                           (EDA, KDA, GDN; GDN-2 has b, w instead)
    decay:   channel-wise, low-rank d -> r*HV -> HV*K (KDA's f_a/f_b), through the gate; GDN: a = W_a x per head.
    EDA:     gamma = sigmoid(W_g x) per value head; e = L2norm(low-rank d -> r*H -> H*K) per q/k head, like k.
    GDN-2:   b, w = sigmoid(low-rank d -> r*H -> H*K or H*V) per q/k head; channel-wise log decay.
    out:     per-head RMSNorm, times sigmoid(W_o_gate x) (full rank, Qwen3-Next style), then o_proj."""

    def __init__(self, cfg: GPTConfig, compile=False):
        super().__init__()
        self.cfg = cfg
        self.mixer = cfg.mixer
        self.compile = compile  # la_conv, la_gates, la_output through torch.compile (maybe_compiled)
        d, H, HV, K, V = cfg.n_embd, cfg.la_n_head, cfg.la_n_v_head, cfg.la_head_dim, cfg.la_v_head_dim
        self.H, self.HV, self.K, self.V = H, HV, K, V
        self.q_proj = nn.Linear(d, H * K, bias=False)
        self.k_proj = nn.Linear(d, H * K, bias=False)
        self.v_proj = nn.Linear(d, HV * V, bias=False)
        self.conv_dim = 2 * H * K + HV * V  # one depthwise conv over [q | k | v] (as three convs; one cache tensor)
        self.conv_weight = nn.Parameter(torch.empty(self.conv_dim, 1, cfg.la_conv_size))
        if self.mixer != "gdn2":
            self.beta_proj = nn.Linear(d, HV, bias=False)
        if self.mixer == "gdn":  # scalar decay per head
            self.a_proj = nn.Linear(d, HV, bias=False)
            self.dt_bias = nn.Parameter(torch.empty(HV))
        else:                    # channel-wise decay, rank r per value head
            r = cfg.la_gate_rank * HV
            self.f_a = nn.Linear(d, r, bias=False)
            self.f_b = nn.Linear(r, HV * K, bias=False)
            self.dt_bias = nn.Parameter(torch.empty(HV, K))
        # the decay amplitude A has the decay's shape (Eq. safe_gate writes A_i; Table 7's counts need it)
        self.A_log = nn.Parameter(torch.empty_like(self.dt_bias))
        re = cfg.la_erase_rank * H
        if self.mixer == "eda":
            self.gamma_proj = nn.Linear(d, HV, bias=False)
            self.e_a = nn.Linear(d, re, bias=False)
            self.e_b = nn.Linear(re, H * K, bias=False)
        if self.mixer == "gdn2":
            self.b_a = nn.Linear(d, re, bias=False)
            self.b_b = nn.Linear(re, H * K, bias=False)
            self.w_a = nn.Linear(d, re, bias=False)
            self.w_b = nn.Linear(re, H * V, bias=False)
        self.o_norm = RMSNorm(V, cfg.norm_eps)
        self.g_proj = nn.Linear(d, HV * V, bias=False)
        self.o_proj = nn.Linear(HV * V, d, bias=False)
        self.o_proj.residual = True
        # the projections of x in project()'s order, wide ones first, zero rows padding to 64s (notes/model.md)
        self.x_projs = tuple(n for n in ("q_proj", "k_proj", "v_proj", "g_proj", "f_a", "e_a", "b_a", "w_a",
                                         "beta_proj", "a_proj", "gamma_proj") if hasattr(self, n))
        self.x_pad = -sum(getattr(self, n).out_features for n in self.x_projs) % 64
        self.init_gates()

    @torch.no_grad()
    def init_gates(self, gen=lambda leaf: None):
        """dt ~ logU(1e-3, 1e-1), dt_bias = softplus^-1(dt) (Mamba2); A = 1 ('unit') or A ~ U(1, 16) ('mamba2'); the
        conv U(+-1/sqrt(la_conv_size)) (why: notes/model.md). gen(leaf): the generator each parameter draws from."""
        if self.cfg.A_init == "unit":
            init_draw(self.A_log, lambda t, g: t.zero_())
        else:
            init_draw(self.A_log, lambda t, g: t.uniform_(1, 16, generator=g).log_(), gen("A_log"))
        lo, hi = math.log(1e-3), math.log(1e-1)

        def dt_bias(t, g):
            dt = torch.exp(t.uniform_(generator=g) * (hi - lo) + lo).clamp(min=1e-4)
            return dt + torch.log(-torch.expm1(-dt))  # softplus^-1
        init_draw(self.dt_bias, dt_bias, gen("dt_bias"))
        init_uniform_conv(self.conv_weight, gen("conv_weight"))

    def project(self, x):
        """Every projection of x [B, T, d] by name ('qkv': the conv's input): T > 1, one matmul on the weights
        concatenated on the fly; T = 1, one per projection (copying the weights would move more bytes)."""
        mods = [getattr(self, n) for n in self.x_projs]
        if x.shape[1] > 1:
            widths = [self.conv_dim] + [m.out_features for m in mods[3:]] + [self.x_pad]
            w = torch.cat([m.weight for m in mods] + [mods[0].weight.new_zeros(self.x_pad, x.shape[-1])])
            outs = F.linear(x, w).split(widths, -1)
        else:
            outs = [torch.cat([m(x) for m in mods[:3]], dim=-1)] + [m(x) for m in mods[3:]]
        return dict(zip(("qkv",) + self.x_projs[3:], outs))  # (the zero-padding slice dropped)

    def forward(self, x, cache=None, return_rule_inputs=False):
        """x [B,T,d] -> [B,T,d]. cache: this layer's {'conv', 'state'} (read and updated in place) or None (zero left
        context and state). return_rule_inputs: return the rule's inputs q, k, v, e, g, beta, gamma, b, w (probe.py)."""
        cfg, heads = self.cfg, (self.H, self.HV, self.K, self.V)
        rule = eda.rule_backend(cfg.la_backend, self.mixer, x.is_cuda)
        if cache is not None and x.shape[1] == 1:  # one token with a cache: a recurrent step (fused where Triton runs)
            rule = "decode" if rule == "triton" else "recurrent"
        compile = self.compile if cache is None else False
        p = self.project(x)
        if rule == "triton" and cache is None:  # the Triton rule comes with the fused conv, which takes no tail
            q, k, v = eda.kernels().short_conv(p["qkv"], self.conv_weight, heads)
        else:
            q, k, v, tail = maybe_compiled(la_conv, compile)(p["qkv"], self.conv_weight, heads,
                                                             None if cache is None else cache["conv"])
            if cache is not None:  # in place, as every cache update (a CUDA graph replays on the same tensors)
                cache["conv"].copy_(tail)
        # the gates: the log decay g, beta; EDA's erase address e and gamma (its logit plus the constant
        # la_erase_bias, no parameter: Table 7's counts; added only when set: adding 0.0 still changes the
        # training's arithmetic, python train.py's loss at step 29 3.3537 -> 3.3536, README's figures with it)
        a = p["a_proj"] if self.mixer == "gdn" else self.f_b(p["f_a"])
        e_low = self.e_b(p["e_a"]) if self.mixer == "eda" else None
        gamma_logit = p.get("gamma_proj")
        if gamma_logit is not None and cfg.la_erase_bias != 0:
            gamma_logit = gamma_logit + cfg.la_erase_bias
        b_low, w_low = (self.b_b(p["b_a"]), self.w_b(p["w_a"])) if self.mixer == "gdn2" else (None, None)
        g, beta, gamma, e, b, w = maybe_compiled(la_gates, compile)(
            a, p.get("beta_proj"), gamma_logit, e_low, b_low, w_low, self.A_log, self.dt_bias, heads, cfg.gate,
            cfg.la_gate_lower_bound, p["qkv"].dtype)
        if return_rule_inputs:
            return dict(q=q, k=k, v=v, e=e, g=g, beta=beta, gamma=gamma, b=b, w=w)
        # the update rule (eda.py) from the cached state, or zeros; the final state only to continue a cache
        state, keep = (None, False) if cache is None else (cache["state"], True)
        # (no value checks, a host sync per call: the gates give g <= 0, and train.py checks the loss for NaN)
        ref = dict(initial_state=state, output_final_state=keep, check=False)
        if self.mixer == "gdn2" and rule == "recurrent":
            o, S = eda.gdn2_recurrent(q, k, v, g, b, w, **ref)
        elif self.mixer == "gdn2":
            o, S = eda.gdn2_chunk(q, k, v, g, b, w, chunk_size=cfg.la_chunk_size, **ref)
        elif rule == "triton":
            o, S = eda.eda_triton(q, k, v, e, g, beta, gamma, initial_state=state, output_final_state=keep,
                                  check_g=eda.triton_checks_g(cfg.gate, cfg.la_gate_lower_bound),
                                  recompute_states=cfg.la_recompute_states)
        elif rule == "decode":  # the fused recurrent kernel, the cached fp32 state updated in place
            o, S = eda.eda_triton_decode(q, k, v, e, g, beta, gamma, state=state.contiguous(), inplace=True)
        elif rule == "recurrent":
            o, S = eda.eda_recurrent(q, k, v, e, g, beta, gamma, **ref)
        else:
            o, S = eda.eda_chunk(q, k, v, e, g, beta, gamma, chunk_size=cfg.la_chunk_size, **ref)
        if cache is not None and S is not state:  # (the decode kernel has updated `state` in place already)
            state.copy_(S)
        return self.o_proj(maybe_compiled(la_output, compile)(o, self.o_norm.weight, self.o_norm.eps, p["g_proj"]))


# Full attention: Gated Attention (Appendix A; Qiu et al.), as in Qwen3-Next ----------------------------------
def rope_cos_sin(pos, rope_dim, theta):
    """cos, sin [1, T, 1, rope_dim/2] (fp32) of the half-split RoPE angles at positions pos [T] (a tensor)."""
    inv = 1.0 / (theta ** (torch.arange(0, rope_dim, 2, device=pos.device, dtype=torch.float32) / rope_dim))
    ang = pos.to(torch.float32)[:, None] * inv[None]                       # [T, rope_dim/2]
    return ang.cos()[None, :, None], ang.sin()[None, :, None]


def apply_rope(x, cos, sin):
    """Rotate the first rope_dim = 2 * cos.shape[-1] dims of x [B,T,h,hd] (fp32 math, x's dtype out)."""
    rope_dim = 2 * cos.shape[-1]
    xr, xp = x[..., :rope_dim].float(), x[..., rope_dim:]
    x1, x2 = xr.chunk(2, dim=-1)
    xr = torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1).to(x.dtype)
    return torch.cat([xr, xp], dim=-1)


def check_kv_room(cache, n):
    if n > cache["k"].shape[2]:
        raise ValueError(f"KV cache holds {cache['k'].shape[2]} positions, asked for {n}")


class GatedAttention(nn.Module):
    """Causal GQA attention with q/k RMSNorm, (partial) RoPE, SDPA, and an elementwise sigmoid output
    gate computed from the layer input (the gate comes out of q_proj, per head, as in Qwen3-Next)."""

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.cfg = cfg
        d, self.nh, self.nkv, self.hd = cfg.n_embd, cfg.n_head, cfg.kv_heads, cfg.head_dim
        self.q_proj = nn.Linear(d, self.nh * self.hd * 2, bias=False)   # [q | gate] per head
        self.k_proj = nn.Linear(d, self.nkv * self.hd, bias=False)
        self.v_proj = nn.Linear(d, self.nkv * self.hd, bias=False)
        # q/k RMSNorm with unit gains bounds every logit by sqrt(head_dim) until the gains grow
        self.q_norm = RMSNorm(self.hd, cfg.norm_eps) if cfg.qk_norm else nn.Identity()
        self.k_norm = RMSNorm(self.hd, cfg.norm_eps) if cfg.qk_norm else nn.Identity()
        self.o_proj = nn.Linear(self.nh * self.hd, d, bias=False)
        self.o_proj.residual = True
        # attn_conv_size > 0: each position sees its few predecessors before q, k, v are made, so a lookup can
        # match "the token after key k" without first learning a previous-token head (notes/synthetic.md §3)
        self.conv_weight = nn.Parameter(torch.empty(d, cfg.attn_conv_size)) if cfg.attn_conv_size else None

    def forward(self, x, cache=None, pos=0):
        """x [B,T,d]; cache: this layer's {'k', 'v'} of [B, nkv, max_len, hd] or None; pos: tokens before x, an
        int, or a long tensor [1] on x's device (decode.static_decode_step: T == 1, no shape depends on pos)."""
        B, T, _ = x.shape
        static = isinstance(pos, torch.Tensor)
        if static and (cache is None or T != 1):
            raise ValueError(f"GatedAttention: a tensor pos is for one-token decoding with a cache, got T={T}, "
                             f"cache={'None' if cache is None else 'given'}")
        if self.conv_weight is not None:  # the left context is the cache's last inputs, or zeros
            x, tail = causal_conv(x, self.conv_weight.to(x.dtype),
                                  cache["conv"].to(x.dtype) if cache is not None else None)
            if cache is not None:
                cache["conv"].copy_(tail)
        q, gate = self.q_proj(x).view(B, T, self.nh, 2 * self.hd).chunk(2, dim=-1)
        k, v = (proj(x).view(B, T, self.nkv, self.hd) for proj in (self.k_proj, self.v_proj))
        q, k = self.q_norm(q), self.k_norm(k)
        cos, sin = rope_cos_sin(pos if static else torch.arange(pos, pos + T, device=x.device),
                                self.cfg.rope_dim, self.cfg.rope_theta)   # once for q and k
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))                 # [B, h, T, hd]
        if static:  # a CUDA graph replays this step at every position: no shape depends on pos
            if cache["k"].dtype != q.dtype:  # converting the whole cache every step would cost more than attending
                raise ValueError(f"static decoding: the KV cache is {cache['k'].dtype}, the compute dtype {q.dtype}")
            cache["k"].index_copy_(2, pos, k.to(q.dtype))
            cache["v"].index_copy_(2, pos, v.to(q.dtype))
        elif cache is not None:
            check_kv_room(cache, pos + T)
            cache["k"][:, :, pos:pos + T] = k.to(cache["k"].dtype)
            cache["v"][:, :, pos:pos + T] = v.to(cache["v"].dtype)
        if cache is not None and T == 1:  # decoding: one query per head against the cache
            y = self._decode_attention(q, cache, pos)
        else:                             # training, or a prefill of T > 1 tokens after pos cached ones
            mask = None  # causal
            if cache is not None:
                k, v = cache["k"][:, :, :pos + T].to(q.dtype), cache["v"][:, :, :pos + T].to(q.dtype)
                if pos > 0:  # queries at pos..pos+T-1 see keys 0..their own position
                    mask = torch.arange(pos + T, device=x.device) <= (pos + torch.arange(T, device=x.device))[:, None]
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=mask is None,
                                               enable_gqa=self.nkv != self.nh)
        y = y.transpose(1, 2) * torch.sigmoid(gate)                       # elementwise gate per head dim
        return self.o_proj(y.reshape(B, T, self.nh * self.hd))

    def _decode_attention(self, q, cache, pos):
        """One query per head, q [B, nh, 1, hd], against the cache up to pos. A tensor pos attends over the whole
        cache, slots after pos masked."""
        ck, cv = cache["k"], cache["v"]
        split_kv = self.cfg.attn_decode == "split_kv"  # (ATTN_DECODES: which kernel, and why)
        if self.cfg.attn_decode == "auto" and q.is_cuda:  # wherever the kernel's own check takes the inputs
            split_kv = eda.kernels().attention_decode_problem(q, ck, cv, pos) is None
        if split_kv:  # the whole cache and pos as they are: the kernel reads slots 0..pos only
            return eda.kernels().attention_decode(q, ck, cv, pos)
        if isinstance(pos, torch.Tensor):
            keys, values, mask = ck, cv, (torch.arange(ck.shape[2], device=q.device) <= pos).view(1, 1, 1, -1)
        else:
            keys, values, mask = ck[:, :, :pos + 1].to(q.dtype), cv[:, :, :pos + 1].to(q.dtype), None
        qg = q.reshape(-1, self.nkv, self.nh // self.nkv, self.hd)  # GQA as query rows (enable_gqa: not every kernel)
        # the kernels chosen here, not by SDPA (its cuDNN plans anew for every key length); flash takes no mask
        backends = ([] if mask is not None else [SDPBackend.FLASH_ATTENTION]) + [SDPBackend.EFFICIENT_ATTENTION]
        with sdpa_kernel(backends if q.device.type == "cuda" else [SDPBackend.MATH]):
            y = F.scaled_dot_product_attention(qg, keys, values, attn_mask=mask)
        return y.reshape(-1, self.nh, 1, self.hd)


# Mixture of experts ------------------------------------------------------------------------------------------
def grouped_matmul(x, w, counts):
    """x [N, a] sorted by expert, w [E, a, b], counts [E] -> [N, b]: rows of expert i times w[i]. torch's grouped
    GEMM on CUDA in bf16 (one launch), else one matmul per expert (why: notes/model.md)."""
    w = w.to(x.dtype)
    aligned = all((s * x.element_size()) % 16 == 0 for s in (w.shape[1], w.shape[2]))
    if hasattr(F, "grouped_mm") and aligned and x.is_cuda and x.dtype == torch.bfloat16:
        with suppress(RuntimeError):  # a GPU (or torch build) without it, which torch documents for sm80 and later
            return F.grouped_mm(x, w, offs=counts.cumsum(0).to(torch.int32))
    return torch.cat([xi @ w[i] for i, xi in enumerate(x.split(counts.tolist()))])


class MoE(nn.Module):
    """Routed SwiGLU experts + one shared expert (Qwen3-Next / Qwen MoE recipe). Router: softmax over E experts in
    fp32, top-k, weights renormalized to sum to 1; the shared expert, a SwiGLU of width shared_expert_hidden, scaled
    by sigmoid(W_s x). Aux loss (Switch Transformer): moe_aux_coef * E * sum_i f_i * P_i, f_i = the fraction of the
    N*k routed slots that go to expert i, P_i = its mean router probability (coef when perfectly balanced).
    Dispatch: the (token, expert) pairs sorted by expert, run with a grouped GEMM, scattered back with index_add."""

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.cfg = cfg
        d, E, Fh = cfg.n_embd, cfg.n_expert, cfg.expert_hidden
        self.router = nn.Linear(d, E, bias=False)
        self.w_gate = nn.Parameter(torch.empty(E, d, Fh))
        self.w_up = nn.Parameter(torch.empty(E, d, Fh))
        self.w_down = nn.Parameter(torch.empty(E, Fh, d))
        if cfg.shared_expert_hidden:
            self.shared = SwiGLU(d, cfg.shared_expert_hidden)
            self.shared_gate = nn.Linear(d, 1, bias=False)
        self.last_counts = None  # tokens per expert in the last forward (for tests / logging)
        self.init_experts()

    @torch.no_grad()
    def init_experts(self, gen=lambda leaf: None):
        """Normal(0, init_std), the residual output w_down scaled by 1/sqrt(2 n_layer); gen as init_gates'."""
        std = self.cfg.init_std
        for leaf, s in (("w_gate", std), ("w_up", std), ("w_down", std / math.sqrt(2 * self.cfg.n_layer))):
            init_draw(getattr(self, leaf), lambda t, g, s=s: t.normal_(0.0, s, generator=g), gen(leaf))

    def forward(self, x):
        B, T, d = x.shape
        E, k = self.cfg.n_expert, self.cfg.moe_topk
        xf = x.reshape(-1, d)
        probs = F.linear(xf.float(), self.router.weight.float()).softmax(dim=-1)  # fp32 router
        top_p, top_i = probs.topk(k, dim=-1)
        top_p = top_p / top_p.sum(dim=-1, keepdim=True)
        flat_e = top_i.flatten()                                           # [N*k]
        counts = torch.bincount(flat_e, minlength=E)
        self.last_counts = counts.detach()
        aux = self.cfg.moe_aux_coef * E * (counts.float() / (xf.shape[0] * k) * probs.mean(dim=0)).sum()
        order = flat_e.argsort(stable=True)
        token = order // k
        xs = xf[token]
        h = F.silu(grouped_matmul(xs, self.w_gate, counts)) * grouped_matmul(xs, self.w_up, counts)
        y = grouped_matmul(h, self.w_down, counts) * top_p.flatten()[order].unsqueeze(-1).to(h.dtype)
        out = torch.zeros_like(xf).index_add_(0, token, y.to(xf.dtype))
        if self.cfg.shared_expert_hidden:
            out = out + self.shared(xf) * torch.sigmoid(self.shared_gate(xf))
        return out.view(B, T, d), aux


# Blocks and the model ----------------------------------------------------------------------------------------
class Block(nn.Module):
    """Pre-norm residual block: x + mixer(norm(x)), then x + ffn(norm(x)). Returns (x, the MoE aux loss or 0)."""

    def __init__(self, cfg: GPTConfig, layer_idx, compile=False):
        super().__init__()
        self.is_attention = cfg.is_attention_layer(layer_idx)
        self.norm1 = RMSNorm(cfg.n_embd, cfg.norm_eps)
        self.mixer = GatedAttention(cfg) if self.is_attention else LinearAttention(cfg, compile)
        self.norm2 = RMSNorm(cfg.n_embd, cfg.norm_eps)
        self.ffn = MoE(cfg) if cfg.moe else SwiGLU(cfg.n_embd, cfg.ffn_width)

    def forward(self, x, cache=None, pos=0):
        h = self.norm1(x)
        x = x + (self.mixer(h, cache, pos) if self.is_attention else self.mixer(h, cache))
        h = self.ffn(self.norm2(x))
        h, aux = h if isinstance(h, tuple) else (h, x.new_zeros((), dtype=torch.float32))
        return x + h, aux


def _head_chunk(logits, classes, valid, n):
    """One chunk of _HeadLoss from its logits [rows, vocab]: (its valid rows' summed cross-entropy, the gradient of
    the mean over all n valid rows, softmax - onehot, in the logits' dtype)."""
    lf = logits.to(torch.promote_types(logits.dtype, torch.float32))
    lse = torch.logsumexp(lf, dim=-1)
    loss = ((lse - lf.gather(1, classes[:, None]).squeeze(1)) * valid).sum()
    onehot = torch.arange(lf.shape[-1], device=lf.device) == classes[:, None]
    grad = (torch.exp(lf - lse[:, None]) - onehot.to(lf.dtype)) * (valid.to(lf.dtype) / n)[:, None]
    return loss, grad.to(logits.dtype)


class _HeadLoss(torch.autograd.Function):
    """Mean cross-entropy of h @ weight^T against targets (-1: ignored), its gradients formed in the forward `rows`
    rows at a time: no [N, vocab] logits outlive a chunk, and the backward only scales the stored dh, dweight. The
    plain head's FLOPs and precisions (softmax, loss and dweight in at least fp32). Ignored rows are dropped eager,
    masked when compiled (no shape depends on the data). grads=False (evaluation): the loss alone."""

    @staticmethod
    def forward(ctx, h, weight, targets, grads, rows, compile):
        acc = torch.promote_types(weight.dtype, torch.float32)
        valid, classes = targets != -1, targets.clamp(min=0)  # (an ignored row's class: any, masked below)
        n = valid.sum()
        all_rows, kept = h, None
        if not compile and not torch.compiler.is_compiling():
            kept = valid.nonzero().squeeze(1)  # (one host sync a step: eager only)
            if len(kept) < len(valid):
                h, classes, valid = h[kept], classes[kept], valid[kept]
            else:
                kept = None
        loss = torch.zeros((), device=h.device, dtype=acc)
        dh = torch.empty_like(h) if grads else h.new_empty(0)
        dw = torch.zeros(weight.shape if grads else 0, device=weight.device, dtype=acc)
        chunk = maybe_compiled(_head_chunk, compile)
        for i in range(0, h.shape[0], rows):
            hc, tc, vc = (x[i:i + rows] for x in (h, classes, valid))
            chunk_loss, grad = chunk(F.linear(hc, weight), tc, vc, n)  # logits in autocast's dtype, else the inputs'
            loss += chunk_loss
            if grads:
                dh[i:i + rows] = grad @ weight.to(grad.dtype)
                dw += grad.t() @ hc.to(grad.dtype)
        if grads and kept is not None:  # the dropped rows' gradient is zero
            dh = torch.zeros_like(all_rows).index_copy_(0, kept, dh)
        ctx.save_for_backward(dh, dw)
        ctx.weight_dtype = weight.dtype
        return loss / n

    @staticmethod
    def backward(ctx, dloss):
        dh, dw = ctx.saved_tensors
        return dh * dloss.to(dh.dtype), (dw * dloss).to(ctx.weight_dtype), None, None, None, None


class GPT(nn.Module):
    """The language model: embedding, n_layer blocks, final RMSNorm, lm_head (untied by default). compile: False, True
    (Inductor) or a backend name compiles the elementwise pieces (maybe_compiled) of every forward without a cache."""

    def __init__(self, config: GPTConfig, compile=False, seed=None):
        super().__init__()
        self.config = cfg = config
        check_compile(compile)
        self.compile = compile
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.blocks = nn.ModuleList([Block(cfg, i, compile) for i in range(cfg.n_layer)])
        self.norm_f = RMSNorm(cfg.n_embd, cfg.norm_eps)
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        if cfg.tie_embeddings:
            self.lm_head.weight = self.wte.weight
        self.grad_checkpoint = False  # True: recompute each block in backward (non-reentrant checkpoint)
        self.init_weights(seed)

    @torch.no_grad()
    def init_weights(self, seed=None):
        """nanoGPT init (normal init_std, residual outputs scaled by 1/sqrt(2 n_layer)); norms at 1; gates and convs as
        init_gates. Each parameter draws from param_generator(seed, its full name); seed None: one from torch's global
        generator. Safe to call again after building on meta and to_empty()."""
        if seed is None:
            seed = int(torch.randint(2**31, (), device="cpu"))
        std = self.config.init_std
        for mname, m in self.named_modules():
            def gen(leaf, mname=mname):
                return param_generator(seed, f"{mname}.{leaf}")
            if isinstance(m, (nn.Linear, nn.Embedding)):
                s = std / math.sqrt(2 * self.config.n_layer) if getattr(m, "residual", False) else std
                init_draw(m.weight, lambda t, g: t.normal_(0.0, s, generator=g), gen("weight"))
            elif isinstance(m, RMSNorm):
                init_draw(m.weight, lambda t, g: t.fill_(1.0))
            elif isinstance(m, MoE):
                m.init_experts(gen)
            if isinstance(m, LinearAttention):
                m.init_gates(gen)
            if isinstance(m, GatedAttention) and m.conv_weight is not None:  # as the linear layers' conv
                init_uniform_conv(m.conv_weight, gen("conv_weight"))

    def forward(self, idx, targets=None, chunked_loss=False):
        """idx [B,T] -> (logits [B,T,vocab], mean CE loss or None, aux_loss). With targets [B,T] the loss is the
        mean cross-entropy over the positions whose target is not -1; the plain head takes all positions (one graph
        under torch.compile). chunked_loss=True: logits None, the loss from _HeadLoss, which never holds the whole
        logits (64k tokens x 50k vocab: 13 GB in fp32) and, eager, skips the positions without a target."""
        x = self.wte(idx)
        aux = torch.zeros((), device=idx.device, dtype=torch.float32)
        for block in self.blocks:
            if self.grad_checkpoint and self.training and torch.is_grad_enabled():
                x, a = checkpoint(block, x, use_reentrant=False)
            else:
                x, a = block(x)
            aux = aux + a
        if chunked_loss and targets is not None:
            h, w = self.norm_f(x).flatten(0, 1), self.lm_head.weight
            grads = torch.is_grad_enabled() and (h.requires_grad or w.requires_grad)
            return None, _HeadLoss.apply(h, w, targets.flatten(), grads, self.config.head_chunk_rows, self.compile), aux
        logits = self.lm_head(self.norm_f(x))
        if targets is None:
            return logits, None, aux
        return logits, F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), ignore_index=-1), aux

    def param_summary(self):
        """{'total', 'active', 'breakdown'}, counted as Table 7 counts (notes/model.md, "Counting")."""
        cfg = self.config
        bd = {k: 0 for k in ("embedding", "lm_head", "linear_attention", "full_attention", "ffn", "experts",
                             "shared_expert", "router", "norms")}
        parts = (("wte.", "embedding"), ("lm_head.", "lm_head"), (".ffn.router.", "router"), (".ffn.w_", "experts"),
                 (".ffn.shared", "shared_expert"), (".ffn.", "ffn"))  # the first match counts
        for name, p in self.named_parameters():  # (a tied weight once: named_parameters skips repeats)
            if ".mixer." in name:  # blocks.<i>.mixer.*
                part = "full_attention" if self.blocks[int(name.split(".")[1])].is_attention else "linear_attention"
            else:
                part = next((part for key, part in parts if key in name), "norms")
            bd[part] += p.numel()
        total = sum(bd.values())
        active = total - (bd["experts"] * (cfg.n_expert - cfg.moe_topk) // cfg.n_expert if cfg.moe else 0)
        return {"total": total, "active": active, "breakdown": bd}

    def configure_optimizers(self, weight_decay, learning_rate, betas, device_type):
        """AdamW; weight decay on matrices (>= 2D) only, never on the decay gate's A_log, dt_bias, norms or biases."""
        decay, no_decay = [], []
        for name, p in self.named_parameters():
            if not p.requires_grad:
                continue
            matrix = p.dim() >= 2 and name.rsplit(".", 1)[-1] not in ("A_log", "dt_bias") and "norm" not in name
            (decay if matrix else no_decay).append(p)
        groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
        return torch.optim.AdamW(groups, lr=learning_rate, betas=betas, fused=device_type == "cuda")

    def flops_per_token(self, seq_len, on_cuda=False):
        """Training FLOPs per token (3x forward) for MFU (notes/model.md, "Counting"), at the device rule's chunk."""
        cfg = self.config
        s = self.param_summary()  # the embedding lookup is no matmul, but a tied lm_head still is
        flops = 6.0 * (s["active"] - (0 if cfg.tie_embeddings else s["breakdown"]["embedding"]))
        C = eda.rule_chunk(eda.rule_backend(cfg.la_backend, cfg.mixer, on_cuda), cfg.la_chunk_size)
        K, V = cfg.la_head_dim, cfg.la_v_head_dim
        for b in self.blocks:
            if b.is_attention:
                flops += 3 * 2 * 2 * cfg.n_head * cfg.head_dim * seq_len / 2
            else:
                sub, Cs = (2, 2 * C) if cfg.mixer == "eda" else (1, C)
                per = 2 * Cs * K * 2 + 2 * Cs * V + Cs * (K + V) + 3 * 2 * K * V
                flops += 3 * sub * per * cfg.la_n_v_head
        return float(flops)


# Checkpoints (train.py writes them; train.py, sample.py and probe.py read them) ----------------------------
RETIRED_FIELDS = ("grad_checkpoint",)  # once GPTConfig fields, still in older checkpoints' model_args


class CheckpointError(ValueError):
    """A checkpoint file that cannot be used; the message names the file."""


def _rng_states_load(rng):
    """Whether train.py's saved random-number states load into fresh generators (fails here, not at a resume)."""
    try:
        random.Random().setstate(rng["python"])
        name, key, *rest = rng["numpy"]
        np.random.RandomState().set_state((name, np.array(key, dtype=np.uint32), *rest))
        torch.Generator().set_state(rng["torch"])
        return rng.get("cuda") is None or (torch.is_tensor(rng["cuda"]) and rng["cuda"].dtype == torch.uint8)
    except Exception:
        return False


# each field train.py writes: (the test its value passes, what it must be)
CHECKPOINT_FIELDS = {
    "model": (lambda v: isinstance(v, dict) and all(isinstance(k, str) and torch.is_tensor(t) for k, t in v.items()),
              "a dict of named tensors"),
    "model_args": (lambda v: isinstance(v, dict) and all(isinstance(k, str) for k in v), "a dict of GPTConfig fields"),
    "optimizer": (lambda v: isinstance(v, dict) and isinstance(v.get("state"), dict)
                  and isinstance(v.get("param_groups"), list), "an optimizer state dict"),
    "iter_num": (lambda v: type(v) is int and v >= 0, "a step count >= 0"),
    "best_val_loss": (lambda v: type(v) in (int, float), "a number"),
    "rng": (lambda v: isinstance(v, dict) and _rng_states_load(v), "the random-number states train.py saves"),
    "data_position": (lambda v: isinstance(v, dict) and isinstance(v.get("dataset"), str)
                      and type(v.get("block_size")) is int, "a dict with the dataset's name and block_size"),
    "encoding": (lambda v: v is None or isinstance(v, str), "a tokenizer name")}


def load_checkpoint(path, keys=("model", "model_args"), **kw):
    """torch.load with weights_only=True (a crafted ckpt.pt cannot run code), then checked before anything is built
    from it (a crafted n_embd would allocate the model it names): a CheckpointError naming the file when it is
    unreadable, lacks one of `keys`, has a field of the wrong kind, or unfit or non-finite weights."""
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True, **kw)
    except pickle.UnpicklingError as err:  # what weights_only raises on anything but tensors and plain values
        # torch's message is a page long; its line naming the refused object is the one worth showing
        lines = [ln for ln in str(err).splitlines() if "GLOBAL" in ln or "Unsupported" in ln] or [type(err).__name__]
        raise CheckpointError(f"{path} holds Python objects other than tensors and plain values, so it is not "
                              f"loaded (unpickling them could run code): {lines[0].strip()[:200]}") from None
    except Exception as err:  # torch.load's errors for a short or damaged file are RuntimeErrors, EOFError, ...
        raise CheckpointError(f"cannot read the checkpoint {path} (truncated or corrupt?): "
                              f"{type(err).__name__}: {str(err).strip().split('. ')[0][:200]}") from None
    if missing := [k for k in keys if not isinstance(ckpt, dict) or k not in ckpt]:
        raise CheckpointError(f"{path} is not a nanoEDA checkpoint: no {', '.join(map(repr, missing))}")
    for name, (ok, what) in CHECKPOINT_FIELDS.items():
        if name in ckpt and not ok(ckpt[name]):
            raise CheckpointError(f"{path}: its field {name!r} ({type(ckpt[name]).__name__}) is not {what}")
    if "model" in ckpt:
        _A_per_channel(ckpt)
    if "model" not in ckpt or "model_args" not in ckpt:
        return ckpt
    with torch.device("meta"):  # the model model_args describe, against the weights, which must be finite
        want = GPT(checkpoint_config(ckpt, path)).state_dict()
    have = ckpt["model"]
    bad = next((f"unexpected weight {k!r}" for k in have if k not in want), None) or next(
        (f"no weight {k!r}" for k in want if k not in have), None) or next(
        (f"{k} is {list(have[k].shape)} in the file, model_args make {list(t.shape)}"
         for k, t in want.items() if have[k].shape != t.shape), None)
    if bad:
        raise CheckpointError(f"{path}: the weights do not fit its model_args: {bad}")
    for k, t in have.items():
        if t.is_floating_point() and not torch.isfinite(t).all():
            raise CheckpointError(f"{path}: the weight {k} holds NaN or inf values: the model cannot be used")
    return ckpt


def checkpoint_config(ckpt, path, **runtime):
    """The GPTConfig of a checkpoint's model_args (RETIRED_FIELDS dropped), with the `runtime` fields replaced; a
    CheckpointError naming the file for fields this code cannot build."""
    args = {k: v for k, v in ckpt["model_args"].items() if k not in RETIRED_FIELDS}
    if unknown := sorted(set(args) - {f.name for f in fields(GPTConfig)}):
        raise CheckpointError(f"{path}: model_args has fields this code does not know: {', '.join(unknown)}")
    try:
        return GPTConfig(**dict(args, **runtime))
    except (TypeError, ValueError) as err:
        raise CheckpointError(f"{path}: {err}") from None


def _A_per_channel(ckpt):
    """In place: a checkpoint written when A was one per value head ([HV]) in the channel-wise layers, with A (and
    its optimizer moments) repeated over each head's K channels ([HV, K]): the same decay."""
    model, opt = ckpt["model"], (ckpt.get("optimizer") or {}).get("state", {})
    for name, a in list(model.items()):
        dt = model.get(name[:-len("A_log")] + "dt_bias") if name.endswith("A_log") else None
        if dt is None or a.dim() != 1 or dt.dim() != 2:
            continue
        model[name] = a[:, None].expand_as(dt).clone()
        for key, t in opt.get(name, {}).items():  # Adam's exp_avg, exp_avg_sq (a scalar step stays)
            if torch.is_tensor(t) and t.shape == a.shape:
                opt[name][key] = t[:, None].expand_as(dt).clone()


def model_from_checkpoint(path, la_backend="auto", device="cpu", dtype="float32", missing=""):
    """(the GPT a checkpoint describes, its weights loaded, in eval mode on device, in dtype on CUDA and float32 on
    the CPU; the checkpoint dict), for sample.py, probe.py, eval.py. la_backend replaces the recorded one (how to
    compute, not what). A CheckpointError where it cannot be had; `missing` ends its message where there is no file."""
    if not os.path.exists(path):
        raise CheckpointError(f"no checkpoint at {path}{missing}")
    ckpt = load_checkpoint(path)
    cfg = checkpoint_config(ckpt, path, la_backend=la_backend)
    if problem := cfg.auto_backend_problem("cuda" in device):
        raise CheckpointError(problem)
    model = GPT(cfg)
    model.load_state_dict(ckpt["model"])  # (shapes and names checked by load_checkpoint)
    return model.eval().to(device, getattr(torch, dtype) if "cuda" in device else torch.float32), ckpt
