#!/bin/sh
# fleetwise example task: counts to COUNT_TO, one step every STEP_SECONDS, following the worker contract
# (README "Checkpoints"; src/worker/checkpoints.ts):
#   - appends "<unix seconds> <iterations completed>" to FLEETWISE_PROGRESS_FILE after every step;
#   - every CHECKPOINT_SECONDS writes its counter into FLEETWISE_CHECKPOINT_DIR and then the COMPLETE marker, but
#     only once the worker has taken the previous checkpoint (it deletes COMPLETE after uploading);
#   - on SIGTERM writes a final checkpoint and exits 0;
#   - with FLEETWISE_RESTORE=1 starts from the restored counter and logs "resumed at K".
# Plain POSIX sh: runs on busybox (FROM busybox:1.36) and, as the process variant, on the host's /bin/sh.
set -u
count_to=${COUNT_TO:-100}
step=${STEP_SECONDS:-0.2}
every=${CHECKPOINT_SECONDS:-2}
ignore_term=${IGNORE_TERM:-0}   # for tests: a task that never checkpoints on request
dir=${FLEETWISE_CHECKPOINT_DIR:-./checkpoint}
progress=${FLEETWISE_PROGRESS_FILE:-/dev/null}
mkdir -p "$dir"

n=0
if [ "${FLEETWISE_RESTORE:-0}" = 1 ] && [ -f "$dir/counter" ]; then
  n=$(cat "$dir/counter")
  echo "resumed at $n"
else
  echo "starting at 0"
fi

checkpoint() {
  # Wait (briefly) for the worker to take the previous checkpoint; never write while COMPLETE is there.
  waited=0
  while [ -e "$dir/COMPLETE" ] && [ "$waited" -lt "${1:-0}" ]; do sleep 0.1; waited=$((waited + 1)); done
  [ -e "$dir/COMPLETE" ] && return 0
  echo "$n" > "$dir/counter.tmp" && mv "$dir/counter.tmp" "$dir/counter" && : > "$dir/COMPLETE"
}

stop=0
if [ "$ignore_term" = 1 ]; then trap 'echo "ignoring SIGTERM"' TERM; else trap 'stop=1' TERM; fi

last=$(date +%s)
while [ "$n" -lt "$count_to" ]; do
  if [ "$stop" = 1 ]; then
    checkpoint 100
    echo "checkpointed at $n on SIGTERM"
    exit 0
  fi
  sleep "$step"
  n=$((n + 1))
  echo "$(date +%s) $n" >> "$progress"
  now=$(date +%s)
  if [ $((now - last)) -ge "$every" ]; then
    checkpoint 0
    last=$now
  fi
done
echo "finished $n"
