# The language models past their training length: the erase x gate square and the Transformer with its conv at
# config/stdlib_26m.py (~26M parameters, 1600 steps x 16 x 1024 tokens), each at its best lr of the LM grid
# (results/lm.jsonl, seed 0 of 5e-4, 1e-3, 2e-3): 1e-3 for the four hybrids (the config's), 2e-3 for the
# Transformer (at the grid's edge), in its mixer's arguments, so the rows' lr reads 'cfg'. Seeds 0-7: 40 runs,
# fixed before any of them ran. Each run is then evaluated by eval.py on the machine that trained it (its
# checkpoint stays there), rows in results/lm_long_eval.jsonl: the loss on 8 held-out windows of 16 x 1024
# tokens by position bucket, the state carried and reset at every 1024 (text; its val_loss is the loss at the
# training length on those windows), and the needles at 1k-16k tokens x depths 0.1, 0.5, 0.9, bound and
# rebound, 10 haystacks a cell, 4 candidate values (chance 25%); every sequence from eval_seed 0.
#   python sweep.py config/sweep/lm_long.py --jobs=7         # one 80 GB GPU; 4 GPUs: --jobs=28
#
# Verdict rule, fixed with the grid. Runs pair by seed (same data; the same init for the parameters two mixers
# share) and are of one commit and one device kind (the rows record both). For each pair below: the 8 paired
# differences A - B, their mean, its 95% t interval (mean +- 2.365 sd / sqrt(8)) and the two-sided exact sign
# test, of each figure: (1) train.py's final val loss; (2) text: the carried loss over positions 1024-16384
# (past the training length) and the carried minus reset loss there (what carrying the state costs or gains);
# (3) needles: the accuracy over all cells of each variant, and the rebound cells' stale rate. "A ahead" only
# where the interval excludes zero; else "not resolved" (never "a tie"). Figures (1)-(3) are the primary ones,
# named before the runs; the per-bucket and per-cell figures are reported beside them, uncorrected.
#
# GPU time, measured (2026-11-27): 5 runs at once on each of 4 H200s (--jobs=20) took 345-391 s a run with its
# evaluation (text ~2 s, needles ~22 s), so the grid took two such waves; on one H100 at --jobs=7 expect ~2.5 h.
# A checkpoint is ~320 MB (weights and AdamW state): 13 GB for the grid.
name = 'lm_long'
results_dir = 'results'
tasks = {'stdlib': {'config': 'config/stdlib_26m.py', 'x': 'model', 'levels': [['26M', []]]}}
mixers = {'eda': ['--mixer=eda'], 'kda': ['--mixer=kda'],
          'eda kda-gate': ['--mixer=eda', '--la_gate=kda'],     # KDA plus the erase
          'kda safe-gate': ['--mixer=kda', '--la_gate=safe'],   # EDA minus the erase
          'transformer conv4': ['--mixer=transformer', '--attn_conv_size=4', '--learning_rate=2e-3']}
learning_rates = []            # each mixer's own: the config's 1e-3, or its mixer's arguments
seeds = [0, 1, 2, 3, 4, 5, 6, 7]
metric = 'val_loss'
checkpoints = True             # eval.py reads each run's checkpoint where it trained; a run cut off resumes
run_timeout = 7200
evaluate = [['text,needles', '--text_windows=8', '--needle_trials=10']]  # 1-16x; 3 depths x 10 haystacks
# the erase at each gate, the gate with and without the erase, and EDA against the Transformer
pairs = [['eda', 'kda safe-gate'], ['eda kda-gate', 'kda'], ['eda', 'eda kda-gate'], ['kda safe-gate', 'kda'],
         ['eda', 'transformer conv4']]
