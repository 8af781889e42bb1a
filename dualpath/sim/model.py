"""Time and answer models of a simulated serving path.

Time: a call holds one slot for `(prompt_n - cache_n) / prefill_tps + n_out / decode_tps`
modelled seconds (rates per busy slot), slept as that times `time_scale`. With `knee_slots`
set, a call that starts while more slots than that are busy is slowed by busy / knee_slots,
so aggregate throughput stops growing at the knee (as a real GPU's does).

Answers: the final-grade call sees the synthetic market's hidden signal through this path's
own noise. The latent score of a ticker-night is
`signal_weight * signal + night_noise * eta(path, ticker, night) + draw_noise * eps(seed)`;
`eta` is shared by all draws of that ticker-night (so draws agree more than chance) and `eps`
comes from the request's seed. The latent is cut into 5 grades at fixed quantiles.
"""

from __future__ import annotations

import hashlib
import math
import random
from datetime import date
from statistics import NormalDist

from dualpath.config import SimProfile
from dualpath.market import SyntheticMarket

# Share of grades 1..5 a calibrated model gives: few strong views, most near hold.
GRADE_SHARES = (0.10, 0.22, 0.36, 0.22, 0.10)


def _stable_seed(*parts: object) -> int:
    digest = hashlib.blake2b("|".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def expected_unit_seconds(p: SimProfile, slots: int, calls: int = 17,
                          prompt_tokens: float = 8300.0) -> float:
    """Modelled seconds per unit (one ticker × one draw: one pass of the pipeline's `calls`)
    on the throughput basis with all slots busy; `flows.planning` multiplies by units."""
    mu = math.log(p.output_mean_tokens) - p.output_sigma**2 / 2
    mean_out = (1 - p.runaway_share) * math.exp(mu + p.output_sigma**2 / 2) + p.runaway_share * 4096
    per_call = prompt_tokens / p.prefill_tps + mean_out / p.decode_tps
    return calls * per_call / slots


class SimModel:
    """Draws output lengths and grades for one simulated path."""

    def __init__(self, profile: SimProfile, market_start: date = date(2027, 1, 4)):
        self.p = profile
        self.market = SyntheticMarket(profile.market_seed, start=market_start, n_days=900)
        total = math.sqrt(profile.signal_weight**2 + profile.night_noise**2 + profile.draw_noise**2)
        nd, acc = NormalDist(), 0.0
        self.cuts = []
        for share in GRADE_SHARES[:-1]:
            acc += share
            self.cuts.append(nd.inv_cdf(acc) * (total or 1.0))
        self._mu = math.log(profile.output_mean_tokens) - profile.output_sigma**2 / 2

    def rng(self, seed: int | None, *parts: object) -> random.Random:
        """A generator for one request: seeded requests repeat, unseeded ones do not."""
        if seed is None:
            return random.Random()
        return random.Random(_stable_seed(self.p.model_alias, seed, *parts))

    def output_tokens(self, rng: random.Random, max_tokens: int) -> tuple[int, bool]:
        """(tokens generated, runaway?) for one call."""
        if rng.random() < self.p.runaway_share:
            return max_tokens, True
        n = max(1, int(rng.lognormvariate(self._mu, self.p.output_sigma)))
        return (max_tokens, True) if n >= max_tokens else (n, False)

    def grade(self, rng: random.Random, ticker: str, night: date | None) -> int:
        """A grade 1-5 for a ticker-night, the signal seen through this path's noise."""
        signal = self.market.signal(ticker, night) if night else None
        eta = random.Random(_stable_seed(self.p.model_alias, "night", ticker, night)).gauss(0, 1)
        latent = (self.p.signal_weight * (signal or 0.0) + self.p.night_noise * eta
                  + self.p.draw_noise * rng.gauss(0, 1))
        return 1 + sum(latent > c for c in self.cuts)

    def seconds(self, prompt_n: int, cache_n: int, n_out: int,
                busy: int = 1) -> tuple[float, float]:
        """Modelled (prefill, decode) seconds of one call started with `busy` slots busy."""
        slow = max(1.0, busy / self.p.knee_slots) if self.p.knee_slots else 1.0
        return ((prompt_n - cache_n) / self.p.prefill_tps * slow,
                n_out / self.p.decode_tps * slow)
