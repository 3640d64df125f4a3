"""What every loaded model (static, gear or dynamic) shares: its use as a context manager."""
from __future__ import annotations


class LoadedModel:
    """``with aircc.load(path) as model: ...`` closes the model (frees its device memory and
    destroys its streams) when the block ends, also on an error."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
