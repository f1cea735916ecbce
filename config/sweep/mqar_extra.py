# MQAR runs that test why the Transformer and GDN-2 defaults fail (notes/synthetic.md):
#   python sweep.py config/sweep/mqar_extra.py --jobs=3
name = 'mqar_extra'
# the configs' recipe when these rows ran (session 6); the configs now train at batch 256
tasks = {'mqar': {'config': 'config/mqar.py', 'x': 'config', 'levels': [['default', ['--batch_size=64', '--max_iters=2000']]]}}
mixers = {
    'transformer 5000 steps': ['--mixer=transformer', '--max_iters=5000'],
    'transformer lr 3e-4': ['--mixer=transformer', '--learning_rate=3e-4'],
    'gdn2 A=1 lr 3e-3': ['--mixer=gdn2', '--la_A_init=unit', '--learning_rate=3e-3'],
}
learning_rates = []
seeds = [1337]
