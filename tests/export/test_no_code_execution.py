"""A tree, a config or any other input never runs code: no ``eval``/``exec``, no
``sympify`` of strings, no pickle.

The static check reads every module of the package (``cellgraph/``, ``backends/``,
``proofs/``, ``benchmarks/``) as an AST and fails on a call that can turn data into code.
The behavioural checks feed inputs whose strings are Python that would create a marker file,
and assert the marker never appears and the strings stay data.
"""

from __future__ import annotations

import ast
import io
import json
from pathlib import Path

import pytest

from cellgraph.data.glove import load_glove
from cellgraph.data.text import parse_sst_tree, read_ptb
from cellgraph.errors import CellGraphError, FormatError
from cellgraph.experiment.config import load_toml, parse_set, resolve_config
from cellgraph.export import jsonio, symbolic
from cellgraph.targets import target

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("cellgraph", "backends", "proofs", "benchmarks")

#: Bare names whose call runs or parses code.
BANNED_NAMES = {"eval", "exec", "compile", "__import__", "sympify", "parse_expr", "S"}
#: ``module.function`` calls that run code or unpickle.
BANNED_ATTRIBUTES = {
    ("pickle", "load"), ("pickle", "loads"), ("pickle", "Unpickler"), ("marshal", "load"),
    ("marshal", "loads"), ("shelve", "open"), ("dill", "load"), ("dill", "loads"), ("joblib", "load"),
    ("yaml", "load"), ("yaml", "unsafe_load"), ("yaml", "full_load"), ("sympy", "sympify"),
    ("sympy", "S"), ("sympy", "parse_expr"), ("os", "system"), ("builtins", "eval"), ("builtins", "exec"),
}


def modules() -> list[Path]:
    return sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py"))


def _dotted(node: ast.expr) -> tuple[str, ...]:
    """``a.b.c`` -> ("a", "b", "c"); ``()`` for anything else."""
    if isinstance(node, ast.Name):
        return (node.id,)
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return head + (node.attr,) if head else ()
    return ()


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def violations(source: str, where: str) -> list[str]:
    """The calls in ``source`` that can run code from data, as ``where:line: reason``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module in ("pickle", "marshal", "dill", "shelve"):
            found.append(f"{where}:{node.lineno}: imports from {node.module}")
        if not isinstance(node, ast.Call):
            continue
        name = _dotted(node.func)
        at = f"{where}:{node.lineno}: "
        if len(name) == 1 and name[0] in BANNED_NAMES:
            found.append(at + f"calls {name[0]}()")
        elif len(name) >= 2 and name[-2:] in BANNED_ATTRIBUTES:
            found.append(at + f"calls {'.'.join(name)}()")
        elif name[-2:] == ("torch", "load"):
            weights_only = _keyword(node, "weights_only")
            if not (isinstance(weights_only, ast.Constant) and weights_only.value is True):
                found.append(at + "calls torch.load without weights_only=True")
        elif name[-1:] == ("load",) and name[-2:-1] in (("np",), ("numpy",)):
            allow = _keyword(node, "allow_pickle")
            if allow is not None and not (isinstance(allow, ast.Constant) and allow.value is False):
                found.append(at + "calls numpy.load with allow_pickle")
        shell = _keyword(node, "shell")
        if isinstance(shell, ast.Constant) and shell.value is True:
            found.append(at + "runs a shell")
    return found


def test_the_package_has_modules_to_check():
    names = {p.relative_to(ROOT).as_posix() for p in modules()}
    assert {"cellgraph/export/jsonio.py", "cellgraph/experiment/config.py",
            "backends/torch/training/checkpoint.py"} <= names


#: Modules that may unpickle, with how many calls and why. benchmarks/authors_witness.py runs the
#: paper's authors' code from a checkout the user names, and their trainer needs their pickled GRU
#: module (legacy format: no tensors-only form); no cellgraph command reaches it.
THIRD_PARTY_LOADS = {"benchmarks/authors_witness.py": 1}


@pytest.mark.parametrize("path", modules(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_module_can_run_code_from_data(path):
    where = path.relative_to(ROOT).as_posix()
    found = violations(path.read_text(encoding="utf-8"), where)
    unpickling = [f for f in found if f.endswith("calls torch.load without weights_only=True")]
    assert len(unpickling) == THIRD_PARTY_LOADS.get(where, 0), unpickling
    assert [f for f in found if f not in unpickling] == []


@pytest.mark.parametrize("source", [
    "eval(text)", "exec(code)", "x = compile(s, 'f', 'exec')", "__import__(name)",
    "import pickle\npickle.loads(b)", "from pickle import loads", "sympy.sympify(s)", "sympify('x+1')",
    "S('x')", "from sympy.parsing.sympy_parser import parse_expr\nparse_expr(s)", "yaml.load(f)",
    "torch.load(f)", "torch.load(f, weights_only=False)", "torch.load(f, weights_only=flag)",
    "np.load(f, allow_pickle=True)", "os.system(cmd)", "subprocess.run(cmd, shell=True)",
])
def test_the_static_check_catches_every_banned_call(source):
    assert violations(source, "example.py")


@pytest.mark.parametrize("source", [
    "torch.load(f, map_location='cpu', weights_only=True)", "yaml.safe_load(f)", "np.load(f)",
    "re.compile('a+')", "sympy.Symbol('x')", "model.eval()", "json.loads(s)", "ast.literal_eval(s)",
])
def test_the_static_check_allows_safe_calls(source):
    assert violations(source, "example.py") == []


# --- behaviour ---------------------------------------------------------------------------


def payload(marker: Path) -> str:
    """Python that creates ``marker`` if anything ever runs it."""
    return f"__import__('pathlib').Path({str(marker)!r}).touch()"


def test_a_cell_document_full_of_code_stays_data(tmp_path):
    marker = tmp_path / "ran"
    code = payload(marker)
    gru = target("gru")
    doc = jsonio.dump_cell(gru.cell, gru.layout)
    doc["layout"][0].update(L=code, R=f"{code} + I", b=code, name=code)
    doc["state"] = code
    doc["nodes"][0].update(leaf=code, role="data")
    loaded = jsonio.load_document(json.loads(json.dumps(doc)))
    eqs = symbolic.equations(loaded.cell, loaded.layout)
    assert code in symbolic.sstr(eqs) and code in loaded.trees  # kept as names
    for field, value in (("act", code), ("op", code), ("tuple", code), ("role", code)):
        bad = json.loads(json.dumps(doc))
        bad["nodes"][-1 if field != "role" else 0][field] = value
        with pytest.raises(FormatError):
            jsonio.load_document(bad)
    with pytest.raises(FormatError, match="not a finite number"):
        jsonio.load_document({"leaf": "x", "vector": ["1 + 1"]})
    assert not marker.exists()


def test_a_config_full_of_code_stays_data(tmp_path):
    marker = tmp_path / "ran"
    code = payload(marker)
    toml = tmp_path / "c.toml"
    toml.write_text(f"glove = {json.dumps(code)}\nteacher = {json.dumps(code)}\n")
    assert load_toml(toml)["glove"] == code
    assert resolve_config(config_file=toml).teacher == code
    for item in (f"epochs={code}", "epochs=2*3", "lr=1/1000", f"identity_trainable={code}", "seed=0x10"):
        with pytest.raises(FormatError):
            resolve_config(overrides=parse_set([item]))
    assert not marker.exists()


def test_a_data_file_full_of_code_stays_data(tmp_path):
    marker = tmp_path / "ran"
    code = payload(marker).replace(" ", "")  # one token
    (tmp_path / "ptb.txt").write_text(f"a {code}\n")
    assert read_ptb(tmp_path / "ptb.txt") == ("a", code, "<eos>")
    (tmp_path / "glove.txt").write_text(f"{code} 1 2\n")
    assert load_glove(tmp_path / "glove.txt", [code], dim=2).found.tolist() == [True]
    assert parse_sst_tree("(2 (2 eval) (2 exec))") == (2, ("eval", "exec"))
    assert not marker.exists()


def test_a_checkpoint_holding_code_is_refused(tmp_path):
    import torch

    from cellgraph.backends.torch.training.checkpoint import CheckpointError, load_checkpoint

    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            return (Path.touch, (marker,))

    buffer = io.BytesIO()
    torch.save({"model": Payload()}, buffer)
    (tmp_path / "evil.pt").write_bytes(buffer.getvalue())
    with pytest.raises(CheckpointError, match="cannot be read"):
        load_checkpoint(tmp_path / "evil.pt")
    assert not marker.exists()


def test_a_tree_is_never_sympified(tmp_path):
    """Leaf names that sympy would parse as expressions stay one symbol each."""
    tree = jsonio.load_tree({"op": "add", "act": "tanh", "tuple": 0,
                             "children": [{"leaf": "x + y", "role": "data"}, {"leaf": "h"}]})
    expr = symbolic.state_expressions(jsonio.load_cell(jsonio.dump_tree(tree)))["h"]
    names = {s.name for s in expr.free_symbols if hasattr(s, "name")}
    assert any("x + y" in n for n in names)
    with pytest.raises(CellGraphError):
        jsonio.load_tree({"op": "eval", "act": "tanh", "tuple": 0,
                          "children": [{"leaf": "x"}, {"leaf": "h"}]})
