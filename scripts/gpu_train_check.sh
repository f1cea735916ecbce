#!/usr/bin/env bash
# Training measurements on a GPU machine (no network needed: the data is this Python's stdlib, bytes,
# prepared on the spot; the models keep their real vocab so the lm_head costs what it costs).
#
#   bash scripts/gpu_train_check.sh speed   # 1 GPU: ~125M EDA hybrid vs ~125M Transformer, T = 4096 and 16384
#   bash scripts/gpu_train_check.sh 2p5b    # 1 GPU: the 2.5B dense EDA config, 3 steps: tok/s, MFU, peak memory
#   bash scripts/gpu_train_check.sh multi   # 2 GPUs: 1-GPU vs torchrun DDP vs torchrun FSDP, 20 steps, same global batch
#   bash scripts/gpu_train_check.sh profile # 1 GPU: bench.py --what=model_train, where a 125M training step's time goes
#   bash scripts/gpu_train_check.sh compile # 1 GPU: the speed part's runs with --compile=True
#   bash scripts/gpu_train_check.sh context # 1 GPU: compiled, both models at block_size 4k .. 64k (CONTEXTS), same tokens a step
#   bash scripts/gpu_train_check.sh all     # all of them (multi only if 2+ GPUs are visible)
# Each part ends with a compact table, also written to $OUT/gpu_train_check_<part>.txt when OUT is set, and
# appends a JSON row per run (command, date, commit, device, tok/s, MFU, peak memory, last loss: scripts/rows.py)
# to $RESULTS (default $OUT or $RUNS /train.jsonl; RESULTS.md's are results/train.jsonl).
# Knobs: CONTEXTS (context part: block sizes, default "4096 8192 16384 32768 65536"; TOKENS a step, default
#        32768: batch = TOKENS / block_size, at least 1; TAG: a suffix for its run names; MIXERS (default
#        "eda transformer"); TRAIN_ARGS: extra train.py overrides for its runs, e.g.
#        TRAIN_ARGS=--la_recompute_states=True TAG=_recompute; it always compiles), LA_BACKEND (auto = triton on
#        CUDA; set chunk if the kernels are not there), COMPILE (False),
#        STEPS (speed part, default 8; the table averages the steps after the first 3),
#        MULTI_ARGS (extra train.py overrides for the multi part's four runs, e.g. --dtype=float32).
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python3}
PART=${1:-all}
# this invocation, the knobs it was given included (not their defaults, below): each row's command
COMMAND="bash scripts/gpu_train_check.sh $PART"
for knob in STEPS COMPILE LA_BACKEND MULTI_ARGS TRAIN_ARGS TAG MIXERS TOKENS CONTEXTS; do
  [ -n "${!knob:-}" ] && COMMAND="$knob=\"${!knob}\" $COMMAND"
done
LA_BACKEND=${LA_BACKEND:-auto}
COMPILE=${COMPILE:-False}
STEPS=${STEPS:-8}
RUNS=${RUNS:-/tmp/gpu_train_check}
REPORT=${OUT:-$RUNS}/gpu_train_check_${PART}.txt
RESULTS=${RESULTS:-${OUT:-$RUNS}/train.jsonl}
mkdir -p "$RUNS" "$(dirname "$REPORT")"
: > "$REPORT"
export PYTHONUNBUFFERED=1
# one Python start (importing torch takes seconds): the GPU count, then the device and versions
read -r NGPU INFO < <($PY -c 'import torch, triton; n = torch.cuda.device_count()
print(n, f"({torch.cuda.get_device_name(0) if n else None}), torch {torch.__version__}, triton {triton.__version__}")')
echo "gpus: $NGPU $INFO" | tee -a "$REPORT"
if [ ! -f data/stdlib/train.bin ] || [ ! -f data/stdlib/val.bin ]; then  # carried along, or prepared here
  $PY data/prepare.py stdlib > /dev/null || exit 1
fi
COMMON=(--dataset=stdlib --save_ckpt=False --eval_iters=1 --log_interval=1 --progress=False --compile=$COMPILE --la_backend=$LA_BACKEND)

run() {  # run NAME ARGS...: one training run into $RUNS/NAME, log kept, failure reported but not fatal (no retry
  # in another backend: its row would carry this command; LA_BACKEND=chunk measures the PyTorch form on purpose)
  local name=$1; shift
  rm -rf "${RUNS:?}/$name"
  echo "== $name: $*"
  echo "$*" > "$RUNS/$name.cmd"
  "$@" --out_dir="$RUNS/$name" > "$RUNS/$name.log" 2>&1
  local rc=$?
  tail -n 4 "$RUNS/$name.log"
  [ $rc -eq 0 ] || echo "!! $name failed (exit $rc), see $RUNS/$name.log"
  return $rc
}

table() {  # table NAME...: tok/s, MFU and peak memory of each run (mean over steps >= 3), final loss
  $PY - "$RUNS" "$@" <<'EOF' | tee -a "$REPORT"
import json, os, sys
runs, names = sys.argv[1], sys.argv[2:]
toks = {}
print(f"{'run':<28} {'steps':>5} {'tok/s':>12} {'MFU':>7} {'peak GiB':>9} {'last loss':>10}  note")
for n in names:
    path = os.path.join(runs, n, 'log.jsonl')
    recs = [json.loads(l) for l in open(path)] if os.path.exists(path) else []
    steps = [r for r in recs if 'loss' in r]
    if not steps:
        print(f"{n:<28} {'failed: see ' + n + '.log':>40}")
        continue
    timed = [r for r in steps if r['step'] >= 3] or steps[-1:]
    tok = sum(r['tok_per_s'] for r in timed) / len(timed)
    mfu = [r['mfu'] for r in timed if r['mfu'] is not None]
    mfu = f"{100 * sum(mfu) / len(mfu):6.1f}%" if mfu else '    n/a'
    mem = max((r['peak_mem_gib'] or 0) for r in steps)
    note = os.path.join(runs, n, 'note')
    note = ' '.join(open(note).read().split()) if os.path.exists(note) else ''
    print(f"{n:<28} {len(steps):>5} {tok:>12,.0f} {mfu:>7} {mem:>9.1f} {steps[-1]['loss']:>10.4f}  {note}")
    toks[n] = tok
for n in names:  # each EDA run against the Transformer run of the same name
    other = n.replace('_eda_', '_transformer_')
    if '_eda_' in n and n in toks and other in toks:
        print(f"tok/s {n} / {other}: {toks[n] / toks[other]:.2f}x")
EOF
  $PY scripts/rows.py "$RESULTS" "$COMMAND" "$RUNS" "$@"
}

if [ "$PART" = speed ] || [ "$PART" = all ]; then
  # same tokens per step at both lengths: 8 x 4096 = 2 x 16384
  for mixer in eda transformer; do
    run "125m_${mixer}_T4096" $PY train.py config/eda_125m.py --mixer=$mixer "${COMMON[@]}" \
      --block_size=4096 --batch_size=8 --gradient_accumulation_steps=1 --max_iters=$STEPS --eval_interval=1000
    run "125m_${mixer}_T16384" $PY train.py config/eda_125m.py --mixer=$mixer "${COMMON[@]}" \
      --block_size=16384 --batch_size=2 --gradient_accumulation_steps=1 --max_iters=$STEPS --eval_interval=1000
  done
  echo "-- speed: ~125M EDA hybrid vs ~125M Transformer, 1 GPU" | tee -a "$REPORT"
  table 125m_eda_T4096 125m_transformer_T4096 125m_eda_T16384 125m_transformer_T16384
fi

if [ "$PART" = profile ] || [ "$PART" = all ]; then
  # per layer type (the layer vs its kernel alone), the whole step, and its GPU time by kernel kind
  $PY bench.py --what=model_train 2>&1 | tee -a "$REPORT"
fi

if [ "$PART" = compile ] || [ "$PART" = all ]; then
  # the speed part's runs with train.py's compile=True (each block compiled; the kernels are custom ops
  # inside the graphs); each log's "compile:" line is the time to the end of the first step
  for mixer in eda transformer; do
    run "125m_${mixer}_T4096_compile" $PY train.py config/eda_125m.py --mixer=$mixer "${COMMON[@]}" --compile=True \
      --block_size=4096 --batch_size=8 --gradient_accumulation_steps=1 --max_iters=$STEPS --eval_interval=1000
    run "125m_${mixer}_T16384_compile" $PY train.py config/eda_125m.py --mixer=$mixer "${COMMON[@]}" --compile=True \
      --block_size=16384 --batch_size=2 --gradient_accumulation_steps=1 --max_iters=$STEPS --eval_interval=1000
  done
  echo "-- compile=True: ~125M EDA hybrid vs ~125M Transformer, 1 GPU" | tee -a "$REPORT"
  table 125m_eda_T4096_compile 125m_transformer_T4096_compile 125m_eda_T16384_compile 125m_transformer_T16384_compile
  for f in "$RUNS"/125m_*_compile.log; do echo "$(basename "$f" .log): $(grep -h '^compile:' "$f")"; done | tee -a "$REPORT"
fi

if [ "$PART" = context ]; then  # not in 'all': ten compiled runs take ~10 minutes
  # where the hybrid overtakes the Transformer: an attention layer's cost per token grows with the context, a
  # linear layer's does not. Shortest first: a run that fails (out of memory at 64k) costs only itself.
  names=()
  for T in ${CONTEXTS:-4096 8192 16384 32768 65536}; do
    B=$(( ${TOKENS:-32768} / T )); [ $B -ge 1 ] || B=1
    for mixer in ${MIXERS:-eda transformer}; do
      run "125m_${mixer}_T${T}_ctx${TAG:-}" $PY train.py config/eda_125m.py --mixer=$mixer "${COMMON[@]}" --compile=True \
        --block_size=$T --batch_size=$B --gradient_accumulation_steps=1 --max_iters=$STEPS --eval_interval=1000 ${TRAIN_ARGS:-}
      names+=("125m_${mixer}_T${T}_ctx${TAG:-}")
    done
  done
  echo "-- context: ~125M EDA hybrid vs ~125M Transformer, compiled, ${TOKENS:-32768} tokens a step (fewer than one sequence: 1 x block_size) ${TRAIN_ARGS:-}" | tee -a "$REPORT"
  table "${names[@]}"
fi

if [ "$PART" = 2p5b ] || [ "$PART" = all ]; then
  BIG=(config/dense_2p5b.py --mixer=eda "${COMMON[@]}" --batch_size=1 --gradient_accumulation_steps=1
       --max_iters=3 --eval_interval=1000 --warmup_iters=1)
  names=2p5b_eda
  if ! run 2p5b_eda $PY train.py "${BIG[@]}"; then  # out of memory? recompute activations in backward
    run 2p5b_eda_ckpt $PY train.py "${BIG[@]}" --grad_checkpoint=True
    mkdir -p "$RUNS/2p5b_eda_ckpt" && echo "grad_checkpoint=True" >> "$RUNS/2p5b_eda_ckpt/note"
    names="2p5b_eda 2p5b_eda_ckpt"
  fi
  echo "-- 2.5B dense EDA, 1 GPU, 3 steps of 1 x 4096 tokens (few steps: tok/s is that of the last one)" | tee -a "$REPORT"
  table $names
fi

if { [ "$PART" = multi ] || [ "$PART" = all ]; } && [ "$NGPU" -ge 2 ]; then
  # global batch 8 x 1024 x 4 micro-steps on every run; the logged loss is the global batch's mean.
  # learning_rate 6e-4, not the config's 3e-3: at 3e-3 two identical 1-GPU runs drifted apart by up to
  # 2.6 nats within 20 steps (loss spikes amplify run-to-run noise; notes/train.md), too coarse a yardstick
  MULTI=(config/eda_125m.py "${COMMON[@]}" --block_size=1024 --batch_size=8 --gradient_accumulation_steps=4
         --max_iters=20 --eval_interval=20 --warmup_iters=5 --lr_decay_iters=20 --learning_rate=6e-4 ${MULTI_ARGS:-})
  run one_gpu env CUDA_VISIBLE_DEVICES=0 $PY train.py "${MULTI[@]}"
  # the same 1-GPU run again: its distance to the first is the noise floor (bf16, atomics in the kernels'
  # backward, cuBLAS reduction order) that DDP / FSDP are judged against
  run one_gpu_again env CUDA_VISIBLE_DEVICES=0 $PY train.py "${MULTI[@]}"
  run ddp_2gpu $PY -m torch.distributed.run --standalone --nproc_per_node=2 train.py "${MULTI[@]}" --parallel=ddp
  run fsdp_2gpu $PY -m torch.distributed.run --standalone --nproc_per_node=2 train.py "${MULTI[@]}" --parallel=fsdp
  echo "-- 20 steps, same global batch: 1 GPU vs 2-GPU DDP vs 2-GPU FSDP (losses should agree within bf16 noise)" | tee -a "$REPORT"
  table one_gpu one_gpu_again ddp_2gpu fsdp_2gpu
  $PY - "$RUNS" <<'EOF' | tee -a "$REPORT"
import json, os, sys
def losses(n):
    p = os.path.join(sys.argv[1], n, 'log.jsonl')
    return {r['step']: r['loss'] for r in map(json.loads, open(p)) if 'loss' in r} if os.path.exists(p) else {}
ref = losses('one_gpu')
names = ('one_gpu_again', 'ddp_2gpu', 'fsdp_2gpu')
curves = {n: losses(n) for n in names}
print(f"{'step':>4} {'one_gpu':>10}" + ''.join(f' {n:>14}' for n in names))
for s in sorted(ref):
    print(f'{s:>4} {ref[s]:>10.4f}' + ''.join(f' {curves[n][s]:>14.4f}' if s in curves[n] else f' {"":>14}' for n in names))
for n in names:
    other = curves[n]
    common = sorted(set(ref) & set(other))
    if not common:
        print(f'{n}: no steps to compare'); continue
    d = [abs(ref[s] - other[s]) for s in common]
    print(f'{n} vs one_gpu: {len(common)} steps, max |dloss| {max(d):.4f}, mean {sum(d) / len(d):.4f}, '
          f'loss step 0 {ref[common[0]]:.4f}/{other[common[0]]:.4f}, step {common[-1]} {ref[common[-1]]:.4f}/{other[common[-1]]:.4f}')
EOF
fi
echo "report: $REPORT"
cat "$REPORT"
