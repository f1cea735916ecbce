"""
The paper's memory-state probes (Sec. 4.4 sec:memory_state_analysis, Fig. eda_memory_state_analysis) on a
trained checkpoint: held-out text runs through the model, and for every EDA layer and value head:

    (a) gate-strength allocation   per token and head, with alpha_bar = mean_j exp(g_j) over the d_k key
                                   channels:  b_D = 1 - alpha_bar,  b_Delta = alpha_bar beta,  b_E = alpha_bar gamma,
                                   shares q_m = b_m / (b_D + b_Delta + b_E); their means overall and per alpha_bar bin
    (b) collateral perturbation    ||delta o_t|| / ||o_t^-||: o_t^- = S^_t^T q_t, the readout of the decayed state
                                   just before the erase, delta o_t = (S~_t - S^_t)^T q_t, the change the erase
                                   makes to it; for the actual address e_t and, replaying the whole recurrence
                                   with the same q, k, v, g, beta, gamma, for three counterfactual addresses:
                                   random unit vectors, head-shuffled erase addresses, e_t = k_t. Per layer, the
                                   fold change mean(score) / mean(Actual score)
    (c) geometry                   mean |cos(e_t, k_t)|, beside the mean |u^T r| of two independent uniform unit
                                   vectors in R^{d_k}: Gamma(d/2) / (sqrt(pi) Gamma((d+1)/2)), d = d_k
    (d) raw write-key recall       R(lag) = mean over t >= lag, batch and heads of cos(S_t^T k_{t-lag}, v_{t-lag}):
                                   the state at token t read at the raw write key of the token `lag` steps
                                   earlier (unit k, no query, no scale), compared in direction with the value
                                   written there. 1: that value comes back intact (up to scale); 0: nothing of
                                   it. Any delta-rule model has it: EDA beside a KDA checkpoint (--compare)

notes/probe.md derives each definition and the choices the paper leaves open. The replay is eda.eda_recurrent
(the spec), traced token by token, on the rule inputs the layer itself computes (LinearAttention.forward with
return_rule_inputs=True), in float64; the replayed readout, put through the layer's output norm, gate and
projection, is checked against the layer's own output (printed as the replay check).

    python probe.py --out_dir=out/stdlib_26m                                # the checkpoint's val split
    python probe.py --out_dir=out/eda --compare=out/kda --num_tokens=16384  # recall beside a KDA model
    python probe.py --out_dir=out/eda --text=FILE:held_out.txt --png=probe.png

Prints a table per layer and overall; draws the paper's three panels (a)-(c), and (d) recall with --compare,
to a PNG when matplotlib is installed (the table prints without it).
"""
import math
import os
import sys

import torch
import torch.nn.functional as F

import eda
from configurator import configure, file_text
from data.synthetic import TASKS as SYNTHETIC_TASKS
from model import CheckpointError, LinearAttention, la_output, model_from_checkpoint

# -----------------------------------------------------------------------------
out_dir = 'out'            # the EDA checkpoint: out_dir/ckpt.pt (written by train.py)
compare = ''               # a KDA (or EDA) checkpoint directory to put beside it where a probe applies ('': none)
dataset: str | None = None  # token source: a name in data/ or a folder with {split}.bin (None: the checkpoint's own)
split = 'val'              # which file of the dataset: held-out text by default
text: str | None = None    # instead of a dataset: the text itself, or FILE:path (encoded with the checkpoint's tokenizer)
num_tokens = 8192          # tokens probed (cut into sequences of seq_len; the remainder is dropped)
seq_len: int | None = None  # tokens per sequence (None: the model's block_size, or the whole text if shorter)
offset = 0                 # first token taken from the dataset file
lags = (1, 4, 16, 64, 256)  # write-key recall: read S_t at k_{t-lag}; lags >= seq_len are dropped
bins = (0.3, 0.5, 0.7, 0.9)  # alpha_bar bin edges of the allocation: [0, 0.3), [0.3, 0.5), ..., [0.9, 1]
per_head = False           # True: also a row per value head in the per-layer tables
seed = 1337                # the random counterfactual addresses
device = 'cuda' if torch.cuda.is_available() else 'cpu'
dtype = 'float32'          # the model's forward on CUDA ('bfloat16': as trained); the CPU runs float32. The
                           # replay is float64 whatever this is
la_backend = 'auto'        # the model's forward: auto (triton on CUDA, chunk on CPU), chunk, recurrent, triton
png: str | None = None     # the figure (None: out_dir/probe.png; '': no figure)
# -----------------------------------------------------------------------------

STRATEGIES = ('actual', 'random', 'shuffle', 'same')  # erase addresses of probe (b); 'same' is e_t = k_t
MECHANISMS = ('D', 'Dlt', 'E')                        # decay, same-address delta correction, independent erase
# the paper's numbers (Sec. 4.4), printed beside ours
PAPER = dict(shares=(35.4, 31.8, 32.8), erase_high=69.1, erase_over_delta_high=3.0,
             raw=dict(actual=0.064, random=0.143, shuffle=0.115, same=0.223),
             fold=dict(random=2.4, shuffle=1.9, same=3.4), cos=0.105, cos_ref_128=0.0707)


def fail(msg):
    sys.exit(f"probe.py: {msg}")


# ----------------------------------------------------------------------------------------------------
# The probes, on one layer's rule inputs (shapes as in eda.py: q, k [B,T,H,K], v [B,T,HV,V], e [B,T,HV,K],
# g [B,T,HV,K] or [B,T,HV], beta, gamma [B,T,HV]; e = gamma = None for KDA/GDN).


def to_value_heads(x, HV):
    """q or k [B, T, H, K] -> [B, T, HV, K] in float64: value head i reads q/k head i // (HV // H), as in eda.py."""
    return x.double().repeat_interleave(HV // x.shape[2], dim=2)


def gate_allocation(g, beta, gamma):
    """Probe (a) per token and value head: (alpha_bar [B,T,HV], shares [B,T,HV,3] = q_D, q_Delta, q_E), float64.
    alpha_bar = mean over the key channels of exp(g); b_D = 1 - alpha_bar, b_Delta = alpha_bar beta,
    b_E = alpha_bar gamma (0 without an erase); q_m = b_m / (b_D + b_Delta + b_E)."""
    alpha = g.double().exp()
    abar = alpha.mean(-1) if alpha.dim() == 4 else alpha  # a per-head g (GDN) is its own mean
    erase = abar * gamma.double() if gamma is not None else torch.zeros_like(abar)
    b = torch.stack([1 - abar, abar * beta.double(), erase], dim=-1)
    return abar, b / b.sum(-1, keepdim=True)  # > 0: beta = sigmoid(.) > 0 where alpha_bar = 1


def abs_cos(e, k):
    """Probe (c): |cos(e_t, k_t)| [B, T, HV] (e per value head, k expanded to the value heads)."""
    return F.cosine_similarity(e.double(), to_value_heads(k, e.shape[2]), dim=-1).abs()


def independent_abs_cos(d):
    """E|u^T r| for independent uniform unit vectors u, r in R^d: Gamma(d/2) / (sqrt(pi) Gamma((d+1)/2))
    (notes/probe.md; 2/pi for d = 2, 0.0707 for d = 128)."""
    return math.exp(math.lgamma(d / 2) - math.lgamma((d + 1) / 2)) / math.sqrt(math.pi)


def counterfactual_addresses(inputs, generator):
    """Probe (b)'s alternatives to the layer's e, each [B, T, HV, K] float64 with the structure of the learned
    address (one unit vector per q/k head, shared by its HV // H value heads, like e and k):
    random:  i.i.d. uniform unit vectors (normalized Gaussians from `generator`);
    shuffle: the learned addresses of another q/k head at the same token (value heads rolled by HV // H, a
             cyclic shift of the q/k heads, so no head keeps its own); None with a single q/k head;
    same:    e_t = k_t."""
    e, k = inputs['e'], inputs['k']
    B, T, H, K = k.shape
    HV = e.shape[2]
    rand = torch.randn(B, T, H, K, generator=generator, dtype=torch.float64).to(e.device)
    return dict(random=to_value_heads(F.normalize(rand, dim=-1), HV),
                shuffle=e.double().roll(HV // H, dims=2) if H > 1 else None,
                same=to_value_heads(k, HV))


def replay(inputs, e=None, lags=()):
    """Run eda.eda_recurrent in float64 on a layer's rule inputs with erase address e, recording along the way
    what probes (b) and (d) need. e: None (the layer's own, inputs['e']), or [n*B, T, HV, K]: n addresses
    replayed side by side in one batch (the other inputs repeated n times). Returns a dict:
      o             [n*B, T, HV, V] the rule's output (float64)
      perturbation  [n*B, T, HV] ||delta o_t|| / ||o_t^-||, NaN where ||o_t^-|| = 0 (the first token reads the
                    empty state); None without an erase
      recall        [len(lags), HV] mean cos(S_t^T k_{t-lag}, v_{t-lag}) over t >= lag and the batch
    """
    e = inputs['e'] if e is None else e
    n = 1 if e is None else e.shape[0] // inputs['v'].shape[0]
    q, k, v, g, beta, gamma = (None if inputs[m] is None else torch.cat([inputs[m].double()] * n)
                               for m in ('q', 'k', 'v', 'g', 'beta', 'gamma'))
    B, T, HV, _ = v.shape
    qx, kx = to_value_heads(q, HV), to_value_heads(k, HV)
    pre = torch.zeros(B, T, HV, dtype=torch.float64, device=v.device)   # ||o_t^-||
    change = torch.zeros_like(pre)                                       # ||delta o_t||
    recall_sum = torch.zeros(len(lags), HV, dtype=torch.float64, device=v.device)
    recall_n = torch.zeros(len(lags), 1, dtype=torch.float64, device=v.device)

    def trace(t, S_hat, S_tilde, S):
        if e is not None:
            o_minus = torch.einsum('bhk,bhkv->bhv', qx[:, t], S_hat)
            pre[:, t] = o_minus.norm(dim=-1)
            change[:, t] = (torch.einsum('bhk,bhkv->bhv', qx[:, t], S_tilde) - o_minus).norm(dim=-1)
        done = [i for i, lag in enumerate(lags) if t >= lag]  # one read of S_t for every lag reached
        if done:
            src = [t - lags[i] for i in done]
            read = torch.einsum('bshk,bhkv->bshv', kx[:, src], S)
            recall_sum[done] += F.cosine_similarity(read, v[:, src], dim=-1).sum(0)
            recall_n[done] += B

    o, _ = eda.eda_recurrent(q, k, v, None if e is None else e.double(), g, beta, gamma, trace=trace)
    perturbation = None if e is None else (change / pre).masked_fill(pre == 0, math.nan)
    return dict(o=o, perturbation=perturbation, recall=recall_sum / recall_n.clamp_min(1))


def probe_inputs(inputs, lags=(), seed=0):
    """Every probe on one layer's rule inputs (the dict LinearAttention.forward returns with
    return_rule_inputs=True). Returns a dict of CPU float64 tensors: abar, shares (probe a), perturbation
    {strategy: [B,T,HV] or None} and cos (b, c; None without an erase), recall [len(lags), HV] (d), o (the
    replayed rule output, [B,T,HV,V])."""
    abar, shares = gate_allocation(inputs['g'], inputs['beta'], inputs['gamma'])
    actual = replay(inputs, lags=lags)
    res = dict(abar=abar, shares=shares, recall=actual['recall'], o=actual['o'], perturbation=None, cos=None)
    if inputs['e'] is not None:
        res['cos'] = abs_cos(inputs['e'], inputs['k'])
        res['perturbation'] = {'actual': actual['perturbation']}
        alternatives = counterfactual_addresses(inputs, torch.Generator().manual_seed(seed))
        names = [m for m, e in alternatives.items() if e is not None]
        replayed = replay(inputs, torch.cat([alternatives[m] for m in names]))['perturbation']  # one batch
        for name, p in zip(names, replayed.chunk(len(names))):
            res['perturbation'][name] = p
        res['perturbation'].update({m: None for m, e in alternatives.items() if e is None})
    return {n: ({s: (p.cpu() if p is not None else None) for s, p in r.items()} if isinstance(r, dict)
                else r.cpu() if r is not None else None) for n, r in res.items()}


def rel(a, b):
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm().clamp_min(1e-300)).item()


@torch.no_grad()
def probe_model(model, idx, lags=(), seed=0):
    """Run idx [B, T] through the model, catching each linear-attention layer's input and output with hooks,
    then probe every such layer. Returns a list of (block index, probe_inputs' dict + 'replay_err': the
    relative error of the replayed output, through the layer's own output path, against the layer's output)."""
    layers = [(i, b.mixer) for i, b in enumerate(model.blocks) if isinstance(b.mixer, LinearAttention)]
    seen, handles = {}, []
    for i, layer in layers:
        handles.append(layer.register_forward_hook(lambda m, args, out, i=i: seen.__setitem__(i, (args[0], out))))
    try:
        model(idx)
    finally:
        for h in handles:
            h.remove()
    results = []
    for i, layer in layers:
        x, out = seen.pop(i)
        res = probe_inputs(layer(x, return_rule_inputs=True), lags, seed=seed * 1000 + i)
        o = res['o'].to(x.device, x.dtype)
        replayed = layer.o_proj(la_output(o, layer.o_norm.weight, layer.o_norm.eps, layer.g_proj(x)))
        res['replay_err'] = rel(replayed, out)
        del res['o']
        results.append((i, res))
    return results


# ----------------------------------------------------------------------------------------------------
# Summaries: per layer and pooled over layers (tokens and heads weigh equally).


def bin_labels(edges):
    return [f"<{edges[0]:g}"] + [f"{a:g}-{b:g}" for a, b in zip(edges, edges[1:])] + [f">={edges[-1]:g}"]


def allocation_summary(abar, shares, edges):
    """abar [N], shares [N, 3] (tokens x heads flattened): mean shares overall and per bin of alpha_bar.
    Returns dict(all=[3], bins=[(fraction of tokens, [3] or None)] one per bin)."""
    which = torch.bucketize(abar, torch.tensor(edges, dtype=abar.dtype), right=True)  # [0, e0) -> 0, ...
    out = []
    for j in range(len(edges) + 1):
        sel = which == j
        out.append((sel.double().mean().item(), shares[sel].mean(0).tolist() if sel.any() else None))
    return dict(all=shares.mean(0).tolist(), bins=out)


def summarize(results, edges):
    """Per-layer rows and overall numbers of every probe from probe_model's list."""
    rows, abars, shares = [], [], []
    for i, r in results:
        HV = r['abar'].shape[-1]
        row = dict(layer=i, heads=HV, replay_err=r['replay_err'],
                   shares=r['shares'].reshape(-1, 3).mean(0).tolist(),
                   head_shares=r['shares'].reshape(-1, HV, 3).mean(0).tolist(),
                   abar=r['abar'].mean().item(), recall=r['recall'].mean(-1).tolist(),
                   head_recall=r['recall'].T.tolist())
        if r['perturbation'] is not None:
            p = r['perturbation']
            row['raw'] = {s: (p[s].nanmean().item() if p[s] is not None else math.nan) for s in STRATEGIES}
            row['head_raw'] = {s: (p[s].flatten(0, 1).nanmean(0).tolist() if p[s] is not None else [math.nan] * HV)
                               for s in STRATEGIES}
            base = row['raw']['actual']
            row['fold'] = {s: row['raw'][s] / base if base > 0 else math.nan for s in STRATEGIES[1:]}
            row['cos'] = r['cos'].mean().item()
            row['head_cos'] = r['cos'].flatten(0, 1).mean(0).tolist()
        rows.append(row)
        abars.append(r['abar'].reshape(-1))
        shares.append(r['shares'].reshape(-1, 3))
    s = dict(rows=rows, alloc=allocation_summary(torch.cat(abars), torch.cat(shares), edges),
             recall=[sum(r['recall'][j] for r in rows) / len(rows) for j in range(len(rows[0]['recall']))])
    eda_rows = [r for r in rows if 'raw' in r]
    if eda_rows:
        s['raw'] = {m: sum(r['raw'][m] for r in eda_rows) / len(eda_rows) for m in STRATEGIES}
        s['fold'] = {m: sum(r['fold'][m] for r in eda_rows) / len(eda_rows) for m in STRATEGIES[1:]}
        s['cos'] = sum(r['cos'] for r in eda_rows) / len(eda_rows)
    return s


# ----------------------------------------------------------------------------------------------------
# Output


def pct(x):
    return '   n/a' if x is None or x != x else f"{100 * x:6.1f}"


def num(x, w=8, p=3):
    return ' ' * (w - 3) + 'n/a' if x is None or x != x else f"{x:{w}.{p}f}"


def print_tables(name, s, d_k, lag_list, edges, other=None, other_name=None):
    """The probes' tables; `other` is the --compare model's summary (allocation and recall rows)."""
    rows, models = s['rows'], [(name, s)] + ([(other_name, other)] if other is not None else [])
    print(f"\n(a) gate-strength allocation, mean shares q_m = b_m / (b_D + b_Dlt + b_E) in %: b_D = 1 - abar, "
          f"b_Dlt = abar beta, b_E = abar gamma\n    [paper, all layers: D {PAPER['shares'][0]} / Dlt "
          f"{PAPER['shares'][1]} / E {PAPER['shares'][2]} %]")
    print(f"{'model':>6} {'layer':>5} {'head':>4} {'D':>6} {'Dlt':>6} {'E':>6} {'abar':>7}")
    for label, summ in models:
        for r in summ['rows']:
            print(f"{label:>6} {r['layer']:>5} {'all':>4} " + ' '.join(pct(x) for x in r['shares']) + f" {r['abar']:7.3f}")
            for h, sh in enumerate(r['head_shares'] if per_head else []):
                print(f"{label:>6} {r['layer']:>5} {h:>4} " + ' '.join(pct(x) for x in sh))
        print(f"{label:>6} {'all':>5} {'all':>4} " + ' '.join(pct(x) for x in summ['alloc']['all']))
    print(f"  by abar bin (all layers and heads) [paper, abar >= 0.9: E {PAPER['erase_high']} %, "
          f"E / Dlt ~ {PAPER['erase_over_delta_high']}]")
    print(f"{'model':>6} {'bin':>9} {'tokens':>7} {'D':>6} {'Dlt':>6} {'E':>6} {'E/Dlt':>6}")
    for label, summ in models:
        for lab, (frac, sh) in zip(bin_labels(edges), summ['alloc']['bins']):
            sh = sh or [None] * 3
            print(f"{label:>6} {lab:>9} {pct(frac)} " + ' '.join(pct(x) for x in sh)
                  + f" {num(sh[2] / sh[1] if sh[1] else None, 6, 2)}")

    if 'raw' in s:
        print("\n(b) collateral readout perturbation ||delta o_t|| / ||o_t^-|| of the erase step (mean over tokens, "
              "heads), same gates, erase address replaced\n"
              f"    [paper raw means: actual {PAPER['raw']['actual']} / random {PAPER['raw']['random']} / shuffle "
              f"{PAPER['raw']['shuffle']} / e=k {PAPER['raw']['same']}; fold over actual: random "
              f"{PAPER['fold']['random']}x / shuffle {PAPER['fold']['shuffle']}x / e=k {PAPER['fold']['same']}x]")
        print(f"{'layer':>5} {'head':>4} {'actual':>8} {'random':>8} {'shuffle':>8} {'e=k':>8} | fold: "
              f"{'random':>7} {'shuffle':>7} {'e=k':>7}")
        for r in (r for r in rows if 'raw' in r):
            print(f"{r['layer']:>5} {'all':>4} " + ' '.join(num(r['raw'][m]) for m in STRATEGIES) + ' |       '
                  + ' '.join(num(r['fold'][m], 7, 2) for m in STRATEGIES[1:]))
            for h in range(r['heads'] if per_head else 0):
                print(f"{r['layer']:>5} {h:>4} " + ' '.join(num(r['head_raw'][m][h]) for m in STRATEGIES))
        print(f"{'mean':>5} {'all':>4} " + ' '.join(num(s['raw'][m]) for m in STRATEGIES) + ' |       '
              + ' '.join(num(s['fold'][m], 7, 2) for m in STRATEGIES[1:]) + '   (fold: mean of the layers\' folds)')

        ref = independent_abs_cos(d_k)
        print(f"\n(c) mean |cos(e_t, k_t)| [paper: ~{PAPER['cos']} at d_k = 128, reference "
              f"{PAPER['cos_ref_128']}]; independent-direction reference at d_k = {d_k}: {ref:.4f}; e = k: 1")
        print(f"{'layer':>5} {'head':>4} {'|cos|':>8} {'/ ref':>7}")
        for r in (r for r in rows if 'cos' in r):
            for h, c in [('all', r['cos'])] + list(enumerate(r['head_cos'] if per_head else [])):
                print(f"{r['layer']:>5} {h:>4} {num(c, 8, 4)} {num(c / ref, 7, 2)}")
        print(f"{'mean':>5} {'all':>4} {num(s['cos'], 8, 4)} {num(s['cos'] / ref, 7, 2)}")

    print("\n(d) raw write-key recall R(lag) = mean cos(S_t^T k_{t-lag}, v_{t-lag}) (1: the value written lag tokens "
          "ago reads back intact in direction) [paper: KDA ahead of EDA]")
    print(f"{'model':>6} {'layer':>5} {'head':>4} " + ' '.join(f"{'lag ' + str(x):>8}" for x in lag_list)
          + f" {'mean':>8}")
    for label, summ in models:
        for r in summ['rows']:
            print(f"{label:>6} {r['layer']:>5} {'all':>4} " + ' '.join(num(x) for x in r['recall'])
                  + f" {num(sum(r['recall']) / len(r['recall']))}")
            for h, hr in enumerate(r['head_recall'] if per_head else []):
                print(f"{label:>6} {r['layer']:>5} {h:>4} " + ' '.join(num(x) for x in hr))
        print(f"{label:>6} {'mean':>5} {'all':>4} " + ' '.join(num(x) for x in summ['recall'])
              + f" {num(sum(summ['recall']) / len(summ['recall']))}")


def draw_figure(path, name, s, d_k, lag_list, edges, other=None, other_name=None):
    """The paper's three panels (a)-(c) and, with a comparison model, (d) recall by lag. Returns the path, or
    None without matplotlib."""
    try:
        import matplotlib
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    n = 4 if other is not None else 3
    with plt.rc_context({'axes.titlesize': 10, 'legend.fontsize': 7}):
        fig, axes = plt.subplots(1, n, figsize=(4.6 * n, 3.8))
        colors = dict(D='#9e9e9e', Dlt='#4878cf', E='#d62728')

        ax = axes[0]  # (a) stacked shares per alpha_bar bin, the erase share in red above each bar
        labels = ['all'] + bin_labels(edges)
        groups = [(1.0, s['alloc']['all'])] + s['alloc']['bins']
        for x, (frac, sh) in enumerate(groups):
            for k, (m, v) in enumerate(zip(MECHANISMS, sh or [])):
                ax.bar(x, 100 * v, bottom=100 * sum(sh[:k]), color=colors[m], label=m if x == 0 else None, width=0.7)
            if sh is not None:
                ax.text(x, 101, f"{100 * sh[2]:.1f}%", ha='center', va='bottom', color=colors['E'], fontsize=8)
        ax.set_xticks(range(len(labels)), [f"{lab}\n{100 * f:.0f}%" for lab, (f, _) in zip(labels, groups)], fontsize=7)
        ax.set(ylim=(0, 128), ylabel='share of gate strength (%)',
               xlabel=r'mean retention $\bar\alpha$ bin (token share)',
               title='(a) gate-strength allocation')
        ax.legend(['decay D', r'delta $\beta k$', r'erase $\gamma e$'], loc='upper center', ncol=3)

        eda_rows = [r for r in s['rows'] if 'raw' in r]
        layers = (range(len(eda_rows)), [str(r['layer']) for r in eda_rows])
        ax = axes[1]  # (b) fold change over Actual per layer
        names = dict(random='Random', shuffle='Shuffle', same='$e_t=k_t$')
        for j, m in enumerate(STRATEGIES[1:]):
            ax.bar([i + (j - 1) * 0.8 / 3 for i in layers[0]], [r['fold'][m] for r in eda_rows], 0.8 / 3,
                   label=f"{names[m]} ($\\mu$={s['raw'][m]:.3f})")
        ax.axhline(1.0, color='k', lw=1, ls='--', label=f"Actual ($\\mu$={s['raw']['actual']:.3f})")
        ax.set_xticks(*layers)
        ax.set(xlabel='layer', ylabel='perturbation / Actual', title='(b) collateral readout perturbation')
        ax.legend()

        ax = axes[2]  # (c) |cos(e, k)| per layer against the reference
        ref = independent_abs_cos(d_k)
        ax.bar(layers[0], [r['cos'] for r in eda_rows], 0.6, color=colors['E'], label=r'observed $|\cos(e,k)|$')
        ax.axhline(ref, color='k', ls='--', lw=1, label=f"independent, $d_k$={d_k}: {ref:.4f}")
        ax.set_xticks(*layers)
        ax.set(xlabel='layer', ylabel=r'mean $|\cos(e_t, k_t)|$ (same address: 1)', title='(c) erase-address geometry')
        ax.legend()

        if other is not None:  # (d) recall by lag, both models
            ax = axes[3]
            for label, summ, c in ((name, s, colors['E']), (other_name, other, colors['Dlt'])):
                ax.plot(lag_list, summ['recall'], marker='o', color=c, label=label)
            ax.set_xscale('log', base=2)
            ax.set(xlabel='lag (tokens)', ylabel=r'mean $\cos(S_t^\top k_{t-lag}, v_{t-lag})$',
                   title='(d) raw write-key recall')
            ax.legend()
        fig.tight_layout()
        fig.savefig(path, dpi=150)
    plt.close(fig)
    return path


# ----------------------------------------------------------------------------------------------------
# The script


def load_model(ckpt_dir, role):
    """(model on device, its config, the checkpoint dict); a one-line exit for anything unusable."""
    path = os.path.join(ckpt_dir, 'ckpt.pt')
    if not os.path.exists(path):
        fail(f"no checkpoint at {path} ({role}): point {'--compare' if role == 'compare' else '--out_dir'} "
             f"at a directory train.py wrote")
    try:
        model, ckpt = model_from_checkpoint(path, la_backend, on_cuda='cuda' in device)
    except CheckpointError as err:
        fail(err)
    model.eval().to(device, getattr(torch, dtype) if 'cuda' in device else torch.float32)
    return model, model.config, ckpt


def n_linear(cfg):
    return sum(not cfg.is_attention_layer(i) for i in range(cfg.n_layer))


def read_tokens(ckpt, cfg):
    """The probed token ids (a 1-D int64 tensor) and a description of where they came from."""
    encoding = ckpt.get('encoding')
    if text is not None:
        if encoding is None or encoding.startswith('synthetic'):
            fail(f"the checkpoint {'records no tokenizer' if encoding is None else f'was trained on {encoding}'}: "
                 f"--text needs a text tokenizer; pass --dataset instead")
        where = text[5:] if text.startswith('FILE:') else 'the --text string'
        try:
            body = file_text(text, 'the text file')
        except ValueError as err:
            fail(str(err))
        from data.prepare import get_encoder
        encode = get_encoder(encoding)[0]
        return torch.from_numpy(encode([body])[0][:-1].astype('int64')), where  # without the end-of-document token
    name = dataset or (ckpt.get('data_position') or {}).get('dataset')
    if name is None:
        fail("the checkpoint does not record its dataset: pass --dataset=<name or folder> or --text=...")
    if name in SYNTHETIC_TASKS:
        fail(f"the checkpoint was trained on the synthetic task {name!r}: pass a text dataset (--dataset=...) "
             f"or --text=...")
    folder = name if (os.sep in name or '/' in name) else os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                                          'data', name)
    from data.prepare import TokenFileError, load_tokens, read_meta
    try:
        data, _ = load_tokens(os.path.join(folder, f'{split}.bin'))
    except TokenFileError as err:
        fail(err)
    data_encoding = read_meta(folder).get('encoding')
    if data_encoding and encoding and data_encoding != encoding:
        fail(f"{folder} holds {data_encoding} tokens, the model reads {encoding} tokens")
    if offset < 0 or offset >= len(data):
        fail(f"offset={offset} is outside {folder}/{split}.bin ({len(data)} tokens)")
    data = data[offset:offset + num_tokens]
    return torch.from_numpy(data.astype('int64')), f"{folder}/{split}.bin from token {offset}"


def main():
    if type(num_tokens) is not int or num_tokens < 1:
        fail(f"num_tokens must be a positive int, got {num_tokens!r}")
    if seq_len is not None and (type(seq_len) is not int or seq_len < 1):
        fail(f"seq_len must be a positive int or None, got {seq_len!r}")
    if not lags or not all(type(x) is int and x >= 1 for x in lags):
        fail(f"lags must be a non-empty tuple of positive ints, got {lags!r}")
    edges = tuple(bins)
    if not edges or not all(isinstance(x, (int, float)) and 0 < x < 1 for x in edges) or list(edges) != sorted(set(edges)):
        fail(f"bins must be increasing edges in (0, 1), got {bins!r}")
    if dtype not in ('float32', 'bfloat16', 'float16'):
        fail(f"dtype must be 'float32', 'bfloat16' or 'float16', got {dtype!r}")
    if device.startswith('cuda') and not torch.cuda.is_available():
        fail(f"device={device!r} but this torch sees no CUDA GPU; use --device=cpu")

    model, cfg, ckpt = load_model(out_dir, 'out_dir')
    if cfg.mixer != 'eda' or n_linear(cfg) == 0:
        fail(f"{os.path.join(out_dir, 'ckpt.pt')} is a {cfg.mixer} model with no EDA layer: the probes need an EDA "
             f"checkpoint (a KDA one goes beside it with --compare=...)")
    other = other_cfg = None
    if compare:
        other, other_cfg, other_ckpt = load_model(compare, 'compare')
        if other_cfg.mixer not in ('kda', 'eda') or n_linear(other_cfg) == 0:
            fail(f"--compare={compare} is a {other_cfg.mixer} model: it must be a KDA (or EDA) checkpoint with "
                 f"linear-attention layers")
        if other_ckpt.get('encoding') != ckpt.get('encoding'):
            fail(f"--compare={compare} uses the tokenizer {other_ckpt.get('encoding')!r}, the probed model "
                 f"{ckpt.get('encoding')!r}: the two must read the same tokens")

    tokens, source = read_tokens(ckpt, cfg)
    tokens = tokens[:num_tokens]
    chunk = cfg.la_chunk_size
    if len(tokens) < chunk:
        fail(f"the text is {len(tokens)} tokens, shorter than one chunk ({chunk} tokens, the model's la_chunk_size): "
             f"give a longer text")
    limit = min(cfg.block_size, other_cfg.block_size if other_cfg else cfg.block_size)
    T = seq_len if seq_len is not None else min(limit, len(tokens))
    if T < chunk:
        fail(f"seq_len={T} is shorter than one chunk ({chunk} tokens, the model's la_chunk_size)")
    if T > limit:
        fail(f"seq_len={T} exceeds the model's block_size ({limit})")
    if len(tokens) < T:
        fail(f"the text is {len(tokens)} tokens, fewer than seq_len={T}")
    vocab = min(cfg.vocab_size, other_cfg.vocab_size if other_cfg else cfg.vocab_size)
    if int(tokens.max()) >= vocab:
        fail(f"the text holds token {int(tokens.max())}, outside the model's vocabulary of {vocab}")
    n_seq = len(tokens) // T
    idx = tokens[:n_seq * T].view(n_seq, T).to(device)
    lag_list = tuple(x for x in lags if x < T)
    if not lag_list:
        fail(f"every lag in {lags} is >= seq_len={T}")

    name, d_k = 'EDA', cfg.la_head_dim
    print(f"probe.py: {out_dir} ({cfg.mixer}, {n_linear(cfg)} linear layers x {cfg.la_n_v_head} value heads, "
          f"d_k = {d_k}); {n_seq} x {T} tokens of {source}; lags {lag_list}"
          + (f"; dropped lags >= {T}" if len(lag_list) < len(lags) else ''))
    torch.manual_seed(seed)
    s = summarize(probe_model(model, idx, lag_list, seed), edges)
    other_s = other_name = None
    if other is not None:
        other_name = other_cfg.mixer.upper() if other_cfg.mixer != 'eda' else 'EDA-2'
        print(f"compare: {compare} ({other_cfg.mixer}, {n_linear(other_cfg)} linear layers x "
              f"{other_cfg.la_n_v_head} value heads, d_k = {other_cfg.la_head_dim})")
        other_s = summarize(probe_model(other, idx, lag_list, seed), edges)
    tol = 1e-3 if (dtype == 'float32' or 'cuda' not in device) else 3e-2
    for label, summ in ((name, s), (other_name, other_s)):
        if summ is None:
            continue
        worst = max(r['replay_err'] for r in summ['rows'])
        print(f"replay check ({label}): the float64 step-by-step replay reproduces the layers' outputs to a "
              f"relative error of {worst:.1e} at most" + ('' if worst <= tol else
                                                         f"  WARNING: above {tol:g}: the probe may not measure the model that runs"))
    print_tables(name, s, d_k, lag_list, edges, other_s, other_name)
    path = os.path.join(out_dir, 'probe.png') if png is None else png
    if path:
        if draw_figure(path, name, s, d_k, lag_list, edges, other_s, other_name) is None:
            print('figure: skipped (matplotlib is not installed: pip install matplotlib)')
        else:
            print(f"figure: {path}")


if __name__ == '__main__':
    configure(globals())
    main()
