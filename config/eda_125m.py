# ~125M EDA hybrid (3:1 linear : full attention), the paper's 2.5B recipe scaled down to GPT-2 small's width.
#   python train.py config/eda_125m.py                       # EDA
#   python train.py config/eda_125m.py --mixer=transformer   # or kda | gdn | gdn2: the counterparts
# Needs data/fineweb_edu (python data/prepare.py fineweb_edu, network); offline: --dataset=stdlib --vocab_size=256.
# Widths follow the 2.5B config's ratios to d_model (the comments below); the FFN is narrower to land at 125M.

# -- model
vocab_size = 50304           # gpt2's 50257 padded to a multiple of 128
block_size = 4096            # the paper's pretraining length
n_layer = 12                 # 9 linear + 3 full attention
n_embd = 768
mixer = 'eda'
attn_every = 4
tie_embeddings = True        # as in GPT-2 small: untied, the 50k vocab alone would be 77M of the 125M
n_head = 6                   # Gated Attention: 6 x 128 = d_model, GQA with 2 KV heads
n_kv_head = 2
head_dim = 128
la_n_head = 3                # "LA K/V" 3/6 heads of 128: q/k 384 = d/2, v 768 = d (paper 8/16 at d 2048)
la_n_v_head = 6
la_head_dim = 128
la_v_head_dim = 128
la_gate_rank = 16
la_erase_rank = 16
la_chunk_size = 64           # the chunked PyTorch rule's (GDN-2's only one): faster on GPUs with 64 (16 on CPU)
ffn_hidden = 2048            # 2.67 d (paper 3.62 d): the hybrid lands at ~125M with tied embeddings

# -- training: ~2.6B tokens (about 20 tokens per parameter), 0.5M tokens per step
dataset = 'fineweb_edu'
out_dir = 'out/eda_125m'
batch_size = 8               # micro-batch per GPU (8 x 4096 tokens)
gradient_accumulation_steps = 16
max_iters = 5000
lr_decay_iters = 5000
warmup_iters = 200
learning_rate = 3e-3         # the paper's dense runs use 4e-3 at 2.5B; small models take a similar peak
min_lr = 3e-5
weight_decay = 0.1
eval_interval = 250
eval_iters = 40
log_interval = 10
