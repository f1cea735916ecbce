#!/usr/bin/env bash
# The GPU's share of README's "Does erase help?" in one device call: GDN-2's language-model runs beside the
# synthetic grid, then the evict follow-up. Each sweep resumes where its results file stops and, with
# --deadline, starts only the runs its level's finished runs say will end in time; everything under
# notes/sweep comes back as $OUT/sweeps.tgz (unpack it in the repo root before the next call, or the next
# call redoes the same runs). The LM runs read data/stdlib: carry it to the device.
#   bash scripts/gpu_sweeps.sh [seconds, default 560]
set -uo pipefail
cd "$(dirname "$0")/.."
LIMIT=${1:-560}
OUT=${OUT:-/tmp/gpu_sweeps}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
start=$(date +%s)
sweep() {  # a sweep with what is left of the call as its deadline (nothing if under a minute is left)
  local left=$(( LIMIT - ($(date +%s) - start) ))
  [ "$left" -gt 60 ] || { echo "gpu_sweeps: $1 not started, ${left}s left"; return 0; }
  timeout "$left" $PY sweep.py "$@" --deadline=$(( left - 15 )) 2>&1 | tail -n 40
}
nvidia-smi -L
sweep config/sweep/lm.py "--mixers={'gdn2': ['--mixer=gdn2']}" --jobs=2 > "$OUT/lm.txt" &
sweep config/sweep/synthetic.py --jobs=10
sweep config/sweep/evict_long.py --jobs=10
wait
cat "$OUT/lm.txt"
for c in synthetic evict_long lm; do $PY sweep.py config/sweep/$c.py --report_only=True; done
tar czf "$OUT/sweeps.tgz" notes/sweep
