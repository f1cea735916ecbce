# The small language-model comparison of RESULTS.md: ~26M-parameter 3:1 hybrids (and the Transformer) on the
# stdlib corpus (bytes, offline, prepared on first use), the same tokens for every mixer; its grid: config/sweep/lm.py.
#   python train.py config/stdlib_26m.py [--mixer=kda|gdn|gdn2|transformer]
# Parameters (model.param_summary): eda 26.56M, kda 26.40M, gdn 26.01M, gdn2 26.68M, transformer 26.56M.

# -- model
vocab_size = 256             # bytes
block_size = 1024
n_layer = 8                  # 6 linear + 2 full attention
n_embd = 512
attn_every = 4
n_head = 4                   # Gated Attention: 4 x 128 = d_model, GQA with 2 KV heads
n_kv_head = 2
head_dim = 128
la_n_head = 2                # LA q/k 2 x 128 = d/2, v 4 x 128 = d: config/eda_125m.py's ratios
la_n_v_head = 4
la_head_dim = 128
la_v_head_dim = 128
la_gate_rank = 16
la_erase_rank = 16
la_chunk_size = 64
ffn_hidden = 1408            # 2.75 d
transformer_ffn_hidden = 1456  # the all-attention baseline's FFN, widened to the EDA hybrid's parameter count

# -- training: 1600 steps x 16 x 1024 = 26.2M tokens
dataset = 'stdlib'
compile = False              # eager for every mixer: gdn2's chunked PyTorch rule compiles too slowly to pay off
out_dir = 'out/stdlib_26m'
batch_size = 16
max_iters = 1600
warmup_iters = 50
learning_rate = 1e-3          # EDA's best of the LM grid's 5e-4, 1e-3, 2e-3 on seed 0 (RESULTS.md, with every
                             # other mixer's own best: pass --learning_rate= for those)
min_lr = 2e-5
weight_decay = 0.1
eval_interval = 100
eval_iters = 16
log_interval = 50
