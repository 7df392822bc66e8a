"""`psychoalign serve` flags checked before anything listens (subprocess, as a user runs it)."""

from __future__ import annotations

from pathlib import Path

from tests.cli.test_main import cli


def test_an_unknown_log_level_is_one_line_naming_the_levels(tmp_path: Path) -> None:
    """`--log-level loud` was 'internal error (ValueError)'."""
    config = tmp_path / "p.toml"
    config.write_text(f'home = "{tmp_path / "home"}"\n')
    out = cli("serve", "--log-level", "loud", "--port", "0", "--config", str(config))
    assert out.returncode == 2, out.stderr
    lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "--log-level" in lines[0] and "debug, info, warning, error" in lines[0], out.stderr


def test_serve_key_prints_a_table_that_pastes_into_the_config() -> None:
    """`serve-key -d "my clinic"` printed `[deployments.my clinic]`, which is not TOML."""
    import tomllib

    for name in ("clinic", "my clinic", "kliniká"):
        out = cli("serve-key", "--deployment", name)
        assert out.returncode == 0, out.stderr
        table = out.stdout.split("add to psychoalign.toml:\n", 1)[1]
        parsed = tomllib.loads(table)
        assert list(parsed["deployments"]) == [name], table
        assert len(parsed["deployments"][name]["api_keys"][0]) == 64
