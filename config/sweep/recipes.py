# Which default recipe learns the README's synthetic commands, over seeds: the configs as a user runs them,
# and the variants that test a cause (notes/synthetic.md):
#   python sweep.py config/sweep/recipes.py --jobs=18
name = 'recipes'
# the configs' recipe when these rows ran (session 6); the configs now train at batch 256
tasks = {
    'mqar': {'config': 'config/mqar.py', 'x': 'config', 'levels': [['default', ['--batch_size=64', '--max_iters=2000']]]},
    'reassign': {'config': 'config/reassign.py', 'x': 'config', 'levels': [['default', ['--batch_size=64', '--max_iters=3000']]]},
}
mixers = {
    'eda': ['--mixer=eda'], 'kda': ['--mixer=kda'],
    'eda erase bias -3': ['--mixer=eda', '--la_erase_bias=-3.0'],   # gamma starts at ~0.05: EDA starts near KDA
}
learning_rates = []           # the configs' own
seeds = [0, 1, 2]
