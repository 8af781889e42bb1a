#!/bin/bash
# Issue 22 on the device (bench/gpu/README.md): real prompt size (20 KB documents per ticker,
# 16 tickers x 17 calls, 192 output tokens), each run on a freshly started CUDA llama-server
# whose log gives server-side occupancy and idle gaps (--log-prefix --log-timestamps).
# Per round: dualpath's default config (prefix affinity on); the bare-client replay of that
# run's requests at slots and slots + 1 in flight (id_slot dropped, one FIFO); prefix affinity
# off. Round 2 alternates the order of the two replays. $G/skip_extra skips the affinity-off
# run of round 2. Everything lands in $G/res; $G/all.done marks the end. The helpers (server
# start and stop, a night, a bare replay, the summary) are lib_issue22.sh's.
source "$(dirname "$0")/lib_issue22.sh"

until [ -f $G/build.rc ] && [ -f $G/model.rc ]; do sleep 2; done
log "build rc=$(cat $G/build.rc) model rc=$(cat $G/model.rc)"
[ "$(cat $G/build.rc)" = 0 ] && [ "$(cat $G/model.rc)" = 0 ] || { log "setup failed"; tail -5 $G/build.log $G/model.log; touch $G/all.done; exit 1; }

nvidia-smi --query-gpu=name,memory.used,memory.total,driver_version --format=csv > $R/gpu.txt
SPY=1 night d1 true; bare b4_1 d1 4; bare b5_1 d1 5; night off1 false --queue-depth 1; summary
touch $G/round1.done
night d2 true; bare b5_2 d2 5; bare b4_2 d2 4; summary
touch $G/round2.done
[ -f $G/skip_extra ] || { night off2 false --queue-depth 1; summary; }
touch $G/all.done
log "all done"
