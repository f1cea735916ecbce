# The length benchmark: stale bindings that pile up as the stream goes on, the case the erase is made for. The
# erase x gate square (eda, kda, eda with KDA's gate, kda with EDA's safe gate) and gdn, config/reassign.py's
# 2-layer linear models, trained at 256 tokens, each run then scored by eval.py at 256 x {1, 2, 4, 8, 16} tokens
# on the same 512 sequences a length (eval_seed 0, whatever the training seed) with training's live pairs and
# key budget and the updates (moves, overwrites) filling the longer stream (data.synthetic.at_length;
# notes/eval.md). 5 mixers x lr 1e-3 x seeds 0-7: 40 runs, fixed before any of them ran.
#   reassign  config/reassign.py's task (16 live pairs, 16 updates) at 1500 steps: every mixer of the default
#             recipes was at 99.7-99.97% by then at 256 tokens (results/defaults.jsonl, seed 1337, 3000 steps:
#             eda 99.97, kda 99.94, gdn 99.74, gdn2 99.97, transformer 99.83 at step 1500); 3000 steps would
#             double the GPU time for +0.01-0.2 points. At 16x, 976 updates over the 32 keys.
#   evict     not in the grid: a pilot (2026-11-27, one H200, seed 0, 3000 steps, config/reassign.py with
#             --dataset=evict) found no level at 256 tokens where every mixer reaches 99%: 16 pairs with
#             4 updates eda 99.1 / kda 97.2 / kda safe-gate 97.2 / gdn 96.6%, with 8 updates 94.1 / 95.1 /
#             94.9 / 91.0% (curves still rising); 16 updates reached 90-99.4% only at 6000 steps. A second
#             pilot (2026-11-27, H200, seed 0, 2000 steps) with 8 live pairs: 4 updates eda 39.0 / kda 88.7 /
#             eda kda-gate 88.7 / kda safe-gate 36.3 / gdn 33.3% (the NONE floor 33.3), 8 updates 71.3 / 66.4 /
#             50.5 / 73.2 / 50.0% (floor 50), most curves still near their floor. Evict needs a step
#             budget of its own, longer than this grid's.
#   python sweep.py config/sweep/length.py --jobs=4          # the grid; on 4 GPUs --jobs=40
#
# Verdict rule, fixed with the grid. Runs are joined with their rows in results/length_eval.jsonl by task,
# mixer and seed; every compared run is of one commit and one device kind (the rows record both). For each pair
# below: the 8 paired differences A - B of a run's figure, their mean, the 95% t interval of the
# mean (mean +- 2.365 sd / sqrt(8)) and the two-sided exact sign test. "A ahead" only where the interval
# excludes zero; else "not resolved" (never "a tie"). Primary figure, one per run: the mean accuracy over 2x,
# 4x, 8x and 16x. Reported beside it, uncorrected: each length's accuracy, and values and NONE answers apart. A
# run below 99% at 1x stays in (its pair too) and is counted in the table.
#
# GPU time, one H200 (the pilot): 8 runs of 3000 steps at once took ~515 s, so a 1500-step run costs ~32 s
# of the GPU; the evaluation (5 lengths x 512 sequences, 4.1M tokens through a 2-layer model; drawing the
# sequences takes 13-14 s of a CPU) adds ~30 s. The grid: ~40 GPU-minutes.
name = 'length'
results_dir = 'results'
tasks = {
    'reassign': {'config': 'config/reassign.py', 'x': 'block_size', 'levels': [[256, [
        '--block_size=256', '--max_iters=1500', '--eval_interval=500']]]},
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
