# The small language-model comparison (RESULTS.md): config/stdlib_26m.py (~26M parameters, 1600 steps x 16 x 1024 tokens, the
# same tokens for every run of a seed) for every mixer the paper compares, each at its own best learning rate.
# The grid is fixed before any run: lrs 5e-4, 1e-3, 2e-3 on seed 0; at each mixer's best lr (chosen on seed 0),
# seeds 1 and 2, and seed 0 once more (same data; the run-to-run noise beside the seed spread).
#   python sweep.py config/sweep/lm.py --jobs=7       # one 80 GB GPU
#   python sweep.py config/sweep/lm.py --jobs=12 "--mixer_jobs={'gdn2': 3}"   # one 141 GB GPU
# A run takes ~7 GiB, gdn2's (its chunked PyTorch rule, eager) ~26 GiB: notes/train.md, "GPU measurements".
name = 'lm'
results_dir = 'results'
tasks = {'stdlib': {'config': 'config/stdlib_26m.py', 'x': 'model', 'levels': [['26M', []]]}}
mixers = {
    'gdn2': ['--mixer=gdn2'],                      # first: its chunked PyTorch rule makes its runs the longest
    'eda': ['--mixer=eda'], 'kda': ['--mixer=kda'],
    'kda safe-gate': ['--mixer=kda', '--la_gate=safe'],   # EDA minus the erase
    'eda kda-gate': ['--mixer=eda', '--la_gate=kda'],     # KDA plus the erase
    'gdn': ['--mixer=gdn'],
    'transformer no-conv': ['--mixer=transformer'],        # the paper's baseline: no conv
    'transformer conv4': ['--mixer=transformer', '--attn_conv_size=4'],  # local mixing, as the hybrids' short conv
}
learning_rates = [5e-4, 1e-3, 2e-3]
seeds = [0]
best_seeds = [1, 2]
best_repeats = 1
metric = 'val_loss'
checkpoints = True             # a run cut off resumes from its last evaluation's checkpoint
run_timeout = 7200
mixer_jobs = {'gdn2': 1}
pairs = [['eda', 'kda safe-gate'], ['eda kda-gate', 'kda']]  # the erase at each gate, seed by seed
