"""The types ringsafe ships (engine/python/README.md, "Types"):

- ``_ringsafe.pyi`` matches the compiled module: the same names, the same
  members of each class (methods, properties, static methods), the same
  parameters of every function (names, order, which have defaults, the
  defaults the stub spells out) as pybind11 reports them, and the same bases
  of the exception classes; so a binding changed without its stub fails here;
- mypy (pinned in tools/dev.sh) accepts the built package and the typed user
  code of tests/python/typed_usage.py, and reports each misuse marked there;
- the public API is annotated throughout.

mypy's cache lives in the build directory (or the temporary directory), never
in the source tree; without mypy the checker's tests skip."""

import ast
import inspect
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import ringsafe
from ringsafe import _ringsafe

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = Path(ringsafe.__file__).resolve().parent
STUB = PACKAGE / "_ringsafe.pyi"
USAGE = Path(__file__).resolve().parent / "typed_usage.py"

# Members every pybind11 class or exception has, which a stub does not declare.
IGNORED_MEMBERS = {"__doc__", "__module__", "__dict__", "__weakref__", "__repr__", "__str__", "__eq__", "__ne__",
                   "__hash__", "__getstate__", "__setstate__", "__reduce__", "__reduce_ex__"}


# ---------------------------------------------------------------- the stub, as written

def _stub_module():
    return ast.parse(STUB.read_text(encoding="utf-8"), filename=str(STUB))


def _is_typing_helper(node):
    """A TypeVar or type alias: typing-only names the module does not have."""
    if isinstance(node, ast.AnnAssign):
        return ast.unparse(node.annotation) == "TypeAlias"
    if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
        return ast.unparse(node.value.func) == "TypeVar"
    return False


def _stub_names(tree):
    """{name: ast node} of what the stub declares at module level (typing helpers apart)."""
    out = {}
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            out[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and not _is_typing_helper(node):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                out[t.id] = node
    return out


def _decorators(fn):
    return {ast.unparse(d) for d in fn.decorator_list}


def _stub_params(fn, method):
    """[(name, kind, has_default, default or Ellipsis)] of a stub function;
    kind: "pos" (positional-only), "arg", "kw" (keyword-only), "*", "**"."""
    a = fn.args
    out = []
    positional = [(p, "pos") for p in a.posonlyargs] + [(p, "arg") for p in a.args]
    defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
    for (p, kind), d in zip(positional, defaults):
        out.append((p.arg, kind, d is not None, _literal(d)))
    if a.vararg:
        out.append((a.vararg.arg, "*", False, ...))
    for p, d in zip(a.kwonlyargs, a.kw_defaults):
        out.append((p.arg, "kw", d is not None, _literal(d)))
    if a.kwarg:
        out.append((a.kwarg.arg, "**", False, ...))
    if method and "staticmethod" not in _decorators(fn):
        assert out and out[0][0] == "self", f"{fn.name}: a method's first parameter is self"
        out = out[1:]
    return out


def _literal(node):
    if node is None:
        return ...
    try:
        return ast.literal_eval(node)
    except ValueError:
        return ...


# ---------------------------------------------------------------- the module, as pybind11 reports it

def _split_top(text):
    """``text`` split at the commas outside brackets and quotes."""
    parts, depth, quote, cur = [], 0, None, ""
    for ch in text:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
            continue
        cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts


def _runtime_params(obj, name, method):
    """[(name, kind, has_default, default text)] from pybind11's signature line
    ("name(a: int, b: bool = True, **kwargs) -> None")."""
    doc = (obj.__doc__ or "").lstrip()
    assert doc.startswith(name + "("), f"{name}: no pybind11 signature in its docstring: {doc[:80]!r}"
    depth, end = 0, None
    for i, ch in enumerate(doc[len(name):], len(name)):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0:
            end = i
            break
    out, keyword_only = [], False
    for p in _split_top(doc[len(name) + 1:end]):
        if p == "*":  # py::kw_only(): the parameters after it are keyword-only
            keyword_only = True
        elif p == "/":  # py::pos_only(): the parameters before it are positional-only
            out = [(n, "pos", d, t) for n, _, d, t in out]
        elif p.startswith("**"):
            out.append((p[2:], "**", False, None))
        elif p.startswith("*"):
            out.append((p[1:], "*", False, None))
        else:
            head, sep, default = p.partition(" = ")
            pname = head.split(":")[0].strip()
            kind = "kw" if keyword_only else "pos" if re.fullmatch(r"arg\d+", pname) else "arg"
            out.append((pname, kind, bool(sep), default or None))
    if method and out and out[0][0] == "self":
        out = out[1:]
    return out


def _is_constructor(cls):
    """Whether the class has a constructor of its own (pybind11 gives the others a raising __init__)."""
    init = cls.__dict__.get("__init__")
    return init is not None and (init.__doc__ or "").lstrip().startswith("__init__(")


def _resolve(name):
    """The class a stub's base names: builtins.X, one of the module's, or a builtin."""
    import builtins
    if name.startswith("builtins."):
        return getattr(builtins, name[len("builtins."):])
    return getattr(_ringsafe, name, None) or getattr(builtins, name)


# Dunder names of the module a stub declares (the rest, __doc__, __file__ ..., every module has).
DECLARED_DUNDERS = {"__version__"}


def _runtime_names():
    return {n for n in dir(_ringsafe) if not (n.startswith("__") and n.endswith("__")) or n in DECLARED_DUNDERS}


def _runtime_members(cls):
    out = set()
    for n in cls.__dict__:
        if n in IGNORED_MEMBERS or n.startswith("_pybind11"):
            continue
        if n == "__init__" and not _is_constructor(cls):
            continue
        out.add(n)
    return out


def _stub_members(cls_node):
    return {node.name: node for node in cls_node.body if isinstance(node, ast.FunctionDef)} | {
        node.target.id: node for node in cls_node.body if isinstance(node, ast.AnnAssign)}


def _check_params(where, stub_fn, runtime_fn, method):
    stub = _stub_params(stub_fn, method)
    runtime = _runtime_params(runtime_fn, stub_fn.name, method)
    problems = []
    def shape(params):
        return [(n, k if k in ("*", "**") else "p") for n, k, _, _ in params]

    if shape(stub) != shape(runtime):
        problems.append(f"{where}: parameters {[s[0] for s in stub]} in the stub, {[r[0] for r in runtime]} in the "
                        f"module")
        return problems
    for (name, kind, has_default, default), (_, rkind, rhas, rdefault) in zip(stub, runtime):
        if rkind == "pos" and kind != "pos":
            problems.append(f"{where}: '{name}' has no name in the binding: positional-only (/) in the stub")
        if rkind == "kw" and kind != "kw":
            problems.append(f"{where}: '{name}' is keyword-only in the binding: after * in the stub")
        if has_default != rhas:
            problems.append(f"{where}: '{name}' has a default in {'the stub' if has_default else 'the module'} only")
        elif has_default and default is not ... and repr(default) != rdefault:
            problems.append(f"{where}: '{name}' defaults to {default!r} in the stub, {rdefault} in the module")
    return problems


# ---------------------------------------------------------------- the stub against the module

def test_stub_declares_every_name_of_the_module_and_no_other():
    declared = set(_stub_names(_stub_module()))
    runtime = _runtime_names()
    assert not declared - runtime, f"declared in _ringsafe.pyi, not in the module: {sorted(declared - runtime)}"
    assert not runtime - declared, f"in the module, not declared in _ringsafe.pyi: {sorted(runtime - declared)}"
    helpers = [ast.unparse(n).split(":")[0].split("=")[0].strip() for n in _stub_module().body if _is_typing_helper(n)]
    assert all(h.startswith("_") for h in helpers), f"typing-only names of the stub must be private: {helpers}"


def test_stub_classes_match_the_module_members_kinds_and_bases():
    problems = []
    for name, node in _stub_names(_stub_module()).items():
        if not isinstance(node, ast.ClassDef) or name not in _runtime_names():
            continue
        cls = getattr(_ringsafe, name)
        assert inspect.isclass(cls), f"{name} is a class in the stub, a {type(cls).__name__} in the module"
        stub_bases = [_resolve(ast.unparse(b).split("[")[0]) for b in node.bases]
        runtime_bases = [b for b in cls.__bases__ if b.__name__ != "pybind11_object"]
        if stub_bases != runtime_bases:
            problems.append(f"{name}: bases {stub_bases} in the stub, {runtime_bases} in the module")
        if issubclass(cls, BaseException):
            continue  # members of the exceptions are Python's (and .kind, set on each instance)
        members = _stub_members(node)
        declared = set(members) - {"__buffer__"}
        runtime = _runtime_members(cls)
        if declared - runtime:
            problems.append(f"{name}: {sorted(declared - runtime)} in the stub only")
        if runtime - declared:
            problems.append(f"{name}: {sorted(runtime - declared)} in the module only")
        for member in declared & runtime:
            fn, attr = members[member], cls.__dict__[member]
            where = f"{name}.{member}"
            if isinstance(fn, ast.AnnAssign):
                problems.append(f"{where}: declare it as a @property (read-only)")
                continue
            decorators = _decorators(fn)
            if isinstance(attr, property):
                if "property" not in decorators:
                    problems.append(f"{where}: a property in the module, a method in the stub")
                elif attr.fset is not None:
                    problems.append(f"{where}: writable in the module, read-only in the stub")
                continue
            if "property" in decorators:
                problems.append(f"{where}: a property in the stub, not in the module")
                continue
            if isinstance(attr, staticmethod) != ("staticmethod" in decorators):
                problems.append(f"{where}: static in one of the stub and the module only")
            problems += _check_params(where, fn, getattr(cls, member), method=True)
    assert not problems, "\n".join(problems)


def test_stub_functions_match_the_module_parameters():
    problems = []
    for name, node in _stub_names(_stub_module()).items():
        if isinstance(node, ast.FunctionDef) and name in _runtime_names():  # the others: the test above
            fn = getattr(_ringsafe, name)
            assert callable(fn) and not inspect.isclass(fn), f"{name} is a function in the stub only"
            problems += _check_params(name, node, fn, method=False)
    assert not problems, "\n".join(problems)


def test_stub_buffer_classes_export_the_buffer_protocol(tmp_path):
    # __buffer__ (PEP 688) types what the buffer protocol gives; the module has no such method on 3.11.
    declared = {name for name, node in _stub_names(_stub_module()).items()
                if isinstance(node, ast.ClassDef) and "__buffer__" in _stub_members(node)}
    assert declared == {"Arena", "MappedFile"}
    path = tmp_path / "bytes"
    path.write_bytes(b"0123456789")
    assert bytes(memoryview(_ringsafe.Arena(16, huge=False))) == bytes(16)
    assert bytes(memoryview(_ringsafe.MappedFile(path))) == b"0123456789"


# ---------------------------------------------------------------- mypy

def _cache_dir():
    """mypy's cache: in the meson build directory holding the package, else the temporary directory."""
    for parent in PACKAGE.parents:
        if (parent / "meson-private").is_dir():
            return parent / "mypy-cache"
    return Path(tempfile.gettempdir()) / "ringsafe-mypy-cache"


def _mypy(*files):
    """(exit status, output lines) of mypy with the project's configuration over the package and ``files``."""
    pytest.importorskip("mypy", reason="mypy is not installed (tools/dev.sh's PY_TEST_DEPS pins it)")
    env = dict(os.environ)
    env.pop("MYPYPATH", None)
    run = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
                          "--cache-dir", str(_cache_dir()), "--no-color-output", "--no-error-summary",
                          "--show-error-codes", "--show-absolute-path", str(PACKAGE), *map(str, files)],
                         cwd=tempfile.gettempdir(), env=env, capture_output=True, text=True, timeout=600)
    return run.returncode, [line for line in (run.stdout + run.stderr).splitlines() if line.strip()]


def test_mypy_accepts_the_package_and_the_typed_usage():
    status, lines = _mypy(USAGE)
    assert status == 0 and not lines, "\n".join(lines)


MARK = re.compile(r"  # type: ignore\[([a-z-]+)\]$")


def test_mypy_rejects_each_misuse_of_the_typed_usage(tmp_path):
    # typed_usage.py without its `# type: ignore[code]` marks: each marked line, and only those, is an error
    # with that code.
    expected, text = {}, []
    for number, line in enumerate(USAGE.read_text(encoding="utf-8").splitlines(), 1):
        m = MARK.search(line)
        if m:
            expected[number] = m.group(1)
            line = line[:m.start()]
        text.append(line)
    assert len(expected) >= 10
    misuse = tmp_path / "typed_misuse.py"
    misuse.write_text("\n".join(text) + "\n", encoding="utf-8")
    status, lines = _mypy(misuse)
    assert status == 1
    found = {}
    for line in lines:
        # By name: mypy's cache may report an identical file under the path it had in an earlier run.
        m = re.match(r"[^:]*typed_misuse\.py:(\d+): error: .*\[([a-z-]+)\]$", line)
        if m:
            found[int(m.group(1))] = m.group(2)
        else:
            assert ": note: " in line, line  # every error is one of the marked lines
    assert found == expected


# ---------------------------------------------------------------- the public API is annotated

def _public_callables():
    import ringsafe.distributed
    import ringsafe.gguf
    import ringsafe.numpy
    import ringsafe.torch
    import ringsafe.transformers

    out = []
    for module in (ringsafe, ringsafe.torch, ringsafe.numpy, ringsafe.distributed, ringsafe.transformers,
                   ringsafe.gguf):
        names = getattr(module, "__all__", None) or [n for n in vars(module) if not n.startswith("_")]
        for n in names:
            obj = getattr(module, n)
            if inspect.isfunction(obj) and obj.__module__.startswith("ringsafe"):
                out.append((f"{module.__name__}.{n}", obj))
            elif inspect.isclass(obj) and obj.__module__.startswith("ringsafe.") and \
                    obj.__module__ != "ringsafe._ringsafe":
                seen = set()  # its own methods and those it inherits from the package's classes
                for klass in obj.__mro__:
                    if not klass.__module__.startswith("ringsafe."):
                        continue
                    for m, fn in vars(klass).items():
                        if m in seen or not inspect.isfunction(fn):
                            continue
                        seen.add(m)
                        if not m.startswith("_") or m in ("__init__", "__getitem__", "__enter__", "__exit__"):
                            out.append((f"{module.__name__}.{n}.{m}", fn))
    return out


def test_public_api_is_annotated():
    callables = _public_callables()
    names = {n for n, _ in callables}
    assert {"ringsafe.safe_open.get_tensor", "ringsafe.Writer.write", "ringsafe.torch.load_file",
            "ringsafe.numpy.iter_tensors", "ringsafe.distributed.load_model", "ringsafe.install",
            "ringsafe.transformers.from_pretrained", "ringsafe.TensorSlice.__getitem__"} <= names
    missing = []
    for name, fn in callables:
        sig = inspect.signature(fn)
        if sig.return_annotation is inspect.Signature.empty:
            missing.append(f"{name} -> ?")
        missing += [f"{name}({p})" for p in sig.parameters
                    if p not in ("self", "cls") and sig.parameters[p].annotation is inspect.Parameter.empty]
    assert not missing, "unannotated: " + ", ".join(missing)
