#!/usr/bin/env bash
# Sweeps that outlast one device call. A call's command may run 10 minutes, a machine stays held up to 30:
# `start` copies the repo and its results files to $STORE on the device and starts each sweep there in its own
# process session (setsid: it lives on after the call returns), so the GPU stays busy between calls; each
# `collect` call waits, prints the sweeps' progress and returns the results files as $OUT/sweeps.tgz (unpack
# it in the repo root: `tar xzf sweeps.tgz`, which writes notes/sweep/*.jsonl). Sweeps resume from their
# results file, so runs cut off when the machine goes back are simply run by the next `start`.
# The sweeps run from the copy, so editing the working tree between calls cannot change a running grid.
#   bash scripts/gpu_sweeps.sh start 'config/sweep/synthetic.py --jobs=6' 'config/sweep/evict_long.py --jobs=4'
#   bash scripts/gpu_sweeps.sh collect 560      # wait up to 560 s (less if every sweep ends), then report
# Issue the calls back to back: the device gives an idle machine back ~30 s after a call (and with it the runs).
set -uo pipefail
cd "$(dirname "$0")/.."
STORE=${STORE:-/tmp/nanoeda_sweeps}
OUT=${OUT:-/tmp/gpu_sweeps}
PY=${PY:-python3}
mkdir -p "$OUT"
running() { pgrep -f "sweep.py .*--results_dir=$STORE" > /dev/null; }
case ${1:-} in
start)
  shift
  running && { echo "gpu_sweeps: sweeps already running in $STORE"; exit 1; }
  mkdir -p "$STORE/notes/sweep"
  rm -rf "$STORE/repo" && mkdir -p "$STORE/repo" && cp -r ./*.py config data "$STORE/repo/"
  for f in notes/sweep/*.jsonl; do  # on a machine that already ran sweeps, its results files are the newer
    [ -e "$STORE/$f" ] || cp "$f" "$STORE/$f"
  done
  i=0
  for spec in "$@"; do  # each argument: one sweep's command line (config file and its --key=value settings)
    i=$((i + 1))
    (cd "$STORE/repo" && eval "PYTHONUNBUFFERED=1 setsid nohup $PY sweep.py $spec --results_dir=$STORE/notes/sweep \
      --runs_dir=$STORE/runs" > "$STORE/sweep$i.log" 2>&1 < /dev/null &)
    echo "gpu_sweeps: started sweep $i: $spec (log $STORE/sweep$i.log)"
  done
  sleep 5 ;;
collect)
  end=$((SECONDS + ${2:-560}))
  while [ $SECONDS -lt $end ] && running; do sleep 10; done ;;
*)
  echo "usage: gpu_sweeps.sh start 'SWEEP ARGS' ... | collect [seconds]"; exit 2 ;;
esac
running && echo "gpu_sweeps: sweeps still running" || echo "gpu_sweeps: no sweep running"
for log in "$STORE"/sweep*.log; do echo "== $log"; tail -n 4 "$log"; done
nvidia-smi --query-gpu=utilization.gpu,memory.used,memory.total --format=csv,noheader
tar czf "$OUT/sweeps.tgz" -C "$STORE" notes/sweep
