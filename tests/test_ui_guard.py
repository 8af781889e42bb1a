"""The viewer answers only for the names it is served under (DNS rebinding), and every
ticker page renders whatever the unit's outcome (an unpriced ticker's page answered 500)."""

from __future__ import annotations

import duckdb
import pytest
from starlette.testclient import TestClient

from tests.helpers import SimFleet, ingest, make_project, score_night_plain
from dualpath.viewer.app import create_app
from dualpath.viewer.hosts import host_of, served_names
from dualpath.viewer.links import ticker_url


@pytest.fixture(scope="module")
def unpriced(tmp_path_factory):
    """One night of 3 tickers, the last with no prices at all: its units are input_failed."""
    root = tmp_path_factory.mktemp("unpriced")
    cfg_path, cfg, nights = make_project(root, tickers=3, draws=1, nights=1)
    gone = cfg.tickers()[-1]
    with duckdb.connect(str(cfg.resolve(cfg.warehouse.path))) as con:
        con.execute("DELETE FROM prices WHERE ticker = ?", [gone])
    with SimFleet(cfg) as fleet:
        ingest(cfg, score_night_plain(cfg, nights[0], fleet.urls))
    return cfg, nights[0], gone


def test_an_unpriced_tickers_page_renders(unpriced):
    cfg, night, gone = unpriced
    with duckdb.connect(str(cfg.resolve(cfg.warehouse.path)), read_only=True) as con:
        assert {r[0] for r in con.execute("SELECT outcome FROM v_units WHERE ticker = ?",
                                          [gone]).fetchall()} == {"input_failed"}
    with TestClient(create_app(cfg), base_url="http://127.0.0.1") as c:
        r = c.get(ticker_url("", night, gone))
        assert r.status_code == 200 and gone in r.text and "input_failed" in r.text
        assert c.get(ticker_url("", night, cfg.tickers()[0])).status_code == 200


@pytest.mark.parametrize("host, status", [
    ("127.0.0.1:8765", 200), ("localhost:8765", 200), ("[::1]:8765", 200), ("LOCALHOST", 200),
    ("attacker.example:8765", 400), ("127.0.0.1.attacker.example", 400), ("", 400),
    ("[::1", 400)])
def test_a_host_it_does_not_serve_is_refused(unpriced, host, status):
    cfg = unpriced[0]
    with TestClient(create_app(cfg), base_url="http://127.0.0.1") as c:
        r = c.get("/", headers={"host": host})
    assert r.status_code == status
    if status == 400:
        assert "is not served here" in r.text and "<html" not in r.text


def test_the_served_names_follow_ui_host_and_base_url():
    assert host_of("[::1]:8765") == "::1" and host_of("Box:80") == "box"
    names = served_names("192.168.1.7", "http://viewer.lan:8765/")
    assert {"192.168.1.7", "viewer.lan", "localhost", "127.0.0.1", "::1"} <= names
    assert "attacker.example" not in served_names("0.0.0.0", None)
