# Follow-up to the synthetic grid's evict task, fixed in session 11 before it ran: at 2000 steps no mixer had
# learned evict (no run above 91%, against 50 / 67% for answering NONE everywhere; most still rising at
# the last evaluation, notes/synthetic.md §12), so the grid cannot say whether the erase helps there. The same two
# levels and mixers at 3x the steps, at the lr that was best for all three (1e-3), seeds 0-2: 18 runs.
#   python sweep.py config/sweep/evict_long.py --jobs=10
exec(open('config/sweep/synthetic.py').read())
name = 'evict_long'
tasks = {'evict': tasks['evict']}
learning_rates = [1e-3]
extra = ['--max_iters=6000', '--eval_interval=1000']
