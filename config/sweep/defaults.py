# Every mixer's default recipe learns: the synthetic commands exactly as a user runs them (train.py's seed 1337,
# the configs' own recipe: batch 256, 3000 steps), `python train.py config/mqar.py --mixer=X` and
# `python train.py config/reassign.py --mixer=X` for every mixer (RESULTS.md).
#   python sweep.py config/sweep/defaults.py --jobs=4
name = 'defaults'
results_dir = 'results'
tasks = {'mqar': {'config': 'config/mqar.py', 'x': 'config', 'levels': [['default', []]]},
         'reassign': {'config': 'config/reassign.py', 'x': 'config', 'levels': [['default', []]]}}
mixers = {**{m: [f'--mixer={m}'] for m in ('eda', 'kda', 'gdn', 'gdn2')},
          'transformer conv4': ['--mixer=transformer']}  # the task configs set attn_conv_size = 4
learning_rates = []
seeds = [1337]
