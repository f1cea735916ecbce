# Session 9, after screen4: the Transformer with attn_conv_size=4 learned MQAR on all 4 seeds (100% from step
# ~1000) and reassign on 3 of 4 (99.9-100% at 2000 steps; seed 0 94.1%, still climbing). Here the same conv
# on reassign with 3000 steps instead of 2000. Decided before running: if all 4 seeds reach >= 99%, the conv
# becomes both synthetic configs' Transformer recipe and reassign's max_iters goes to 3000 (for every mixer,
# so the README commands stay one recipe); if not, screen4's 8000-step arm runs next.
#   python sweep.py config/sweep/screen5.py --jobs=4
name = 'screen5'
tasks = {'reassign': {'config': 'config/reassign.py', 'x': 'config', 'levels': [['3000 steps', []]]}}
mixers = {'transformer + attn conv 4': ['--mixer=transformer', '--attn_conv_size=4', '--max_iters=3000']}
learning_rates = []
seeds = [0, 1, 2, 1337]
