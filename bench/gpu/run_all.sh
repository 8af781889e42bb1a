#!/bin/bash
# The GPU measurements, run on the device from a copy of the repo (bench/gpu/README.md).
# Waits for the llama-server build and the model (bench/gpu/setup.sh), then, each on a freshly
# started server: harness variants a (queue_depth 0, affinity off), b (1, off), c (1, on),
# the direct replay of a; then a freeze + sweep over -np 1,2,4,8; then a second round.
# Everything lands in $G/res; $G/all.done marks the end.
G=${G:-/tmp/gpu}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
cd "$REPO"
export PYTHONPATH=/tmp/site:$REPO PREFECT_HOME=$G/prefect PYTHONUNBUFFERED=1
R=$G/res; mkdir -p $R
D=${NIGHT:-2027-04-29}
SERVER_ARGS=${SERVER_ARGS:--np 4 -c 65536 -ngl 999 -fa on}      # the harness server
SWEEP_ARGS=${SWEEP_ARGS:--np 4 -c 131072 -ngl 999 -fa on}       # a sweep point's base
SWEEP_NP=${SWEEP_NP:-1, 2, 4, 8}
CFG_ARGS=${CFG_ARGS:-}                                          # e.g. --tickers 2 --max-tokens 8
LS=$G/build/bin/llama-server; M=$G/moe8.gguf; PORT=8080; URL=http://127.0.0.1:$PORT
log() { echo "$(date +%T) $*"; }

until [ -f $G/build.rc ] && [ -f $G/model.rc ]; do sleep 2; done
log "build rc=$(cat $G/build.rc) model rc=$(cat $G/model.rc)"
[ "$(cat $G/build.rc)" = 0 ] && [ "$(cat $G/model.rc)" = 0 ] || { log "setup failed"; touch $G/all.done; exit 1; }

start_server() {
  setsid $LS -m $M --alias dp-moe --host 127.0.0.1 --port $PORT $SERVER_ARGS \
    --metrics --slots > $R/server-$1.log 2>&1 &
  echo $! > $G/server.pid
  for i in $(seq 240); do curl -sf $URL/health >/dev/null && { log "server $1 up after ${i}x0.5s"; return 0; }; sleep 0.5; done
  log "server $1 did not start"; tail -20 $R/server-$1.log; return 1
}
stop_server() {
  local p=$(cat $G/server.pid); kill $p; for i in $(seq 60); do kill -0 $p 2>/dev/null || return 0; sleep 0.5; done; kill -9 $p
}
variant() {  # NAME QUEUE_DEPTH AFFINITY
  python3 bench/gpu/make_cfg.py $R/$1 --url $URL --queue-depth $2 --affinity $3 $CFG_ARGS >/dev/null
  start_server $1 || return 1
  python3 bench/gpu/gpubench.py snap $URL $R/$1/m0.json
  local t0=$(date +%s.%N)
  python3 -m dualpath nightly -c $R/$1/dualpath.toml --date $D > $R/$1/night.log 2>&1
  local rc=$?
  python3 bench/gpu/gpubench.py snap $URL $R/$1/m1.json
  log "variant $1 rc=$rc outer wall $(awk "BEGIN{print $(date +%s.%N) - $t0}") s"
  tail -12 $R/$1/night.log | grep -E "^│|complete|partial|failed" | head -3
  stop_server
}
replay() {  # VARIANT [SUFFIX]
  start_server replay_$1$2 || return 1
  python3 bench/gpu/replay_direct.py $R/$1/warehouse.duckdb $URL --slots 4 --out $R/replay_$1$2.json > $R/replay_$1$2.log 2>&1
  log "replay of $1$2 rc=$? $(python3 -c "import json;r=json.load(open('$R/replay_$1$2.json'));print('wall',round(r['wall_s'],1),'decode',round(r['decode_tps'],1),'retries',r['retries'])")"
  stop_server
}
summary() { python3 bench/gpu/gpubench.py summary $R > $R/summary.txt 2>&1; tail -12 $R/summary.txt; }

nvidia-smi --query-gpu=name,memory.used,memory.total,driver_version --format=csv > $R/gpu.txt
variant a 0 false; replay a; variant b 1 false; variant c 1 true; summary
touch $G/round1.done
if [ ! -f $G/skip_sweep ]; then
  log "freeze + sweep"; mkdir -p $R/sweep
  python3 -m dualpath freeze --night $D --tickers ${SWEEP_TICKERS:-4} --path llama -c $R/a/dualpath.toml --out $R/sweep/four.parquet > $R/freeze.log 2>&1
  log "freeze rc=$? $(tail -2 $R/freeze.log)"
  python3 - <<PY
import json
base = ["$LS", "-m", "$M", "--alias", "dp-moe", "--host", "{host}", "--port", "{port}",
        *"$SWEEP_ARGS".split(), "--metrics", "--slots"]
open("$R/sweep/np.toml", "w").write("\n".join([
    "[sweep]", 'name = "cuda-np"', 'path = "llama"', 'replay_set = "$R/sweep/four.parquet"',
    "base = " + json.dumps(base), "ready_timeout_s = 180", "point_timeout_s = 400",
    "[[sweep.axes]]", 'flag = "-np"', "values = [$SWEEP_NP]"]) + "\n")
PY
  python3 -m dualpath sweep $R/sweep/np.toml -c $R/a/dualpath.toml > $R/sweep/sweep.log 2>&1
  log "sweep rc=$?"; tail -30 $R/sweep/sweep.log
  python3 -m dualpath sweep show -c $R/a/dualpath.toml > $R/sweep/show.txt 2>&1
  cat $R/sweep/show.txt | tail -30
fi
touch $G/sweep.done
if [ ! -f $G/skip_round2 ]; then
  replay a _2; variant a2 0 false; replay a2; variant b2 1 false; variant c2 1 true; summary
fi
touch $G/all.done
log "all done"
