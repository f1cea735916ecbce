# MQAR (multi-query associative recall, Zoology recipe): can the mixer store and recall key-value bindings?
#   python train.py config/mqar.py [--mixer=kda|gdn|gdn2|transformer] [--num_kv_pairs=64 --block_size=512]
# Data are generated in-process from the seed (data/synthetic.py); eval reports accuracy on the answers.
# Zoology's setup, two layers and no full attention: the linear memory alone must recall (notes/synthetic.md).

dataset = 'mqar'
vocab_size = 8192            # Zoology's vocab: keys and values from disjoint halves
block_size = 256
num_kv_pairs = 16            # Zoology sweeps 4 .. 64 pairs over sequence lengths 64 .. 512
n_layer = 2
attn_every = 100             # no attention layer
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
out_dir = 'out/mqar'
compile = False              # eager: a launch-bound step; compiling costs more than it saves (notes/synthetic.md §5)
batch_size = 256             # Zoology's MQAR batch; at 64, EDA/GDN/Transformer learned on some seeds only
max_iters = 3000             # EDA was at 98.8-99.99% by step 1800 on 3 seeds; 3000 for margin
warmup_iters = 100
learning_rate = 1e-3
min_lr = 1e-5
weight_decay = 0.1
eval_interval = 200
eval_iters = 8
log_interval = 50
