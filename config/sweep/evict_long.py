# The erase benchmark's evict task at 3x the steps: in 2000 steps no mixer learns evict (most curves still rising at the
# last evaluation), so the grid alone cannot say whether the erase helps there. The same two levels and mixers at 6000
# steps, at the lr that was best for all three (1e-3), seeds 0-2: 18 runs, fixed before any of them ran.
#   python sweep.py config/sweep/evict_long.py --jobs=4
exec(open('config/sweep/synthetic.py').read())
name = 'evict_long'
tasks = {'evict': tasks['evict']}
learning_rates = [1e-3]
extra = ['--max_iters=6000', '--eval_interval=1000']
