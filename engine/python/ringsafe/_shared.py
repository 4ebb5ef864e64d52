"""Tensors that share memory, judged as the reference judges them: tensors
are grouped by (device, storage address, storage size), and within a group
only tensors whose bytes overlap stay together, so disjoint views of one
storage save like separate tensors. The names are the reference's
(safetensors.torch re-exports them), because ecosystem code imports them."""

from collections import defaultdict

import torch

_META = torch.device("meta")


def storage_ptr(tensor: torch.Tensor) -> int:
    """Address of the storage behind ``tensor`` (0 for meta tensors)."""
    try:
        return tensor.untyped_storage().data_ptr()
    except (NotImplementedError, RuntimeError):
        return 0


def storage_size(tensor: torch.Tensor) -> int:
    """Bytes of the storage behind ``tensor`` (its own size for meta tensors)."""
    try:
        return tensor.untyped_storage().nbytes()
    except (NotImplementedError, RuntimeError):
        return tensor.nelement() * tensor.element_size()


def _end_ptr(tensor):
    """One past the address of the last element of ``tensor`` (its start when empty)."""
    if not tensor.nelement():
        return tensor.data_ptr()
    return tensor.view(-1)[-1].data_ptr() + tensor.element_size()


def _is_complete(tensor):
    """Whether ``tensor`` covers its whole storage, from its first byte."""
    return (tensor.data_ptr() == storage_ptr(tensor)
            and tensor.nelement() * tensor.element_size() == storage_size(tensor))


def _filter_shared_not_shared(tensors, state_dict):
    """Splits each group of names into runs whose byte ranges overlap."""
    out = []
    for group in tensors:
        if len(group) < 2:
            out.append(group)
            continue
        spans = sorted((state_dict[n].data_ptr(), _end_ptr(state_dict[n]), n) for n in group)
        last_stop = None
        for start, stop, name in spans:
            if last_stop is None or start >= last_stop:
                out.append({name})
            else:
                out[-1].add(name)
            last_stop = stop
    return out


def _find_shared_tensors(state_dict):
    """Sets of names whose tensors' bytes overlap (singletons for the others),
    in state-dict order of each storage's first name, as the reference lists
    them (its sort of disjoint sets keeps that order)."""
    by_storage = defaultdict(set)
    for name, t in state_dict.items():
        if t.device == _META:
            continue
        ptr, size = storage_ptr(t), storage_size(t)
        if ptr != 0 and size != 0:
            by_storage[(t.device, ptr, size)].add(name)
    return _filter_shared_not_shared(list(by_storage.values()), state_dict)


def _remove_duplicate_names(state_dict, *, preferred_names=None, discard_names=None):
    """{kept name: [names to drop]} for each group of overlapping tensors: the
    kept one covers its whole storage, chosen first from ``preferred_names``,
    then from names not in ``discard_names``, then by sort order."""
    preferred_names = set(preferred_names or ())
    discard_names = set(discard_names or ())
    drops = defaultdict(list)
    for group in _find_shared_tensors(state_dict):
        complete = {n for n in group if _is_complete(state_dict[n])}
        if not complete:  # the reference's text, to the character
            raise RuntimeError(
                "Error while trying to find names to remove to save state dict, but found no suitable name to keep"
                f" for saving amongst: {group}. None is covering the entire storage.Refusing to save/load the model"
                " since you could be storing much more memory than needed. Please refer to"
                " https://huggingface.co/docs/safetensors/torch_shared_tensors for more information. Or open an"
                " issue.")
        keep = min(complete)
        if complete - discard_names:
            keep = min(complete - discard_names)
        if preferred_names & complete:
            keep = min(preferred_names & complete)
        for name in sorted(group):
            if name != keep:
                drops[keep].append(name)
    return drops


def shared_groups(tensors):
    """The groups of two or more names whose tensors' bytes overlap."""
    return [g for g in _find_shared_tensors(tensors) if len(g) > 1]
