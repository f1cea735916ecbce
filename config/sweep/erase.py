# The erase where its verdicts stand, rerun on the model as shipped (A per channel in the channel-wise gates):
# capacity at 2000 steps and evict at 6000, the levels and steps of config/sweep/synthetic.py and evict_long.py, at
# their best lr (1e-3), seeds 0-2, with the whole erase x gate square: EDA, KDA, EDA with KDA's gate (KDA plus the
# erase), KDA with the safe gate (EDA minus the erase). Fixed before it ran.
#   python sweep.py config/sweep/erase.py --jobs=4
# A run holds 12-19 GB of GPU memory; beyond a few at once they only share its time (notes/synthetic.md).
exec(open('config/sweep/synthetic.py').read())
name = 'erase'
_steps = {'capacity': ['--max_iters=2000', '--eval_interval=500'], 'evict': ['--max_iters=6000', '--eval_interval=1000']}
tasks = {t: {**tasks[t], 'levels': [[x, [*args, *_steps[t]]] for x, args in tasks[t]['levels']]} for t in _steps}
mixers = {'eda': ['--mixer=eda'], 'kda': ['--mixer=kda'], 'eda kda-gate': ['--mixer=eda', '--la_gate=kda'],
          'kda safe-gate': ['--mixer=kda', '--la_gate=safe']}
learning_rates = [1e-3]
extra = []
pairs = [['eda kda-gate', 'kda'], ['eda', 'kda safe-gate']]
