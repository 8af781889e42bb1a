"""How much of each path's generation was thinking (the ``calls`` frame, see `evals`).

A call's thinking tokens are the server's count where it reports one (vLLM with a reasoning
parser: basis ``server``) and otherwise estimated from the thinking's share of the generated
characters (basis ``chars``: llama-server, which reports no count, and vLLM's inline
``<think>``). The share is thinking tokens over generated tokens, over every call that
reported its generated tokens; ``basis`` names how its thinking was counted.
"""

from __future__ import annotations

import pandas as pd

COLUMNS = ["path", "calls", "thinking_calls", "thinking_tokens", "completion_tokens",
           "thinking_share", "basis"]


def thinking_share(calls: pd.DataFrame) -> pd.DataFrame:
    """One row per path: calls, calls that thought, thinking and generated tokens, the
    thinking share of generated tokens, and the basis of the count (``server``, ``chars``,
    ``server+chars`` when mixed, ``none`` when no call thought)."""
    if not len(calls) or "reasoning_tokens" not in calls:
        return pd.DataFrame(columns=COLUMNS)
    rows = []
    for path, c in calls.groupby("path", sort=True):
        done = c[c["completion_tokens"].notna()]
        think = done["reasoning_tokens"].fillna(0).astype(float)
        out = done["completion_tokens"].astype(float).sum()
        bases = sorted(done.loc[think > 0, "reasoning_tokens_basis"].dropna().unique())
        rows.append({"path": path, "calls": len(c), "thinking_calls": int((think > 0).sum()),
                     "thinking_tokens": int(think.sum()), "completion_tokens": int(out),
                     "thinking_share": float(think.sum() / out) if out else float("nan"),
                     "basis": "+".join(bases) or "none"})
    return pd.DataFrame(rows, columns=COLUMNS)
