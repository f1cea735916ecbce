#!/usr/bin/env bash
# One GPU session's checks and measurements, most important first, each part capped in time so that a
# short lease still returns the parts that finished. Logs go to $OUT (or /tmp/gpu_session).
#   bash scripts/gpu_session.sh
# 1. correctness on the GPU: kernel tests (bf16 T=4096 EDA/KDA, decode, T=32768 finiteness) and the
#    model's triton / fused-decode tests
# 2. model decoding at 32k context: EDA hybrid vs Transformer (bench.py --what=model_decode)
# 3. ~125M EDA hybrid vs ~125M Transformer training throughput at block_size 4096 (train.py)
# 4. the 2.5B dense EDA config, 3 training steps (train.py)
set -uo pipefail
cd "$(dirname "$0")/.."
LOG=${OUT:-/tmp/gpu_session}
mkdir -p "$LOG"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
$PY -c 'import torch, triton; print(torch.cuda.get_device_name(0), "torch", torch.__version__, "triton", triton.__version__)' | tee "$LOG/versions.txt"

# (2026-11-21: 110 s on a fresh H100 covered one test: each kernel variant compiles on first use)
timeout ${TEST_SECONDS:-330} $PY -m pytest -q -rs -x test_kernel.py test_model.py -k "gpu or triton or fused" 2>&1 | tee "$LOG/gpu_tests.txt"

timeout 70 $PY bench.py --what=model_decode "--decode_contexts=[8192, 32768]" 2>&1 | tee "$LOG/model_decode.txt"

COMMON=(--dataset=stdlib --save_ckpt=False --eval_iters=1 --log_interval=1 --progress=False --eval_interval=1000)
for mixer in eda transformer; do
  timeout 60 $PY train.py config/eda_125m.py --mixer=$mixer "${COMMON[@]}" --block_size=4096 --batch_size=8 \
    --gradient_accumulation_steps=1 --max_iters=5 --out_dir=/tmp/run_125m_$mixer 2>&1 | tail -n 6 | tee "$LOG/train_125m_$mixer.txt"
done

timeout 100 $PY train.py config/dense_2p5b.py --mixer=eda "${COMMON[@]}" --batch_size=1 --gradient_accumulation_steps=1 \
  --max_iters=3 --warmup_iters=1 --grad_checkpoint=True --out_dir=/tmp/run_2p5b 2>&1 | tail -n 8 | tee "$LOG/train_2p5b.txt"
