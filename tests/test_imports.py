"""The import graph: the API imports the engine, the engine imports the kernels, never the other way, no
module of the library is imported inside a function, and no layer has an import circle. The training
application beside the library (`lazytensor_train`) uses only the public API, and the library never
imports it."""
import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
# Where each installed package lives in the source tree (pyproject.toml's package-dir).
PACKAGES = {"lazytensor": ROOT / "lazytensor", "lazytensor.runtime": ROOT / "runtime",
            "lazytensor.kernels": ROOT / "kernels"}
# The command's own modules import the library when a subcommand runs, so `--help` and `--version`
# answer without loading numba; that is startup time, not a circle.
COMMAND_MODULES = {"lazytensor_train.cli", "lazytensor_train.train", "lazytensor_train.plot"}
APP = {"lazytensor_train": ROOT / "lazytensor_train"}
# The library's public API: the package's names and its documented subpackages.
PUBLIC = {"lazytensor", "lazytensor.nn", "lazytensor.nn.functional", "lazytensor.nn.init", "lazytensor.optim",
          "lazytensor.optim.lr_scheduler", "lazytensor.distributed", "lazytensor.utils", "lazytensor.utils.data",
          "lazytensor.npz_archive"}


def _modules(packages=PACKAGES):
    for package, folder in packages.items():
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
            if t.split(".")[0] in ("lazytensor", "lazytensor_train"):
                yield t, id(node) in inside


MODULES = list(_modules())
APP_MODULES = list(_modules(APP))


def _layer(module):
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in ("runtime", "kernels") else "api"


@pytest.mark.parametrize("name,path", MODULES, ids=[m for m, _ in MODULES])
def test_imports_point_down_the_layers(name, path):
    allowed = {"api": {"api", "runtime", "kernels"}, "runtime": {"runtime", "kernels"}, "kernels": {"kernels"}}
    for target, _ in _imports(name, path):
        assert not target.startswith("lazytensor_train"), f"{name} imports the training app ({target})"
        assert _layer(target) in allowed[_layer(name)], f"{name} imports {target}"


@pytest.mark.parametrize("name,path", [m for m in MODULES if m[0] not in COMMAND_MODULES],
                         ids=[m for m, _ in MODULES if m not in COMMAND_MODULES])
def test_no_module_of_the_library_is_imported_inside_a_function(name, path):
    late = [target for target, inside in _imports(name, path) if inside]
    assert not late, f"{name} imports {late} inside a function"


@pytest.mark.parametrize("name,path", APP_MODULES, ids=[m for m, _ in APP_MODULES])
def test_the_training_app_uses_only_the_public_api(name, path):
    for target, _ in _imports(name, path):
        assert target.startswith("lazytensor_train") or target in PUBLIC, f"{name} imports {target}"


def _circles(modules):
    """The strongly connected groups of more than one module in the import graph of `modules` (function-
    level imports included), each sorted."""
    names = {name for name, _ in modules}
    # (a module's own packages are initialized before it: `from . import x` names x, not a circle)
    graph = {name: {t for t, _ in _imports(name, path) if t in names and t != name and not name.startswith(t + ".")}
             for name, path in modules}
    index, low, stack, on_stack, circles = {}, {}, [], set(), []

    def visit(v):  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                circles.append(sorted(group))
    for name in sorted(graph):
        if name not in index:
            visit(name)
    return circles


@pytest.mark.parametrize("layer", ["api", "runtime", "kernels"])
def test_no_layer_has_an_import_circle(layer):
    assert _circles([m for m in MODULES if _layer(m[0]) == layer]) == []
