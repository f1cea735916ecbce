# The erase benchmark (RESULTS.md, "Does the erase help?"): four synthetic recall tasks at two difficulties each,
# at one state size (config/mqar.py's model: 2 linear layers, 2 heads of K = V = 64), the configs' batch of 256,
# 2000 steps. Mixers: EDA, KDA, and EDA with KDA's decay gate, which differs from KDA only by the erase (the
# ablation of the paper's claim); lr 1e-3 and 3e-3; seeds 0-2: 144 runs, fixed before any of them ran.
# 'floor': the accuracy of answering NONE at every query (notes/synthetic.md, 1). Resumable: rerun the command.
#   python sweep.py config/sweep/synthetic.py --jobs=4
# --jobs=4: beyond a few runs at once a GPU's time is only shared (notes/synthetic.md, "Runs at once").
name = 'synthetic'
results_dir = 'results'
tasks = {
    'mqar': {'config': 'config/mqar.py', 'x': 'num_kv_pairs', 'levels': [
        [32, ['--num_kv_pairs=32']], [64, ['--num_kv_pairs=64']]]},
    'evict': {'config': 'config/reassign.py', 'x': 'num_updates', 'levels': [
        [u, ['--dataset=evict', f'--num_updates={u}', '--block_size=256']] for u in (16, 32)],
        'floor': ['NONE at every query', {16: 0.5, 32: 0.667}]},
    'reassign': {'config': 'config/reassign.py', 'x': 'num_updates', 'levels': [
        [u, [f'--num_updates={u}', '--block_size=512']] for u in (32, 48)],
        'floor': ['NONE at every query', {32: 0.502, 48: 0.601}]},
    # every update a move: live bindings stay at num_kv_pairs while 2x as many keys are written
    'capacity': {'config': 'config/reassign.py', 'x': 'num_kv_pairs', 'levels': [
        [k, [f'--num_kv_pairs={k}', f'--num_updates={k}', '--move_frac=1.0', '--block_size=640']]
        for k in (48, 64)],
        'floor': ['NONE at every query', {48: 0.5, 64: 0.5}]},
}
mixers = {'eda': ['--mixer=eda'], 'kda': ['--mixer=kda'], 'eda kda-gate': ['--mixer=eda', '--la_gate=kda']}
learning_rates = [1e-3, 3e-3]
seeds = [0, 1, 2]
extra = ['--max_iters=2000', '--eval_interval=500']
# the erase's own effect (EDA with KDA's gate against KDA), and EDA's default against KDA, seed by seed
pairs = [['eda kda-gate', 'kda'], ['eda', 'kda']]
