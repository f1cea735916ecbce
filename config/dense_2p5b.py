# Dense 2.5B (paper Appendix A, Tables 6-7): 24 layers (18 linear / 6 full), d_model 2048, vocab 248,320.
#   python train.py config/dense_2p5b.py --mixer=eda      (eda | kda | gdn | gdn2 | transformer)
# Parameter counts vs Table 7 for every mixer: RESULTS.md (all within 0.4%; the shapes: notes/params.md).

# -- model --------------------------------------------------------------------------------------------
vocab_size = 248320
block_size = 4096            # pretraining sequence length
n_layer = 24
n_embd = 2048
mixer = 'eda'
attn_every = 4               # linear, linear, linear, full (3:1 hybrid)
tie_embeddings = False       # Table 7's counts include both the embedding and the lm_head
# full attention ("Attn/KV 8/2"): Gated Attention, head_dim 256 and partial RoPE as in Qwen3-Next (notes/params.md)
n_head = 8
n_kv_head = 2
head_dim = 256
rope_frac = 0.25
rope_theta = 10000000.0
transformer_n_kv_head = 4    # the Transformer baseline's 8/4/4 q/k/v heads, "for parameter alignment" (Appendix A)
# linear attention ("LA K/V 8/16", "LA dim 128/128"): 8 q/k heads, 16 value heads, 128/128 per head
la_n_head = 8
la_n_v_head = 16
la_head_dim = 128
la_v_head_dim = 128
la_conv_size = 4
la_gate_rank = 16            # "rank-16 (per-head) low-rank projections for the gate generator"
la_erase_rank = 16           # EDA's erase address (and GDN-2's b, w): rank 16 per q/k head
la_gate = 'auto'             # eda: safe gate (l = -5), kda: KDA gate, gdn / gdn2: Mamba2 log gate
la_gate_lower_bound = -5.0
la_backend = 'auto'
la_chunk_size = 64
# FFN: SwiGLU at 7424 for every mixer (notes/params.md); transformer_ffn_hidden = 0 means "same as ffn_hidden"
ffn_hidden = 7424
transformer_ffn_hidden = 0
moe = False

# -- training (Sec. 4.1: 400B tokens, seq 4096, global batch 1024 sequences, lr 4e-3 -> 3e-5) -----------
batch_size = 1                       # micro-batch per GPU: 2.5B EDA, T=4096, bf16 autocast, triton backend,
                                     # fwd+bwd peaks at 49 GiB on one H100 (fp32 weights + grads, 248k-vocab logits)
gradient_accumulation_steps = 1024   # over all ranks (train.py): 1 x 1024 = 1024 sequences per step
grad_checkpoint = False              # True: B=2 fits in 39 GiB on one H100 (3.5% fewer tokens/s)
learning_rate = 4e-3
min_lr = 3e-5
max_iters = 95367                    # 400e9 / (1024 * 4096) steps
warmup_iters = 2000                  # not given in the paper
lr_decay_iters = 95367
weight_decay = 0.1                   # not given in the paper (nanoGPT / common default)
dtype = 'bfloat16'
out_dir = 'out/dense_2p5b'
