# The small language-model comparison (issue #14 item 5): config/stdlib_26m.py for every mixer at its config
# learning rate, 2 seeds, the same tokens. Metric: validation loss (nats per byte); the figure is the curves.
#   python sweep.py config/sweep/lm.py --jobs=8
name = 'lm'
tasks = {'stdlib': {'config': 'config/stdlib_26m.py', 'x': 'model', 'levels': [['26M', []]]}}
mixers = {m: [f'--mixer={m}'] for m in ('eda', 'kda', 'gdn', 'gdn2', 'transformer')}
learning_rates = []
seeds = [0, 1]
metric = 'val_loss'
