"""Helpers shared by the tests (pytest puts this directory on sys.path: `from conftest import rel`)."""


def rel(a, b):
    """Relative error |a - b| / |b| in float64 on the CPU (any dtype, any device)."""
    a, b = a.detach().double().cpu(), b.detach().double().cpu()
    return ((a - b).norm() / b.norm().clamp_min(1e-300)).item()


def tiny_gpt(mixer="eda", seed=0, **kw):
    """A small random model of `mixer` (4 layers: 3 linear + 1 full attention; 2 q/k heads, 4 value heads,
    16-token chunks), in float32 on the CPU; kw overrides GPTConfig fields."""
    import torch
    from model import GPT, GPTConfig
    base = dict(mixer=mixer, vocab_size=256, block_size=128, n_layer=4, n_embd=32, n_head=2, n_kv_head=1,
                head_dim=16, la_n_head=2, la_n_v_head=4, la_head_dim=16, la_v_head_dim=8, la_chunk_size=16,
                init_std=0.1, la_backend="chunk")
    base.update(kw)
    torch.manual_seed(seed)
    return GPT(GPTConfig(**base)).eval()


def save_checkpoint(model, out_dir, encoding="bytes", dataset="stdlib"):
    """out_dir/ckpt.pt with the keys of train.py's checkpoints that the reading scripts use (model,
    model_args, encoding, data_position). Returns out_dir."""
    import dataclasses
    import os
    import torch
    os.makedirs(out_dir, exist_ok=True)
    torch.save({"model": model.state_dict(), "model_args": dataclasses.asdict(model.config), "encoding": encoding,
                "data_position": {"dataset": dataset, "block_size": model.config.block_size, "iter": 0}},
               os.path.join(out_dir, "ckpt.pt"))
    return out_dir
