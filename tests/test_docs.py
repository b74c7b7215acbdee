"""README is the front door: short, its test command the one `.ci/run` runs, and every file
it or a page of ``docs/`` links to is in the repository."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
#: ``[text](target)`` links of Markdown, not web addresses or anchors
LINK = re.compile(r"\]\((?!https?:|#)([^)#\s]+)")
#: code blocks and code spans, whose brackets are not links
CODE = re.compile(r"```.*?```|`[^`\n]*`", re.S)


def test_readme_is_short():
    assert README.stat().st_size < 10_000


def test_readme_commands_are_what_ci_runs():
    """The test command of README is the line `.ci/run` runs (with -q pip), the demo's the
    same install with the plot extra and the search's (the demo's discovery step needs optuna)."""
    blocks = re.findall(r"```bash\n(.*?)\n```", README.read_text(encoding="utf-8"), re.S)
    demo, tests = blocks[:2]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert tests.replace("pip install ", "pip install -q ") in ci.splitlines()
    assert demo == "pip install torch==2.13.0 && pip install -e '.[plot,hpo]' && cellgraph demo"


def _tracked() -> set[str]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    return {name for name in out.decode().split("\0") if name}


@pytest.mark.parametrize("page", ["README.md", "BENCHMARKS.md", *sorted(p.relative_to(ROOT).as_posix()
                                                         for p in (ROOT / "docs").glob("*.md"))])
def test_every_linked_file_is_in_the_repository(page):
    tracked = _tracked()
    folders = {str(Path(name).parent) for name in tracked}
    source = ROOT / page
    missing = []
    for target in LINK.findall(CODE.sub("", source.read_text(encoding="utf-8"))):
        path = (source.parent / target).resolve().relative_to(ROOT).as_posix()
        if path not in tracked and path not in folders:
            missing.append(target)
    assert not missing, f"{page} links to files that are not in git ls-files: {missing}"


#: BENCHMARKS.md's rows of today's figures -> where the bench's JSON has their value
TODAY = {
    "(1) optimized search, speed-up over literal Algorithm 2": "optimized search speed-up over literal Algorithm 2 (x)",
    "(2) RRNN soft training step": "RRNN soft training step (s)",
    "(2) RRNN-GRU step / GRUCell loop": "RRNN-GRU step / GRUCell loop (x)",
    "(2) frozen gru step / GRUCell loop": "frozen gru step / GRUCell loop (x)",
    "(2) peak memory of the RRNN soft step": "peak memory of the RRNN soft step (GiB)",
    "(3) RRNN step GFLOP/s / torch.matmul GFLOP/s (executed FLOPs)":
        "RRNN step GFLOP/s / torch.matmul GFLOP/s (executed FLOPs)",
    "(4) growth exponent of the cost per cell in n_iterations": "growth exponent of the cost per cell in n_iterations",
    "(5) Wiki-5k RRNN epoch, estimated from 3 of 313 batches": "Wiki-5k RRNN epoch (s)",
    "(6) RRNN soft step, search compiled / eager (speed-up)": ("compile", "speedup"),
    "(7) RRNN soft step, 2 one-thread processes / one 2-thread process (speed-up)": ("parallel", "speedup"),
}


def _number(text: str) -> float:
    value = float(re.match(r"[\d.]+", text).group(0))
    return value / 100 if text.endswith("%") else value


def test_benchmarks_open_with_todays_figures_read_from_the_runs_json():
    text = (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8")
    section = text.split("## Today's figures", 1)[1].split("\n## ", 1)[0]
    result = json.loads((ROOT / re.search(r"`(results/bench-[^`]+\.json)`", section).group(1)).read_text())
    targets = {t["target"]: t for t in result["targets"]}
    rows = [[cell.strip() for cell in line.strip().strip("|").split("|")]
            for line in section.splitlines() if line.startswith("| (")]
    assert [row[0] for row in rows] == list(TODAY)
    for item, value, target, met, machine, commit in rows:
        where = TODAY[item]
        if isinstance(where, tuple):
            want, limit, verdict = result[where[0]][where[1]], None, "-"
        else:
            t = targets[where]
            want, limit, verdict = t["value"], t["limit"], "yes" if t["met"] else "no"
            assert _number(target.split()[1]) == pytest.approx(limit), item
        assert _number(value) == pytest.approx(want, rel=5e-3), item
        assert met == verdict and commit.strip("`") in section.split("|", 1)[0], item
