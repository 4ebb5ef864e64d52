"""Progress reporting: a callable ``progress(done_bytes, total_bytes)`` runs on
the calling thread while a read or write runs; ``progress=True`` draws a tqdm
bar (tqdm must be installed), its description shown as errors are: a URL's
signing values written "..." (without_url_secrets)."""

from contextlib import contextmanager

from ._ringsafe import without_url_secrets


@contextmanager
def progress_callback(progress, description):
    """Yields the callback to hand to the engine (None when there is none);
    ``description`` names the bar drawn for progress=True."""
    if progress is None or progress is False:
        yield None
        return
    if progress is not True:
        if not callable(progress):
            raise TypeError("progress must be a callable(done, total), True (tqdm) or None")
        yield progress
        return
    try:
        from tqdm import tqdm
    except ImportError as e:
        raise ImportError("progress=True needs tqdm (pip install tqdm)") from e
    bar = tqdm(total=0, unit="B", unit_scale=True, unit_divisor=1024, desc=without_url_secrets(description))
    shown = [0]

    def update(done, total):
        if total and bar.total != total:
            bar.total = total
            bar.refresh()
        if done > shown[0]:
            bar.update(done - shown[0])
            shown[0] = done

    try:
        yield update
    finally:
        bar.close()
