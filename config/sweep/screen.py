# Session 7's screen of the failing defaults (notes/synthetic.md §5), fixed before running: config/mqar.py,
# seeds 0, 1, 2, the config's lr. Does a longer run fix EDA's seed-dependence (4000 steps), does the KDA gate
# (the gate alone), do 4x larger batches or 2x longer runs teach the Transformer, does GDN-2 learn with
# 64-token chunks (faster on GPU)? The first call ran 18 runs at once with the full-vocabulary logits at every
# position and 12 of them ran out of GPU memory; the Transformer's rows of that call stand. The two
# 'transformer batch 256' rows after it were added once the first call had shown a 4x batch teach 1 seed of 3.
#   python sweep.py config/sweep/screen.py --jobs=18
name = 'screen'
tasks = {'mqar': {'config': 'config/mqar.py', 'x': 'config', 'levels': [['default', []]]}}
mixers = {
    'eda 4000 steps': ['--mixer=eda', '--max_iters=4000'],
    'eda kda-gate': ['--mixer=eda', '--la_gate=kda'],
    'eda batch 256': ['--mixer=eda', '--batch_size=256'],
    'transformer batch 256': ['--mixer=transformer', '--batch_size=256'],
    'transformer 4000 steps': ['--mixer=transformer', '--max_iters=4000'],
    'gdn2 chunk 64': ['--mixer=gdn2', '--la_chunk_size=64'],
    'transformer batch 256 4000 steps': ['--mixer=transformer', '--batch_size=256', '--max_iters=4000'],
    'transformer batch 256 lr 3e-3': ['--mixer=transformer', '--batch_size=256', '--learning_rate=3e-3'],
}
learning_rates = []
seeds = [0, 1, 2]
