# Long-context midtraining (the paper's 32k stage): resume a pretrained run with a longer block_size on
# another dataset. Put it AFTER the pretraining config, so the model settings match the checkpoint:
#   python train.py config/eda_125m.py config/midtrain_32k.py
# What comes from resume_dir/ckpt.pt (left as it is) and what from here: notes/train.md, "Resume / midtraining".
# The numbers below continue config/eda_125m.py (5000 steps); for another run set lr_schedule_start to the
# step its checkpoint was saved at, and max_iters / lr_decay_iters to that plus the stage's length.
# Once the stage has saved a checkpoint, the same command stops rather than replace it: continue the stage
# with --resume_dir=out/eda_125m_midtrain_32k, or start it over with --overwrite=True.

init_from = 'resume'
resume_dir = 'out/eda_125m'
out_dir = 'out/eda_125m_midtrain_32k'
dataset = 'openwebtext'      # another corpus; any prepared folder works (python data/prepare.py text ...)
block_size = 32768
grad_checkpoint = True       # recompute blocks in backward: activations of 32k tokens otherwise dominate
batch_size = 1
gradient_accumulation_steps = 16   # 16 x 32k = 0.5M tokens per step, as in pretraining
lr_schedule_start = 5000
max_iters = 6000             # + 1000 steps = 0.5B tokens (the paper: 80B after 400B, i.e. +20%)
lr_decay_iters = 6000
warmup_iters = 100
learning_rate = 1e-3
min_lr = 3e-5
eval_interval = 250
eval_iters = 8
