"""The import graph: the API imports the engine, the engine imports the kernels, never the other way, and
no module of the library is imported inside a function (no import circle to work around)."""
import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
# Where each installed package lives in the source tree (pyproject.toml's package-dir).
PACKAGES = {"lazytensor": ROOT / "lazytensor", "lazytensor.runtime": ROOT / "runtime",
            "lazytensor.kernels": ROOT / "kernels"}
# The command's own modules import the library when a subcommand runs, so `--help` and `--version`
# answer without loading numba; that is startup time, not a circle.
COMMAND_MODULES = {"lazytensor.cli", "lazytensor.train", "lazytensor.plot"}


def _modules():
    for package, folder in PACKAGES.items():
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(folder).with_suffix("").parts
            name = ".".join((package,) + parts)
            if parts[-1] == "__init__":
                name = name.rsplit(".", 1)[0]
            yield name, path


def _imports(name, path):
    """(imported module, inside a function) for every import of one of our modules in the file."""
    tree = ast.parse(path.read_text())
    is_package = path.name == "__init__.py"
    base = name.split(".") if is_package else name.split(".")[:-1]
    inside = set()
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            inside.update(id(n) for n in ast.walk(fn) if n is not fn)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                target = ".".join(base[:len(base) - node.level + 1] + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            targets = [target] + ([f"{target}.{a.name}" for a in node.names] if not node.module or node.level else [])
        elif isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            continue
        for t in targets:
            if t == "lazytensor" or t.startswith("lazytensor."):
                yield t, id(node) in inside


MODULES = list(_modules())


def _layer(module):
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in ("runtime", "kernels") else "api"


@pytest.mark.parametrize("name,path", MODULES, ids=[m for m, _ in MODULES])
def test_imports_point_down_the_layers(name, path):
    allowed = {"api": {"api", "runtime", "kernels"}, "runtime": {"runtime", "kernels"}, "kernels": {"kernels"}}
    for target, _ in _imports(name, path):
        assert _layer(target) in allowed[_layer(name)], f"{name} imports {target}"


@pytest.mark.parametrize("name,path", [m for m in MODULES if m[0] not in COMMAND_MODULES],
                         ids=[m for m, _ in MODULES if m not in COMMAND_MODULES])
def test_no_module_of_the_library_is_imported_inside_a_function(name, path):
    late = [target for target, inside in _imports(name, path) if inside]
    assert not late, f"{name} imports {late} inside a function"
