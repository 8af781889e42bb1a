#!/bin/bash
# Later device calls: with a wheel folder, install the wheels carried in both calls into
# /tmp/site ($G/venv/bin/python runs python3 with it first on the path), then
# start the measurement script once (from a copy of the repo under $G, so the next call's copy
# cannot change it mid-run); follow its log for up to SECONDS and bring back the results
# (tarred in $OUT).
# usage (device, repo root): bash bench/gpu/poll.sh SECONDS [WHEEL_DIR [SCRIPT]]
G=${G:-/tmp/gpu}; S=$1; SCRIPT=${3:-bench/gpu/run_issue22.sh}
if [ -n "$2" ] && [ ! -x $G/venv/bin/python ]; then
  # every carried wheel into /tmp/site, ahead of the system's packages on the path (a venv
  # over the system packages with pip --no-index did not see the system's numpy there)
  cp $2/*.whl $G/wh/
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site \
    $G/wh/*.whl 2>&1 | tail -2
  mkdir -p $G/venv/bin
  printf '#!/bin/bash\nexport PYTHONPATH=/tmp/site:$PYTHONPATH\nexec python3 "$@"\n' > $G/venv/bin/python
  chmod +x $G/venv/bin/python; ln -sf /tmp/site/bin/py-spy $G/venv/bin/py-spy
  PYTHONPATH=$PWD $G/venv/bin/python -c "import dualpath.cli, flows.nightly, prefect, duckdb, aiohttp; print('imports ok', prefect.__version__, duckdb.__version__)" 2>&1 | tail -3
fi
if [ ! -f $G/started ]; then
  rm -rf $G/repo; mkdir -p $G/repo && cp -r dualpath flows warehouse evals bench pyproject.toml $G/repo/
  touch $G/started
  setsid bash $G/repo/$SCRIPT > $G/all.log 2>&1 < /dev/null &
fi
end=$((SECONDS + S)); shown=0
while [ $SECONDS -lt $end ] && [ ! -f $G/all.done ]; do
  n=$(wc -l < $G/all.log); [ $n -gt $shown ] && { sed -n "$((shown+1)),${n}p" $G/all.log; shown=$n; }
  sleep 3
done
n=$(wc -l < $G/all.log); [ $n -gt $shown ] && sed -n "$((shown+1)),${n}p" $G/all.log
[ -f $G/build.log ] && ! [ -f $G/build.rc ] && tail -2 $G/build.log
nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv,noheader
tar czf $OUT/res.tgz -C $G res all.log build.log model.log 2>/dev/null; ls -la $OUT
