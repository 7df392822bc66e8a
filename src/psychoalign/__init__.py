"""PsychoAlign: negotiated AI alignment and STAR sociotechnical red teaming."""

from .config import Settings, load_settings
from .errors import PsychoAlignError

__all__ = ["PsychoAlignError", "Settings", "load_settings"]
__version__ = "0.1.0"
