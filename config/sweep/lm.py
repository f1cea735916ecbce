# The small language-model comparison (RESULTS.md): config/stdlib_26m.py for every mixer, 2 seeds, the same
# tokens. Metric: validation loss (nats per byte); the figure is the curves.
#   python sweep.py config/sweep/lm.py --jobs=8
name = 'lm'
results_dir = 'results'
tasks = {'stdlib': {'config': 'config/stdlib_26m.py', 'x': 'model', 'levels': [['26M', []]]}}
mixers = {m: [f'--mixer={m}'] for m in ('eda', 'kda', 'gdn', 'gdn2', 'transformer')}
# the 2 x 2 of erase and gate (the gate's A init follows the gate): EDA with KDA's gate is KDA plus the erase,
# KDA with EDA's safe gate is EDA minus the erase
mixers['eda kda-gate'] = ['--mixer=eda', '--la_gate=kda']
mixers['kda safe-gate'] = ['--mixer=kda', '--la_gate=safe']
learning_rates = []
seeds = [0, 1]
metric = 'val_loss'
# the erase at each gate, seed by seed
pairs = [['eda kda-gate', 'kda'], ['eda', 'kda safe-gate']]
