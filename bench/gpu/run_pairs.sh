#!/bin/bash
# Issue 34 on the device (bench/gpu/README.md, 2026-12-02): `dualpath doctor` against the
# H200 (attached, then `--launch`), then on/off pairs on a fresh `--cache-ram 0` server per
# night: the default night with GPU telemetry on (dN), the same night with it off (tN),
# interleaved d1 t1 d2 t2 d3 t3. QD (default 1) is the queue depth the nights run at.
source "$(dirname "$0")/lib_issue22.sh"
SERVER_ARGS="-np 4 -c 131072 -ngl 999 -fa on --cache-ram 0"
QD=${QD:-1}

until [ -f $G/build.rc ] && [ -f $G/model.rc ]; do sleep 2; done
log "build rc=$(cat $G/build.rc) model rc=$(cat $G/model.rc)"
[ "$(cat $G/build.rc)" = 0 ] && [ "$(cat $G/model.rc)" = 0 ] || { log "setup failed"; tail -5 $G/build.log $G/model.log; touch $G/all.done; exit 1; }
nvidia-smi --query-gpu=name,memory.used,memory.total,driver_version,power.limit,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max --format=csv | tee $R/gpu.txt
doctor_runs() {  # the attached doctor on a running server, then --launch from the config
  $PY bench/gpu/make_cfg.py $R/doc --url $URL --affinity true --tickers 2 >/dev/null
  start_server doc && { COLUMNS=160 $PY -m dualpath doctor -c $R/doc/dualpath.toml 2>&1 | tee $R/doctor.txt; stop_server; }
  cp $R/doc/dualpath.toml $R/doc/launch.toml
  printf 'launch = ["%s", "-m", "%s", "--alias", "dp-moe", "--host", "127.0.0.1", "--port", "%s", %s]\n' \
    $LS $M $PORT "$(printf '"%s", ' $SERVER_ARGS --metrics --slots | sed 's/, $//')" >> $R/doc/launch.toml
  COLUMNS=160 timeout 150 $PY -m dualpath doctor --launch -c $R/doc/launch.toml 2>&1 | tee $R/doctor_launch.txt
}
[ -z "$NO_DOCTOR" ] && doctor_runs
for r in $(seq ${ROUNDS:-3}); do
  night d$r true --queue-depth $QD
  night t$r true --queue-depth $QD --telemetry off
  summary > /dev/null; touch $G/round$r.done
done
summary
touch $G/all.done
log "all done"
