# The screen of config/sweep/screen.py on config/reassign.py, for the two recipes that task most needs
# checked (EDA's seed 1 stayed at 89% with batch 64; the Transformer stays on the 33% plateau):
#   python sweep.py config/sweep/screen_reassign.py --jobs=6
name = 'screen_reassign'
tasks = {'reassign': {'config': 'config/reassign.py', 'x': 'config', 'levels': [['default', []]]}}
mixers = {
    'eda batch 256': ['--mixer=eda', '--batch_size=256'],
    'transformer batch 256 4000 steps': ['--mixer=transformer', '--batch_size=256', '--max_iters=4000'],
}
learning_rates = []
seeds = [0, 1, 2]
