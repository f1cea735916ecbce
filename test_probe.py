"""probe.py: the memory-state probes (Sec. 4.4) on tiny random models, and the script end to end on tiny
checkpoints, all on the CPU in a few seconds."""
import json
import math
import os
import runpy
import sys

import pytest
import torch

torch.set_num_threads(1)  # tiny tensors: more threads only add contention

import probe
from conftest import rel, save_checkpoint, tiny_gpt, tokens
from model import LinearAttention, la_output

HERE = os.path.dirname(os.path.abspath(__file__))
TEXT = "def probe(layer):\n    return layer.rule_inputs(x)  # memory-state analysis\n" * 8  # 600 bytes


def linear_layers(model, idx):
    """[(block index, layer, its input x, its output)] of every linear-attention layer on idx."""
    layers = [(i, b.mixer) for i, b in enumerate(model.blocks) if isinstance(b.mixer, LinearAttention)]
    seen = {}
    hooks = [m.register_forward_hook(lambda m, a, out, i=i: seen.__setitem__(i, (a[0], out))) for i, m in layers]
    with torch.no_grad():
        model(idx)
    for h in hooks:
        h.remove()
    return [(i, m, *seen[i]) for i, m in layers]


def rule_inputs(mixer="eda", **kw):
    """The rule inputs of the first linear layer of a tiny float64 model on random tokens."""
    model = tiny_gpt(mixer, **kw).double()
    _, layer, x, _ = linear_layers(model, tokens(T=96, vocab=256, seed=0))[0]
    with torch.no_grad():
        return layer(x, return_rule_inputs=True)


def test_zero_erase_gate_gives_zero_erase_share_and_zero_perturbation():
    inputs = rule_inputs()
    res = probe.probe_inputs(inputs)
    assert res['shares'][..., 2].min() > 0  # the learned gamma erases: the check below is not vacuous
    assert res['perturbation']['actual'].nan_to_num().max() > 0
    inputs['gamma'] = torch.zeros_like(inputs['gamma'])
    res = probe.probe_inputs(inputs)
    assert torch.equal(res['shares'][..., 2], torch.zeros_like(res['shares'][..., 2]))
    for name in probe.STRATEGIES:  # whatever the address, an erase with gamma = 0 changes nothing
        p = res['perturbation'][name]
        assert p[:, 1:].eq(0).all(), name  # t = 0 reads the empty state: NaN, left out
        assert p[:, 0].isnan().all()


def test_erase_at_the_write_key_makes_the_same_address_counterfactual_equal_actual():
    inputs = rule_inputs()
    inputs['e'] = probe.to_value_heads(inputs['k'], inputs['v'].shape[2])  # e_t = k_t, grouped as the layer's e
    res = probe.probe_inputs(inputs)
    p = res['perturbation']
    torch.testing.assert_close(p['same'], p['actual'], rtol=0, atol=0, equal_nan=True)
    assert rel(res['cos'], torch.ones_like(res['cos'])) < 1e-12
    assert not torch.allclose(p['random'], p['actual'], equal_nan=True)  # the other addresses do differ


def test_shuffled_addresses_come_from_another_qk_head_and_need_two():
    inputs = rule_inputs()
    e, G = inputs['e'], inputs['v'].shape[2] // inputs['k'].shape[2]
    cf = probe.counterfactual_addresses(inputs, torch.Generator().manual_seed(0))
    assert torch.equal(cf['shuffle'][:, :, G:], e[:, :, :-G]) and torch.equal(cf['shuffle'][:, :, :G], e[:, :, -G:])
    assert not torch.equal(cf['shuffle'], e)
    torch.testing.assert_close(cf['random'].norm(dim=-1), torch.ones(e.shape[:3], dtype=torch.float64))
    assert torch.equal(cf['random'][:, :, 0], cf['random'][:, :, G - 1])  # one address per q/k head, as e
    one_head = rule_inputs(la_n_head=1, la_n_v_head=2)
    cf = probe.counterfactual_addresses(one_head, torch.Generator().manual_seed(0))
    assert cf['shuffle'] is None
    assert probe.probe_inputs(one_head)['perturbation']['shuffle'] is None


def test_allocation_shares_sum_to_one_per_token_overall_and_in_every_bin():
    model = tiny_gpt('eda').double()
    results = probe.probe_model(model, tokens(T=96, vocab=256, seed=0), lags=(1, 4))
    for _, r in results:
        torch.testing.assert_close(r['shares'].sum(-1), torch.ones_like(r['abar']))
        assert (r['shares'] >= 0).all()
    # bins that catch these tokens: the tiny model's alpha_bar sits near 1, so edges around its spread
    abar = torch.cat([r['abar'].reshape(-1) for _, r in results])
    edges = tuple(abar.quantile(torch.tensor([0.25, 0.5, 0.75], dtype=abar.dtype)).tolist())
    s = probe.summarize(results, edges)
    assert sum(s['alloc']['all']) == pytest.approx(1, abs=1e-12)
    assert sum(frac for frac, _ in s['alloc']['bins']) == pytest.approx(1, abs=1e-12)
    for frac, shares in s['alloc']['bins']:
        assert frac > 0.2 and sum(shares) == pytest.approx(1, abs=1e-12)
    for row in s['rows']:
        assert sum(row['shares']) == pytest.approx(1, abs=1e-12)


def test_allocation_scores_are_the_papers_formulas():
    g = torch.log(torch.tensor([[[[0.2, 0.6]]]], dtype=torch.float64))  # alpha = 0.2, 0.6: alpha_bar = 0.4
    beta, gamma = torch.tensor([[[0.5]]], dtype=torch.float64), torch.tensor([[[0.25]]], dtype=torch.float64)
    abar, shares = probe.gate_allocation(g, beta, gamma)
    b = torch.tensor([1 - 0.4, 0.4 * 0.5, 0.4 * 0.25], dtype=torch.float64)
    torch.testing.assert_close(abar, torch.full((1, 1, 1), 0.4, dtype=torch.float64))
    torch.testing.assert_close(shares[0, 0, 0], b / b.sum())
    _, kda = probe.gate_allocation(g, beta, None)
    torch.testing.assert_close(kda[0, 0, 0], torch.tensor([0.6, 0.2, 0], dtype=torch.float64) / 0.8)


@pytest.mark.parametrize("d", [2, 3, 16, 128])
def test_independent_direction_reference_matches_monte_carlo(d):
    gen = torch.Generator().manual_seed(d)
    c = []
    for _ in range(4):  # 100k pairs, 25k at a time
        u, r = torch.nn.functional.normalize(torch.randn(2, 25_000, d, generator=gen, dtype=torch.float64), dim=-1)
        c.append((u * r).sum(-1).abs())
    c = torch.cat(c)
    assert abs(probe.independent_abs_cos(d) - c.mean().item()) < 4 * c.std().item() / math.sqrt(len(c))
    if d == 2:
        assert probe.independent_abs_cos(2) == pytest.approx(2 / math.pi, rel=1e-14)
    if d == 128:
        assert round(probe.independent_abs_cos(128), 4) == 0.0707  # the paper's quoted reference


@pytest.mark.parametrize("mixer", ["eda", "kda"])
def test_replayed_readout_equals_the_layers_own_output(mixer):
    """The probe replays the model that runs: eda_recurrent on rule_inputs, put through the layer's output
    path, gives the layer's output (the model runs the chunked form), and probe_model reports that error."""
    model = tiny_gpt(mixer).double()
    idx = tokens(T=96, vocab=256, seed=0)
    for _, layer, x, out in linear_layers(model, idx):
        with torch.no_grad():
            o = probe.probe_inputs(layer(x, return_rule_inputs=True))['o']
            replayed = layer.o_proj(la_output(o, layer.o_norm.weight, layer.o_norm.eps, layer.g_proj(x)))
        assert rel(replayed, out) < 1e-10
        assert rel(out, torch.zeros_like(out)) > 0  # a real output, not two zeros
    results = probe.probe_model(model, idx)
    assert len(results) == 3 and all(r['replay_err'] < 1e-10 for _, r in results)


def test_write_key_recall_is_one_for_orthogonal_writes_without_decay_and_drops_after_an_erase():
    """The score's meaning: with orthonormal keys, no decay, beta = 1 and no erase, S_t^T k_s = v_s exactly;
    erasing at an old key removes that value from its key's readout."""
    T, K, V = 6, 8, 4
    gen = torch.Generator().manual_seed(0)
    k = torch.eye(K, dtype=torch.float64)[:T].view(1, T, 1, K)
    inputs = dict(q=k.clone(), k=k, v=torch.randn(1, T, 1, V, generator=gen, dtype=torch.float64),
                  g=torch.zeros(1, T, 1, K, dtype=torch.float64), beta=torch.ones(1, T, 1, dtype=torch.float64),
                  e=None, gamma=None)
    recall = probe.replay(inputs, lags=(1, 2, 5))['recall']
    torch.testing.assert_close(recall, torch.ones(3, 1, dtype=torch.float64))
    # erase at token 2's address with gamma = 1 at token 3: lag 1 from token 2 no longer reads v_2 back
    e = torch.zeros(1, T, 1, K, dtype=torch.float64)
    e[0, :, 0, 7] = 1  # an unused direction everywhere ...
    e[0, 3, 0] = k[0, 2, 0]  # ... but the old key at token 3
    gamma = torch.zeros(1, T, 1, dtype=torch.float64)
    gamma[0, 3] = 1
    erased = probe.replay(dict(inputs, e=e, gamma=gamma), lags=(1,))['recall']
    assert erased[0, 0].item() == pytest.approx(1 - 1 / (T - 1))  # one of the five lag-1 reads is now 0


# ----------------------------------------------------------------------------------------------------
# The script


def run_script(monkeypatch, capsys, *args):
    """Run probe.py in this process (its settings fresh each time). Returns (exit message or None, stdout)."""
    monkeypatch.setattr(sys, 'argv', ['probe.py', '--device=cpu', *args])
    try:
        runpy.run_path(os.path.join(HERE, 'probe.py'), run_name='__main__')
        msg = None
    except SystemExit as stop:  # anything else propagates: a traceback fails the test
        msg = str(stop.code)
    return msg, capsys.readouterr().out


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    root = tmp_path_factory.mktemp("probe")
    return {m: save_checkpoint(tiny_gpt(m), str(root / m)) for m in ("eda", "kda", "gdn")}


def test_script_prints_every_table_and_draws_the_figure(checkpoints, monkeypatch, capsys, tmp_path):
    png = tmp_path / "probe.png"
    msg, out = run_script(monkeypatch, capsys, f"--out_dir={checkpoints['eda']}", f"--compare={checkpoints['kda']}",
                          f"--text={TEXT}", "--lags=(1, 4, 16)", f"--png={png}")
    assert msg is None, msg
    for head in ("(a) gate-strength allocation", "(b) readout perturbation", "(c) mean |cos(e_t, k_t)|",
                 "(d) raw write-key recall", "replay check (EDA)", "replay check (KDA)"):
        assert head in out
    assert "WARNING" not in out
    assert f"reference at d_k = 16: {probe.independent_abs_cos(16):.4f}" in out
    assert "4 x 128 tokens of the --text string" in out  # 600 bytes: four sequences of the block size
    assert sum(line.split()[:2] == ["KDA", "0"] for line in out.splitlines()) == 2  # allocation and recall rows
    pytest.importorskip("matplotlib")
    assert png.stat().st_size > 10_000 and f"figure: {png}" in out


def test_script_prints_the_table_without_matplotlib(checkpoints, monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    msg, out = run_script(monkeypatch, capsys, f"--out_dir={checkpoints['eda']}", f"--text={TEXT}",
                          f"--png={tmp_path / 'p.png'}")
    assert msg is None, msg
    assert "(b) readout perturbation" in out and "skipped (matplotlib is not installed" in out
    assert not (tmp_path / "p.png").exists()


def test_script_reads_the_checkpoints_own_held_out_split_by_default(monkeypatch, capsys, tmp_path):
    import numpy as np
    from data.prepare import finish
    data = tmp_path / "data"
    arr = np.frombuffer(TEXT.encode() * 2, np.uint8)
    finish(str(data), {"train": ([arr], 1), "val": ([arr], 1)}, 256, "bytes", "test")
    eda_dir = save_checkpoint(tiny_gpt("eda"), str(tmp_path / "eda"), dataset=str(data))
    msg, out = run_script(monkeypatch, capsys, f"--out_dir={eda_dir}", "--num_tokens=256", "--offset=100", "--png=")
    assert msg is None, msg
    assert f"2 x 128 tokens of {data}/val.bin from token 100" in out and "(d) raw write-key recall" in out
    other = save_checkpoint(tiny_gpt("eda"), str(tmp_path / "gpt2"), encoding="gpt2", dataset=str(data))
    msg, _ = run_script(monkeypatch, capsys, f"--out_dir={other}", "--png=")
    assert msg == f"probe.py: {data} holds bytes tokens, the model reads gpt2 tokens"


def test_script_errors_are_one_line_messages(checkpoints, monkeypatch, capsys, tmp_path):
    eda_dir = checkpoints['eda']
    cases = [
        ([f"--out_dir={tmp_path / 'nowhere'}"], "no checkpoint at"),
        ([f"--out_dir={eda_dir}", f"--compare={tmp_path / 'nowhere'}", f"--text={TEXT}"], "no checkpoint at"),
        ([f"--out_dir={checkpoints['kda']}", f"--text={TEXT}"], "is a kda model with no EDA layer"),
        ([f"--out_dir={eda_dir}", f"--compare={checkpoints['gdn']}", f"--text={TEXT}"], "must be a KDA (or EDA)"),
        ([f"--out_dir={eda_dir}", "--text=too short"], "shorter than one chunk (16 tokens"),
        ([f"--out_dir={eda_dir}", f"--text={TEXT}", "--seq_len=8"], "shorter than one chunk"),
        ([f"--out_dir={eda_dir}", f"--text={TEXT}", "--seq_len=256"], "exceeds the model's block_size"),
        ([f"--out_dir={eda_dir}", f"--text=FILE:{tmp_path / 'missing.txt'}"], "cannot read the text file"),
        ([f"--out_dir={eda_dir}", f"--dataset={tmp_path / 'nodata'}"], "is missing"),
        ([f"--out_dir={eda_dir}", f"--text={TEXT}", "--lags=(0,)"], "lags must be"),
        ([f"--out_dir={eda_dir}", f"--text={TEXT}", "--bins=(0.9, 0.3)"], "bins must be increasing"),
    ]
    bad = tmp_path / "bad"
    bad.mkdir()
    whole = open(os.path.join(eda_dir, "ckpt.pt"), "rb").read()
    (bad / "ckpt.pt").write_bytes(whole[:len(whole) // 2])  # a truncated file
    cases.append(([f"--out_dir={bad}"], "cannot read the checkpoint"))
    for args, message in cases:
        msg, _ = run_script(monkeypatch, capsys, *args)
        assert msg is not None and msg.startswith("probe.py: ") and message in msg, (args, msg)
        assert "\n" not in msg


def test_baseline_puts_every_probe_beside_the_untrained_model_of_the_checkpoints_seed(monkeypatch, capsys, tmp_path):
    """--baseline=untrained probes, beside the checkpoint, its architecture at the init of the seed it records
    (model.GPT's): its rows are those of an untrained GPT(cfg, seed) probed alone, not the checkpoint's."""
    from model import GPT
    trained = tiny_gpt("eda")
    with torch.no_grad():  # "training" moved the erase address: the two models' probes differ
        for b in trained.blocks:
            if isinstance(b.mixer, LinearAttention):
                b.mixer.e_b.weight.mul_(3.0)
    out_dir = save_checkpoint(trained, str(tmp_path / "eda"))
    ckpt = torch.load(os.path.join(out_dir, "ckpt.pt"), weights_only=True)
    msg, _ = run_script(monkeypatch, capsys, f"--out_dir={out_dir}", f"--text={TEXT}", "--baseline=untrained", "--png=")
    assert msg.startswith("probe.py: ") and "records no training seed" in msg and "\n" not in msg
    torch.save(dict(ckpt, config=dict(seed=7)), os.path.join(out_dir, "ckpt.pt"))
    args = (f"--text={TEXT}", "--num_tokens=128", "--seq_len=64", "--lags=(1, 4)")
    msg, out = run_script(monkeypatch, capsys, f"--out_dir={out_dir}", "--baseline=untrained", *args,
                          f"--png={tmp_path / 'p.png'}")
    assert msg is None, msg
    assert "baseline: EDA init, the same architecture untrained, its init at seed 7" in out
    assert "replay check (EDA init)" in out and "WARNING" not in out

    def rows(text, label):  # the lines of every table that are label's, label cut off
        return [line.split(None, 2)[2] for line in text.splitlines()
                if line.startswith(f"{label:>8} ") and not line.startswith(f"{label} init")]
    init_dir = save_checkpoint(GPT(trained.config, seed=7), str(tmp_path / "init"))
    _, alone = run_script(monkeypatch, capsys, f"--out_dir={init_dir}", *args, "--png=")
    mine = rows(out, "EDA init")
    assert len(mine) > 20 and mine == [line.split(None, 1)[1] for line in alone.splitlines()
                                       if line.startswith(f"{'EDA':>6} ")]
    assert rows(out, "EDA") != mine  # the checkpoint's own rows are another model's
    assert "(b) readout perturbation" in out and "|cos eq|" in out
    pytest.importorskip("matplotlib")
    assert (tmp_path / "p.png").stat().st_size > 10_000


def test_results_rows_hold_each_probed_models_figures_as_the_tables_print_them(checkpoints, monkeypatch, capsys,
                                                                                 tmp_path):
    path = tmp_path / "probe.jsonl"
    msg, out = run_script(monkeypatch, capsys, f"--out_dir={checkpoints['eda']}", f"--compare={checkpoints['kda']}",
                          f"--text={TEXT}", "--lags=(1, 4)", "--png=", f"--results={path}")
    assert msg is None, msg
    eda_row, kda_row = [json.loads(line) for line in path.read_text().splitlines()]
    assert (eda_row["label"], eda_row["mixer"], kda_row["label"], kda_row["mixer"]) == ("EDA", "eda", "KDA", "kda")
    assert eda_row["bench"] == "probe" and eda_row["trained"] and eda_row["device"] == "cpu" and eda_row["command"]
    assert abs(sum(eda_row["shares_pct"].values()) - 100) < 0.2 and "shares_pct" not in kda_row
    assert f"reference at d_k = 16: {eda_row['cos_reference']:.4f}" in out
    for row in (eda_row, kda_row):  # the mean recall is the tables' last (d) row of the model
        last = [line.split() for line in out.splitlines() if line.split()[:3] == [row["label"], "mean", "all"]][-1]
        assert f"{row['recall']:.3f}" == last[-1] and len(row["recall_by_lag"]) == 2
