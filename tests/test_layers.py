"""Imports go one way: the core (``cellgraph`` but its command line) imports neither torch nor
the backends, the proofs, the benchmarks or the command line, not even inside a function;
everything it needs from a backend it finds by name (:func:`cellgraph.backend.backend`). The
drawings, the JSON files and file writing import no sympy (only the symbolic export needs
it) and the drawings and JSON files no run folders."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest

import cellgraph

PACKAGE = Path(cellgraph.__file__).parent
#: The command line: it may import every layer (a command runs the proofs or a trainer).
COMMAND_LINE = ("cli", "__main__.py")
#: What the core may not import.
ABOVE = ("torch", "cellgraph.backends", "cellgraph.proofs", "cellgraph.benchmarks", "cellgraph.cli")
CORE = sorted(p for p in PACKAGE.rglob("*.py") if p.relative_to(PACKAGE).parts[0] not in COMMAND_LINE)


def imported(path: Path) -> list[tuple[int, str]]:
    """``(line, module)`` of every import statement of a file, nested ones included."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found += [(node.lineno, node.module)] + [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
    return found


def test_the_core_is_every_module_but_the_command_line():
    names = {p.relative_to(PACKAGE).as_posix() for p in CORE}
    assert {"cell/expr.py", "data/planted.py", "experiment/hpo.py", "algorithms/distance.py",
            "experiment/config.py", "targets.py", "algorithm2.py", "export/draw.py"} <= names
    assert not any(n.startswith("cli/") for n in names) and "__main__.py" not in names


@pytest.mark.parametrize("path", CORE, ids=lambda p: p.relative_to(PACKAGE).as_posix())
def test_a_core_module_imports_nothing_above_it(path):
    wrong = [f"line {line}: {name}" for line, name in imported(path)
             if any(name == top or name.startswith(top + ".") for top in ABOVE)]
    assert not wrong, f"{path.relative_to(PACKAGE)} imports " + ", ".join(wrong)


def test_importing_every_core_module_leaves_torch_unimported():
    modules = sorted({"cellgraph." + ".".join(p.relative_to(PACKAGE).with_suffix("").parts).removesuffix(".__init__")
                      for p in CORE})
    code = f"import sys, {', '.join(modules)}; assert 'torch' not in sys.modules, 'torch was imported'"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def _circles(names: dict[str, Path]) -> list[str]:
    graph = nx.DiGraph((name, other) for name, path in names.items() for _, other in imported(path)
                       if other in names and other != name and not name.startswith(other + "."))
    return [" -> ".join(circle) for circle in nx.simple_cycles(graph)]


def test_no_core_modules_import_each_other_in_a_circle():
    """Not even inside a function (``cellgraph.data.datadir`` finds the loaders by name)."""
    circles = _circles({"cellgraph." + ".".join(p.relative_to(PACKAGE).with_suffix("").parts).removesuffix(".__init__"): p
                        for p in CORE})
    assert not circles, "\n".join(circles)


def test_no_torch_modules_import_each_other_in_a_circle():
    """Inside a room too, and inside functions (``runs/run.py`` reads finished runs back with
    ``runs/train.py``'s loaders, never the other way)."""
    circles = _circles({"cellgraph.backends." + ".".join(p.relative_to(BACKENDS).with_suffix("").parts): p
                        for p in TORCH_MODULES})
    assert not circles, "\n".join(circles)


#: Modules that read and write cells and files but export nothing to sympy.
WITHOUT_SYMPY = ("export.draw", "export.jsonio", "files", "cell.names")


def test_drawings_and_json_files_leave_sympy_unimported():
    modules = ", ".join(f"cellgraph.{name}" for name in WITHOUT_SYMPY)
    code = f"import sys, {modules}; assert 'sympy' not in sys.modules, 'sympy was imported'"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("name", ["draw", "jsonio"])
def test_drawings_and_json_files_import_neither_run_folders_nor_the_sympy_export(name):
    wrong = [f"line {line}: {module}" for line, module in imported(PACKAGE / "export" / f"{name}.py")
             if module.startswith(("cellgraph.experiment.runs", "cellgraph.export.symbolic"))]
    assert not wrong, f"{name}.py imports " + ", ".join(wrong)


BACKENDS = PACKAGE.parent / "backends"
#: The torch backend's rooms, lowest first: a module may import its own room and the rooms
#: before it, never one after it (docs/layout.md); the plugin object at the top imports them all.
TORCH_ROOMS = ("runtime", "algorithm2", "models", "training", "runs", "discover")
TORCH_MODULES = sorted(p for room in TORCH_ROOMS for p in (BACKENDS / "torch" / room).glob("*.py"))


def test_every_torch_room_has_its_place_in_the_order():
    rooms = {p.name for p in (BACKENDS / "torch").iterdir() if (p / "__init__.py").exists()}
    assert rooms == set(TORCH_ROOMS), "a room of backends/torch without its place in TORCH_ROOMS (or gone)"
    top = {p.name for p in (BACKENDS / "torch").glob("*.py")}
    assert top == {"__init__.py", "plugin.py"}, f"modules outside the rooms: {sorted(top)}"


@pytest.mark.parametrize("path", TORCH_MODULES, ids=lambda p: p.relative_to(BACKENDS).as_posix())
def test_a_torch_room_imports_no_room_above_it(path):
    above = TORCH_ROOMS[TORCH_ROOMS.index(path.parent.name) + 1:]
    wrong = [f"line {line}: {name}" for line, name in imported(path)
             if any(name == f"cellgraph.backends.torch.{room}" or name.startswith(f"cellgraph.backends.torch.{room}.")
                    for room in above + ("plugin",))]
    assert not wrong, f"{path.relative_to(BACKENDS)} imports " + ", ".join(wrong)


@pytest.mark.parametrize("path", sorted((BACKENDS / "numpy").glob("*.py")), ids=lambda p: p.name)
def test_the_numpy_reference_imports_neither_torch_nor_the_torch_backend(path):
    wrong = [f"line {line}: {name}" for line, name in imported(path)
             if name.split(".")[0] == "torch" or name.startswith("cellgraph.backends.torch")]
    assert not wrong, f"numpy/{path.name} imports " + ", ".join(wrong)
