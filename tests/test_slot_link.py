"""An AMD card's PCIe link as its slot sees it: an RDNA GPU behind its own switch reports the
link inside the card (Gen5 x16 on an R9700 whatever the slot); dualpath reads the card's
upstream port, so a card in a Gen3 x4 slot says Gen3 x4 in `doctor`, in `runs --evidence`
and to a pin, as a card with no switch always did. Trees as tests/sysfs_trees.py builds them."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from dualpath.cli import app
from dualpath.telemetry.gpu_identity import GpuReading, gpu_line, narrow_links
from dualpath.telemetry.pci import slot_link
from dualpath.telemetry.readers import HwmonSource
from tests.helpers import make_project, score_night_plain, ingest, SimFleet
from tests.sysfs_trees import amd_card


def reading(sysfs) -> GpuReading:
    src = HwmonSource(None, sysfs / "class" / "drm")
    (info,), (state,) = src.info(), src.state()
    return GpuReading(info, state)


@pytest.mark.parametrize("switch", [True, False])
def test_the_link_is_read_at_the_cards_end_of_the_slot(tmp_path, switch):
    """The GPU function of the RDNA card reads 32 GT/s x16 (inside the card); the card's
    upstream port reads the slot's 8 GT/s x4. A card with no switch reads it on itself."""
    card = amd_card(tmp_path, switch=switch, slot=(3, 4))
    assert (card.gpu / "current_link_width").read_text() == ("16\n" if switch else "4\n")
    link = slot_link(tmp_path / "class" / "drm" / "card1" / "device")
    assert (link.switch_ports, link.card.address) == \
        ((2, "0000:01:00.0") if switch else (0, "0000:01:00.0"))
    assert (link.card.gen, link.card.width, link.gen_max, link.width_max) == (3, 4, 3, 4)
    r = reading(tmp_path)
    assert (r.state.pcie_gen, r.state.pcie_width, r.pcie, r.pcie_width) == (3, 4, "Gen3 x4", 4)
    assert (r.info.card_pcie_gen_max, r.info.card_pcie_width_max) == (5, 16)


def test_a_card_in_a_full_slot_reads_the_slot_and_warns_of_nothing(tmp_path):
    """A Gen4 x16 slot: the link reaches Gen4 (the slot's most), x16; no warning, and the
    line names where the link was read."""
    amd_card(tmp_path, slot=(4, 16))
    r = reading(tmp_path)
    assert r.pcie == "Gen4 x16" and narrow_links([r]) == []
    assert gpu_line(r) == ("AMD Radeon AI PRO R9700, driver amdgpu, power limit 210 W, link "
                           "Gen4 x16 (max Gen4 x16; the card Gen5 x16, read at the card's "
                           "upstream port 0000:01:00.0), VRAM 32768 MiB")


def test_a_link_retrained_narrower_than_its_slot_is_a_reseat(tmp_path):
    """An x16 slot whose link trained x8: the card's end reads x8 of the slot's x16."""
    card = amd_card(tmp_path, slot=(4, 16))
    (card.card_end / "current_link_width").write_text("8\n")
    assert narrow_links([reading(tmp_path)]) == [
        "GPU 0: PCIe link runs x8 of its maximum x16 (width is judged: the generation drops "
        "at idle); reseat the card or move it to a full-width slot"]


def _attached_project(tmp_path, url: str, gpu_pin: dict | None = None):
    """The demo's project with the backup attached as a llama-server at `url`, its GPUs read
    from the tree under tmp_path/sys."""
    cfg_path, cfg, nights = make_project(tmp_path, tickers=3, draws=1, nights=1)
    text = cfg_path.read_text().replace(
        '[paths.backup]\nengine = "sim"', f'[paths.backup]\nengine = "llama.cpp"\n'
        f'base_url = "{url}"')
    text += f'\n[telemetry]\nsysfs = "{tmp_path / "sys"}"\nidle_s = 0.2\n'
    if gpu_pin:
        text += "\n[paths.backup.expect.gpu]\n" + "".join(f"{k} = {v}\n"
                                                          for k, v in gpu_pin.items())
    cfg_path.write_text(text)
    from dualpath.config import load_config
    return cfg_path, load_config(cfg_path), nights[0]


GEN3_X4 = ("AMD Radeon AI PRO R9700, driver amdgpu, power limit 210 W, link Gen3 x4 (max Gen3 "
           "x4; the card Gen5 x16, read at the card's upstream port 0000:01:00.0), VRAM 32768 "
           "MiB")


def test_doctor_says_gen3_x4_for_an_rdna_card_in_a_gen3_x4_slot(tmp_path, sim_server):
    amd_card(tmp_path / "sys", slot=(3, 4))
    srv = sim_server(slots=4, model_alias="qwen3.6-35b-a3b")
    cfg_path, _, _ = _attached_project(tmp_path, srv.url)
    r = CliRunner().invoke(app, ["doctor", "-c", str(cfg_path)], terminal_width=400)
    lines = [ln for ln in r.output.splitlines() if "backup: GPU" in ln or "PCIe" in ln]
    assert lines == [f"– backup: GPU 0: {GEN3_X4}",
                     "– backup: PCIe link: warning: GPU 0: the slot gives the card Gen3 x4 of "
                     "its Gen5 x16; move it to a slot of x16"], r.output


def test_runs_evidence_says_gen3_x4_and_a_pin_of_width_16_refuses_the_night(tmp_path):
    """One night scored with the backup's GPU read from the tree: its evidence row says Gen3
    x4. The same night on a config pinning pcie_width = 16 records the backup failed with
    the value to write; main is scored."""
    from dualpath.warehouse.db import reader
    from dualpath.warehouse.queries import run_summaries

    amd_card(tmp_path / "sys", slot=(3, 4))
    (tmp_path / "sims").mkdir()
    _, demo, _ = make_project(tmp_path / "sims", tickers=3, draws=1, nights=1)
    with SimFleet(demo) as fleet:
        for pin, root in [(None, tmp_path / "free"), ({"pcie_width": 16}, tmp_path / "pinned")]:
            root.mkdir()
            (root / "sys").symlink_to(tmp_path / "sys")
            cfg_path, cfg, night = _attached_project(root, fleet.urls["backup"], pin)
            ingest(cfg, score_night_plain(cfg, night, fleet.urls))
            with reader(cfg.resolve(cfg.warehouse.path)) as con:
                runs = {r.path: (r.status, r.status_detail)
                        for r in run_summaries(con).itertuples()}
            if pin is None:
                assert runs["backup"] == ("complete", None)
                doc = json.loads(CliRunner().invoke(app, ["runs", "-c", str(cfg_path),
                                                          "--evidence", "-f", "json"]).output)
                gpu = {g["path"]: g for g in doc["gpu"]}["backup"]
                assert (gpu["gpu"], gpu["link"], gpu["link_max"]) == (
                    "AMD Radeon AI PRO R9700", "Gen3 x4", "Gen3 x4")
                table = CliRunner().invoke(app, ["runs", "-c", str(cfg_path), "--evidence"],
                                           terminal_width=300).output
                row = next(ln for ln in table.splitlines() if "│ backup" in ln
                           and "R9700" in ln)
                assert "│ Gen3 x4 " in row
            else:
                assert runs["main"][0] == "complete"
                assert runs["backup"] == ("failed", (
                    "0 of 3 units measured; 3 never started; IdentityError: gpu.pcie_width: "
                    "expected 16, GPU 0 reads 4; if this GPU is the one meant, write "
                    "pcie_width = 4 under [paths.backup.expect.gpu]"))
