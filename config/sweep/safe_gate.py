# The fourth cell of the erase x gate square: KDA with EDA's safe gate (EDA minus the erase) on the tasks where
# the erase was ahead behind KDA's gate in the runs with one A per head (capacity at 2000 steps; evict at 6000).
# Is it also ahead behind EDA's default gate? Same levels, step counts, lr (1e-3, the best for every mixer there) and seeds as the
# grid's runs, so each row pairs by seed with the 'eda' rows of results/synthetic.jsonl (capacity) and
# results/evict_long.jsonl (evict), whose commands are this sweep's but the mixer: 12 runs, fixed before any ran.
#   python sweep.py config/sweep/safe_gate.py --jobs=4
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
