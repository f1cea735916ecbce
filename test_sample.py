"""Generation: cached decoding emits what full forwards emit, linear-layer state has a constant size,
and sample.py runs end to end on a checkpoint from a short training run."""
import os
import re
import subprocess
import sys

import pytest
import torch

from conftest import rel, run_script, save_checkpoint, tiny_gpt, tokens
from decode import (GraphDecoder, decode_state_snapshot, decode_step, generate, new_cache, prefill, sample_next,
                    sampling_problem)
from model import GPT, MIXERS, GPTConfig

HERE = os.path.dirname(os.path.abspath(__file__))
TINY = dict(vocab_size=97, block_size=96, la_chunk_size=8, init_std=0.02)  # changes to conftest.tiny_gpt's model


@torch.no_grad()
def greedy_by_full_forwards(model, prompt, n):
    """prompt followed by n greedy tokens, each from a full forward over everything so far (no cache)."""
    seq = prompt
    for _ in range(n):
        seq = torch.cat([seq, model(seq)[0][:, -1].argmax(-1, keepdim=True)], dim=1)
    return seq


@pytest.mark.parametrize("mixer", MIXERS)
def test_cached_greedy_decoding_emits_the_tokens_of_repeated_full_forwards(mixer):
    model = tiny_gpt(mixer, **TINY).double()
    prompt = torch.randint(0, 97, (2, 21), generator=torch.Generator().manual_seed(1))  # > one chunk
    cached = generate(model, prompt, max_new_tokens=12, temperature=0)
    assert torch.equal(cached, greedy_by_full_forwards(model, prompt, 12))


@pytest.mark.parametrize("mixer", MIXERS)
def test_static_shape_greedy_decoding_emits_the_tokens_of_repeated_full_forwards(mixer):
    """generate's CUDA-graph path (GraphDecoder) on the CPU, without the graph: same greedy tokens."""
    model = tiny_gpt(mixer, **TINY).double()
    prompt = torch.randint(0, 97, (2, 21), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        cache = new_cache(model, 2, max_len=33)
        logits, _ = prefill(model, prompt, cache)
        step = GraphDecoder(model, cache, capture=False)
        seq = prompt
        for _ in range(12):
            seq = torch.cat([seq, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
            logits = step(seq[:, -1])
    assert torch.equal(seq, greedy_by_full_forwards(model, prompt, 12))


@pytest.mark.parametrize("mixer", MIXERS)
def test_chunked_prefill_gives_the_logits_and_tokens_of_a_one_shot_prefill(mixer):
    model = tiny_gpt(mixer, **TINY).double()
    prompt = torch.randint(0, 97, (2, 21), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        ref_cache = new_cache(model, 2, max_len=40)
        ref, _ = prefill(model, prompt, ref_cache, all_logits=True)
        for chunk in (5, 8, 21, 64):  # pieces that split the linear layers' chunks, align with them, or hold all
            cache = new_cache(model, 2, max_len=40)
            logits, _ = prefill(model, prompt, cache, all_logits=True, chunk_size=chunk)
            # the linear layers' cached state is fp32 whatever the model's dtype: between pieces it is rounded
            assert logits.shape == ref.shape and rel(logits, ref) < 1e-6, chunk
            assert cache["pos"] == 21
            last, _ = prefill(model, prompt, new_cache(model, 2, max_len=40), chunk_size=chunk)
            assert rel(last, ref[:, -1:]) < 1e-6, chunk
        tokens = generate(model, prompt, 8, temperature=0, prefill_chunk=6)
    assert torch.equal(tokens, generate(model, prompt, 8, temperature=0))
    with pytest.raises(ValueError, match="chunk_size must be a positive int"):
        prefill(model, prompt, new_cache(model, 2, max_len=40), chunk_size=0)


@pytest.mark.parametrize("mixer", ["eda", "gdn2"])
def test_linear_layer_state_does_not_grow_with_length(mixer):
    model = tiny_gpt(mixer, **TINY).double()
    prompt = torch.randint(0, 97, (1, 5), generator=torch.Generator().manual_seed(2))
    cache = new_cache(model, 1)
    _, cache = prefill(model, prompt, cache)
    linear = [i for i, b in enumerate(model.blocks) if not b.is_attention]
    assert linear, "the hybrid has linear-attention layers"

    def sizes():
        return [{n: (t.shape, t.dtype) for n, t in cache["layers"][i].items()} for i in linear]

    def states():
        return [cache["layers"][i]["state"].clone() for i in linear]

    after_prompt, s0 = sizes(), states()
    tok = prompt[:, -1]
    for _ in range(60):
        logits, cache = decode_step(model, tok, cache)
        tok = logits[:, -1].argmax(-1)
    assert cache["pos"] == 65
    assert sizes() == after_prompt  # same tensors, same shapes, after 12x more tokens
    assert all(not torch.equal(a, b) for a, b in zip(s0, states()))  # ... yet the memory was updated


def run(args, cwd):
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, PYTHONPATH=HERE))


def sample(*args, cwd):
    """sample.py run in this process (run_script): the script-level behaviour has its own subprocess tests."""
    return run_script("sample.py", *args, cwd=cwd)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A checkpoint from a short CPU training run on a small byte-level corpus."""
    tmp = tmp_path_factory.mktemp("sample")
    corpus = tmp / "corpus.txt"
    corpus.write_text("the cat sat on the mat. " * 400 + "naïve café ünïcödé\n" * 50)
    out = tmp / "out"
    prep = run_script("data/prepare.py", "text", f"--input={corpus}", f"--out={tmp / 'data'}", "--encoding=bytes",
                      cwd=tmp)
    r = run_script("train.py", f"--dataset={tmp / 'data'}", f"--out_dir={out}", "--max_iters=10", "--eval_interval=10",
                   "--eval_iters=1", "--n_layer=4", "--n_embd=32", "--block_size=64", "--batch_size=4",
                   "--warmup_iters=5", "--progress=False", "--device=cpu", cwd=tmp)
    assert prep.returncode == 0, prep.stderr
    assert r.returncode == 0, r.stdout + r.stderr
    assert (out / "ckpt.pt").exists()
    return tmp, out


def test_sample_script_prints_text_decoded_with_the_checkpoints_tokenizer(trained):
    tmp, out = trained
    r = run([os.path.join(HERE, "sample.py"), f"--out_dir={out}", "--start=the cat", "--temperature=0",
             "--num_samples=1", "--max_new_tokens=20", "--device=cpu"], tmp)
    assert r.returncode == 0, r.stderr
    # the same greedy tokens, decoded here with the byte tokenizer
    ckpt = torch.load(out / "ckpt.pt", map_location="cpu", weights_only=True)
    assert ckpt["encoding"] == "bytes"
    model = GPT(GPTConfig(**dict(ckpt["model_args"], la_backend="chunk")))
    model.load_state_dict(ckpt["model"])
    prompt = torch.tensor([list(b"the cat")])
    tokens = generate(model, prompt, 20, temperature=0)[0].tolist()
    expected = bytes(tokens).decode("utf-8", errors="replace")
    assert r.stdout.startswith(expected)


def test_sample_script_reports_time_to_first_token_and_rate_and_prefills_long_prompts_in_pieces(trained):
    tmp, out = trained
    args = [f"--out_dir={out}", "--start=the cat sat on the", "--temperature=0", "--num_samples=2",
            "--max_new_tokens=12", "--device=cpu"]
    whole, pieces = sample(*args, "--prefill_chunk=None", cwd=tmp), sample(*args, "--prefill_chunk=4", cwd=tmp)
    assert whole.returncode == 0 and pieces.returncode == 0, whole.stderr + pieces.stderr
    assert pieces.stdout == whole.stdout  # the same greedy text; the report stays off stdout
    report = [ln for ln in pieces.stderr.splitlines() if "time to first token" in ln]
    assert len(report) == 2 and all("prompt 18 tokens" in ln and "first step" in ln and "10 tokens at" in ln
                                    and "tokens/s" in ln for ln in report), pieces.stderr


def test_sample_script_defaults_fill_the_context(trained):
    tmp, out = trained
    r = sample(f"--out_dir={out}", "--device=cpu", cwd=tmp)  # as in the README
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("---------------") == 2  # num_samples=2, each up to block_size tokens


def test_sample_script_errors_are_clear(trained, tmp_path):
    tmp, out = trained
    cases = [
        ([f"--out_dir={tmp_path / 'nowhere'}"], "no checkpoint at"),
        ([f"--out_dir={out}", "--start=" + "x" * 80], "fills the model's block_size"),
        ([f"--out_dir={out}", "--start=" + "x" * 40, "--max_new_tokens=30"], "exceeds the model's block_size"),
        ([f"--out_dir={out}", f"--start=FILE:{tmp_path / 'missing.txt'}"], "cannot read the prompt file"),
        ([f"--out_dir={out}", "--start=", "--max_new_tokens=1"], "the prompt is empty"),
        ([f"--out_dir={out}", "--temperature=-1"], "temperature must be >= 0"),
        ([f"--out_dir={out}", "--top_k=0"], "top_k must be a positive int"),
        ([f"--out_dir={out}", "--top_p=1.5"], "top_p must be in (0, 1]"),
        ([f"--out_dir={out}", "--cuda_graph=1"], "cuda_graph must be None, True or False"),
        ([f"--out_dir={out}", "--prefill_chunk=0"], "prefill_chunk must be a positive int"),
        ([f"--out_dir={out}", "--cuda_graph=True"], "CUDA graphs need a CUDA device"),
        ([f"--out_dir={out}", "--compile=True"], "compile=True compiles the CUDA-graph decode step"),
        (["--out_dir=out/eda_125m"], "train one first (python train.py config/eda_125m.py)"),
        ([f"--out_dir={save_checkpoint(tiny_gpt(), str(tmp_path / 'mqar'), 'synthetic:mqar', 'mqar')}",
          "--encoding=bytes"], "trained on a synthetic task (synthetic:mqar): it has no text tokenizer"),
    ]
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"caf\xe9")  # latin-1, not UTF-8
    cases.append(([f"--out_dir={out}", f"--start=FILE:{bad}"], "not valid UTF-8"))
    # the first case as a user meets it, a process of its own (exit code, stderr); the rest the same way in this one
    results = [run([os.path.join(HERE, "sample.py"), "--device=cpu", *cases[0][0]], tmp)]
    results += [sample("--device=cpu", *args, cwd=tmp) for args, _ in cases[1:]]
    for (args, message), r in zip(cases, results):
        assert r.returncode != 0 and message in r.stderr, (args, r.stderr)
        assert "Traceback" not in r.stderr


def test_sample_script_never_samples_ids_its_tokenizer_cannot_decode(tmp_path):
    """A model trained with a vocab padded past its tokenizer's (--vocab_size=512 on bytes): here every id >= 256
    is far likelier than any byte, and sampling still keeps to the 256 the byte tokenizer decodes."""
    model = tiny_gpt(vocab_size=512)
    with torch.no_grad():
        model.lm_head.weight[:256] = 0
        model.lm_head.weight[256:] = 10 * model.lm_head.weight[256:].sign()
    out = save_checkpoint(model, str(tmp_path / "padded"))
    r = sample(f"--out_dir={out}", "--device=cpu", "--num_samples=1", "--max_new_tokens=20", "--start=ab",
               "--temperature=0", cwd=tmp_path)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert r.stdout.startswith("ab" + "\0" * 20), repr(r.stdout)  # every id >= 256 masked: the bytes are tied


def test_decode_api_refuses_what_sample_py_refuses_with_the_same_words():
    model = tiny_gpt(vocab_size=64)
    logits = torch.tensor([[4.0, 0.0, -2.0, -4.0]])
    idx = torch.zeros(2, 3, dtype=torch.long)
    for kw, message in [(dict(temperature=-1.0), "temperature must be >= 0 (0: greedy), got -1.0"),
                        (dict(temperature=float("nan")), "temperature must be >= 0"),
                        (dict(top_k=0), "top_k must be a positive int or None, got 0"),
                        (dict(top_k=-2), "top_k must be a positive int or None, got -2"),
                        (dict(top_p=-0.1), "top_p must be in (0, 1] or None, got -0.1")]:
        args = dict(dict(temperature=1.0, top_k=None, top_p=None), **kw)
        assert message in sampling_problem(**args)  # what sample.py says for the same setting
        with pytest.raises(ValueError, match=re.escape(message)):
            sample_next(logits, **args)
        with pytest.raises(ValueError, match=re.escape(message)):
            generate(model, idx, 2, **args)
    for prompt, n, message in [(idx, -1, "max_new_tokens must be an int >= 0, got -1"),
                               (idx[0], 2, "must be a 2-D integer tensor [B, T], got a 1-D torch.int64"),
                               (idx.float(), 2, "must be a 2-D integer tensor [B, T], got a 2-D torch.float32"),
                               (idx[:, :0], 2, "the prompt is empty"),
                               (idx + 64, 2, "the prompt holds token 64, outside the model's vocabulary of 64"),
                               (idx - 1, 2, "the prompt holds token -1, outside")]:
        with pytest.raises(ValueError, match=re.escape(message)):
            generate(model, prompt, n)
    with pytest.raises(ValueError, match="prefill: the prompt holds token 64"):
        prefill(model, idx + 64, new_cache(model, 2))
    cache = new_cache(model, 2)
    prefill(model, idx, cache)
    with pytest.raises(ValueError, match="decode_step: 3 tokens for a cache of batch 2"):
        decode_step(model, torch.zeros(3, dtype=torch.long), cache)
    with pytest.raises(ValueError, match="decode_step: the tokens must be an integer tensor"):
        decode_step(model, torch.zeros(2), cache)
    assert generate(model, idx, 0).shape == (2, 3)  # nothing to generate is no error


def test_sample_script_rejects_a_bool_for_max_new_tokens(trained):
    tmp, out = trained
    r = sample(f"--out_dir={out}", "--device=cpu", "--max_new_tokens=True", cwd=tmp)
    assert r.returncode != 0 and "max_new_tokens" in r.stderr and "got bool True" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_generate_refuses_to_compile_a_decode_step_it_cannot_graph():
    """compile= compiles GraphDecoder's step; where no CUDA graph can run (here: the CPU) it is a clear error,
    not a silent eager decode, and a wrong type is named."""
    model = tiny_gpt()
    idx = torch.zeros(1, 3, dtype=torch.long)
    with pytest.raises(ValueError, match="compiles the CUDA-graph decode step"):
        generate(model, idx, 4, compile=True)
    with pytest.raises(ValueError, match="compile must be a bool"):
        generate(model, idx, 4, compile=1)
    assert generate(model, idx, 4, temperature=0).shape == (1, 7)  # compile=False: the plain path still decodes


@pytest.mark.parametrize("mixer, attn_conv_size", [("eda", 0), ("transformer", 0), ("eda", 4), ("transformer", 4)])
def test_a_decode_state_snapshot_restored_replays_the_same_decode_step(mixer, attn_conv_size):
    """What GraphDecoder's warm-up and bench.py's decode check rely on: after restoring the snapshot (and pos), a
    step from the same cache gives the same logits and leaves the same cache, the attention layers' conv tails
    (attn_conv_size) included; only attention's K/V slot past pos keeps the extra step's write, which nothing
    reads."""
    model = tiny_gpt(mixer, attn_conv_size=attn_conv_size).double()
    cache = new_cache(model, 2, max_len=16, dtype=torch.float64)
    prefill(model, tokens(B=2, T=5, vocab=model.config.vocab_size), cache)
    tok = torch.tensor([[3], [7]])
    restore = decode_state_snapshot(model, cache)
    first = decode_step(model, tok, cache)[0]
    advanced = [(layer, {n: t.clone() for n, t in layer.items() if not (block.is_attention and n in ("k", "v"))})
                for layer, block in zip(cache["layers"], model.blocks)]
    decode_step(model, tok, cache)  # a second step moves the conv tails and linear states on
    moved = [n for layer, a in advanced for n in a if not torch.equal(layer[n], a[n])]
    assert len(moved) == sum(len(a) for _, a in advanced)  # (the plain Transformer has none: K/V only)
    restore()
    cache["pos"] = 5
    assert torch.equal(decode_step(model, tok, cache)[0], first)
    assert all(torch.equal(layer[n], a[n]) for layer, a in advanced for n in a)
