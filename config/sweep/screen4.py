# Session 8's plan for the Transformer (fixed now, run next session; notes/synthetic.md §9). Two candidates:
# - a short causal conv on attention's input (attn_conv_size=4, the linear layers' conv size): on a CPU
#   miniature of MQAR it took the Transformer from an 8.5% plateau to 100% by step 400 on both seeds tried;
# - a longer schedule: with a 4000-step cosine the Transformer learned MQAR on 2 seeds of 3 by step ~2000 (§5),
#   and Zoology trains MQAR on ~8x as many sequences as our 3000 steps at batch 256.
# Whichever teaches every seed both tasks becomes the configs' recipe for the Transformer. ~10 ms of GPU a step
# per run (scripts/step_profile.py): ~10 minutes of one H100 in all, so two calls (the sweep resumes).
# Run order, decided in session 9 before any of it ran: the conv arm first, with the README's seed 1337 beside
# seeds 0-2 (so its rows are the README commands as they will read if the conv becomes the default). The
# 8000-step arm costs ~3x the conv arm's GPU time and runs only if the conv arm misses 99% on some seed:
# uncomment it then.
#   python sweep.py config/sweep/screen4.py --jobs=12
name = 'screen4'
tasks = {'mqar': {'config': 'config/mqar.py', 'x': 'config', 'levels': [['default', []]]},
         'reassign': {'config': 'config/reassign.py', 'x': 'config', 'levels': [['default', []]]}}
mixers = {'transformer + attn conv 4': ['--mixer=transformer', '--attn_conv_size=4']}
# mixers['transformer 8000 steps'] = ['--mixer=transformer', '--max_iters=8000', '--eval_interval=500']
learning_rates = []
seeds = [0, 1, 2, 1337]
