"""The night page's plots, per path: slot occupancy over the night, and beside it the GPU's
board power over the same night, on one time axis (real-scale minutes since the run began).

Occupancy is drawn twice: from the client's side, the calls in flight over the run's slots (a
unit's calls run one after another, so calls in flight are the slots a unit holds), and from
the server's, the calls' own prefill + decode seconds over the slots (what `dualpath runs`
calls occupancy, and what shows a starved run: slots held, not worked). Power
is the run's stored samples (`energy_samples`: each row a span's mean watts). Where a run has
no samples the page says why in a line (`power_note`); no chart is drawn empty.

Drawn with matplotlib's SVG backend (its object API: no pyplot state, safe in the server's
threads) and served inline as a `data:` image, which the viewer's CSP allows and which
carries no script.
"""

from __future__ import annotations

import base64
import hashlib
import io
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import pandas as pd

from dualpath.evals.energy import basis_words

BINS = 120
SPARSE = 60          # power rows few enough to mark each one


@dataclass
class Series:
    """x: real-scale seconds since the run began; y: the value over [x[i], x[i+1])."""

    x: np.ndarray
    y: np.ndarray


def origin(spans: pd.DataFrame, segments: pd.DataFrame) -> float | None:
    """The run's wall-clock start: its telemetry window's, else its first call's."""
    starts = segments["started_wall"].dropna() if "started_wall" in segments else []
    if len(starts):
        return float(starts.min())
    return float(spans["start_wall"].min()) if len(spans) else None


def occupancy(spans: pd.DataFrame, slots: int | None, scale: float, t0: float,
              bins: int = BINS) -> tuple[Series | None, Series | None]:
    """(client, server) occupancy per bin, `spans` one run's `warehouse.viewer.call_spans`:
    client = calls in flight ÷ slots; server = the calls' own service seconds ÷ slots, each
    call's spread over its client interval (as `warehouse.disturbed` judges a starved run),
    None where the calls carry no server timings. (None, None) without calls or slots."""
    if not len(spans) or not slots:
        return None, None
    scale = scale or 1.0
    s = (spans["start_wall"].to_numpy() - t0) / scale
    e = (spans["end_wall"].to_numpy() - t0) / scale
    edges = np.linspace(min(s.min(), 0.0), e.max(), bins + 1)
    lo, hi = edges[:-1], edges[1:]
    # each call's seconds inside each bin (calls × bins; a night's ~3,400 calls × 120 bins)
    inside = np.clip(np.minimum(e[:, None], hi) - np.maximum(s[:, None], lo), 0, None)
    width = np.where(hi > lo, hi - lo, 1.0) * slots
    client = Series(edges, inside.sum(axis=0) / width)
    service = spans["service_s"].to_numpy(dtype=float) if "service_s" in spans else None
    if service is None or np.isnan(service).all():
        return client, None
    share = np.nan_to_num(service) / np.where(e > s, e - s, np.inf)
    return client, Series(edges, (inside * share[:, None]).sum(axis=0) / width)


def power(samples: pd.DataFrame, segments: pd.DataFrame, scale: float,
          t0: float) -> Series | None:
    """The run's power samples on the run's time axis (each segment from its window's start);
    None when it has none."""
    if not len(samples):
        return None
    starts = dict(zip(segments["segment"], segments["started_wall"]))
    offset = [0.0 if pd.isna(starts.get(g)) else (starts[g] - t0) / (scale or 1.0)
              for g in samples["segment"]]
    x = samples["t_s"].to_numpy() + np.array(offset)
    width = samples["width_s"].fillna(0).to_numpy()
    edges = np.append(x, x[-1] + (width[-1] or 0.0))
    return Series(edges, samples["power_w"].to_numpy(dtype=float))


def power_note(segments: pd.DataFrame, samples: pd.DataFrame,
               running: bool = False) -> str | None:
    """Why a run has no power plot, in a line; None when it has one."""
    if len(samples):
        return None
    if not len(segments) and running:
        return ("energy not known yet (a segment's telemetry is stored when it ends; "
                "this run is still scoring)")
    if not len(segments):
        return "energy unknown (no GPU telemetry was recorded for this run)"
    unknown = [u for u in segments["unknown"].dropna().unique() if u]
    if unknown:
        return f"energy unknown ({'; '.join(unknown)})"
    j, secs = segments["joules"].sum(min_count=1), segments["seconds"].sum(min_count=1)
    if pd.isna(j):
        return "energy unknown (the telemetry recorded no energy for this run)"
    mean = f", mean {j / secs:,.0f} W" if secs and secs > 0 else ""
    return (f"power over the night unknown (no power samples stored for this run); "
            f"its board energy: {j / 1000:,.1f} kJ{mean}, by {_basis(segments, j)}")


def energy_note(segments: pd.DataFrame) -> str | None:
    """Beside a drawn power plot: the run's board energy and how it was measured, or why it
    is unknown (a reader that stopped mid-night leaves its samples drawn and no joules)."""
    if not len(segments):
        return None
    unknown = [u for u in segments["unknown"].dropna().unique() if u]
    if unknown:
        return f"energy unknown ({'; '.join(unknown)})"
    j = segments["joules"].sum(min_count=1)
    if pd.isna(j):
        return None
    return f"board energy {j / 1000:,.1f} kJ, by {_basis(segments, j)}"


def _basis(segments: pd.DataFrame, joules: float) -> str:
    """The segments' basis in words (`evals.energy.basis_words`), with any reader faults."""
    col = lambda c: segments[c] if c in segments else pd.Series(dtype=float)
    basis = "counter" if col("basis").eq("counter").all() else "sampled"
    error = col("error_j").sum(min_count=1)
    text = basis_words(basis, col("sample_hz").min(),
                       error / joules if not pd.isna(error) and joules else None)
    faults = [f for f in col("faults").dropna().unique() if f]
    return text + "".join(f"; {f}" for f in faults)


def _minutes(s: Series) -> tuple[np.ndarray, np.ndarray]:
    """A step line: each value held over its bin."""
    return np.repeat(s.x / 60, 2)[1:-1], np.repeat(s.y, 2)


# above the panel, beside its title: inside, it hid the lines it names wherever they ran low
LEGEND = dict(fontsize=7, loc="lower right", bbox_to_anchor=(1, 1), ncol=3, frameon=False,
              borderaxespad=0.1, handlelength=1.5, columnspacing=1)

_DRAWN: OrderedDict[bytes, str] = OrderedDict()      # figure by what it draws (`figure`)
KEEP = 64


def figure(path: str, occ: Series | None, watts: Series | None,
           idle_w: float | None = None, server: Series | None = None) -> str | None:
    """A `data:image/svg+xml` URI of the path's occupancy (the client's, and the server's
    where it has one) and, beside it, its power (the panels it has data for); None when it
    has neither. A figure costs 0.1-0.3 s to draw on a loaded core, its data a millisecond:
    the last `KEEP` figures are kept by a digest of what they draw, so a night seen again
    (its runs finished, or still the same) is not drawn again."""
    if occ is None and watts is None:
        return None
    h = hashlib.blake2b(repr((path, idle_w)).encode(), digest_size=16)
    for s in (occ, watts, server):
        for a in (s.x, s.y) if s is not None else (np.array([np.nan]),):
            h.update(np.ascontiguousarray(a, dtype=float).tobytes() + b"|")
    key = h.digest()
    if key not in _DRAWN:
        _DRAWN[key] = _draw(path, occ, watts, idle_w, server)
        while len(_DRAWN) > KEEP:
            _DRAWN.popitem(last=False)
    _DRAWN.move_to_end(key)
    return _DRAWN[key]


def _draw(path: str, occ: Series | None, watts: Series | None, idle_w: float | None,
          server: Series | None) -> str:
    panels = [p for p in (occ, watts) if p is not None]
    import matplotlib
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5.2 * len(panels), 2.3))
    # fixed margins: constrained layout measured every label first, half a figure's cost
    # (0.65 of 1.5 s on a loaded core)
    fig.subplots_adjust(left=0.07 / len(panels), right=1 - 0.02 / len(panels), bottom=0.2,
                        top=0.88, wspace=0.16)
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    ax = iter(axes)
    if occ is not None:
        a = next(ax)
        a.fill_between(*_minutes(occ), step=None, color="#2457c5", alpha=0.25, lw=0)
        a.plot(*_minutes(occ), color="#2457c5", lw=1, label="calls in flight ÷ slots")
        if server is not None:
            a.plot(*_minutes(server), color="#1a7f4b", lw=1.2,
                   label="server's own timings ÷ slots")
        a.set_ylim(0, max(1.05, float(occ.y.max()) * 1.05))
        a.axhline(1, color="grey", lw=0.6, ls=":")
        a.legend(**LEGEND)
        a.set_title(f"{path}: slot occupancy", fontsize=9, loc="left")
    if watts is not None:
        a = next(ax)
        a.plot(*_minutes(watts), color="#b54708", lw=1, label="board power")
        if len(watts.y) <= SPARSE:     # few reads (a compressed clock): show where they are
            a.plot(watts.x[:-1] / 60, watts.y, "o", color="#b54708", ms=2.5, label="reads")
        if idle_w is not None and idle_w == idle_w:
            a.axhline(idle_w, color="grey", lw=0.8, ls="--", label=f"idle floor {idle_w:.0f} W")
            a.legend(**LEGEND)
        a.set_ylim(bottom=0)
        a.set_title(f"{path}: GPU board power (W)", fontsize=9, loc="left")
    if occ is not None and watts is not None:    # one time axis for both
        lo = min(occ.x[0], watts.x[0]) / 60
        hi = max(occ.x[-1], watts.x[-1]) / 60
        for a in axes:
            a.set_xlim(lo, hi)
    for a in axes:
        a.set_xlabel("minutes since the run began (real-scale)", fontsize=8)
        a.tick_params(labelsize=7)
    buf = io.BytesIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "dualpath"}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    return "data:image/svg+xml;base64," + base64.b64encode(buf.getvalue()).decode("ascii")
