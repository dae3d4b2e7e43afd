"""Imports point one way: library (datafarm/) <- tasks/ <- flows/ <- command line (cli/).

Parsed, not imported: every `import` statement of every module, wherever it is (a lazy import
inside a function counts too).
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ("datafarm", "tasks", "flows", "cli")  # each may import only the ones before it
FORBIDDEN_EXTRA = {"datafarm": ("prefect",)}


def _modules(layer: str, root: Path = ROOT) -> list[Path]:
    return sorted(p for p in (root / layer).rglob("*.py") if "__pycache__" not in p.parts)


def _imports(path: Path) -> list[tuple[int, str, tuple[str, ...]]]:
    """(line, imported module, names imported from it) for every import in the file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, ()) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module, tuple(alias.name for alias in node.names)))
    return found


def _violations(layer: str, root: Path = ROOT) -> list[str]:
    later = LAYERS[LAYERS.index(layer) + 1:]
    forbidden = later + FORBIDDEN_EXTRA.get(layer, ())
    problems = []
    for path in _modules(layer, root):
        for line, module, names in _imports(path):
            top = module.split(".")[0]
            where = f"{path.relative_to(root)}:{line}"
            if top in forbidden:
                problems.append(f"{where} imports {module} (the {layer} layer may not import {top})")
            if layer != "datafarm" and top == "datafarm":
                private = [part for part in module.split(".") if part.startswith("_") and part != "__init__"]
                private += [name for name in names if name.startswith("_")]
                if private:
                    problems.append(f"{where} reaches into the library's internals: {module} {private}")
    return problems


@pytest.mark.parametrize("layer", LAYERS)
def test_imports_point_one_way(layer):
    assert _modules(layer), f"no modules found under {layer}/"
    assert _violations(layer) == []


def test_the_check_catches_wrong_way_imports(tmp_path):
    """Negative control: the same check on planted modules."""
    (tmp_path / "datafarm").mkdir()
    (tmp_path / "datafarm" / "bad.py").write_text("def f():\n    from flows.farm import farm_flow\n    import prefect\n")
    (tmp_path / "flows").mkdir()
    (tmp_path / "flows" / "bad.py").write_text("from cli.main import app\nfrom datafarm.farm.collect import _private\n")
    library, flows = _violations("datafarm", tmp_path), _violations("flows", tmp_path)
    assert any("imports flows.farm" in p for p in library) and any("imports prefect" in p for p in library)
    assert any("imports cli.main" in p for p in flows) and any("internals" in p for p in flows)
