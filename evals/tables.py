"""The tables of measures declared outside their own modules, and the order all are shown in.

Speed and the headline register themselves where they are computed (`evals.speed`,
`evals.headline`); the quality measures are declared here, beside the functions that compute
them, so `evals.registry.TABLES` holds every table a reader prints.
"""

from __future__ import annotations

from dualpath.evals import headline as _headline  # noqa: F401  (registers "headline")
from dualpath.evals import listings as _listings  # noqa: F401  (registers runs, left_out, evidence, hosts)
from dualpath.evals import serving as _serving  # noqa: F401  (registers "serving")
from dualpath.evals import speed as _speed  # noqa: F401  (registers "speed")
from dualpath.evals.agreement import grade_distribution, self_agreement
from dualpath.evals.compare import compare_paths, cross_path_agreement
from dualpath.evals.rankic import rank_ic_summary
from dualpath.evals.registry import declare
from dualpath.evals.signal import by_grade, draws_analysis, signal_shape

ORDER = ["headline", "comparison", "rank_ic", "cross_path", "self_agreement", "draws",
         "signal_shape", "by_grade", "grades", "speed", "serving"]

P_GLOSS = ("chance of a ΔIC this far above −δ if the candidate were worse by δ: small "
           "means non-inferior (it is a p-value, not a share of anything)")

declare("rank_ic", "RankIC per path × horizon (matured nights; t, p and CI on "
        "non-overlapping nights, or why not)",
        ["path", "horizon", "nights", "mean_ic", "sd_ic", "icir", "share_positive", "skew",
         "excess_kurtosis", "n_independent", "tested_mean", "t", "df", "p", "ci_low", "ci_high",
         "ci_level", "ci_method", "basis", "note", "pending_nights", "estimate"],
        ["path", "horizon", "nights", "estimate", "icir", "n_independent", "p", "ci_low",
         "ci_high", "note"],
        # the interval is a t on the non-overlapping nights: beside it, their mean, not the
        # mean over every night (that lay outside its interval in 1.3-3.2% of tables)
        gloss={"estimate": "mean IC over the non-overlapping nights the t, p and CI use (the "
               "interval's centre); without an interval, over every matured night (mean_ic)",
               "icir": "mean IC ÷ its nightly sd", "n_independent": "non-overlapping nights "
               "the t, p and CI use"},
        kinds={"nights": "int", "horizon": "int", "n_independent": "int",
               "pending_nights": "int"}, measure=rank_ic_summary)

declare("comparison", "ΔIC = IC(candidate) − IC(baseline) on common tickers, each horizon's "
        "planned test (non-inferior when the one-sided lower bound > −margin); the interval "
        "is centred on `estimate`; exploratory rows Holm-adjusted",
        ["baseline", "candidate", "horizon", "role", "test", "nights", "unpaired_nights",
         "unpaired_ticker_nights", "mean_common_tickers", "mean_delta", "sd_delta", "rho_ic",
         "n_independent", "estimate", "tested_mean", "df", "ci_low", "ci_high", "ci_level",
         "ci_method", "ci_text", "basis", "margin", "alpha", "p_claim", "p_claim_holm",
         "p_counter", "p_counter_holm", "p_noninferior", "p_inferior", "verdict",
         "p_equivalent", "equivalence", "mde", "power", "power_basis", "note"],
        ["horizon", "role", "test", "nights", "estimate", "ci_low", "ci_high", "p_claim",
         "verdict", "power", "note"],
        gloss={"p_claim": "p-value of the planned claim (for non-inferiority: a ΔIC this far "
               "above −δ if the candidate were worse by δ); small supports it: a p-value, "
               "not a share of anything",
               "p_noninferior": P_GLOSS,
               "estimate": "mean ΔIC over the non-overlapping nights the test uses",
               "power": "chance the planned test shows its claim with these nights "
                        "(power_basis says under what)"},
        kinds={"horizon": "int", "nights": "int", "unpaired_nights": "int",
               "unpaired_ticker_nights": "int", "n_independent": "int"},
        measure=compare_paths)

declare("cross_path", "Cross-path agreement of mean scores",
        ["baseline", "candidate", "ticker_nights", "spearman", "qwk_rounded"],
        kinds={"ticker_nights": "int"}, measure=cross_path_agreement)

declare("self_agreement", "Self-reproducibility between draws (pooled over nights; chance = "
        "mean pairwise Cohen p_e)",
        ["path", "ticker_nights", "draws", "exact_agreement", "chance_agreement", "kappa_exact",
         "mean_qwk", "krippendorff_alpha", "icc_1_1", "icc_1_k", "spearman_brown_k", "note"],
        ["path", "ticker_nights", "draws", "exact_agreement", "chance_agreement", "mean_qwk",
         "icc_1_k", "note"],
        gloss={"mean_qwk": "quadratic-weighted kappa between draws: 0 chance, 1 identical"},
        kinds={"ticker_nights": "int", "draws": "int"}, measure=self_agreement)

declare("draws", "What each draw buys: IC of the mean of k draws (measured), Spearman-Brown "
        "projection beyond",
        ["path", "horizon", "k", "basis", "nights", "mean_ic", "reliability", "attenuation",
         "projected_ic", "projected_ci_low", "projected_ci_high", "projected_ci"],
        ["path", "horizon", "k", "basis", "nights", "mean_ic", "reliability", "projected_ic",
         "projected_ci_low", "projected_ci_high", "projected_ci"], kinds={"horizon": "int", "k": "int", "nights": "int"},
        measure=draws_analysis)

declare("signal_shape", "Signal shape: top-minus-bottom quintile forward return, score rank "
        "autocorrelation night to night",
        ["path", "horizon", "nights", "top_minus_bottom", "rank_autocorr"],
        kinds={"horizon": "int", "nights": "int"}, measure=signal_shape)

declare("by_grade", "Mean forward return by grade (mean score rounded)",
        ["path", "horizon", "grade", "ticker_nights", "mean_fwd_return"],
        kinds={"horizon": "int", "ticker_nights": "int"}, measure=by_grade)

declare("grades", "Grade distribution (share of units; failed = no grade; shares sum to 1)",
        ["path", "units", "1", "2", "3", "4", "5", "failed"],
        gloss={"units": "count of units the shares are of (not a share)"},
        kinds={"units": "int"}, measure=grade_distribution)
