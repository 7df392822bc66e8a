"""PsychoAlign: negotiated AI alignment and STAR sociotechnical red teaming."""

from typing import TYPE_CHECKING

from .errors import PsychoAlignError
from .lazy import lazy_exports

if TYPE_CHECKING:
    from .config import Settings, load_settings


# The configuration pulls in pydantic and the model layer: loaded on first use, so that
# `psychoalign --help` and every `import psychoalign.<module>` stay light.
__getattr__ = lazy_exports(__name__, {"Settings": ".config", "load_settings": ".config"})


__all__ = ["PsychoAlignError", "Settings", "load_settings"]
__version__ = "0.1.0"
