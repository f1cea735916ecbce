# See config/sweep/screen2.py.
name = 'screen2_reassign'
tasks = {'reassign': {'config': 'config/reassign.py', 'x': 'config', 'levels': [['default', []]]}}
mixers = {
    'transformer 3 layers batch 256': ['--mixer=transformer', '--batch_size=256', '--n_layer=3'],
    'transformer 4 layers batch 256': ['--mixer=transformer', '--batch_size=256', '--n_layer=4'],
}
learning_rates = []
seeds = [0, 1, 2]
