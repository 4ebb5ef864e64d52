"""ringsafe: safetensors checkpoints moved as fast as the hardware allows.

The API matches the reference ``safetensors`` package (``safe_open``,
``ringsafe.torch.load_file`` / ``save_file`` / ``load_model``, ...), so
switching is an import, and adds what it lacks: parallel io_uring reads into
caller memory, http(s):// and s3:// sources, sharded ``*.index.json``
checkpoints, ``select=``, in-place ``read_into``, a bounded-memory streaming
iterator, a single-pass ``Writer`` with append, progress, and the GIL released
during every read and write.
"""

from ._open import TensorSlice, safe_open
from ._ringsafe import Arena, Reader, SafetensorError
from ._write import Writer

__version__ = "0.1.0"

__all__ = ["safe_open", "TensorSlice", "SafetensorError", "Writer", "Reader", "Arena", "__version__"]
