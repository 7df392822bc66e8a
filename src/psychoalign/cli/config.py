"""`psychoalign config …`: the effective configuration."""

from __future__ import annotations

from pathlib import Path

import typer

from .common import ConfigOpt, JsonOpt, emit_json, emit_yaml, settings_from

config_app = typer.Typer(help="Inspect the effective configuration.", no_args_is_help=True)


@config_app.command("show")
def config_show(config: Path | None = ConfigOpt, json_out: bool = JsonOpt) -> None:
    """Print the effective configuration (file + environment + flags), secrets masked.

    Validates it as the commands would: a bad [negotiation] table (or a deployment's override)
    is an error here too, not only when a negotiation starts."""
    from ..negotiation.params import negotiation_source, parse_params

    settings = settings_from(config)
    parse_params(settings.negotiation, where=negotiation_source(settings))
    for name in settings.deployments:
        profile = settings.for_deployment(name)
        parse_params(profile.negotiation, where=negotiation_source(settings, name))
    settings.check_deployments()
    data = settings.masked()
    if json_out:
        emit_json(data)
        return
    emit_yaml(data)
