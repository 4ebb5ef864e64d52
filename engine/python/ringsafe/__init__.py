"""ringsafe: safetensors checkpoints moved as fast as the hardware allows.

The API is the reference ``safetensors`` package's (``safe_open``,
``serialize``/``deserialize``/``TensorSpec``, ``ringsafe.torch`` and
``ringsafe.numpy``), so switching is an import, or no code change at all:
``ringsafe.install()`` (or RINGSAFE_AS_SAFETENSORS=1 in the environment) makes
``import safetensors`` resolve to ringsafe in the whole process. It adds
what the reference lacks: parallel io_uring reads, mapped loads made resident
before they return, http(s)://, s3:// and hf:// sources, sharded ``*.index.json``
checkpoints, ``select=``, in-place ``read_into``, a bounded-memory streaming
iterator, a single-pass ``Writer`` with append, ``convert`` between
safetensors and GGUF (``ringsafe cp``'s pipeline), progress, and the GIL
released during the engine's reads and writes (not while a Python file object
is read through its own read(), nor for bytes parsed by load/deserialize).
"""

from ._convert import ConvertResult, convert
from ._described import TensorRequest
from ._memory import arena_cache_stats, set_arena_cache, trim_arena_cache
from ._open import TensorSlice, _safe_open_handle, safe_open
from ._ringsafe import Arena, Reader, SafetensorError, __version__  # meson.build's version
from ._ringsafe import without_url_secrets
from ._serialize import TensorSpec, deserialize, serialize, serialize_file
from ._switch import install, installed, uninstall
from ._write import Writer

__all__ = ["safe_open", "TensorSlice", "SafetensorError", "TensorSpec", "serialize", "serialize_file",
           "deserialize", "Writer", "Reader", "Arena", "install", "uninstall", "installed", "arena_cache_stats",
           "set_arena_cache", "trim_arena_cache", "without_url_secrets", "convert", "ConvertResult", "TensorRequest",
           "__version__"]
