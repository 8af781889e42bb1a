"""Write a one-path dualpath config attached to a running llama-server (GPU harness runs).

usage: python bench/gpu/make_cfg.py OUTDIR --url http://127.0.0.1:8080 --queue-depth 0|1
       --affinity true|false [--tickers 20] [--max-tokens 256] [--slots 4] [--model dp-moe]
Writes OUTDIR/dualpath.toml with its warehouse and runs under OUTDIR. The path is named
`llama`, engine llama.cpp, grade_format json (a random-weight model's final answer parses only
under the schema), on the synthetic market of the demo config (seed 7, from 2027-01-04).
"""
import argparse
from pathlib import Path

p = argparse.ArgumentParser()
p.add_argument("out")
p.add_argument("--url", required=True)
p.add_argument("--queue-depth", type=int, required=True)
p.add_argument("--affinity", choices=["true", "false"], required=True)
p.add_argument("--tickers", type=int, default=20)
p.add_argument("--max-tokens", type=int, default=256)
p.add_argument("--slots", type=int, default=4)
p.add_argument("--model", default="dp-moe")
p.add_argument("--name", default="gpu")
a = p.parse_args()

out = Path(a.out).resolve()
out.mkdir(parents=True, exist_ok=True)
universe = ", ".join(f'"SYN{i:03d}"' for i in range(a.tickers))
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

[warehouse]
path = "{out}/warehouse.duckdb"
runs_dir = "{out}/runs"

[market]
calendar = "synthetic"
timezone = "Asia/Seoul"
synthetic_seed = 7
synthetic_start = 2027-01-04

[paths.llama]
engine = "llama.cpp"
base_url = "{a.url}"
model = "{a.model}"
slots = {a.slots}
stream = true
grade_format = "json"
queue_depth = {a.queue_depth}
""")
print(out / "dualpath.toml")
