#!/bin/bash
# Issue 34 on the device (bench/gpu/README.md): three interleaved rounds, a fresh
# `--cache-ram 0` server per run: dualpath's default night with GPU telemetry on (dN), the
# bare-client replay of its requests at 5 in flight (bN); after round 1 the same night with
# telemetry off (t0). An independent NVML energy probe runs beside every night
# (energy_probe.py); energy_check.py compares it with what dualpath stored.
source "$(dirname "$0")/lib_issue22.sh"
SERVER_ARGS="-np 4 -c 131072 -ngl 999 -fa on --cache-ram 0"

until [ -f $G/build.rc ] && [ -f $G/model.rc ]; do sleep 2; done
log "build rc=$(cat $G/build.rc) model rc=$(cat $G/model.rc)"
[ "$(cat $G/build.rc)" = 0 ] && [ "$(cat $G/model.rc)" = 0 ] || { log "setup failed"; tail -5 $G/build.log $G/model.log; touch $G/all.done; exit 1; }
nvidia-smi --query-gpu=name,memory.used,memory.total,driver_version,power.limit,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max --format=csv > $R/gpu.txt
cat $R/gpu.txt
pnight() {  # NAME [make_cfg args]: a night with the probe beside it
  local name=$1; shift
  mkdir -p $R/$name
  $PY bench/gpu/energy_probe.py $R/$name/probe.txt & local probe=$!
  night $name true "$@"
  kill $probe
  $PY bench/gpu/energy_check.py $R 2>&1 | grep "^$name "
}
ROUNDS=${ROUNDS:-3}
for r in $(seq $ROUNDS); do
  pnight d$r; bare b$r d$r 5
  [ $r = 1 ] && pnight t0 --telemetry off
  summary > /dev/null; touch $G/round$r.done
done
summary
$PY bench/gpu/energy_check.py $R | tee $R/energy.txt
touch $G/all.done
log "all done"
