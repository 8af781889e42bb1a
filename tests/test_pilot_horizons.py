"""A pilot is used horizon by horizon, as soon as a horizon has 5 matured nights: on the
seeded warehouse (`tests.seeded`: 10 nights, 2027-04-29 – 2027-05-13, the last one's backup
run partial) drafted the morning after its last night (prices to 2027-05-14), h=1 and h=5
come from the pilot and h=20, matured on no night yet, is assumed."""

from dualpath.cli.prereg import _noise
from dualpath.evals.power import null_sd_delta
from tests.seeded import seed_warehouse
from dualpath.warehouse.db import writer


def test_a_ten_night_pilot_drafted_the_next_morning_uses_h1_and_h5(tmp_path):
    _, cfg, _ = seed_warehouse(tmp_path)
    with writer(cfg.resolve(cfg.warehouse.path)) as con:
        con.execute("DELETE FROM prices WHERE date > DATE '2027-05-14'")
    sd, source, pilot, sd_df = _noise(cfg, None, False)
    # what `prereg draft` prints after "noise: "
    assert source == ("pilot: sd of nightly ΔIC over the warehouse's nights 2027-04-29 – "
                      "2027-05-12 (h=1: 9, h=5: 6 matured nights); assumed for h=20 (not "
                      "matured on 5 pilot nights)")
    assert sorted(pilot.sd) == [1, 5] and sorted(sd_df) == [1, 5]
    assert sd[20] == null_sd_delta(len(cfg.tickers())) and sd[1] != sd[20]
