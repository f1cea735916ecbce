# Session 7's second screen, fixed after config/sweep/screen.py showed 4x batches (256, Zoology's MQAR batch)
# teach EDA every seed on MQAR and reassign: the same batch for the other mixers, and, for the Transformer
# on reassign (33% with 2 layers at every setting so far), 3 and 4 layers (notes/synthetic.md §5 says why).
#   python sweep.py config/sweep/screen2.py --jobs=9; python sweep.py config/sweep/screen2_reassign.py --jobs=6
name = 'screen2'
tasks = {'mqar': {'config': 'config/mqar.py', 'x': 'config', 'levels': [['default', []]]}}
mixers = {
    'transformer batch 256 3000 steps': ['--mixer=transformer', '--batch_size=256', '--max_iters=3000'],
    'gdn2 batch 256': ['--mixer=gdn2', '--batch_size=256', '--la_chunk_size=64'],
    'gdn batch 256': ['--mixer=gdn', '--batch_size=256'],
}
learning_rates = []
seeds = [0, 1, 2]
