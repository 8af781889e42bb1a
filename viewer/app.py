"""`dualpath ui`: a read-only web viewer over the warehouse (starlette, jinja2 templates).

Pages (every one reachable by URL, so a link can be shared; `viewer.links` builds them):

    /                          overview: the headline (verdict, slowdown) and the nights
    /night/YYYY-MM-DD          every ticker of the night on both paths (?sort= &q= &only= &min_gap=)
    /night/YYYY-MM-DD          ... (&flag=runaway|parse_failed|contaminated|retried), and
                               each run's slot occupancy beside its GPU power over the night
    /night/YYYY-MM-DD/TICKER   the two paths side by side: draws, a word diff of the draw's
                               final answers, then the calls (?draw=N)
    /ticker/TICKER             one ticker's grades per path night by night, runs' status
    /search?q=TEXT             every stored answer holding TEXT (&path=P), newest night first

Everything a model wrote is shown as text: templates escape every value, and the pages carry
no script at all, under a Content-Security-Policy that refuses any (`CSP`). Only GET is
served. Each page opens the warehouse read-only for its own queries and closes it, so a
night being ingested waits at most one page (see `warehouse.viewer`).
"""

from __future__ import annotations

import re
import threading
from datetime import date
from pathlib import Path
from urllib.parse import urlencode

import jinja2
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from dualpath.config import Config
from dualpath.errors import DualpathError, WarehouseBusy
from dualpath.viewer import across, data
from dualpath.viewer.headline import Headline, headline
from dualpath.viewer.hosts import HostGuard, served_names
from dualpath.viewer.links import history_url, night_url, search_url, ticker_url
from dualpath.viewer.pages import FLAGS, SORTS

HERE = Path(__file__).parent
# no script from anywhere, styles and images from this server only, no framing, forms to here
CSP = ("default-src 'none'; script-src 'none'; style-src 'self'; img-src 'self' data:; "
       "form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff",
           "Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY",
           "Cache-Control": "no-store"}


class _HeadlineCache:
    """The headline, recomputed only when the warehouse's runs or plans changed."""

    def __init__(self):
        self.key, self.value = None, None

    def get(self, cfg: Config, key) -> Headline:
        if key != self.key or self.value is None:
            self.value, self.key = headline(cfg), key
        return self.value


class Viewer:
    """The pages of one config's experiment."""

    def __init__(self, cfg: Config, warehouse: Path | None = None):
        self.cfg = cfg
        self.warehouse = warehouse or cfg.resolve(cfg.warehouse.path)
        self.env = jinja2.Environment(loader=jinja2.FileSystemLoader(HERE / "templates"),
                                      autoescape=True, undefined=jinja2.StrictUndefined,
                                      trim_blocks=True, lstrip_blocks=True)
        self.env.filters.update(num=_num, pct=_pct, secs=_secs, beyond_counts=_beyond_counts)
        self.env.globals.update(night_url=lambda n: night_url("", n),
                                ticker_url=lambda n, t, d=None: ticker_url("", n, t, d),
                                history_url=lambda t: history_url("", t),
                                search_url=lambda q, p=None: search_url("", q, p),
                                qs=lambda query, **kw: "?" + urlencode({**query, **kw}))
        # one page's queries at a time: each holds a read-only connection only while it runs
        self.db_lock = threading.Lock()
        self.headline = _HeadlineCache()
        # an exchange's calendar takes seconds to build the first time (XKRX: ~3 s here),
        # matplotlib ~1 s to import: both now, so the first night page does not wait for them
        threading.Thread(target=_warm, args=(cfg,), daemon=True).start()

    def render(self, template: str, **ctx) -> HTMLResponse:
        html = self.env.get_template(template).render(experiment=self.cfg.experiment.name, **ctx)
        return HTMLResponse(html, headers=HEADERS)

    def overview(self, request: Request) -> Response:
        with self.db_lock:
            nights, key = data.overview(self.cfg, self.warehouse)
        baseline, candidate, _ = data.question(self.cfg)
        return self.render("overview.html.j2", nights=nights, baseline=baseline,
                           candidate=candidate, headline=self.headline.get(self.cfg, key),
                           paths=list(self.cfg.paths))

    def night(self, request: Request) -> Response:
        night = _night(request.path_params["night"])
        q = request.query_params
        sort = q.get("sort", "disagree")
        min_gap = _float(q.get("min_gap"))
        flag = q.get("flag") or None
        if flag is not None and flag not in FLAGS:
            raise HTTPException(400, f"flag={flag!r} is not a filter; use one of "
                                     + ", ".join(FLAGS))
        with self.db_lock:
            view = data.night(self.cfg, self.warehouse, night, sort if sort in SORTS else
                              "disagree", q.get("q", ""), q.get("only") == "disagree", min_gap,
                              flag)
        if view is None:
            raise HTTPException(404, f"no runs of {self.cfg.experiment.name} on {night}")
        return self.render("night.html.j2", v=view, sorts=SORTS, flags=FLAGS, query=dict(q))

    def history(self, request: Request) -> Response:
        ticker = request.path_params["ticker"]
        with self.db_lock:
            view = across.history(self.cfg, self.warehouse, ticker)
        if view is None:
            raise HTTPException(404, f"{ticker} was never scored in {self.cfg.experiment.name}")
        return self.render("history.html.j2", v=view)

    def search(self, request: Request) -> Response:
        q = request.query_params
        with self.db_lock:
            view = across.search(self.cfg, self.warehouse, q.get("q", "")[:200],
                                 q.get("path") or None)
        return self.render("search.html.j2", v=view, limit=across.SEARCH_LIMIT)

    def ticker(self, request: Request) -> Response:
        night = _night(request.path_params["night"])
        ticker = request.path_params["ticker"]
        draw = _int(request.query_params.get("draw"))
        with self.db_lock:
            view = data.ticker(self.cfg, self.warehouse, night, ticker, draw)
        if view is None:
            raise HTTPException(404, f"{ticker} was not scored on {night}")
        return self.render("ticker.html.j2", v=view)

    def candidates(self, request: Request) -> Response:
        """The study's candidates scored on past nights (retrospective), each answered."""
        from dualpath.evals.format import cell
        from dualpath.flows.candidate_answer import stored_answers

        with self.db_lock:
            answers = stored_answers(self.cfg)
        shown = [{"lines": a.lines, "cols": list(a.per_night.columns),
                  "rows": [[cell(x) for x in r] for r in a.per_night.itertuples(index=False)]}
                 for a in answers]
        return self.render("candidates.html.j2", answers=shown)

    def error(self, request: Request, exc: HTTPException) -> Response:
        html = self.env.get_template("error.html.j2").render(
            experiment=self.cfg.experiment.name, status=exc.status_code, detail=exc.detail)
        return HTMLResponse(html, status_code=exc.status_code, headers=HEADERS)


    def failed(self, request: Request, exc: DualpathError) -> Response:
        """The warehouse could not be read (busy beyond the wait, damaged): say so."""
        return self.error(request, HTTPException(503 if isinstance(exc, WarehouseBusy)
                                                 else 500, str(exc)))


def create_app(cfg: Config, warehouse: Path | None = None, host: str | None = None) -> Starlette:
    """The viewer's ASGI app for one config (GET only), answering only for the names it is
    served under (`viewer.hosts`; `host`: the address it listens on, default `[ui] host`)."""
    v = Viewer(cfg, warehouse)
    routes = [Route("/", v.overview, methods=["GET"]),
              Route("/night/{night}", v.night, methods=["GET"]),
              Route("/night/{night}/{ticker}", v.ticker, methods=["GET"]),
              Route("/ticker/{ticker}", v.history, methods=["GET"]),
              Route("/search", v.search, methods=["GET"]),
              Route("/candidates", v.candidates, methods=["GET"]),
              Mount("/static", StaticFiles(directory=HERE / "static"), name="static")]
    names = served_names(host or cfg.ui.host, cfg.ui.base_url)
    return Starlette(routes=routes, exception_handlers={HTTPException: v.error,
                                                        DualpathError: v.failed},
                     middleware=[Middleware(HostGuard, names=names)])


def _warm(cfg: Config) -> None:
    from dualpath.calendar import MarketCalendar

    try:
        MarketCalendar.from_settings(cfg.market)
    except DualpathError:       # the night page says why
        pass
    import matplotlib.backends.backend_svg  # noqa: F401  (the night page's plots)
    import matplotlib.figure  # noqa: F401


def _night(text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise HTTPException(404, f"{text!r} is not a night (use YYYY-MM-DD)") from None


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text else None
    except ValueError:
        raise HTTPException(400, f"{text!r} is not a whole number") from None


def _float(text: str | None) -> float | None:
    try:
        return float(text) if text else None
    except ValueError:
        raise HTTPException(400, f"{text!r} is not a number") from None


def _num(v, spec: str = ".2f") -> str:
    return "—" if v is None or v != v else format(v, spec)


def _pct(v) -> str:
    return "—" if v is None or v != v else f"{v:+.2%}"


def _secs(v) -> str:
    if v is None or v != v:
        return "—"
    return f"{v:.2f} s" if v < 10 else f"{v:,.1f} s"


def _beyond_counts(detail: str | None) -> str:
    """A run's status detail without its leading "N of M units measured" (the page shows the
    counts beside it already): "" when that is all it says."""
    if not isinstance(detail, str):
        return ""
    first, _, rest = detail.partition("; ")
    return rest if re.fullmatch(r"\d+ of \d+ units measured", first) else detail
