# The length benchmark: stale bindings that pile up as the stream goes on, the case the erase is made for. The
# erase x gate square (eda, kda, eda with KDA's gate, kda with EDA's safe gate) and gdn, config/reassign.py's
# 2-layer linear models, trained at 256 tokens, each run then scored by eval.py at 256 x {1, 2, 4, 8, 16} tokens
# on the same 512 sequences a length (eval_seed 0, whatever the training seed) with training's live pairs and
# key budget and the updates (moves, overwrites) filling the longer stream (data.synthetic.at_length;
# notes/eval.md). 5 mixers x lr 1e-3 x seeds 0-7: 40 runs a task, each fixed before any of its runs.
#   reassign  config/reassign.py's task (16 live pairs, 16 updates) at 1500 steps: every mixer of the default
#             recipes was at 99.7-99.97% by then at 256 tokens (results/defaults.jsonl, seed 1337, 3000 steps:
#             eda 99.97, kda 99.94, gdn 99.74, gdn2 99.97, transformer 99.83 at step 1500); 3000 steps would
#             double the GPU time for +0.01-0.2 points. At 16x, 976 updates over the 32 keys.
#   evict     16 live pairs, 2 updates, at 5500 steps: the step budget config/sweep/evict_pilot.py's rule
#             chose from its runs (2026-11-27, H200, seed 0, f890d34, results/evict_pilot.jsonl): with 2
#             updates every mixer was at >= 99% from step 5500 (gdn last: 98.9 at 5000, 99.03 at 5500);
#             with 4 updates gdn stayed at 64.8% after 6000 steps. Two earlier pilots (3000 steps with 16
#             pairs and 4-16 updates; 2000 steps with 8 pairs) found no level where all reach 99%. Added
#             after the reassign runs, before any evict run; the verdict rule below is the same.
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
# sequences takes 13-14 s of a CPU) adds ~30 s. Reassign: ~40 GPU-minutes. Evict (2026-11-27, 4 H200s, 20 runs at
# once, 5 a GPU): 339-376 s a run, 393-398 s for 20 runs with their evaluations, so the 40 need two such calls.
name = 'length'
results_dir = 'results'
tasks = {
    'reassign': {'config': 'config/reassign.py', 'x': 'block_size', 'levels': [[256, [
        '--block_size=256', '--max_iters=1500', '--eval_interval=500']]]},
    'evict': {'config': 'config/reassign.py', 'x': 'block_size', 'levels': [[256, [
        '--dataset=evict', '--num_updates=2', '--block_size=256', '--max_iters=5500', '--eval_interval=500']]]},
}
mixers = {'eda': ['--mixer=eda'], 'kda': ['--mixer=kda'],
          'eda kda-gate': ['--mixer=eda', '--la_gate=kda'],     # KDA plus the erase
          'kda safe-gate': ['--mixer=kda', '--la_gate=safe'],   # EDA minus the erase
          'gdn': ['--mixer=gdn']}
learning_rates = [1e-3]
seeds = [0, 1, 2, 3, 4, 5, 6, 7]
checkpoints = True             # eval.py reads each run's checkpoint where it trained
evaluate = [['length']]        # eval.py's defaults: multiples 1-16, 512 sequences a length, eval_seed 0
# the erase at each gate, the gate with and without the erase, and EDA against GDN
pairs = [['eda', 'kda safe-gate'], ['eda kda-gate', 'kda'], ['eda', 'eda kda-gate'], ['kda safe-gate', 'kda'],
         ['eda', 'gdn']]
