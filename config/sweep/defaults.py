# The README's synthetic commands for every mixer, as a user runs them (the configs' own lr, seed 1337),
# and the variants that show where the decay gate's init matters:
#   python sweep.py config/sweep/defaults.py --jobs=16
name = 'defaults_s1337'   # its results file
# the configs' recipe when these rows ran (session 6); the configs now train at batch 256
tasks = {
    'mqar': {'config': 'config/mqar.py', 'x': 'config', 'levels': [['default', ['--batch_size=64', '--max_iters=2000']]]},
    'reassign': {'config': 'config/reassign.py', 'x': 'config', 'levels': [['default', ['--batch_size=64', '--max_iters=3000']]]},
}
mixers = {
    'eda': ['--mixer=eda'], 'kda': ['--mixer=kda'], 'gdn': ['--mixer=gdn'], 'gdn2': ['--mixer=gdn2'],
    'transformer': ['--mixer=transformer'],
    'eda A~U(1,16)': ['--mixer=eda', '--la_A_init=mamba2'],   # the init before this change
    'gdn A=1': ['--mixer=gdn', '--la_A_init=unit'],
    'gdn2 A=1': ['--mixer=gdn2', '--la_A_init=unit'],
    'transformer lr 3e-3': ['--mixer=transformer', '--learning_rate=3e-3'],
}
learning_rates = []           # the configs' own
seeds = [1337]                # train.py's default seed: exactly the README's commands
