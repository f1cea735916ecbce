# Session 8's screen of the Transformer's failure (notes/synthetic.md §9): q/k RMSNorm with unit gains caps
# every attention logit at sqrt(head_dim) = 8, about what a one-in-256 lookup needs, until the gains grow at
# Adam's ~lr per step; Zoology's attention has no q/k norm. Same configs, same seeds as the failing runs.
#   python sweep.py config/sweep/screen3.py --jobs=6
name = 'screen3'
tasks = {'mqar': {'config': 'config/mqar.py', 'x': 'config', 'levels': [['default', []]]},
         'reassign': {'config': 'config/reassign.py', 'x': 'config', 'levels': [['default', []]]}}
mixers = {'transformer no qk-norm': ['--mixer=transformer', '--qk_norm=False']}
learning_rates = []
seeds = [0, 1, 2]
