"""`dualpath doctor --launch`: night one rehearsed on the real servers, minutes instead of hours.

Each path's server is obtained as a night obtains it (launched, attached or simulated, under
the endpoint lock), its identity checked against `expect`, then one short call and one
final-grade call go through the real client with the night's sampling; the sampling the
server reports applying is compared with what was sent. What was launched is stopped. A
path "would score" only when every one of its checks passes.
"""

from __future__ import annotations

import asyncio
from datetime import date
from pathlib import Path

import httpx

from dualpath.client import ChatRequest, PathClient, sampling_body
from dualpath.config import Config
from dualpath.errors import DualpathError
from dualpath.grades import GRADE_INSTRUCTION, GRADE_SCHEMA, parse_grade
from dualpath.engines import engine
from dualpath.engines.proof import engine_mismatch
from dualpath.identity import auth_headers, differences, read_identity
from dualpath.launcher import prepare_launches
from dualpath.records import CallRecord, ServerIdentity
from dualpath.flows.connect import connect
from dualpath.flows.doctor import Check, gpu_checks

_SHORT_TOKENS = 16


def _call_check(name: str, what: str, rec: CallRecord) -> Check:
    if not rec.ok:
        return Check(f"{name}: {what}", False, f"{rec.error_kind}: {rec.error_detail}",
                     "see the server's log; fix the server or the path's settings")
    if rec.contaminated:
        return Check(f"{name}: {what}", False, f"answered by another server: {rec.contaminated}",
                     f"fix [paths.{name}.expect] or the server on the endpoint")
    return Check(f"{name}: {what}", True, f"{rec.completion_tokens} tokens in "
                 f"{rec.latency_s:.1f} s, finish {rec.finish_reason}, fingerprint "
                 f"{rec.system_fingerprint}")


def _grade_check(cfg: Config, name: str, rec: CallRecord) -> Check:
    base = _call_check(name, "grade call", rec)
    if not base.ok:
        return base
    parsed = parse_grade(rec.output_text)
    if rec.finish_reason == "length" or parsed.grade is None:
        why = "hit max_tokens" if rec.finish_reason == "length" else parsed.failure
        return Check(f"{name}: grade call", False, f"no readable grade ({why}): "
                     f"{rec.output_text[:120]!r}", "a base model grades reliably only under "
                     f"grade_format = \"json\"; a thinking model may need a larger max_tokens")
    return Check(f"{name}: grade call", True, f"grade {parsed.grade}; {base.detail}")


def _differs(sent, applied) -> bool:
    """A value applied otherwise than sent: numbers beyond float32 noise; the sampler chain
    and the reasoning format as they are."""
    if isinstance(sent, (int, float)) and isinstance(applied, (int, float)):
        return abs(float(sent) - float(applied)) > 1e-6 * max(1.0, abs(float(applied)))
    return sent != applied


async def _sampling_check(name: str, dialect: str, http: httpx.AsyncClient, url: str,
                          sent: dict) -> Check:
    if not engine(dialect).facts.reports_applied_sampling:
        return Check(f"{name}: sampling applied", True, f"{dialect} does not report the "
                     "sampling it applied; sent " + ", ".join(
                         f"{k}={v}" for k, v in sent.items() if k != "max_tokens"))
    # llama-server answers /slots through its task queue: on a busy CPU one read can time
    # out, which is not "/slots is off" (seen under load); read it up to three times
    for _ in range(3):
        if (applied := await engine(dialect).applied_sampling(http, url, None)) is not None:
            break
        await asyncio.sleep(1.0)
    if applied is None:
        where, fix = engine(dialect).facts.applied_sampling_off
        return Check(f"{name}: sampling applied", False, "the server reports no applied "
                     f"sampling ({where})", fix)
    off = [f"{k}: sent {sent[k]}, applied {v}" for k, v in applied.items()
           if k in sent and _differs(sent[k], v)]
    return Check(f"{name}: sampling applied", not off, "; ".join(off) or
                 "as sent: " + ", ".join(f"{k}={v}" for k, v in applied.items()),
                 "the server overrode what was sent; check its launch flags")


def _identity_checks(cfg: Config, name: str, seen: ServerIdentity) -> list[Check]:
    sp = cfg.paths[name]
    diffs = differences(seen, sp.expect)
    files = (f"; binary_sha256 = \"{seen.binary_sha256}\""
             if seen.binary_sha256 and "binary_sha256" in engine(sp.engine).facts.reports else "")
    # a field the engine does not report (vLLM: no slot count) reads as such, not "None"
    shown = ", ".join(f"{k} {'not reported' if v is None else v}" for k, v in (
        ("model", seen.model), ("build", seen.build), ("slots", seen.slots),
        ("n_ctx_per_slot", seen.n_ctx_per_slot)))
    return [Check(f"{name}: identity", not diffs, "; ".join(diffs) or
                  f"matches expect ({shown}{files})",
                  f"fix the server or [paths.{name}.expect] as each line says")]


def _requests(cfg: Config, ticker: str) -> tuple[ChatRequest, ChatRequest]:
    header = f"TICKER: {ticker} | AS OF: {date.today().isoformat()}"
    # its /slots entry then has the latest id_task: the params it was sampled with
    short = ChatRequest("doctor", [{"role": "user", "content": f"{header}\nSay OK."}],
                        ticker, 1, 1, 1, seed=1, id_slot=0)
    ask = [{"role": "user", "content": f"{header}\nThe desks lean positive on {ticker}. "
            f"Give the rationale in one sentence.\n\n{GRADE_INSTRUCTION}"}]
    return short, ChatRequest("portfolio_manager", ask, ticker, 1, 1, 2, seed=2)


async def _rehearse_calls(cfg: Config, name: str, http: httpx.AsyncClient, url: str,
                          seen: ServerIdentity, key: str | None) -> list[Check]:
    sp = cfg.paths[name]
    short_req, grade_req = _requests(cfg, cfg.tickers()[0])
    if sp.grade_format == "json":
        grade_req = ChatRequest(grade_req.agent, [{"role": "user", "content": grade_req.messages[0]
                                ["content"].replace(GRADE_INSTRUCTION, 'Answer with one JSON '
                                                    'object: {"grade": <1-5>}.')}],
                                grade_req.ticker, 1, 1, 2, seed=2, json_schema=GRADE_SCHEMA)
    short_sampling = cfg.sampling.model_copy(update={"max_tokens": _SHORT_TOKENS})
    client = PathClient(name, sp, short_sampling, http, f"doctor/{name}", base_url=url,
                        api_key=key)
    client.pin(seen.model, seen.build, sp.dialect, sp.expect.build)
    out = [_call_check(name, "short call", await client.chat(short_req))]
    sent = {k: v for k, v in sampling_body(sp.dialect, short_sampling, 1).items()
            if k not in ("seed", "cache_prompt")}
    out.append(await _sampling_check(name, sp.dialect, http, url, sent))
    client.sampling = cfg.sampling
    out.append(_grade_check(cfg, name, await client.chat(grade_req)))
    return out


async def rehearse_path(cfg: Config, name: str, log_dir: Path) -> list[Check]:
    """One path's rehearsal: obtain its server, check identity, two calls, stop it."""
    from dualpath.night import api_key
    from dualpath.flows.runner import path_http

    try:
        key = api_key(cfg, name)
        async with connect(cfg, name, f"doctor/{name}", log_dir / name) as ep:
            out = [Check(f"{name}: server", True, f"{ep.how} at {ep.base_url}")]
            out += gpu_checks(cfg, name)         # the GPUs its server runs on, pins too
            async with path_http(cfg, name, auth_headers(key)) as http:
                seen = await read_identity(http, ep.base_url, cfg.paths[name].dialect)
                wrong = await engine_mismatch(http, ep.base_url, cfg.paths[name].dialect)
                if wrong is not None:    # its pins were read in the wrong engine's dialect
                    return out + [Check(f"{name}: engine", False, wrong,
                                        f"fix paths.{name}.engine or its launch/base_url")]
                out += _identity_checks(cfg, name, seen)
                if out[-1].ok:
                    out += await _rehearse_calls(cfg, name, http, ep.base_url, seen, key)
            return out
    except DualpathError as e:
        return [Check(f"{name}: server", False, f"{type(e).__name__}: {e}",
                      "see the message; `dualpath check` first")]


def rehearse(cfg: Config, log_dir: Path | None = None) -> list[Check]:
    """Every path rehearsed, concurrently (as a night runs them), after model files are
    assembled once. Launched servers log to `log_dir` (default: runs_dir/doctor/PATH)."""
    prepare_launches(cfg)
    folder = log_dir or cfg.resolve(cfg.warehouse.runs_dir) / "doctor"

    async def run() -> list[Check]:
        per_path = await asyncio.gather(*(rehearse_path(cfg, n, folder) for n in cfg.paths))
        return [c for checks in per_path for c in checks]
    return asyncio.run(run())
