"""After a night whose server dualpath launched (run_vulkan.sh): what gpubench.py reads of an
attached night, from what dualpath stored. /metrics before and after (`server_sessions`
metrics_before_json / metrics_after_json) as NAME/m0.json and m1.json; the server's log (the
launcher's, `log_path`) as NAME.server.log; the identity dualpath read (/props, the start
log's backend and devices), the launch argv and environment as NAME.identity.json.

usage: python bench/gpu/vkpost.py RES NAME
"""
import json
import shutil
import sys
from pathlib import Path

import duckdb

res, name = Path(sys.argv[1]), sys.argv[2]
con = duckdb.connect(str(res / name / "warehouse.duckdb"), read_only=True)
row = con.execute("SELECT raw_json, log_path, metrics_before_json, metrics_after_json, command, "
                  "env_json, build, slots, n_ctx_per_slot, binary_sha256 FROM server_sessions "
                  "ORDER BY segment LIMIT 1").fetchone()
raw, log, m0, m1, command, env, build, slots, n_ctx, sha = row
(res / name / "m0.json").write_text(m0 or "{}")
(res / name / "m1.json").write_text(m1 or "{}")
if log and Path(log).exists():
    shutil.copy(log, res / f"{name}.server.log")
raw = json.loads(raw or "{}")
ident = {"command": command, "env": json.loads(env or "{}"), "build": build, "slots": slots,
         "n_ctx_per_slot": n_ctx, "binary_sha256": sha, "backend": raw.get("backend"),
         "props": raw.get("props")}
(res / f"{name}.identity.json").write_text(json.dumps(ident, indent=1))
b = raw.get("backend") or {}
print(f"{name}: backend {b.get('backend')!r}, device {b.get('device')!r}, offloaded "
      f"{b.get('offloaded')}, build {build}, slots {slots}, n_ctx/slot {n_ctx}")
