"""PsychoAlign over the A2A protocol (a2a-sdk 1.3, protocol 1.0): role services, transport, system agent."""

import importlib.util
import os
from typing import TYPE_CHECKING


def _otel_sdk_installed() -> bool:
    try:
        return importlib.util.find_spec("opentelemetry.sdk") is not None
    except ModuleNotFoundError:
        return False


# The SDK wraps every request, handler step and event in an OpenTelemetry span as soon as the
# OpenTelemetry *API* is importable (other packages pull it in). Without an OpenTelemetry SDK the
# spans go nowhere, yet cost ~12 % of a role service's CPU (cProfile of bench/a2a.py calls). Keep them when an SDK
# is installed or when the deployment set the SDK's own switch; it is read when `a2a` is imported.
if not _otel_sdk_installed():
    os.environ.setdefault("OTEL_INSTRUMENTATION_A2A_SDK_ENABLED", "false")

from ..lazy import lazy_exports  # noqa: E402
from .remote import remote_transport  # noqa: E402

if TYPE_CHECKING:
    from .server import build_role_app
    from .transport import A2ATransport


# The SDK takes seconds to import: the transport and the role server load on first use, so
# choosing a transport (remote_transport) costs nothing when the agents run in-process.
__getattr__ = lazy_exports(__name__, {"A2ATransport": ".transport", "build_role_app": ".server"})


__all__ = ["A2ATransport", "build_role_app", "remote_transport"]
