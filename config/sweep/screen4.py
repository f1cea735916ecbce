# Session 8's plan for the Transformer (run next session; notes/synthetic.md §9): with a longer cosine schedule
# it learned MQAR on 2 seeds of 3 by step ~2000 (§5, the 4000-step runs), and Zoology trains MQAR ~8x as many
# sequences as our 3000 steps at batch 256. If 8000 steps teach it on every seed, config/mqar.py (and
# reassign.py) raise max_iters for all mixers, as the issue allows. The GPU time is ~10 ms a step per run
# (scripts/step_profile.py): these 6 runs are ~8 minutes of one H100 with nothing else on it.
#   python sweep.py config/sweep/screen4.py --jobs=6
name = 'screen4'
tasks = {'mqar': {'config': 'config/mqar.py', 'x': 'config', 'levels': [['default', []]]},
         'reassign': {'config': 'config/reassign.py', 'x': 'config', 'levels': [['default', []]]}}
mixers = {'transformer 8000 steps': ['--mixer=transformer', '--max_iters=8000', '--eval_interval=500']}
learning_rates = []
seeds = [0, 1, 2]
