"""Every file ampbench writes is strict: JSON without NaN or Infinity (jq, JavaScript and
databases refuse them), CSV cells a spreadsheet never runs as formulas."""
import csv
import json

from conftest import run_main
from utils import report as report_command
from utils.results import strict

QUICK = ["--model", "squeezenet1_1", "-b", "4", "--warmup", "1", "--no-progress", "--data", "synthetic"]


def strict_load(path):
    def refuse(word):
        raise AssertionError(f"{path} holds {word}")
    return json.loads(path.read_text(), parse_constant=refuse)


def test_a_diverged_run_writes_strict_json_and_the_report_reads_it_back(tmp_path, capsys):
    result = run_main(*QUICK, "-n", "20", "--lr", "1e4", "--json", tmp_path / "d.json")
    assert result.returncode == 1 and "training diverged" in result.stderr
    (run,) = strict_load(tmp_path / "d.json")["runs"]
    bad = run["loss_curve_nonfinite"]
    assert bad and all(run["loss_curve"][int(index)] is None and word in ("nan", "inf", "-inf")
                       for index, word in bad.items())
    assert report_command.main([str(tmp_path / "d.json"), "--json", str(tmp_path / "m.json")]) == 0
    (merged,) = strict_load(tmp_path / "m.json")
    assert merged["runs"][0]["loss_curve_nonfinite"] == bad
    assert "nan" in capsys.readouterr().out  # read back as numbers: the table shows the final loss


def test_non_finite_numbers_round_trip():
    document = {"final_loss": float("nan"), "curve": [1.0, float("inf")], "row": {"x": float("-inf")}, "ok": 2.5}
    text = json.dumps(strict.finite_copy(document), allow_nan=False)
    back = strict.restored(json.loads(text))
    assert back["curve"][1] == float("inf") and back["row"]["x"] == float("-inf") and back["ok"] == 2.5
    assert back["final_loss"] != back["final_loss"] and set(back) == set(document)


def test_csv_cells_that_look_like_formulas_are_escaped(tmp_path):
    assert run_main(*QUICK, "-n", "3", "--json", tmp_path / "r.json").returncode == 0
    document = json.loads((tmp_path / "r.json").read_text())
    document["config"]["model"] = "=cmd|' /C calc'!A0"
    document["env"]["hostname"] = "@host"
    (tmp_path / "evil.json").write_text(json.dumps(document))
    assert report_command.main([str(tmp_path / "evil.json"), "--csv", str(tmp_path / "r.csv")]) == 0
    header, row = list(csv.reader((tmp_path / "r.csv").open()))
    cells = dict(zip(header, row))
    assert cells["model"] == "'=cmd|' /C calc'!A0" and cells["hostname"] == "'@host"
    assert not any(cell.startswith(("=", "+", "@")) for cell in row)
