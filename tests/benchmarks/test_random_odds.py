"""The random-odds benchmark: how often random search proposes a teacher, measured without training."""

import json
import math

import pytest

from cellgraph.benchmarks import random_odds


def _rows(record):
    return {r["teacher"]: r for r in record["rows"]}


def test_the_one_node_rnn_is_drawn_and_a_missed_teacher_is_bounded(tmp_path, capsys):
    random_odds.main(["--records", str(tmp_path), "--targets", "rnn", "minimal:25:4-7", "--draws", "3000",
                      "--screen-sample", "40", "--proposals", "10", "100000"])
    out = capsys.readouterr().out.splitlines()
    stored = json.loads((tmp_path / "random-odds.json").read_text())
    assert stored["config"]["draws"] == 3000 and stored["config"]["sized"] is False
    assert stored["versions"]["cellgraph"] and 0 < stored["kept"]["all"] < 1
    rnn, four = _rows(stored)["rnn"], _rows(stored)["minimal:25:4-7"]
    assert rnn["nodes"] == 1 and rnn["hits"] > 0 and 1 <= rnn["first"] <= 3000
    assert rnn["rate"] == rnn["hits"] / 3000
    assert rnn["rate_bound"] == pytest.approx(random_odds.poisson_upper(rnn["hits"]) / 3000)
    assert rnn["rate_bound"] > rnn["rate"]
    assert rnn["even_odds"] == pytest.approx(math.log(2) * 3000 * stored["kept"]["all"] / rnn["hits"])
    assert four["nodes"] == 4 and four["hits"] == 0 and four["first"] is None and four["rate"] == 0
    assert four["rate_bound"] == pytest.approx(2.9957 / 3000, rel=1e-4)
    assert four["screened_bound"] == pytest.approx(four["rate_bound"] / stored["kept"]["all"])
    assert four["even_odds"] == pytest.approx(math.log(2) / four["screened_bound"])
    chance = four["chance_bound"]
    assert chance["10"] == pytest.approx(1 - (1 - four["screened_bound"]) ** 10) and chance["100000"] > 0.999
    assert out[1].split()[:3] == ["teacher", "nodes", "screen"] and out[1].split()[-4:] == ["in", "10", "in", "100,000"]
    assert out[3].split()[:5] == ["minimal:25:4-7", "4", "pass", "3,000", "0"] and ">" in out[3]


def test_sized_draws_come_from_the_teachers_node_count(tmp_path):
    random_odds.main(["--records", str(tmp_path), "--targets", "rnn", "--draws", "1500", "--screen-sample", "20"])
    random_odds.main(["--records", str(tmp_path), "--targets", "rnn", "minimal:0:2-3", "--draws", "1500",
                      "--screen-sample", "20", "--sized"])
    plain = _rows(json.loads((tmp_path / "random-odds.json").read_text()))["rnn"]
    sized = json.loads((tmp_path / "random-odds-sized.json").read_text())
    assert set(sized["kept"]) == {"1", "2"}
    # 16 one-node structures against thousands of larger ones: the sized stream hits far more often
    assert _rows(sized)["rnn"]["rate"] > 5 * plain["rate"]
    assert _rows(sized)["minimal:0:2-3"]["nodes"] == 2


@pytest.mark.parametrize("hits, mean", [(0, 2.9957), (1, 4.7439), (2, 6.2958), (10, 16.9622)])
def test_the_poisson_bound_matches_its_tables(hits, mean):
    assert random_odds.poisson_upper(hits) == pytest.approx(mean, rel=1e-4)


def test_bad_input_is_refused_in_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit):
        random_odds.main(["--records", str(tmp_path), "--targets", "rnn", "--draws", "0"])
    assert "--draws: expected an integer >= 1, got '0'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        random_odds.main(["--records", str(tmp_path), "--targets", "nope", "--draws", "10"])
    assert "unknown target 'nope'" in capsys.readouterr().err
    assert not (tmp_path / "random-odds.json").exists()
