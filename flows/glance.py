"""The headline for a config: both answers over the nights the report analyses.

`headline_for(cfg)` is what a viewer calls; `metrics_and_headline(cfg, ...)` is what
`dualpath metrics` calls (the metrics and the headline of one `flows.prereg.study`, so both
cover the same nights); the weekly report builds its own from the study it already holds.
The primary verdict is `evals.verdict.PrimaryVerdict` (issue 21), rendered, never recomputed.
"""

from __future__ import annotations

from datetime import date

import pandas as pd

from dualpath.config import Config
from dualpath.errors import UserError
from dualpath.evals.headline import Headline, headline


def metrics_and_headline(cfg: Config, paths: list[str] | None = None,
                         since: date | None = None, until: date | None = None):
    """(metrics, headline) of one study: under a frozen plan, the window's analysed nights."""
    from dualpath.flows import metrics as fm
    from dualpath.flows.prereg import study

    frames = fm.load_frames(cfg, paths)
    if since and not (pd.to_datetime(frames["runs"]["night"]).dt.date >= since).any():
        raise UserError(f"no runs of experiment {cfg.experiment.name!r} from {since}"
                        + (f" on {paths}" if paths else "") + " in the warehouse")
    st = study(cfg, since, until, paths, frames)
    return st.metrics, headline(st.metrics, st.verdict, cfg.path_draws(),
                                price=cfg.cost.price_per_kwh, currency=cfg.cost.currency)


def headline_for(cfg: Config, since: date | None = None, until: date | None = None) -> Headline:
    """The headline over the weekly report's nights (every night so far by default)."""
    return metrics_and_headline(cfg, None, since, until)[1]
