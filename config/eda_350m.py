# ~350M EDA hybrid (3:1), the 2.5B recipe at GPT-2 medium's width and depth.
#   python train.py config/eda_350m.py [--mixer=transformer|kda|gdn|gdn2]
# Needs data/fineweb_edu (python data/prepare.py fineweb_edu). Tied embeddings, as in config/eda_125m.py.

# -- model
vocab_size = 50304
block_size = 4096
n_layer = 24                 # 18 linear + 6 full attention, as in the 2.5B model
n_embd = 1024
mixer = 'eda'
attn_every = 4
tie_embeddings = True
n_head = 8                   # Gated Attention 8 x 128, 2 KV heads (the 2.5B model: 8 heads, 2 KV heads)
n_kv_head = 2
head_dim = 128
la_n_head = 4                # LA 4/8 heads of 128: q/k 512 = d/2, v 1024 = d
la_n_v_head = 8
la_head_dim = 128
la_v_head_dim = 128
la_gate_rank = 16
la_erase_rank = 16
la_chunk_size = 64           # the chunked PyTorch rule's (GDN-2's only one): faster on GPUs with 64 (16 on CPU)
ffn_hidden = 2688            # 2.62 d (paper 3.62 d): the hybrid lands at ~350M

# -- training: ~7B tokens (20 per parameter), 0.5M tokens per step
dataset = 'fineweb_edu'
out_dir = 'out/eda_350m'
batch_size = 4
gradient_accumulation_steps = 32
max_iters = 14000
lr_decay_iters = 14000
warmup_iters = 500
learning_rate = 2e-3
min_lr = 3e-5
weight_decay = 0.1
eval_interval = 500
eval_iters = 40
log_interval = 10
