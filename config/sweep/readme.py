# The README's synthetic commands exactly as a user runs them (train.py's seed 1337, the configs' recipe:
# batch 256, 3000 steps each), every mixer:
#   python sweep.py config/sweep/readme.py --jobs=10
name = 'readme'
tasks = {
    'mqar': {'config': 'config/mqar.py', 'x': 'config', 'levels': [['default', []]]},
    'reassign': {'config': 'config/reassign.py', 'x': 'config', 'levels': [['default', []]]},
}
mixers = {m: [f'--mixer={m}'] for m in ('eda', 'kda', 'gdn', 'gdn2', 'transformer')}
learning_rates = []
seeds = [1337]
