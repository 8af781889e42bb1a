#!/bin/bash
# Later device calls (bench/gpu/README.md, 2026-12-06): install the wheels carried in both
# calls (dualpath's own among them) into /tmp/site, start run_vulkan.sh once from a copy of
# the carried bench folder, follow its log for up to SECONDS, and bring back the results.
# usage (device, repo root): bash bench/gpu/poll_vulkan.sh SECONDS [CARRIED_DIR]
G=${G:-/tmp/gpu}; S=$1; C=$2
if [ -n "$C" ] && [ ! -x $G/venv/bin/python ]; then
  cp $C/whl/*.whl $G/wh/
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site \
    $G/wh/*.whl 2>&1 | tail -2
  mkdir -p $G/venv/bin
  printf '#!/bin/bash\nexport PYTHONPATH=/tmp/site:$PYTHONPATH\nexec python3 "$@"\n' > $G/venv/bin/python
  chmod +x $G/venv/bin/python
  $G/venv/bin/python -c "import dualpath.cli, dualpath.flows.nightly, prefect, duckdb; print('imports ok', prefect.__version__, duckdb.__version__)" 2>&1 | tail -3
  rm -rf $G/bench && cp -r $C/bench $G/bench
fi
if [ ! -f $G/started ]; then
  touch $G/started
  setsid bash $G/bench/gpu/run_vulkan.sh > $G/all.log 2>&1 < /dev/null &
fi
end=$((SECONDS + S)); shown=0
while [ $SECONDS -lt $end ] && [ ! -f $G/all.done ]; do
  n=$(wc -l < $G/all.log); [ $n -gt $shown ] && { sed -n "$((shown+1)),${n}p" $G/all.log; shown=$n; }
  sleep 3
done
n=$(wc -l < $G/all.log); [ $n -gt $shown ] && sed -n "$((shown+1)),${n}p" $G/all.log
nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv,noheader
tar czf $OUT/res.tgz -C $G res all.log vk.log cuda.log 2>/dev/null; ls -la $OUT
