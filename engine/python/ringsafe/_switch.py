"""ringsafe in place of the reference ``safetensors`` package, for code you do
not own (transformers, diffusers, accelerate, the Hub client, scripts).

install() makes ``import safetensors``, ``safetensors.torch`` and
``safetensors.numpy`` resolve to ringsafe from then on (an import hook), and
reaches code that imported them before: the reference's module objects get
ringsafe's functions, and names bound with ``from safetensors... import x``
in loaded modules are rebound. It also sets RINGSAFE_AS_SAFETENSORS=1 in
os.environ, so child processes started afterwards (multiprocessing's spawn
and forkserver children, DataLoader workers, torch.multiprocessing.spawn,
subprocesses) switch at start-up too, through the .pth file installed with
the package; fork children inherit the switch itself.

uninstall() undoes all of it: the hook, sys.modules, every name install()
rebound, every name bound to what ``import safetensors...`` handed out while
installed (rebound to the reference's, imported then if needed), and the
variable.

What ``import safetensors`` gives under the switch is ringsafe's and can be
told apart from ringsafe's own objects, so that uninstall() rebinds exactly
those: modules of their own (``safetensors``, ``.torch``, ``.numpy``) holding
forwarding functions, subclasses of ringsafe's safe_open and TensorSpec, and
``safetensors.SafetensorError``, a base class of ringsafe.SafetensorError (so
``except safetensors.SafetensorError`` catches every ringsafe error). The
``safetensors`` module keeps the reference's ``__file__``, ``__path__`` (its
other submodules load from it), ``__version__`` and a spec with its origin.

What stays on the reference: its other framework modules (safetensors.flax,
.tensorflow, .mlx, .paddle) are the reference's code, which then calls
ringsafe's numpy API; and its distribution metadata (keep it installed:
transformers checks that a package named safetensors is installed)."""

import functools
import importlib
import importlib.abc
import importlib.machinery
import os
import sys
import threading
import types
from typing import Any

# The reference version whose API ringsafe provides (safetensors.__version__
# under the switch when the reference is not installed).
API_VERSION = "0.8.0"
ENV = "RINGSAFE_AS_SAFETENSORS"
_TOP = ("safe_open", "SafetensorError", "TensorSpec", "serialize", "serialize_file", "deserialize",
        "_safe_open_handle")
_ALIASED = ("safetensors", "safetensors.torch", "safetensors.numpy")

_lock = threading.RLock()
_state: dict[str, Any] | None = None  # while installed: what uninstall() restores


def _reference_spec():
    """The reference package's spec as the other finders see it, or None."""
    for finder in sys.meta_path:
        if isinstance(finder, _Finder):
            continue
        try:
            spec = finder.find_spec("safetensors", None)
        except Exception:
            continue
        if spec is not None and spec.submodule_search_locations:
            return spec
    return None


def _reference_version():
    try:
        from importlib.metadata import PackageNotFoundError, version
        try:
            return version("safetensors")
        except PackageNotFoundError:
            return API_VERSION
    except ImportError:
        return API_VERSION


def _forward(fn, module):
    """A function of its own that calls ``fn`` (what the switch hands out)."""
    @functools.wraps(fn)
    def switched(*args, **kwargs):
        return fn(*args, **kwargs)
    switched.__ringsafe_switch__ = module  # type: ignore[attr-defined]
    return switched


def _handed(ringsafe_mod, name, value, classes):
    """What the switch's module ``name`` holds for ringsafe's ``value``."""
    if id(value) in classes:
        return classes[id(value)]
    if isinstance(value, types.FunctionType) and getattr(value, "__module__", "").startswith("ringsafe"):
        return _forward(value, ringsafe_mod)
    return value


def _fill(module, source, names, classes):
    """Sets the switch's attributes of ``module`` from ringsafe's ``source``."""
    for name in names:
        if hasattr(source, name):
            setattr(module, name, _handed(module.__name__, name, getattr(source, name), classes))


def _classes():
    """{id(ringsafe class): the switch's class}: subclasses of safe_open and
    TensorSpec, and SafetensorError's base (which catches ringsafe's errors)."""
    import ringsafe
    out = {id(ringsafe.SafetensorError): ringsafe.SafetensorError.__bases__[0]}
    for cls in (ringsafe.safe_open, ringsafe.TensorSpec):
        sub = type(cls.__name__, (cls,), {"__module__": "safetensors", "__doc__": cls.__doc__, "__slots__": ()})
        out[id(cls)] = sub
    return out


def _module(name, origin, is_package=False, path=None):
    m = types.ModuleType(name, f"ringsafe in place of {name} (ringsafe.install()).")
    spec = importlib.machinery.ModuleSpec(name, _Loader(), origin=origin, is_package=is_package)
    if is_package:
        spec.submodule_search_locations = list(path or [])
        m.__path__ = list(path or [])
    spec.has_location = origin is not None
    m.__spec__, m.__loader__ = spec, spec.loader
    m.__package__ = name if is_package else name.rpartition(".")[0]
    if origin is not None:
        m.__file__ = origin
    m.__ringsafe__ = True  # type: ignore[attr-defined]
    return m


def _build():
    """The switch's three modules, and the classes they hand out."""
    import ringsafe
    ref = _reference_spec()
    path = list(ref.submodule_search_locations) if ref else []
    origin = ref.origin if ref and ref.has_location else None
    classes = _classes()
    top = _module("safetensors", origin, True, path)
    top.__version__ = _reference_version()
    _fill(top, ringsafe, _TOP, classes)
    mods = {"safetensors": top}
    for sub in ("torch", "numpy"):
        file = os.path.join(path[0], sub + ".py") if path else None
        mods["safetensors." + sub] = _module("safetensors." + sub, file if file and os.path.exists(file) else None)
    return mods, classes


def _populate(name):
    """Fills the switch's module ``name`` from ringsafe (on import and reload)."""
    import ringsafe
    assert _state is not None  # called while installed
    mod = _state["modules"][name]
    if name == "safetensors":
        _fill(mod, ringsafe, _TOP, _state["classes"])
        for sub in ("torch", "numpy"):
            if "safetensors." + sub in sys.modules and sys.modules["safetensors." + sub] is _state["modules"][
                    "safetensors." + sub]:
                setattr(mod, sub, _state["modules"]["safetensors." + sub])
        return
    source = importlib.import_module("ringsafe." + name.split(".", 1)[1])
    _fill(mod, source, [n for n in vars(source) if not n.startswith("__")], _state["classes"])
    setattr(_state["modules"]["safetensors"], name.rsplit(".", 1)[1], mod)


class _Loader(importlib.abc.Loader):
    def create_module(self, spec):
        assert _state is not None  # the finder hands out specs while installed
        return _state["modules"][spec.name]

    def exec_module(self, module):
        _populate(module.__name__)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname in _ALIASED and _state is not None:
            # The module's own spec: a reload keeps its __path__, __file__ and origin.
            return _state["modules"][fullname].__spec__
        return None


def _replacements(old_modules):
    """{id(reference object): (reference object, the switch's object)} for every
    name the loaded reference modules share with the switch's."""
    assert _state is not None  # called by install()
    out = {}
    for name, old in old_modules.items():
        new = _state["modules"][name]
        for attr, value in vars(old).items():
            if attr.startswith("__") or isinstance(value, types.ModuleType) or not hasattr(new, attr):
                continue
            if callable(value):
                out[id(value)] = (value, getattr(new, attr))
    return out


def _user_modules(exclude):
    for mod in list(sys.modules.values()):
        d = getattr(mod, "__dict__", None)
        if not isinstance(d, dict) or getattr(mod, "__name__", "").startswith("ringsafe") or mod in exclude:
            continue
        yield d


def _rebind(replacements, undo):
    """Rebinds module globals that hold a reference object to the switch's."""
    assert _state is not None  # called by install()
    for d in _user_modules(list(_state["modules"].values())):
        for attr, value in list(d.items()):
            hit = replacements.get(id(value))
            if hit is not None and hit[0] is value:
                d[attr] = hit[1]
                undo.append((d, attr, value))


def install() -> None:
    """Makes every ``import safetensors`` (and .torch, .numpy) in this process
    resolve to ringsafe, including modules that imported them already, and
    sets RINGSAFE_AS_SAFETENSORS=1 for processes started from here on. Idempotent."""
    global _state
    with _lock:
        if _state is not None:
            return
        old_modules = {n: sys.modules[n] for n in _ALIASED if n in sys.modules}
        modules, classes = _build()
        _state = {"finder": _Finder(), "old_modules": old_modules, "undo": [], "modules": modules,
                  "classes": classes}
        for name in _ALIASED:  # the others when first imported (ringsafe.torch imports torch)
            if name == "safetensors" or name in old_modules:
                _populate(name)
        sys.meta_path.insert(0, _state["finder"])
        replacements = _replacements(old_modules)
        # The reference's module objects (held by modules that did `import safetensors`).
        for name, old in old_modules.items():
            for attr, value in list(vars(old).items()):
                hit = replacements.get(id(value))
                if hit is not None and hit[0] is value:
                    setattr(old, attr, hit[1])
                    _state["undo"].append((old.__dict__, attr, value))
        for name in _ALIASED:
            if name == "safetensors" or name in old_modules:
                sys.modules[name] = modules[name]
        _rebind(replacements, _state["undo"])
        os.environ[ENV] = "1"


def _handed_out(state):
    """{id(object): (object, module name, attribute)} of everything the switch handed out."""
    out = {}
    for name, mod in state["modules"].items():
        out[id(mod)] = (mod, name, None)
        for attr, value in vars(mod).items():
            if attr.startswith("__"):
                continue
            if getattr(value, "__ringsafe_switch__", None) == name or any(value is c for c in state["classes"].values()):
                out.setdefault(id(value), (value, name, attr))
    return out


def _reference(name, attr, cache):
    """The reference's module ``name`` (imported now if it was not), or its
    attribute ``attr``; None when the reference cannot be imported."""
    if name not in cache:
        try:
            cache[name] = importlib.import_module(name)
        except Exception:
            cache[name] = None
    mod = cache[name]
    if mod is None or getattr(mod, "__ringsafe__", False):
        return None
    return mod if attr is None else getattr(mod, attr, None)


def uninstall() -> None:
    """Undoes install(): the import hook, sys.modules, every rebound name, every
    name bound to what ``import safetensors...`` gave while installed, and
    RINGSAFE_AS_SAFETENSORS."""
    global _state
    with _lock:
        if _state is None:
            return
        state, _state = _state, None
        if state["finder"] in sys.meta_path:
            sys.meta_path.remove(state["finder"])
        for d, attr, value in reversed(state["undo"]):
            d[attr] = value
        for name in _ALIASED:
            if name in state["old_modules"]:
                sys.modules[name] = state["old_modules"][name]
            elif sys.modules.get(name) is state["modules"][name]:
                del sys.modules[name]
        os.environ.pop(ENV, None)
        # Names bound while installed (`from safetensors.torch import load_file`,
        # `import safetensors.torch as st`): the reference's objects instead.
        handed = _handed_out(state)
        cache = dict(state["old_modules"])
        for d in _user_modules(list(state["modules"].values())):
            for attr, value in list(d.items()):
                hit = handed.get(id(value))
                if hit is None or hit[0] is not value:
                    continue
                ref = _reference(hit[1], hit[2], cache)
                if ref is not None:
                    d[attr] = ref


def installed() -> bool:
    """Whether install() is in effect."""
    return _state is not None


def _install_from_environment():
    """Called at start-up by the ringsafe-safetensors.pth file."""
    if os.environ.get(ENV, "").strip().lower() not in ("", "0", "false", "no"):
        install()
