# The length benchmark: stale bindings that pile up as the stream goes on, the case the erase is made for. The
# erase x gate square (eda, kda, eda with KDA's gate, kda with EDA's safe gate) and gdn, config/reassign.py's
# 2-layer linear models, trained at 256 tokens, each run then scored by eval.py at 256 x {1, 2, 4, 8, 16} tokens
# on the same 512 sequences a length (eval_seed 0, whatever the training seed) with training's live pairs and
# key budget and the updates (moves, overwrites, new owners) filling the longer stream (data.synthetic.at_length;
# notes/eval.md). 2 tasks x 5 mixers x lr 1e-3 x seeds 0-7: 80 runs, fixed before any of them ran.
#   reassign  config/reassign.py as it is: 16 live pairs, 16 updates, 3000 steps (every mixer 99.9-100% at 256
#             tokens: results/defaults.jsonl and the pilot runs); at 16x, 976 updates over the 32 keys
#   evict     8 live pairs, 8 updates, 6000 steps: at 16 pairs and 16 updates no mixer reached 99% at 256 tokens
#             (90-99.4% at 6000 steps, curves flat by then: results/erase.jsonl, results/evict_long.jsonl);
#             at 16x, 1928 new owners over the 16 keys
# Before the grid, the pilot (seeds 100-101, outside the grid; 20 runs, ~30 min of one GPU) checks that every
# mixer reaches >= 99% at the training length on both tasks; a level where one does not is changed here before
# the grid's first run:
#   python sweep.py config/sweep/length.py --name=length_pilot --seeds=[100,101] --evaluate=[] --jobs=4
#   python sweep.py config/sweep/length.py --jobs=4          # the grid; on 4 GPUs --jobs=16
#
# Verdict rule, fixed with the grid. Runs are joined with their rows in results/length_eval.jsonl by task,
# mixer and seed; every compared run is of one commit and one device kind (the rows record both). For each pair
# below and each task: the 8 paired differences A - B of a run's figure, their mean, the 95% t interval of the
# mean (mean +- 2.365 sd / sqrt(8)) and the two-sided exact sign test. "A ahead" only where the interval
# excludes zero; else "not resolved" (never "a tie"). Primary figure, one per run: the mean accuracy over 2x,
# 4x, 8x and 16x. Reported beside it, uncorrected: each length's accuracy, and values and NONE answers apart. A
# run below 99% at 1x stays in (its pair too) and is counted in the table.
#
# GPU time per run, one H100 (estimates from the runs above, not measured with the evaluation): reassign 3000
# steps ~70 s of the GPU (~280 s wall, 4 at once), evict 6000 steps ~90 s (~370 s wall, 4 at once); the
# evaluation ~30 s (5 lengths x 512 sequences, 4.1M tokens through a 2-layer model; drawing the sequences took
# 13-14 s of a CPU), during which the sweep starts no run. The grid: ~2.2 GPU-hours, ~2.5 h
# wall on one H100 at --jobs=4; a checkpoint a run (~30 MB, 2.4 GB in all) stays in its run folder.
name = 'length'
results_dir = 'results'
tasks = {
    'reassign': {'config': 'config/reassign.py', 'x': 'block_size', 'levels': [[256, ['--block_size=256']]]},
    'evict': {'config': 'config/reassign.py', 'x': 'block_size', 'levels': [[256, [
        '--dataset=evict', '--block_size=256', '--num_kv_pairs=8', '--num_updates=8', '--max_iters=6000',
        '--eval_interval=1000']]]},
}
mixers = {
    'eda': ['--mixer=eda'],
    'kda': ['--mixer=kda'],
    'eda kda-gate': ['--mixer=eda', '--la_gate=kda'],     # KDA plus the erase
    'kda safe-gate': ['--mixer=kda', '--la_gate=safe'],   # EDA minus the erase
    'gdn': ['--mixer=gdn'],
}
learning_rates = [1e-3]
seeds = [0, 1, 2, 3, 4, 5, 6, 7]
checkpoints = True             # eval.py reads each run's checkpoint where it trained
evaluate = [['length']]        # eval.py's defaults: multiples 1-16, 512 sequences a length, eval_seed 0
# the erase at each gate, the gate with and without the erase, and EDA against GDN
pairs = [['eda', 'kda safe-gate'], ['eda kda-gate', 'kda'], ['eda', 'eda kda-gate'], ['kda safe-gate', 'kda'],
         ['eda', 'gdn']]
