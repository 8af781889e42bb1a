#!/bin/bash
# Issue 22 on the device: the helpers of run_issue22.sh and run_more.sh (bench/gpu/README.md).
G=${G:-/tmp/gpu}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
cd "$REPO"
PY=$G/venv/bin/python
export PYTHONPATH=$REPO PREFECT_HOME=$G/prefect PYTHONUNBUFFERED=1
R=$G/res; mkdir -p $R
D=2027-04-29
SERVER_ARGS=${SERVER_ARGS:--np 4 -c 131072 -ngl 999 -fa on}
CFG_ARGS=${CFG_ARGS:-}                  # e.g. --tickers 2 for a dry run
LS=$G/build/bin/llama-server; M=$G/moe8.gguf; PORT=8080; URL=http://127.0.0.1:$PORT
log() { echo "$(date +%T) $*"; }

start_server() {
  setsid $LS -m $M --alias dp-moe --host 127.0.0.1 --port $PORT $SERVER_ARGS \
    --metrics --slots --log-prefix --log-timestamps > $R/$1.server.log 2>&1 &
  echo $! > $G/server.pid
  for i in $(seq 480); do curl -sf $URL/health >/dev/null && { log "server $1 up after ${i}x0.25s"; return 0; }; sleep 0.25; done
  log "server $1 did not start"; tail -20 $R/$1.server.log; return 1
}
stop_server() {
  local p=$(cat $G/server.pid); kill $p; for i in $(seq 60); do kill -0 $p 2>/dev/null || return 0; sleep 0.5; done; kill -9 $p
}
night() {  # NAME AFFINITY [make_cfg args]: a dualpath night on a fresh server
  local name=$1 aff=$2; shift 2
  $PY bench/gpu/make_cfg.py $R/$name --url $URL --affinity $aff $CFG_ARGS "$@" >/dev/null
  start_server $name || return 1
  $PY bench/gpu/gpubench.py snap $URL $R/$name/m0.json
  $PY -m dualpath nightly -c $R/$name/dualpath.toml --date $D > $R/$name/night.log 2>&1 &
  local pid=$!
  if [ -n "$SPY" ]; then
    $G/venv/bin/py-spy record --nonblocking -r 100 -f raw -p $pid -o $R/$name/spy.txt > $R/$name/spy.log 2>&1 &
  fi
  wait $pid; local rc=$?
  $PY bench/gpu/gpubench.py snap $URL $R/$name/m1.json
  log "night $name rc=$rc $($PY bench/gpu/gpubench.py brief $R $name)"
  stop_server
}
bare() {  # NAME SOURCE_NIGHT IN_FLIGHT: the bare-client replay of that night's requests
  start_server $1 || return 1
  $PY bench/gpu/replay_direct.py $R/$2/warehouse.duckdb $URL --in-flight $3 --drop-id-slot \
    --out $R/$1.json > $R/$1.log 2>&1
  log "bare $1 rc=$? $($PY bench/gpu/gpubench.py brief $R $1)"
  stop_server
}
summary() { $PY bench/gpu/gpubench.py summary $R > $R/summary.txt 2>&1; tail -25 $R/summary.txt; }

