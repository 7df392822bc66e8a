"""`psychoalign data`: list, verify, fetch (from a loopback mirror only), as a user runs them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from psychoalign.datasets import catalogue
from tests.cli.test_main import cli
from tests.conftest import SHARED_DATA
from tests.loopback import mirror


def test_list_names_every_dataset_and_where_it_looked(tmp_path: Path) -> None:
    out = cli("data", "list", "--json", env={"PSYCHOALIGN_DATA_DIR": str(tmp_path / "none")})
    assert out.returncode == 0, out.stderr
    body = json.loads(out.stdout)
    assert body["data_dir"]["path"] == str(tmp_path / "none")
    assert body["data_dir"]["origin"] == "PSYCHOALIGN_DATA_DIR"
    assert body["data_dir"]["exists"] is False
    assert [d["name"] for d in body["datasets"]] == [d.name for d in catalogue()]
    assert all(d["present"] == 0 and d["licence"] and d["source"] for d in body["datasets"])


def test_list_as_a_table_parses_back_when_piped(tmp_path: Path) -> None:
    out = cli("data", "list", "--data", str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert f"data directory: {tmp_path} (from --data; exists)" in out.stdout
    assert "looked for, in order: --data:" in out.stdout


def test_verify_without_data_is_one_line_naming_the_folder_and_the_fix(tmp_path: Path) -> None:
    out = cli("data", "verify", "--data", str(tmp_path / "none"))
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1
    assert f"{tmp_path / 'none'} does not exist" in out.stderr
    assert "psychoalign data fetch" in out.stderr


def test_path_prints_the_directory_for_scripts(tmp_path: Path) -> None:
    out = cli("data", "path", env={"PSYCHOALIGN_DATA_DIR": str(tmp_path)})
    assert (out.returncode, out.stdout) == (0, f"{tmp_path}\n")
    missing = cli("data", "path", "--data", str(tmp_path / "none"))
    assert (missing.returncode, missing.stdout) == (2, "")


def test_verify_of_an_empty_folder_lists_the_missing_files(tmp_path: Path) -> None:
    out = cli("data", "verify", "xstest", "--data", str(tmp_path), "--json")
    assert out.returncode == 1
    body = json.loads(out.stdout)
    assert body["ok"] is False
    assert {f["status"] for f in body["files"]} == {"missing"}
    assert {f["dataset"] for f in body["files"]} == {"xstest"}


def test_fetch_needs_a_known_name() -> None:
    out = cli("data", "fetch", "nope", "--from", "http://127.0.0.1:9")
    assert out.returncode == 2
    assert "unknown dataset 'nope'" in out.stderr


@pytest.mark.needs_data("xstest", "mt_bench", "hhh_alignment")
def test_fetch_from_a_loopback_mirror_then_the_suites_read_it(tmp_path: Path) -> None:
    """The shared data served as a mirror: fetch into an empty data directory, verify, and a
    benchmark loads from it."""
    dest = tmp_path / "fetched"
    with mirror(SHARED_DATA) as url:
        out = cli("data", "fetch", "xstest", "mt_bench", "hhh_alignment", "--from", url, "--data", str(dest))
    assert out.returncode == 0, out.stderr
    assert "fetching xstest/xstest_prompts.csv" in out.stderr
    out = cli("data", "verify", "xstest", "mt_bench", "hhh_alignment", "--data", str(dest))
    assert out.returncode == 0, out.stdout
    from psychoalign.experiments.suites.benchmarks.xstest import XSTest

    assert len(XSTest().load(dest)) == 450


def test_fetch_errors_never_show_the_credentials_of_the_from_url(tmp_path: Path) -> None:
    """A mirror URL with a user:password and a token in its query: the one error line names the
    URL with both redacted, for a server that is not there and for a URL that is not valid."""
    from tests.loopback import free_port

    secret = "s3cr3tPW"
    for base in (
        f"http://me:{secret}@127.0.0.1:{free_port()}/data?access_token={secret}",
        f"http://me:{secret}@host:notaport/data?api_key={secret}",
    ):
        out = cli("data", "fetch", "xstest", "--from", base, "--data", str(tmp_path))
        assert out.returncode == 2, out.stderr
        errors = [line for line in out.stderr.splitlines() if line.startswith("error: ")]
        assert len(errors) == 1 and errors[0].startswith("error: cannot download http://[redacted]@"), out.stderr
        assert secret not in out.stderr + out.stdout, out.stderr
