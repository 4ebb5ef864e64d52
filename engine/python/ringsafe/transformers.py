"""A transformers model from the Hub in one call, with no disk copy:

    import torch
    import ringsafe.transformers
    model = ringsafe.transformers.from_pretrained("hf://ORG/NAME", dtype=torch.bfloat16)

config.json (and generation_config.json) come through the same resolver as
the weights: the Hub's cache first, else the Hub, the commit of the first
answer pinned for every file that follows. The weights are streamed with
ringsafe's parallel Range requests straight into memory that becomes the
parameters: transformers builds the model on the meta device and takes the
state dict as it is (no copy when the dtype matches), renaming keys, tying
weights and initialising non-persistent buffers as its own from_pretrained
does, so the state dict is the one transformers' from_pretrained gives.

``from_pretrained(source, gguf_file=NAME)`` builds the model from a GGUF file
instead, through transformers' own GGUF loading code over ringsafe's reads
(_transformers_gguf).
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

from . import _ringsafe
from . import torch as _rt
from ._errors import SafetensorError

if TYPE_CHECKING:
    from transformers import PreTrainedModel

    from ._typing import Progress

__all__ = ["from_pretrained"]

# Keyword options that go to the engine (Reader options); the others go to
# transformers' from_pretrained (device_map, attn_implementation, ...).
READER_OPTIONS = {
    "threads", "queue_depth", "direct", "file_chunk", "connections", "http_threads", "http_chunk", "token",
    "headers", "cross_origin_headers", "allow_https_downgrade", "ca_file", "verify_tls", "max_attempts",
    "max_total_attempts", "low_speed_limit", "low_speed_time", "s3_endpoint", "s3_region", "endpoint_url",
    "anonymous", "gcs_credentials", "azure_account", "azure_key", "azure_sas_token", "azure_connection_string",
    "max_header_size", "parallel_shards", "split_set", "cache", "cache_dir", "local_files_only", "verify",
}
INDEX, SINGLE = "model.safetensors.index.json", "model.safetensors"


def _missing(e: BaseException) -> bool:
    """Whether a fetch failed because the file is not there (not a network or auth failure)."""
    if isinstance(e, FileNotFoundError):
        return True
    return isinstance(e, SafetensorError) and "HTTP 404" in str(e) and "RepoNotFound" not in str(e) \
        and "RevisionNotFound" not in str(e)


def _fetch(base: str, name: str, options: dict[str, Any], optional: bool = False) -> _ringsafe.FetchedFile | None:
    """The FetchedFile of ``base/name`` (its bytes and pinned name); None when optional and not there."""
    spec = os.path.join(base, name) if not _ringsafe.is_url(base) else base.rstrip("/") + "/" + name
    try:
        return _ringsafe.fetch_file(spec, **options)
    except (SafetensorError, OSError) as e:
        if optional and _missing(e):
            return None
        raise


def _repo_root(spec: str) -> bool:
    """Whether ``spec`` is an hf:// repo without a path (the engine then picks its checkpoint)."""
    if not spec.lower().startswith("hf://"):
        return False
    body = spec[len("hf://"):].strip("/")
    for prefix in ("models/", "datasets/", "spaces/", "kernels/"):
        if body.startswith(prefix):
            body = body[len(prefix):]
    return body.count("/") == 1


def _checkpoint(source: str, base: str, options: dict[str, Any]) -> str:
    """The checkpoint under ``base``: its index if there is one, else its single file."""
    if _repo_root(base):
        return base  # the engine's rule, the same, in one request
    for name in (INDEX, SINGLE):
        if not _ringsafe.is_url(base):
            if os.path.exists(os.path.join(base, name)):
                return os.path.join(base, name)
            continue
        if name == SINGLE or _fetch(base, name, options, optional=True) is not None:
            return base.rstrip("/") + "/" + name
    raise FileNotFoundError(_ringsafe.without_url_secrets(f"{source}: neither {INDEX} nor {SINGLE}"))


def _model_class(config, model_class):
    import transformers
    if model_class is not None:
        mapping = getattr(model_class, "_model_mapping", None)
        return mapping[type(config)] if mapping is not None else model_class  # an Auto class: its class for config
    for name in config.architectures or []:
        cls = getattr(transformers, name, None)
        if cls is not None:
            return cls
    return transformers.AutoModel._model_mapping[type(config)]


def from_pretrained(source: str | os.PathLike[str], model_class: type[Any] | None = None, *, progress: Progress = None,
                    **kwargs: Any) -> PreTrainedModel:
    """The model stored at ``source`` with its weights loaded, as
    ``model_class.from_pretrained`` would give it.

    ``source``: ``hf://[datasets/|spaces/]ORG/NAME[@REVISION]`` (the repo's
    checkpoint: its model.safetensors.index.json, else model.safetensors), or
    with a path, a folder of the repo holding config.json and the
    checkpoint; an http(s):// or s3:// folder URL; or a local directory.
    ``gguf_file``: the name of a GGUF file under ``source`` (or any part of a
    split set) to build the model from instead, as transformers'
    ``from_pretrained(..., gguf_file=)`` does (its config mapping, tensor-name
    mapping and per-architecture processors), every tensor read and
    dequantized by ringsafe.
    ``model_class``: a transformers model class or Auto class (default: the
    config's ``architectures``, else AutoModel). ``progress``: as
    ringsafe.torch.load_file's. Keyword options of the engine go to it
    (``cache=True`` writes what is read into the Hub cache, ``token``,
    ``local_files_only``, ``endpoint_url``, ``connections``, ...); every other
    keyword (``dtype``, ``device_map``, ``attn_implementation``, ...) goes to
    transformers' ``from_pretrained``. Raises what the engine raises for the
    files (SafetensorError naming the URL, FileNotFoundError offline), and
    ValueError for a config.json of a model type transformers does not know
    (remote code is never run)."""
    from transformers import GenerationConfig
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    source = os.fspath(source)
    options = {k: kwargs.pop(k) for k in list(kwargs) if k in READER_OPTIONS}
    gguf_file = kwargs.pop("gguf_file", None)
    if gguf_file is not None:
        from . import _transformers_gguf
        spec = source.rstrip("/") + "/" + gguf_file if _ringsafe.is_url(source) else os.path.join(source, gguf_file)
        model = _transformers_gguf.from_pretrained(spec, model_class, _model_class, options, kwargs)
        model.config.name_or_path = source
        model.name_or_path = source
        return model
    fetched = _fetch(source, "config.json", options)
    assert fetched is not None  # not optional: a missing one raised
    config_bytes, config_name = fetched.data, fetched.name
    # Every later file at the commit config.json came from (hf://ORG/NAME@COMMIT).
    base = config_name[: -len("/config.json")] if config_name.endswith("/config.json") else source
    config_dict = json.loads(config_bytes)
    model_type = config_dict.get("model_type")
    if model_type not in CONFIG_MAPPING:
        raise ValueError(_ringsafe.without_url_secrets(f"{config_name}: model_type {model_type!r} is not one "
                                                       f"transformers knows (ringsafe.transformers never runs a "
                                                       f"repo's own code)"))
    config = CONFIG_MAPPING[model_type].from_dict(config_dict)
    cls = _model_class(config, model_class)

    state_dict = _rt.load_file(_checkpoint(source, base, options), progress=progress, **options)
    model = cls.from_pretrained(None, config=config, state_dict=state_dict, **kwargs)
    del state_dict
    generation = _fetch(base, "generation_config.json", options, optional=True) if model.can_generate() else None
    if generation is not None:
        model.generation_config = GenerationConfig.from_dict(json.loads(generation.data))
    model.config.name_or_path = source
    model.name_or_path = source
    return model
