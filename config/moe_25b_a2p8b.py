# MoE 25B-A2.8B (paper Appendix A, Tables 6-7): 28 layers (21 linear / 7 full), d_model 2048,
# 256 experts of width 512, top-8 + 1 shared, vocab 248,320.
#   python train.py config/moe_25b_a2p8b.py --mixer=eda      (eda | kda | gdn | gdn2 | transformer)
# Parameter counts vs Table 7: RESULTS.md (all within 0.02%, total and active; the shapes: notes/params.md).

# -- model --------------------------------------------------------------------------------------------
vocab_size = 248320
block_size = 4096            # pretraining; midtraining uses 32768 (--block_size=32768)
n_layer = 28
n_embd = 2048
mixer = 'eda'
attn_every = 4
tie_embeddings = False
# full attention ("Attn/KV 16/2"), head_dim 256 and partial RoPE as in Qwen3-Next (not printed in the paper)
n_head = 16
n_kv_head = 2
head_dim = 256
rope_frac = 0.25
rope_theta = 10000000.0
transformer_n_kv_head = 0    # no Transformer baseline at this scale: same heads as the hybrids
# linear attention ("LA K/V 16/32", "LA dim 128/128")
la_n_head = 16
la_n_v_head = 32
la_head_dim = 128
la_v_head_dim = 128
la_conv_size = 4
la_gate_rank = 16            # rank-16 (per-head) decay projection
la_erase_rank = 16           # rank-16 (per-head) erase-address projection
la_gate = 'auto'             # eda: safe gate with lower bound -5 (Appendix A)
la_gate_lower_bound = -5.0
la_backend = 'auto'
la_chunk_size = 64
# MoE in every layer: 256 experts of width 512, top-8, plus one shared expert of width 512 (notes/params.md)
moe = True
n_expert = 256
moe_topk = 8
expert_hidden = 512
shared_expert_hidden = 512
moe_aux_coef = 0.001         # not given in the paper (Qwen MoE's 1e-3)
ffn_hidden = 7424            # unused with moe = True (kept so --moe=False gives the dense FFN)
transformer_ffn_hidden = 0

# -- training (Sec. 4.1: 400B tokens, seq 4096, global batch 1024, lr 2e-3 -> 3e-5) ---------------------
batch_size = 1               # micro-batch per GPU (25B params need FSDP over several GPUs anyway)
gradient_accumulation_steps = 1024  # over all ranks (train.py): 1 x 1024 = 1024 sequences per step
grad_checkpoint = False
learning_rate = 2e-3
min_lr = 3e-5
max_iters = 95367
warmup_iters = 2000          # not given in the paper
lr_decay_iters = 95367
weight_decay = 0.1           # not given in the paper
dtype = 'bfloat16'
out_dir = 'out/moe_25b_a2p8b'
