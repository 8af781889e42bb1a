#!/bin/bash
# Later device calls: install the wheels carried in this call (if a folder is named), start
# run_all.sh once (from a copy of the repo under $G, so the next call's copy cannot change it
# mid-run), then follow its log for up to SECONDS and bring back the results (tarred in $OUT).
# usage (device, repo root): bash bench/gpu/poll.sh SECONDS [WHEEL_DIR]
G=${G:-/tmp/gpu}; S=$1
if [ -n "$2" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site $2/*.whl 2>&1 | tail -3
  PYTHONPATH=/tmp/site:$PWD python3 -c "import dualpath.cli, flows.nightly, prefect, duckdb; print('imports ok', prefect.__version__, duckdb.__version__)" 2>&1 | tail -3
fi
if [ ! -f $G/started ]; then
  mkdir -p $G/repo && cp -r dualpath flows warehouse evals bench pyproject.toml $G/repo/
  touch $G/started
  setsid bash $G/repo/bench/gpu/run_all.sh > $G/all.log 2>&1 < /dev/null &
fi
end=$((SECONDS + S)); shown=0
while [ $SECONDS -lt $end ] && [ ! -f $G/all.done ]; do
  [ -f $G/stop_at ] && [ -f $G/$(cat $G/stop_at) ] && break
  n=$(wc -l < $G/all.log); [ $n -gt $shown ] && { sed -n "$((shown+1)),${n}p" $G/all.log; shown=$n; }
  sleep 3
done
n=$(wc -l < $G/all.log); [ $n -gt $shown ] && sed -n "$((shown+1)),${n}p" $G/all.log
[ -f $G/build.log ] && ! [ -f $G/build.rc ] && tail -2 $G/build.log
ls $G; cat $G/model.log 2>/dev/null | tail -2
nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv,noheader
tar czf $OUT/res.tgz -C $G res all.log build.log model.log 2>/dev/null; ls -la $OUT
