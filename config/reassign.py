# Reassignment: keys get new values and bindings move to new keys, so stale entries must be removed
# (data/synthetic.py's docstring: what the task asks of the memory).
#   python train.py config/reassign.py [--mixer=kda|gdn|gdn2|transformer]
# Same model as config/mqar.py (two layers, no full attention).

dataset = 'reassign'
vocab_size = 8192
block_size = 256             # stream <= 2 * (16 + 2 * 16) tokens, queries <= 2 * 32 tokens
num_kv_pairs = 16
num_updates = 16
n_layer = 2
attn_every = 100
n_embd = 128
ffn_hidden = 256
n_head = 2
n_kv_head = 2
head_dim = 64
la_n_head = 2
la_n_v_head = 2
la_head_dim = 64
la_v_head_dim = 64
la_gate_rank = 16
la_erase_rank = 16
la_chunk_size = 64           # the chunked PyTorch form (GDN-2's only one) is faster on GPUs with 64 (16 on CPU)
attn_conv_size = 4           # attention's recipe: without it recall plateaus (notes/synthetic.md §3)
out_dir = 'out/reassign'
compile = False              # eager: a launch-bound step; compiling costs more than it saves (notes/synthetic.md §5)
batch_size = 256             # Zoology's MQAR batch; at 64, EDA/GDN/Transformer learned on some seeds only
max_iters = 3000             # EDA: 1000-1250 steps; the Transformer 3000 on 1 seed of 4 (notes/synthetic.md §3)
warmup_iters = 100
learning_rate = 1e-3
min_lr = 1e-5
weight_decay = 0.1
eval_interval = 250
eval_iters = 8
log_interval = 50
