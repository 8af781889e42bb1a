#!/bin/bash
# Vulkan beside CUDA on one H200 (bench/gpu/README.md, 2026-12-06): once both builds and the
# model are there, one night on each build, each server launched by dualpath as a 4-slot
# backup path (PINS="--expect-backend Vulkan --expect-device H100" pins its backend and device
# in `[paths.backup.expect]`; the 2026-12-06 nights ran without), GPU telemetry on,
# an independent NVML energy probe beside it (energy_probe.py); the Vulkan night first.
# Same workload as the earlier nights: 16 tickers x 17 calls, 20 KB documents, 192 tokens
# out, `-np 4 -c 131072 -ngl 999 -fa on --cache-ram 0`.
G=${G:-/tmp/gpu}; B=$(cd "$(dirname "$0")" && pwd)
PY=$G/venv/bin/python
export PREFECT_HOME=$G/prefect PYTHONUNBUFFERED=1
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
R=$G/res; mkdir -p $R; D=2027-04-29; M=$G/moe8.gguf; PORT=8080; URL=http://127.0.0.1:$PORT
SERVER_ARGS="-np 4 -c 131072 -ngl 999 -fa on --cache-ram 0 --metrics --slots --log-prefix --log-timestamps"
TICKERS=${TICKERS:-16}
PINS=${PINS:-}
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | awk "{print \$2}")   # H100, H200
log() { echo "$(date +%T) $*"; }
cd $G
until [ -f model.rc ] && [ -f vk.rc ] && [ -f cuda.rc ]; do sleep 2; done
log "builds: vulkan rc=$(cat vk.rc) cuda rc=$(cat cuda.rc) model rc=$(cat model.rc)"
nvidia-smi --query-gpu=name,memory.used,memory.total,driver_version,power.limit,pcie.link.gen.current,pcie.link.width.current --format=csv | tee $R/gpu.txt
for b in vk cuda; do
  [ "$(cat $b.rc)" = 0 ] && ./build-$b/bin/llama-server --list-devices > $R/$b.devices.txt 2>&1
  cat $R/$b.devices.txt 2>/dev/null | tail -4
done
night() {  # NAME BUILD BACKEND EXTRA_ARGS ENV...: a night on a server dualpath launches
  local name=$1 b=$2 backend=$3 extra=$4; shift 4
  [ "$(cat $b.rc)" = 0 ] || { log "night $name skipped: the $b build failed"; return 1; }
  $PY $B/make_cfg.py $R/$name --url $URL --affinity true --path backup --tickers $TICKERS \
    --launch "$G/build-$b/bin/llama-server -m $M --alias dp-moe --host 127.0.0.1 --port $PORT $SERVER_ARGS $extra" \
    --launch-env "$@" $PINS > /dev/null
  $PY $B/energy_probe.py $R/$name/probe.txt & local probe=$!
  $PY -m dualpath nightly -c $R/$name/dualpath.toml --date $D > $R/$name/night.log 2>&1 &
  local night=$!
  # what the running server shows of its backend beside /props: the libraries it mapped
  for i in $(seq 300); do
    local p=$(pgrep -f "$G/build-$b/bin/llama-server" | head -1)
    if [ -n "$p" ] && curl -sf $URL/health > /dev/null; then
      awk '{print $6}' /proc/$p/maps | grep -E "ggml|vulkan|cuda|nvidia" | sort -u > $R/$name.maps.txt
      curl -s $URL/props > $R/$name.props.json; tr '\0' ' ' < /proc/$p/cmdline > $R/$name.cmdline
      tr '\0' '\n' < /proc/$p/environ | grep -E "VK_|GGML|CUDA" > $R/$name.environ; break
    fi
    sleep 1
  done
  wait $night; local rc=$?
  kill $probe
  $PY $B/vkpost.py $R $name
  log "night $name rc=$rc $(PYTHONPATH=$B/../.. $PY $B/gpubench.py brief $R $name)"
  tail -15 $R/$name/night.log
  $PY $B/energy_check.py $R | grep "^$name "
}
night vulkan vk Vulkan "--device Vulkan0" GGML_VK_VISIBLE_DEVICES=0 VK_DRIVER_FILES=$VK_DRIVER_FILES
night cuda cuda CUDA "" CUDA_VISIBLE_DEVICES=0
PYTHONPATH=$B/../.. $PY $B/gpubench.py summary $R > $R/summary.txt 2>&1; tail -6 $R/summary.txt
$PY $B/energy_check.py $R | tee $R/energy.txt
touch $G/all.done
log "all done"
