"""`dualpath metrics`' comparison title names the primary's margin: the first row is the
shortest horizon, an exploratory one whose margin may be another (a plan's δ = 0.9 at h = 1
once headed the table)."""

import pandas as pd

from dualpath.evals.registry import every_table


def test_the_title_is_the_primarys_margin_not_the_first_rows(monkeypatch):
    from dualpath.cli import metrics_table, results

    titles = []
    monkeypatch.setattr(metrics_table, "print_fitted",
                        lambda spec, frame, title, *_: titles.append(title))
    spec = every_table()["comparison"]
    frame = pd.DataFrame({"horizon": [1, 5, 20], "role": ["exploratory", "primary",
                                                          "exploratory"],
                          "candidate": "backup", "baseline": "main",
                          "margin": [0.9, 0.05, 0.04], "alpha": [0.1, 0.05, 0.05]})
    results._print_tables({"comparison": (spec, frame)}, [], None, wide=False, verbose=False)
    assert titles == [f"{spec.title} — backup vs main, primary h=5 margin δ = 0.05, α = 0.05"]
