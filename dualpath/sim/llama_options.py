"""Request options the simulated llama-server honours as the real one does (measured side by
side against llama.cpp build 11434, `tests/test_contract_llama.py`):

- `id_slot` that is not an integer (`"1"`) runs on any slot, as `json_value(data, "id_slot",
  -1)` falls back to its default for a value of the wrong type (measured: it did not run on
  slot 1); the simulator refused it with a 400;
- `reasoning_format` other than none, auto, deepseek, deepseek-legacy is a 500 "Unknown
  reasoning format: X" (`common_reasoning_format_from_name` throws);
- `cache_prompt: false` reuses nothing of the slot's cache (cache_n 0 on a repeated prompt);
- a reply stops at the slot's context end with `length` (the real one never generates past
  n_ctx per slot: the simulator once wrote 1,671 tokens in a 1,280-token slot);
- `stop` strings end the answer before the first of them, `finish_reason` stop;
- `n_probs: N` adds the OpenAI `logprobs` of each token with its N most likely alternatives.
"""

from __future__ import annotations

import math
import random

REASONING_FORMATS = frozenset({"none", "auto", "deepseek", "deepseek-legacy"})


def slot_of(id_slot):
    """The slot a request names (-1, or a non-integer: any)."""
    if isinstance(id_slot, bool) or not isinstance(id_slot, int) or id_slot == -1:
        return None
    return id_slot


def reasoning_format_error(body: dict) -> dict | None:
    """The 500 body for an unknown `reasoning_format`, else None."""
    fmt = body.get("reasoning_format")
    if fmt is None or fmt in REASONING_FORMATS:
        return None
    return {"error": {"code": 500, "message": f"Unknown reasoning format: {fmt}",
                      "type": "server_error"}}


def reuses_cache(body: dict) -> bool:
    """False when the request says `cache_prompt: false`."""
    return body.get("cache_prompt", True) is not False


def slot_room(max_tokens: int, n_ctx_slot: int, prompt_n: int) -> int:
    """The output cap: never past the slot's context."""
    return min(max_tokens, max(n_ctx_slot - prompt_n, 1))


def apply_stop(body: dict, reply, n_out: int, runaway: bool):
    """(reply, tokens, runaway) once the first stop string ends the answer."""
    from dataclasses import replace

    answer = reply.answer
    stops = body.get("stop")
    stops = [stops] if isinstance(stops, str) else [s for s in stops or () if isinstance(s, str)]
    cuts = [answer.find(s) for s in stops if s and s in answer]
    if not cuts:
        return reply, n_out, runaway
    cut = min(cuts)
    kept = max(1, round(n_out * cut / max(len(answer), 1)))
    return replace(reply, answer=answer[:cut]), kept, False


def logprobs(body: dict, answer: str, seed: int | None) -> dict | None:
    """The `logprobs` of a whole reply when `n_probs` asks for them (the answer cut into
    four-character tokens; log-probabilities drawn from the request's seed)."""
    n = body.get("n_probs")
    if not isinstance(n, int) or isinstance(n, bool) or n <= 0:
        return None
    rng = random.Random(seed)
    content = []
    for i in range(0, len(answer), 4):
        token = answer[i:i + 4]
        top = sorted((-rng.expovariate(1.0) for _ in range(n)), reverse=True)
        entry = {"id": rng.randrange(262144), "token": token,
                 "bytes": list(token.encode()), "logprob": top[0] if top else math.log(0.5)}
        entry["top_logprobs"] = [{"id": rng.randrange(262144), "token": token if j == 0 else
                                  f"<{j}>", "bytes": list(token.encode()), "logprob": lp}
                                 for j, lp in enumerate(top)]
        content.append(entry)
    return {"content": content}
