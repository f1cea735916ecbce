# Follow-up to the synthetic grid, fixed in session 12 before any of it ran: the fourth cell of the erase x gate
# square on the tasks where the erase helped with KDA's gate (capacity; evict at 6000 steps). The grid has EDA
# with the safe gate, EDA with KDA's gate and KDA; KDA with the safe gate (EDA minus the erase) tells whether
# the erase also helps under EDA's default gate, or whether the safe gate hides it. Same levels, step counts,
# lr (1e-3, the best for every mixer there) and seeds as those runs, so each row pairs by seed with the grid's
# 'eda' rows (notes/sweep/synthetic.jsonl, evict_long.jsonl): 12 runs.
#   python sweep.py config/sweep/safe_gate.py --jobs=6
exec(open('config/sweep/synthetic.py').read())
name = 'safe_gate'
_steps = {'capacity': ['--max_iters=2000', '--eval_interval=500'], 'evict': ['--max_iters=6000', '--eval_interval=1000']}
tasks = {t: {**tasks[t], 'levels': [[x, [*args, *_steps[t]]] for x, args in tasks[t]["levels"]]} for t in _steps}
mixers = {'kda safe-gate': ['--mixer=kda', '--la_gate=safe']}
learning_rates = [1e-3]
extra = []
# the erase behind the safe gate, seed by seed: EDA's rows are the grid's (capacity) and evict_long's (evict)
pairs = [['eda', 'kda safe-gate']]
paired_from = {'capacity': 'synthetic', 'evict': 'evict_long'}
