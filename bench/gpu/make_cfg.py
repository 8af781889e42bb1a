"""Write a one-path dualpath config attached to a running llama-server (GPU harness runs).

usage: python bench/gpu/make_cfg.py OUTDIR --url http://127.0.0.1:8080 [--queue-depth N]
       --affinity true|false [--tickers 16] [--max-tokens 192] [--slots 4] [--model dp-moe]
       [--docs-kb 20] [--read-timeout 1800] [--units-per-slot N] [--telemetry on|off]
       [--path llama] [--launch "ARGV ..."] [--launch-env K=V ...] [--expect-backend B]
       [--expect-device TEXT]
With --launch, dualpath starts the server itself (`[paths.X] launch`, its log in the runs
folder) and --launch-env sets its environment; --expect-* pin the backend and device its
start log names (`[paths.X.expect]`). Writes OUTDIR/dualpath.toml with its warehouse and runs under OUTDIR, and (--docs-kb > 0) one
TICKER.md document per ticker in OUTDIR/docs (`[pipeline] documents_dir`): that many KB of
filler words, the same bytes for every run (prompts ~4.6k tokens at 20 KB). The path is named
`llama`, engine llama.cpp, grade_format json (a random-weight model's final answer parses only
under the schema), on the synthetic market of the demo config (seed 7, from 2027-01-04).
"""
import argparse
import json
import random
from pathlib import Path

p = argparse.ArgumentParser()
p.add_argument("out")
p.add_argument("--url", required=True)
p.add_argument("--queue-depth", type=int, help="unset: the engine's default")
p.add_argument("--units-per-slot", type=int, help="unset: the default")
p.add_argument("--affinity", choices=["true", "false"], required=True)
p.add_argument("--tickers", type=int, default=16)
p.add_argument("--max-tokens", type=int, default=192)
p.add_argument("--docs-kb", type=int, default=20)
p.add_argument("--read-timeout", type=float, default=1800.0)
p.add_argument("--slots", type=int, default=4)
p.add_argument("--model", default="dp-moe")
p.add_argument("--name", default="gpu")
p.add_argument("--telemetry", choices=["on", "off"], default="on",
               help="[telemetry] enabled: read the GPU (NVML) during the night")
p.add_argument("--path", default="llama", help="the path's name")
p.add_argument("--launch", help="server argv, space-separated: dualpath launches it")
p.add_argument("--launch-env", nargs="*", default=[], help="K=V for the launched server")
p.add_argument("--ready-timeout", type=float, default=900.0)
p.add_argument("--expect-backend")
p.add_argument("--expect-device")
a = p.parse_args()

out = Path(a.out).resolve()
out.mkdir(parents=True, exist_ok=True)
tickers = [f"SYN{i:03d}" for i in range(a.tickers)]
universe = ", ".join(f'"{t}"' for t in tickers)
docs = ""
if a.docs_kb > 0:
    (out / "docs").mkdir(exist_ok=True)
    rng = random.Random(22)
    words = ["revenue", "margin", "guidance", "segment", "demand", "capex", "inventory",
             "pricing", "backlog", "churn", "outlook", "supply", "regulatory", "buyback",
             "dividend", "debt", "cash", "growth", "risk", "competition", "quarter", "year"]
    for t in tickers:
        text, n = [f"# {t} filings digest"], 0
        while n < a.docs_kb * 1024:
            line = " ".join(rng.choice(words) for _ in range(12)) + f" {rng.randint(1, 999)}."
            text.append(line)
            n += len(line) + 1
        (out / "docs" / f"{t}.md").write_text("\n".join(text) + "\n")
    docs = f'\n[pipeline]\ndocuments_dir = "{out}/docs"\n'

(out / "dualpath.toml").write_text(f"""\
[experiment]
name = "{a.name}"
draws = 1
horizons = [1, 5, 20]
universe = [{universe}]
prefix_affinity = {a.affinity}

[sampling]
temperature = 0.7
top_p = 0.8
top_k = 20
presence_penalty = 1.5
max_tokens = {a.max_tokens}

{docs}
[telemetry]
enabled = {"true" if a.telemetry == "on" else "false"}

[warehouse]
path = "{out}/warehouse.duckdb"
runs_dir = "{out}/runs"

[market]
calendar = "synthetic"
timezone = "Asia/Seoul"
synthetic_seed = 7
synthetic_start = 2027-01-04

[paths.{a.path}]
engine = "llama.cpp"
base_url = "{a.url}"
model = "{a.model}"
slots = {a.slots}
stream = true
grade_format = "json"
{"" if a.queue_depth is None else f"queue_depth = {a.queue_depth}"}
{"" if a.units_per_slot is None else f"units_per_slot = {a.units_per_slot}"}
read_timeout_s = {a.read_timeout}
gpus = [0]
""")
with (out / "dualpath.toml").open("a") as f:
    if a.launch:
        f.write(f"launch = {json.dumps(a.launch.split())}\nready_timeout_s = {a.ready_timeout}\n")
        env = dict(kv.split("=", 1) for kv in a.launch_env)
        if env:
            f.write("launch_env = {" + ", ".join(f"{k} = {json.dumps(v)}" for k, v in env.items())
                    + "}\n")
    pins = {"backend": a.expect_backend, "device_contains": a.expect_device}
    if any(pins.values()):
        f.write(f"\n[paths.{a.path}.expect]\nslots = {a.slots}\n" + "".join(
            f"{k} = {json.dumps(v)}\n" for k, v in pins.items() if v))
print(out / "dualpath.toml")
