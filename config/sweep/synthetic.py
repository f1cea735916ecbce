# The full synthetic grid of README's "Does erase help?": tasks x difficulty x mixers x lr x seeds, at one
# state size (config/mqar.py's model: 2 linear layers, 2 heads of K = V = 64). 540 runs; fixed 2026-11-23,
# before any of it ran. Resumable: rerun the same command and it goes on where it stopped.
#   python sweep.py config/sweep/synthetic.py --jobs=12      (one H100: ~12 runs at once fit in memory)
name = 'synthetic'
tasks = {
    'mqar': {'config': 'config/mqar.py', 'x': 'num_kv_pairs', 'levels': [
        [16, ['--num_kv_pairs=16']], [32, ['--num_kv_pairs=32']], [64, ['--num_kv_pairs=64']]]},
    'reassign': {'config': 'config/reassign.py', 'x': 'num_updates', 'levels': [
        [16, ['--num_updates=16', '--block_size=512']], [32, ['--num_updates=32', '--block_size=512']],
        [48, ['--num_updates=48', '--block_size=512']]]},
    # every update a move: live bindings stay at num_kv_pairs while 2x as many keys are written
    'capacity': {'config': 'config/reassign.py', 'x': 'num_kv_pairs', 'levels': [
        [k, [f'--num_kv_pairs={k}', f'--num_updates={k}', '--move_frac=1.0', '--block_size=640']]
        for k in (32, 48, 64)]},
    'evict': {'config': 'config/reassign.py', 'x': 'num_updates', 'levels': [
        [u, ['--dataset=evict', f'--num_updates={u}', '--block_size=256']] for u in (8, 16, 32)]},
}
learning_rates = [3e-4, 1e-3, 3e-3]
seeds = [0, 1, 2]
extra = ['--max_iters=2000', '--eval_interval=500']
