"""ringsafe in place of the reference ``safetensors`` package, for code you do
not own (transformers, diffusers, accelerate, the Hub client, scripts).

install() makes ``import safetensors``, ``safetensors.torch`` and
``safetensors.numpy`` resolve to ringsafe from then on (an import hook), and
reaches code that imported them before: the reference's module objects get
ringsafe's functions, and names bound with ``from safetensors... import x``
in loaded modules are rebound. uninstall() undoes all of it.
RINGSAFE_AS_SAFETENSORS=1 in the environment installs it at interpreter
start-up (a .pth file installed with the package), no code change at all.

What stays on the reference: its other framework modules (safetensors.flax,
.tensorflow, .mlx, .paddle) are the reference's code, which then calls
ringsafe's numpy API; and its distribution metadata (keep it installed:
transformers checks that a package named safetensors is installed)."""

import importlib.abc
import importlib.machinery
import importlib.util
import sys
import threading
import types

# The reference version whose API ringsafe provides (safetensors.__version__ under the switch).
API_VERSION = "0.8.0"
_TOP = ("safe_open", "SafetensorError", "TensorSpec", "serialize", "serialize_file", "deserialize",
        "_safe_open_handle")
_ALIASED = ("safetensors", "safetensors.torch", "safetensors.numpy")

_lock = threading.RLock()
_state = None  # while installed: what uninstall() restores


def _reference_path():
    """The reference package's directory (its other submodules load from it), or []."""
    for finder in sys.meta_path:
        if isinstance(finder, _Finder):
            continue
        try:
            spec = finder.find_spec("safetensors", None)
        except Exception:
            continue
        if spec is not None and spec.submodule_search_locations:
            return list(spec.submodule_search_locations)
    return []


def _top_module(path):
    import ringsafe
    m = types.ModuleType("safetensors", "ringsafe in place of safetensors (ringsafe.install()).")
    for name in _TOP:
        setattr(m, name, getattr(ringsafe, name))
    m.__version__ = API_VERSION
    m.__path__ = path
    m.__ringsafe__ = True
    m.__spec__ = importlib.machinery.ModuleSpec("safetensors", None, is_package=True)
    m.__spec__.submodule_search_locations = path
    return m


def _target(fullname):
    """The module that stands for ``fullname`` (one of _ALIASED)."""
    if fullname == "safetensors":
        return _state["top"]
    return importlib.import_module("ringsafe." + fullname.split(".", 1)[1])


class _Loader(importlib.abc.Loader):
    def create_module(self, spec):
        return _target(spec.name)

    def exec_module(self, module):
        if module.__name__ != "safetensors":  # ringsafe.torch / .numpy: bind them on the package
            setattr(_state["top"], module.__name__.rsplit(".", 1)[1], module)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname in _ALIASED:
            return importlib.machinery.ModuleSpec(fullname, _Loader(), is_package=fullname == "safetensors")
        return None


def _replacements(old_modules):
    """{id(reference object): (reference object, ringsafe object)} for every
    name the loaded reference modules share with ringsafe's."""
    out = {}
    for name, old in old_modules.items():
        new = _state["top"] if name == "safetensors" else _target(name)
        for attr, value in vars(old).items():
            if attr.startswith("__") or isinstance(value, types.ModuleType) or not hasattr(new, attr):
                continue
            if callable(value):
                out[id(value)] = (value, getattr(new, attr))
    return out


def _rebind(replacements, undo):
    """Rebinds module globals that hold a reference object to ringsafe's."""
    for mod in list(sys.modules.values()):
        d = getattr(mod, "__dict__", None)
        if not isinstance(d, dict) or getattr(mod, "__name__", "").startswith("ringsafe") or mod is _state["top"]:
            continue
        for attr, value in list(d.items()):
            hit = replacements.get(id(value))
            if hit is not None and hit[0] is value:
                d[attr] = hit[1]
                undo.append((d, attr, value))


def install():
    """Makes every ``import safetensors`` (and .torch, .numpy) in this process
    resolve to ringsafe, including modules that imported them already. Idempotent."""
    global _state
    with _lock:
        if _state is not None:
            return
        old_modules = {n: sys.modules[n] for n in _ALIASED if n in sys.modules}
        path = _reference_path()
        _state = {"finder": _Finder(), "old_modules": old_modules, "undo": []}
        _state["top"] = _top_module(path)
        sys.meta_path.insert(0, _state["finder"])
        replacements = _replacements(old_modules)
        # The reference's module objects (held by modules that did `import safetensors`).
        for name, old in old_modules.items():
            new = _state["top"] if name == "safetensors" else _target(name)
            for attr, value in list(vars(old).items()):
                hit = replacements.get(id(value))
                if hit is not None and hit[0] is value:
                    setattr(old, attr, hit[1])
                    _state["undo"].append((old.__dict__, attr, value))
            sys.modules[name] = new
            if name != "safetensors":
                setattr(_state["top"], name.rsplit(".", 1)[1], new)
        sys.modules["safetensors"] = _state["top"]
        _rebind(replacements, _state["undo"])


def uninstall():
    """Undoes install(): the import hook, sys.modules and every rebound name."""
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
            else:
                sys.modules.pop(name, None)


def installed():
    """Whether install() is in effect."""
    return _state is not None


def _install_from_environment():
    """Called at start-up by the ringsafe-safetensors.pth file."""
    import os
    if os.environ.get("RINGSAFE_AS_SAFETENSORS", "").strip().lower() not in ("", "0", "false", "no"):
        install()
