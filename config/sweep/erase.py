# Does the erase help, one level per task, at equal gates: EDA (safe gate, its default), EDA with KDA's gate,
# and KDA (its gate, no erase). EDA with KDA's gate against KDA differs only by the erase step.
# Fixed before it ran (2026-11-23); the full grid over difficulty and learning rates is config/sweep/synthetic.py.
#   python sweep.py config/sweep/erase.py --jobs=14   (a run takes up to ~4.5 GiB of GPU memory)
name = 'erase'
tasks = {
    # explicit moves and reassignments: 16 bindings, 32 updates
    'reassign': {'config': 'config/reassign.py', 'x': 'num_updates',
                 'levels': [[32, ['--num_updates=32', '--block_size=512']]]},
    # capacity pressure: 48 live bindings in a 64-dim key space, 48 moves (96 keys ever written)
    'capacity': {'config': 'config/reassign.py', 'x': 'num_kv_pairs',
                 'levels': [[48, ['--num_kv_pairs=48', '--num_updates=48', '--move_frac=1.0', '--block_size=512']]]},
    # implicit removal: 16 bindings, 16 new owners (the old owner must read NONE)
    'evict': {'config': 'config/reassign.py', 'x': 'num_updates',
              'levels': [[16, ['--dataset=evict', '--num_updates=16', '--block_size=256']]]},
}
mixers = {'eda': ['--mixer=eda'], 'eda kda-gate': ['--mixer=eda', '--la_gate=kda'], 'kda': ['--mixer=kda']}
learning_rates = []           # the configs' own (1e-3)
seeds = [0, 1, 2]
extra = ['--max_iters=1500', '--eval_interval=500', '--batch_size=64']  # batch 64: the configs' recipe then
