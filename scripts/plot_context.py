"""The figure of `scripts/gpu_train_check.sh context`: training tok/s of both models against block_size, from
the part's report (the table it prints, kept in results/train_context.txt), and the hybrid's ratio at each; the
hybrid with recomputed chunk states too where the report has its runs (TAG=_recompute).

    python scripts/plot_context.py results/train_context.txt results/train_context.png
"""
import re
import sys

ROW = re.compile(r"^125m_(\w+?)_T(\d+)_ctx(\S*)\s+\d+\s+([\d,]+)\s+\S+\s+([\d.]+)\s")


def read(path):
    """{run: {block_size: (tok/s, peak GiB)}} from a context report's table rows, run = the mixer and the part's TAG
    ('eda', 'transformer', 'eda_recompute'); failed runs have no tok/s and are left out."""
    runs = {}
    for line in open(path):
        m = ROW.match(line)
        if m:
            runs.setdefault(m[1] + m[3], {})[int(m[2])] = (float(m[4].replace(",", "")), float(m[5]))
    if not {"eda", "transformer"} <= set(runs):
        sys.exit(f"plot_context: no eda and transformer rows in {path}: is it a 'context' report?")
    return runs


def main(report, png):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    runs = {name: {T: tok for T, (tok, _) in rows.items()} for name, rows in read(report).items()}
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    for mixer, label, style in (("eda", "EDA hybrid (3:1)", "o-"), ("transformer", "Transformer", "o-"),
                                ("eda_recompute", "EDA hybrid, la_recompute_states=True", "s--")):
        T = sorted(runs.get(mixer, ()))
        if T:
            ax.plot(T, [runs[mixer][t] / 1e3 for t in T], style, label=label, markersize=4 if "--" in style else 6)
    for t in sorted(set(runs["eda"]) & set(runs["transformer"])):
        ax.annotate(f"{runs['eda'][t] / runs['transformer'][t]:.2f}x", (t, runs["eda"][t] / 1e3),
                    textcoords="offset points", xytext=(0, 8), ha="center", fontsize=8)
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted(runs["eda"]), [f"{t // 1024}k" for t in sorted(runs["eda"])])
    ax.set_xlabel("block_size (32k tokens a step; 64k: one sequence)")
    ax.set_ylabel("training tok/s (thousands)")
    gpu = re.search(r"^gpus: \d+ \(([^)]*)\)", open(report).read(), re.M)
    ax.set_title(f"~125M models, compiled, {gpu[1] if gpu else 'one GPU'}: the hybrid's ratio above its points",
                 fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(png, dpi=120)
    print(f"wrote {png}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python scripts/plot_context.py REPORT PNG")
    main(*sys.argv[1:])
