"""PsychoAlign: negotiated AI alignment and STAR sociotechnical red teaming."""

from typing import TYPE_CHECKING

from .errors import PsychoAlignError

if TYPE_CHECKING:
    from .config import Settings, load_settings


def __getattr__(name: str) -> object:
    # The configuration pulls in pydantic and the model layer: loaded on first use, so that
    # `psychoalign --help` and every `import psychoalign.<module>` stay light.
    if name in ("Settings", "load_settings"):
        from . import config

        return getattr(config, name)
    raise AttributeError(f"module 'psychoalign' has no attribute '{name}'")


__all__ = ["PsychoAlignError", "Settings", "load_settings"]
__version__ = "0.1.0"
