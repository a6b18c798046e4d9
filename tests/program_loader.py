"""Load a public PyTorch program's source as a module for PyTorch or for lazytensor.

For lazytensor only the import lines change: `import torch` becomes `import lazytensor as torch`,
`import torch.nn as nn` becomes `import lazytensor.nn as nn`, `from torch.x import y` becomes
`from lazytensor.x import y`. Lines a test removes (device or plotting set-up, dataset downloads) are
named exactly and must be in the source, so nothing else can change unnoticed.
"""
import contextlib
import pathlib
import re
import sys
import types

PROGRAMS = pathlib.Path(__file__).parent / "programs"

_IMPORT = re.compile(r"^(\s*)import torch(\.[\w.]+)?(\s+as\s+\w+)?\s*$")
_FROM = re.compile(r"^(\s*)from torch(\.[\w.]+)?\s+import\s+(.+)$")


def as_lazytensor(source):
    """`source` with its torch imports pointing at lazytensor (every other line unchanged)."""
    out = []
    for line in source.splitlines():
        m = _IMPORT.match(line)
        if m:
            indent, sub, alias = m.group(1), m.group(2) or "", m.group(3)
            line = f"{indent}import lazytensor{sub}" + (alias if alias else (" as torch" if not sub else ""))
            if sub and not alias:  # `import torch.x` binds `torch`
                line += ", lazytensor as torch"
        else:
            m = _FROM.match(line)
            if m:
                line = f"{m.group(1)}from lazytensor{m.group(2) or ''} import {m.group(3)}"
        out.append(line)
    return "\n".join(out) + "\n"


def without(source, lines):
    """`source` without the given lines (each must be in it exactly once, stripped of indentation)."""
    kept = source.splitlines()
    for line in lines:
        hits = [i for i, text in enumerate(kept) if text.strip() == line]
        if len(hits) != 1:
            raise AssertionError(f"the line {line!r} occurs {len(hits)} times in the program")
        kept[hits[0]] = ""
    return "\n".join(kept) + "\n"


def source_of(relpath, removed=()):
    return without((PROGRAMS / relpath).read_text(), removed)


@contextlib.contextmanager
def _modules(names):
    """Let the program's own imports of its sibling modules (`from mingpt.utils import ...`) find the
    versions loaded here; restore sys.modules afterwards."""
    saved = {n: sys.modules.get(n) for n in names}
    try:
        yield
    finally:
        for n, m in saved.items():
            if m is None:
                sys.modules.pop(n, None)
            else:
                sys.modules[n] = m


def load(framework, files, removed=None, main=False, argv=None, extra_globals=None, framework_module=None):
    """Execute the program files in order (dotted module names -> relative paths) for "torch" or
    "lazytensor"; returns {name: module}. Each file sees `argv` as its command line; `main`: run the last file
    as __main__; `framework_module`: what the program's `import torch` binds (a stand-in that shares a random
    stream between the frameworks: program_compare.SharedRandom)."""
    removed = removed or {}
    top = "torch" if framework == "torch" else "lazytensor"
    names_bound = {} if framework_module is None else {top: framework_module}
    names = list(files)
    loaded = {}
    packages = {n.rsplit(".", 1)[0] for n in names if "." in n}
    with _modules(names + sorted(packages)):
        for pkg in packages:
            sys.modules[pkg] = types.ModuleType(pkg)
            sys.modules[pkg].__path__ = []
        for i, name in enumerate(names):
            source = source_of(files[name], removed.get(name, ()))
            if framework == "lazytensor":
                source = as_lazytensor(source)
            run_main = main and i == len(names) - 1
            module = types.ModuleType("__main__" if run_main else name)
            module.__file__ = str(PROGRAMS / files[name])
            module.__dict__.update(extra_globals or {})
            sys.modules[name] = module
            if "." in name:
                setattr(sys.modules[name.rsplit(".", 1)[0]], name.rsplit(".", 1)[1], module)
            old_argv = sys.argv
            sys.argv = [files[name]] + list(argv or [])  # (a script parses its arguments when it loads)
            if run_main:
                sys.modules["__main__"], old_main = module, sys.modules.get("__main__")
            real = {n: sys.modules[n] for n in names_bound}
            try:
                sys.modules.update(names_bound)
                exec(compile(source, str(PROGRAMS / files[name]), "exec"), module.__dict__)
            finally:
                sys.modules.update(real)
                sys.argv = old_argv
                if run_main:
                    sys.modules["__main__"] = old_main
            loaded[name] = module
    return loaded
