"""
The paper's memory-state probes (Sec. 4.4, Fig. eda_memory_state_analysis) on a trained checkpoint, for every EDA
layer and value head on held-out text: (a) gate-strength allocation, (b) readout perturbation, (c) erase-address
geometry, (d) raw write-key recall, beside a KDA model (notes/probe.md defines each and the choices the paper leaves
open). The replay is eda.eda_recurrent (the spec) in float64 on the layer's own rule inputs, checked against its
output. Prints a table per layer and overall; draws (a)-(c), and (d) with --compare, to a PNG (matplotlib: optional).

    python probe.py --out_dir=out/stdlib_26m                                # the checkpoint's val split
    python probe.py --out_dir=out/eda --text=FILE:held_out.txt --png=probe.png --num_tokens=16384
"""
import math
import os
import sys

import torch
import torch.nn.functional as F

import eda
from configurator import configure, file_text
from data.prepare import TokenFileError, dataset_dir, load_tokenizer, load_tokens, read_meta
from data.synthetic import TASKS as SYNTHETIC_TASKS
from model import GPT, CheckpointError, LinearAttention, la_output, model_from_checkpoint

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'scripts'))
from rows import append, figure, provenance  # noqa: E402  (scripts/rows.py: a row under a lock, its provenance)

# -----------------------------------------------------------------------------
out_dir = 'out'            # the EDA checkpoint: out_dir/ckpt.pt (written by train.py)
compare = ''               # a KDA (or EDA) checkpoint directory to put beside it where a probe applies ('': none)
baseline = ''              # 'untrained': each model's probes beside its untrained twin (its init at its training seed)
dataset: str | None = None  # token source: a name in data/ or a folder with {split}.bin (None: the checkpoint's own)
split = 'val'              # which file of the dataset: held-out text by default
text: str | None = None    # instead of a dataset: the text, or FILE:path (encoded with the checkpoint's tokenizer)
num_tokens = 8192          # tokens probed (cut into sequences of seq_len; the remainder is dropped)
seq_len: int | None = None  # tokens per sequence (None: the model's block_size, or the whole text if shorter)
offset = 0                 # first token taken from the dataset file
lags = (1, 4, 16, 64, 256)  # write-key recall: read S_t at k_{t-lag}; lags >= seq_len are dropped
bins = (0.3, 0.5, 0.7, 0.9)  # alpha_bar bin edges of the allocation: [0, 0.3), [0.3, 0.5), ..., [0.9, 1]
per_head = False           # True: also a row per value head in the per-layer tables
seed = 1337                # the random counterfactual addresses
device = 'cuda' if torch.cuda.is_available() else 'cpu'
dtype = 'float32'          # the model's forward on CUDA ('bfloat16': as trained); CPU: float32; the replay: float64
la_backend = 'auto'        # the model's forward: auto (triton on CUDA, chunk on CPU), chunk, recurrent, triton
png: str | None = None     # the figure (None: out_dir/probe.png; '': no figure)
results = ''               # a JSONL file: one row per model probed (its figures, command, commit, device) ('': none)
# -----------------------------------------------------------------------------

STRATEGIES = ('actual', 'random', 'shuffle', 'same')  # erase addresses of probe (b); 'same' is e_t = k_t
MECHANISMS = ('D', 'Dlt', 'E')                        # decay, same-address delta correction, independent erase
UNTRAINED = ' init'  # the label of a model's untrained baseline: its own label and this
# the paper's numbers (Sec. 4.4), printed beside ours
PAPER = dict(shares=(35.4, 31.8, 32.8), erase_high=69.1, erase_over_delta_high=3.0,
             raw=dict(actual=0.064, random=0.143, shuffle=0.115, same=0.223),
             fold=dict(random=2.4, shuffle=1.9, same=3.4), cos=0.105, cos_ref_128=0.0707)


def fail(msg):
    sys.exit(f"probe.py: {msg}")


# The probes, on one layer's rule inputs (eda.py's shapes; e = gamma = None for KDA/GDN) -----------------------
def to_value_heads(x, HV):
    """q or k [B, T, H, K] -> [B, T, HV, K] in float64: value head i reads q/k head i // (HV // H), as in eda.py."""
    return x.double().repeat_interleave(HV // x.shape[2], dim=2)


def gate_allocation(g, beta, gamma):
    """Probe (a) per token and value head: (alpha_bar [B,T,HV], shares [B,T,HV,3] = q_D, q_Delta, q_E), float64."""
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
    """Probe (b)'s alternatives to the layer's e, each [B, T, HV, K] float64 shaped as the learned address (one
    unit vector per q/k head, shared by its value heads): random, shuffle (another q/k head's address at the same
    token; None with one q/k head), same (e_t = k_t)."""
    e, k = inputs['e'], inputs['k']
    (B, T, H, K), HV = k.shape, e.shape[2]
    rand = torch.randn(B, T, H, K, generator=generator, dtype=torch.float64).to(e.device)
    return dict(random=to_value_heads(F.normalize(rand, dim=-1), HV),
                shuffle=e.double().roll(HV // H, dims=2) if H > 1 else None, same=to_value_heads(k, HV))


def replay(inputs, e=None, lags=()):
    """Run eda.eda_recurrent in float64 on a layer's rule inputs with erase address e (None: the layer's own;
    [n*B, T, HV, K]: n addresses side by side in one batch), recording what probes (b) and (d) need. Returns
    dict(o [n*B,T,HV,V], perturbation [n*B,T,HV] (NaN where ||o_t^-|| = 0, the first token; None without an
    erase), recall [len(lags), HV] (mean over t >= lag and the batch))."""
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
        if done := [i for i, lag in enumerate(lags) if t >= lag]:  # one read of S_t for every lag reached
            src = [t - lags[i] for i in done]
            read = torch.einsum('bshk,bhkv->bshv', kx[:, src], S)
            recall_sum[done] += F.cosine_similarity(read, v[:, src], dim=-1).sum(0)
            recall_n[done] += B

    o, _ = eda.eda_recurrent(q, k, v, None if e is None else e.double(), g, beta, gamma, trace=trace)
    perturbation = None if e is None else (change / pre).masked_fill(pre == 0, math.nan)
    return dict(o=o, perturbation=perturbation, recall=recall_sum / recall_n.clamp_min(1))


def probe_inputs(inputs, lags=(), seed=0):
    """Every probe on one layer's rule inputs (LinearAttention.forward's with return_rule_inputs=True), as CPU
    float64 tensors: abar, shares (a), perturbation {strategy: [B,T,HV] or None}, cos and qcos (|cos(e, k)|,
    |cos(e, q)|) (b, c; None without an erase), recall [len(lags), HV] (d), o (the replayed rule output)."""
    abar, shares = gate_allocation(inputs['g'], inputs['beta'], inputs['gamma'])
    actual = replay(inputs, lags=lags)
    res = dict(abar=abar.cpu(), shares=shares.cpu(), recall=actual['recall'].cpu(), o=actual['o'].cpu(),
               perturbation=None, cos=None, qcos=None)
    if inputs['e'] is not None:
        res.update(cos=abs_cos(inputs['e'], inputs['k']).cpu(), qcos=abs_cos(inputs['e'], inputs['q']).cpu())
        alternatives = counterfactual_addresses(inputs, torch.Generator().manual_seed(seed))
        names = [m for m, e in alternatives.items() if e is not None]
        replayed = replay(inputs, torch.cat([alternatives[m] for m in names]))['perturbation']  # one batch
        res['perturbation'] = {'actual': actual['perturbation'].cpu(), **{m: None for m in alternatives},
                               **dict(zip(names, replayed.cpu().chunk(len(names))))}
    return res


@torch.no_grad()
def probe_model(model, idx, lags=(), seed=0):
    """Run idx [B, T] through the model, catching each linear-attention layer's input and output with hooks,
    then probe every such layer. Returns a list of (block index, probe_inputs' dict + 'replay_err': the
    relative error of the replayed output, through the layer's own output path, against the layer's output)."""
    layers = [(i, b.mixer) for i, b in enumerate(model.blocks) if isinstance(b.mixer, LinearAttention)]
    seen = {}
    handles = [layer.register_forward_hook(lambda m, args, out, i=i: seen.__setitem__(i, (args[0], out)))
               for i, layer in layers]
    try:
        model(idx)
    finally:
        for h in handles:
            h.remove()
    results = []
    for i, layer in layers:
        x, out = seen.pop(i)
        res = probe_inputs(layer(x, return_rule_inputs=True), lags, seed=seed * 1000 + i)
        o = res.pop('o').to(x.device, x.dtype)
        replayed = layer.o_proj(la_output(o, layer.o_norm.weight, layer.o_norm.eps, layer.g_proj(x))).double()
        res['replay_err'] = ((replayed - out.double()).norm() / out.double().norm().clamp_min(1e-300)).item()
        results.append((i, res))
    return results


# Summaries: per layer and pooled over layers (tokens and heads weigh equally) ---------------------------------
def bin_labels(edges):
    return [f"<{edges[0]:g}"] + [f"{a:g}-{b:g}" for a, b in zip(edges, edges[1:])] + [f">={edges[-1]:g}"]


def summarize(results, edges):
    """Per-layer rows and overall numbers of every probe from probe_model's list; alloc: the mean shares over all
    tokens and heads, overall and per alpha_bar bin (bins: [(fraction of tokens, shares or None)])."""
    rows = []
    for i, r in results:
        HV = r['abar'].shape[-1]
        row = dict(layer=i, heads=HV, replay_err=r['replay_err'], shares=r['shares'].reshape(-1, 3).mean(0).tolist(),
                   head_shares=r['shares'].reshape(-1, HV, 3).mean(0).tolist(), abar=r['abar'].mean().item(),
                   recall=r['recall'].mean(-1).tolist(), head_recall=r['recall'].T.tolist())
        if (p := r['perturbation']) is not None:
            row['raw'] = {s: (p[s].nanmean().item() if p[s] is not None else math.nan) for s in STRATEGIES}
            row['head_raw'] = {s: (p[s].flatten(0, 1).nanmean(0).tolist() if p[s] is not None else [math.nan] * HV)
                               for s in STRATEGIES}
            base = row['raw']['actual']
            row['fold'] = {s: row['raw'][s] / base if base > 0 else math.nan for s in STRATEGIES[1:]}
            row.update(cos=r['cos'].mean().item(), qcos=r['qcos'].mean().item(),
                       head_cos=r['cos'].flatten(0, 1).mean(0).tolist())
        rows.append(row)
    abar = torch.cat([r['abar'].reshape(-1) for _, r in results])
    shares = torch.cat([r['shares'].reshape(-1, 3) for _, r in results])
    which = torch.bucketize(abar, torch.tensor(edges, dtype=abar.dtype), right=True)  # [0, e0) -> 0, ...
    bins = [((which == j).double().mean().item(), shares[which == j].mean(0).tolist() if (which == j).any() else None)
            for j in range(len(edges) + 1)]
    s = dict(rows=rows, alloc=dict(all=shares.mean(0).tolist(), bins=bins),
             recall=[sum(col) / len(rows) for col in zip(*(r['recall'] for r in rows))])
    if eda_rows := [r for r in rows if 'raw' in r]:
        n = len(eda_rows)
        s.update(raw={m: sum(r['raw'][m] for r in eda_rows) / n for m in STRATEGIES},
                 fold={m: sum(r['fold'][m] for r in eda_rows) / n for m in STRATEGIES[1:]},
                 **{c: sum(r[c] for r in eda_rows) / n for c in ('cos', 'qcos')})
    return s


# Output -------------------------------------------------------------------------------------------------------
def num(x, w=8, p=3, scale=1):
    return ' ' * (w - 3) + 'n/a' if x is None or x != x else f"{scale * x:{w}.{p}f}"


def print_tables(models, d_k, lag_list, edges):
    """The probes' tables for models = [(label, summary)], the probed EDA model first: allocation and recall for
    every model, perturbation and geometry for those with an erase."""
    W = max(6, *(len(label) for label, _ in models))
    erasing = [(label, m) for label, m in models if 'raw' in m]

    def table(models, key, cells, heads, total=None, last='mean'):  # per model: its layers (those with `key`),
        for label, summ in models:                                  # their value heads (per_head), the total
            for r in (r for r in summ['rows'] if key in r):
                print(f"{label:>{W}} {r['layer']:>5} {'all':>4} {cells(r)}")
                for h, c in enumerate(heads(r) if per_head else []):
                    print(f"{label:>{W}} {r['layer']:>5} {h:>4} {c}")
            print(f"{label:>{W}} {last:>5} {'all':>4} {(total or cells)(summ)}")

    def pcts(xs):
        return ' '.join(num(x, 6, 1, 100) for x in xs)  # percentages

    print(f"\n(a) gate-strength allocation, mean shares q_m = b_m / (b_D + b_Dlt + b_E) in %: b_D = 1 - abar, "
          f"b_Dlt = abar beta, b_E = abar gamma\n    [paper, all layers: D {PAPER['shares'][0]} / Dlt "
          f"{PAPER['shares'][1]} / E {PAPER['shares'][2]} %]")
    print(f"{'model':>{W}} {'layer':>5} {'head':>4} {'D':>6} {'Dlt':>6} {'E':>6} {'abar':>7}")
    table(models, 'shares', lambda r: f"{pcts(r['shares'])} {r['abar']:7.3f}", lambda r: map(pcts, r['head_shares']),
          lambda s: pcts(s['alloc']['all']), last='all')
    print(f"  by abar bin (all layers and heads) [paper, abar >= 0.9: E {PAPER['erase_high']} %, "
          f"E / Dlt ~ {PAPER['erase_over_delta_high']}]")
    print(f"{'model':>{W}} {'bin':>9} {'tokens':>7} {'D':>6} {'Dlt':>6} {'E':>6} {'E/Dlt':>6}")
    for label, summ in models:
        for lab, (frac, sh) in zip(bin_labels(edges), summ['alloc']['bins']):
            sh = sh or [None] * 3
            print(f"{label:>{W}} {lab:>9} {pcts([frac, *sh])} {num(sh[2] / sh[1] if sh[1] else None, 6, 2)}")

    if erasing:
        print("\n(b) readout perturbation ||delta o_t|| / ||o_t^-|| of the erase step (mean over tokens, heads), same "
              "gates, erase address replaced. It equals gamma_t |q_t.e_t| ||S^_t^T e_t|| / ||S^_t^T q_t||: how far\n"
              "    the erase moves this token's own readout, small for an address the query does not read (|cos(e, q)| "
              "in (c)), large for one it reads; not a measure of damage to stored content\n"
              f"    [paper raw means: actual {PAPER['raw']['actual']} / random {PAPER['raw']['random']} / shuffle "
              f"{PAPER['raw']['shuffle']} / e=k {PAPER['raw']['same']}; fold over actual: random "
              f"{PAPER['fold']['random']}x / shuffle {PAPER['fold']['shuffle']}x / e=k {PAPER['fold']['same']}x]")
        print(f"{'model':>{W}} {'layer':>5} {'head':>4} {'actual':>8} {'random':>8} {'shuffle':>8} {'e=k':>8} | fold: "
              f"{'random':>7} {'shuffle':>7} {'e=k':>7}")

        def raw_fold(d):
            return (' '.join(num(d['raw'][m]) for m in STRATEGIES) + ' |       '
                    + ' '.join(num(d['fold'][m], 7, 2) for m in STRATEGIES[1:]))
        table(erasing, 'raw', raw_fold,
              lambda r: [' '.join(num(r['head_raw'][m][h]) for m in STRATEGIES) for h in range(r['heads'])],
              lambda s: raw_fold(s) + '   (fold: mean of the layers\' folds)')

        ref = independent_abs_cos(d_k)
        print(f"\n(c) mean |cos(e_t, k_t)| [paper: ~{PAPER['cos']} at d_k = 128, reference "
              f"{PAPER['cos_ref_128']}]; independent-direction reference at d_k = {d_k}: {ref:.4f}; e = k: 1. "
              f"|cos(e_t, q_t)|: the factor (b) scales with")
        print(f"{'model':>{W}} {'layer':>5} {'head':>4} {'|cos|':>8} {'/ ref':>7} {'|cos eq|':>8}")
        table(erasing, 'cos', lambda d: f"{num(d['cos'], 8, 4)} {num(d['cos'] / ref, 7, 2)} {num(d['qcos'], 8, 4)}",
              lambda r: [f"{num(c, 8, 4)} {num(c / ref, 7, 2)}" for c in r['head_cos']])

    print("\n(d) raw write-key recall R(lag) = mean cos(S_t^T k_{t-lag}, v_{t-lag}) (1: the value written lag tokens "
          "ago reads back intact in direction) [paper: KDA ahead of EDA]")
    print(f"{'model':>{W}} {'layer':>5} {'head':>4} " + ' '.join(f"{'lag ' + str(x):>8}" for x in lag_list)
          + f" {'mean':>8}")
    table(models, 'recall', lambda d: ' '.join(num(x) for x in d['recall'] + [sum(d['recall']) / len(d['recall'])]),
          lambda r: [' '.join(num(x) for x in hr) for hr in r['head_recall']])


def row(label, summ, cfg, ckpt, where, d_k):
    """A probed model's figures as a results row (percentages and ratios rounded as the tables print them)."""
    r3 = lambda x: None if x is None or x != x else round(x, 4)  # noqa: E731
    shares, high = summ['alloc']['all'], summ['alloc']['bins'][-1][1] or [None] * 3
    out = dict(bench='probe', **provenance(device=device), label=label, out_dir=where, mixer=cfg.mixer, gate=cfg.gate,
               seed=(ckpt.get('config') or {}).get('seed'), trained=not label.endswith(UNTRAINED),
               iter=ckpt.get('iter_num'), num_tokens=num_tokens,
               recall=r3(sum(summ['recall']) / len(summ['recall'])), recall_by_lag=[r3(x) for x in summ['recall']])
    if 'raw' in summ:
        out.update(shares_pct=dict(zip(('decay', 'delta', 'erase'), (round(100 * x, 1) for x in shares))),
                   retained_erase_pct=None if high[2] is None else round(100 * high[2], 1),
                   retained_erase_over_delta=r3(high[2] / high[1]) if high[1] else None,
                   perturbation={m: r3(summ['raw'][m]) for m in STRATEGIES},
                   fold={m: r3(summ['fold'][m]) for m in STRATEGIES[1:]},
                   cos_ek=r3(summ['cos']), cos_eq=r3(summ['qcos']), cos_reference=r3(independent_abs_cos(d_k)))
    return out


def draw_figure(models, d_k, lag_list, edges, *axes):
    """The paper's panels (a)-(c) for the models with an erase (an untrained baseline hatched beside its model) and,
    with more than one model, (d) recall by lag for all."""
    erasing = [(label, m) for label, m in models if 'raw' in m]
    colors = dict(D='#9e9e9e', Dlt='#4878cf', E='#d62728')
    width = 0.8 / len(erasing)

    def place(x, j):  # the j-th model's bar at group x
        return x + (j - (len(erasing) - 1) / 2) * width

    ax = axes[0]  # (a) stacked shares per alpha_bar bin, the erase share in red above each bar
    labels = ['all'] + bin_labels(edges)
    for j, (label, s) in enumerate(erasing):
        for x, (frac, sh) in enumerate([(1.0, s['alloc']['all'])] + s['alloc']['bins']):
            bottom = 0
            for m, v in zip(MECHANISMS, sh or []):
                ax.bar(place(x, j), 100 * v, bottom=bottom, color=colors[m], width=width * 0.9,
                       hatch='//' if j else None, label=m if x == 0 and j == 0 else None)
                bottom += 100 * v
            if sh is not None:
                ax.text(place(x, j), 101, f"{100 * sh[2]:.0f}", ha='center', va='bottom', color=colors['E'], fontsize=7)
    groups = [(1.0, None)] + erasing[0][1]['alloc']['bins']
    ax.set_xticks(range(len(labels)), [f"{lab}\n{100 * f:.0f}%" for lab, (f, _) in zip(labels, groups)], fontsize=7)
    ax.set(ylim=(0, 128), ylabel='share of gate strength (%)', xlabel=r'mean retention $\bar\alpha$ bin (token share)')
    ax.set_title('(a) gate-strength allocation' + (f" ({erasing[1][0]}: hatched)" if len(erasing) > 1 else ''),
                 fontsize=10)
    ax.legend(['decay D', r'delta $\beta k$', r'erase $\gamma e$'], fontsize=7, loc='upper center', ncol=3)

    names = dict(random='Random', shuffle='Shuffle', same='$e_t=k_t$')
    w3 = width / 3  # (b) fold change over Actual per layer; (c) |cos(e, k)| per layer against the reference
    ref = independent_abs_cos(d_k)
    for j, (label, s) in enumerate(erasing):
        rows = [r for r in s['rows'] if 'raw' in r]
        for i, m in enumerate(STRATEGIES[1:]):
            xs = [place(x, j) + (i - 1) * w3 for x in range(len(rows))]
            axes[1].bar(xs, [r['fold'][m] for r in rows], w3 * 0.9, color=f"C{i}", hatch='//' if j else None,
                        label=f"{names[m]} ($\\mu$={s['raw'][m]:.3f})" if j == 0 else None)
        axes[2].bar([place(x, j) for x in range(len(rows))], [r['cos'] for r in rows], width * 0.9, color=colors['E'],
                    hatch='//' if j else None, label=f"{label} $|\\cos(e,k)|$")
    axes[1].axhline(1.0, color='k', lw=1, ls='--', label=f"Actual ($\\mu$={erasing[0][1]['raw']['actual']:.3f})")
    axes[2].axhline(ref, color='k', ls='--', lw=1, label=f"independent, $d_k$={d_k}: {ref:.4f}")
    eda_rows = [r for r in erasing[0][1]['rows'] if 'raw' in r]
    for ax, ylabel, title in ((axes[1], 'perturbation / Actual', '(b) readout perturbation (scales with |q.e|)'),
                              (axes[2], r'mean $|\cos(e_t, k_t)|$ (same address: 1)', '(c) erase-address geometry')):
        ax.set_xticks(range(len(eda_rows)), [str(r['layer']) for r in eda_rows])
        ax.set(xlabel='layer', ylabel=ylabel)
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=7)

    if len(models) > 1:  # (d) recall by lag, every model; the untrained ones dashed, in their model's colour
        bases = [label for label, _ in models if not label.endswith(UNTRAINED)]
        for label, summ in models:
            base = label.removesuffix(UNTRAINED)
            axes[3].plot(lag_list, summ['recall'], marker='o', color=f"C{bases.index(base)}", label=label,
                         ls='--' if base != label else '-')
        axes[3].set_xscale('log', base=2)
        axes[3].set(xlabel='lag (tokens)', ylabel=r'mean $\cos(S_t^\top k_{t-lag}, v_{t-lag})$')
        axes[3].set_title('(d) raw write-key recall', fontsize=10)
        axes[3].legend(fontsize=7)


# The script ---------------------------------------------------------------------------------------------------
def load_model(ckpt_dir, role):
    """(model on device, its config, the checkpoint dict); a one-line exit for anything unusable."""
    hint = f" ({role}): point --{role} at a directory train.py wrote"
    try:
        model, ckpt = model_from_checkpoint(os.path.join(ckpt_dir, 'ckpt.pt'), la_backend, device, dtype, hint)
    except CheckpointError as err:
        fail(err)
    return model, model.config, ckpt


def untrained(model, ckpt, label, where):
    """The model's untrained twin: model.GPT's init at the training seed in ckpt['config'], on its device and dtype."""
    start = (ckpt.get('config') or {}).get('seed')
    if type(start) is not int:
        fail(f"{os.path.join(where, 'ckpt.pt')} records no training seed (train.py's settings, its 'config'): "
             f"--baseline=untrained needs it to rebuild the init")
    p = next(model.parameters())
    print(f"baseline: {label}{UNTRAINED}, the same architecture untrained, its init at seed {start}")
    return GPT(model.config, seed=start).eval().to(p.device, p.dtype)


def n_linear(cfg):
    return sum(not cfg.is_attention_layer(i) for i in range(cfg.n_layer))


def describe(cfg):
    return f"{cfg.mixer}, {n_linear(cfg)} linear layers x {cfg.la_n_v_head} value heads, d_k = {cfg.la_head_dim}"


def read_tokens(ckpt):
    """The probed token ids (a 1-D int64 tensor, at most num_tokens) and a description of where they came from."""
    encoding = ckpt.get('encoding')
    if text is not None:
        if encoding is None or encoding.startswith('synthetic'):
            fail(f"the checkpoint {'records no tokenizer' if encoding is None else f'was trained on {encoding}'}: "
                 f"--text needs a text tokenizer; pass --dataset instead")
        try:  # (an unreadable file; text that cannot be encoded)
            ids = load_tokenizer(encoding, 'probe.py').encode_ordinary(file_text(text, 'the text file'))[:num_tokens]
        except ValueError as err:
            fail(str(err))
        return torch.tensor(ids, dtype=torch.int64), text[5:] if text.startswith('FILE:') else 'the --text string'
    name = dataset or (ckpt.get('data_position') or {}).get('dataset')
    if name is None:
        fail("the checkpoint does not record its dataset: pass --dataset=<name or folder> or --text=...")
    if name in SYNTHETIC_TASKS:
        fail(f"the checkpoint was trained on the synthetic task {name!r}: pass a text --dataset=... or --text=...")
    folder = dataset_dir(name)
    try:
        data, _ = load_tokens(os.path.join(folder, f'{split}.bin'))
    except TokenFileError as err:
        fail(err)
    if (data_encoding := read_meta(folder).get('encoding')) and encoding and data_encoding != encoding:
        fail(f"{folder} holds {data_encoding} tokens, the model reads {encoding} tokens")
    if offset < 0 or offset >= len(data):
        fail(f"offset={offset} is outside {folder}/{split}.bin ({len(data)} tokens)")
    where = f"{folder}/{split}.bin from token {offset}"
    return torch.from_numpy(data[offset:offset + num_tokens].astype('int64')), where


def main():
    if type(num_tokens) is not int or num_tokens < 1:
        fail(f"num_tokens must be a positive int, got {num_tokens!r}")
    if seq_len is not None and (type(seq_len) is not int or seq_len < 1):
        fail(f"seq_len must be a positive int or None, got {seq_len!r}")
    if not lags or not all(type(x) is int and x >= 1 for x in lags):
        fail(f"lags must be a non-empty tuple of positive ints, got {lags!r}")
    edges = tuple(bins)
    increasing = all(isinstance(x, (int, float)) and 0 < x < 1 for x in edges) and list(edges) == sorted(set(edges))
    if not edges or not increasing:
        fail(f"bins must be increasing edges in (0, 1), got {bins!r}")
    if baseline not in ('', 'untrained'):
        fail(f"baseline must be '' (none) or 'untrained', got {baseline!r}")
    if dtype not in ('float32', 'bfloat16', 'float16'):
        fail(f"dtype must be 'float32', 'bfloat16' or 'float16', got {dtype!r}")
    if device.startswith('cuda') and not torch.cuda.is_available():
        fail(f"device={device!r} but this torch sees no CUDA GPU; use --device=cpu")

    model, cfg, ckpt = load_model(out_dir, 'out_dir')
    if cfg.mixer != 'eda' or n_linear(cfg) == 0:
        fail(f"{os.path.join(out_dir, 'ckpt.pt')} is a {cfg.mixer} model with no EDA layer: the probes need an EDA "
             f"checkpoint (a KDA one goes beside it with --compare=...)")
    runs = [('EDA', model, ckpt, out_dir)]  # (label, model, checkpoint, its directory)
    if compare:
        other, other_cfg, other_ckpt = load_model(compare, 'compare')
        if other_cfg.mixer not in ('kda', 'eda') or n_linear(other_cfg) == 0:
            fail(f"--compare={compare} is a {other_cfg.mixer} model: it must be a KDA (or EDA) checkpoint with "
                 f"linear-attention layers")
        if other_ckpt.get('encoding') != ckpt.get('encoding'):
            fail(f"--compare={compare} uses the tokenizer {other_ckpt.get('encoding')!r}, the probed model "
                 f"{ckpt.get('encoding')!r}: the two must read the same tokens")
        runs.append((other_cfg.mixer.upper() if other_cfg.mixer != 'eda' else 'EDA-2', other, other_ckpt, compare))

    (tokens, source), chunk = read_tokens(ckpt), cfg.la_chunk_size
    if len(tokens) < chunk:
        fail(f"the text is {len(tokens)} tokens, shorter than one chunk ({chunk} tokens, the model's la_chunk_size): "
             f"give a longer text")
    limit = min(m.config.block_size for _, m, _, _ in runs)
    T = seq_len if seq_len is not None else min(limit, len(tokens))
    if T < chunk:
        fail(f"seq_len={T} is shorter than one chunk ({chunk} tokens, the model's la_chunk_size)")
    if T > limit:
        fail(f"seq_len={T} exceeds the model's block_size ({limit})")
    if len(tokens) < T:
        fail(f"the text is {len(tokens)} tokens, fewer than seq_len={T}")
    if int(tokens.max()) >= (vocab := min(m.config.vocab_size for _, m, _, _ in runs)):
        fail(f"the text holds token {int(tokens.max())}, outside the model's vocabulary of {vocab}")
    n_seq = len(tokens) // T
    idx = tokens[:n_seq * T].view(n_seq, T).to(device)
    if not (lag_list := tuple(x for x in lags if x < T)):
        fail(f"every lag in {lags} is >= seq_len={T}")

    print(f"probe.py: {out_dir} ({describe(cfg)}); {n_seq} x {T} tokens of {source}; lags {lag_list}"
          + (f"; dropped lags >= {T}" if len(lag_list) < len(lags) else ''))
    if compare:
        print(f"compare: {compare} ({describe(other_cfg)})")
    if baseline:
        runs = [twin for label, m, ck, where in runs
                for twin in ((label, m, ck, where), (label + UNTRAINED, untrained(m, ck, label, where), ck, where))]
    torch.manual_seed(seed)
    models = [(label, summarize(probe_model(m, idx, lag_list, seed), edges)) for label, m, _, _ in runs]
    tol = 1e-3 if (dtype == 'float32' or 'cuda' not in device) else 3e-2
    for label, summ in models:
        worst = max(r['replay_err'] for r in summ['rows'])
        print(f"replay check ({label}): the float64 step-by-step replay reproduces the layers' outputs to a relative "
              f"error of {worst:.1e} at most" + ('' if worst <= tol else f"  WARNING: above {tol:g}: the probe may "
                                                                         f"not measure the model that runs"))
    print_tables(models, cfg.la_head_dim, lag_list, edges)
    if results:
        for (label, summ), (_, m, ck, where) in zip(models, runs):
            append(results, row(label, summ, m.config, ck, where, cfg.la_head_dim))
        print(f"rows: {results}")
    if path := os.path.join(out_dir, 'probe.png') if png is None else png:
        figure(path, lambda *axes: draw_figure(models, cfg.la_head_dim, lag_list, edges, *axes),
               4 if len(models) > 1 else 3, (4.6, 3.8), dpi=150)


if __name__ == '__main__':
    configure(globals())
    main()
