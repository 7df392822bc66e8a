"""The evaluation data: the shipped catalogue, where the data directory resolves, verify, and
fetch from a loopback mirror (never the internet)."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

import pytest

from psychoalign import datasets
from psychoalign.datasets import DataFile, Dataset, catalogue, fetch, resolve_data_dir, verify
from psychoalign.errors import ConfigError, InputError
from tests.conftest import SHARED_DATA
from tests.loopback import mirror


def _synthetic(root: Path) -> Dataset:
    """A two-file dataset written under ``root/toy`` with its catalogue entry."""
    files = {"a.csv": b"x,y\n1,2\n", "sub/b.txt": b"hello\n"}
    for rel, body in files.items():
        (root / "toy" / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / "toy" / rel).write_bytes(body)
    return Dataset(
        name="toy",
        title="Toy",
        licence="MIT",
        source="test",
        used_by="tests",
        files={rel: DataFile(sha256=hashlib.sha256(b).hexdigest(), bytes=len(b)) for rel, b in files.items()},
    )


def test_the_catalogue_names_every_folder_with_licence_source_and_hashes() -> None:
    names = [d.name for d in catalogue()]
    assert len(names) == len(set(names)) == 14
    for d in catalogue():
        assert d.licence and d.source and d.used_by and d.files
        assert d.bytes == sum(f.bytes for f in d.files.values()) > 0


def test_unknown_dataset_names_the_known_ones() -> None:
    with pytest.raises(InputError, match="unknown dataset 'nope'") as info:
        datasets.dataset("nope")
    assert "xstest" in (info.value.hint or "")


def test_resolution_order_flag_env_config_checkout_user(tmp_path: Path) -> None:
    env = {"PSYCHOALIGN_DATA_DIR": str(tmp_path / "env"), "XDG_DATA_HOME": str(tmp_path / "xdg")}
    assert resolve_data_dir(tmp_path / "flag", "cfg", env).origin == "--data"
    assert resolve_data_dir(None, "cfg", env).path == tmp_path / "env"
    found = resolve_data_dir(None, str(tmp_path / "cfg"), {"XDG_DATA_HOME": str(tmp_path / "xdg")})
    assert (found.origin, found.path) == ("experiments.data_dir", tmp_path / "cfg")
    assert [origin for origin, _ in found.looked] == [
        "--data",
        "PSYCHOALIGN_DATA_DIR",
        "experiments.data_dir",
        "beside the checkout",
        "user data dir",
    ]


def test_without_any_setting_the_checkout_neighbour_then_the_user_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {"XDG_DATA_HOME": str(tmp_path / "xdg")}
    checkout = tmp_path / "clone"
    (checkout).mkdir()
    (checkout / "pyproject.toml").write_text("")
    monkeypatch.setattr(datasets, "_CHECKOUT", checkout)
    alone = resolve_data_dir(None, None, env)
    assert (alone.origin, alone.path, alone.exists) == (
        "user data dir",
        tmp_path / "xdg" / "psychoalign" / "data",
        False,
    )
    with pytest.raises(ConfigError, match=r"does not exist \(from user data dir\)") as info:
        alone.require()
    assert "psychoalign data fetch" in (info.value.hint or "")
    (tmp_path / "shared" / "data").mkdir(parents=True)
    beside = resolve_data_dir(None, None, env)
    assert (beside.origin, beside.path) == ("beside the checkout", tmp_path / "shared" / "data")


def test_an_explicit_missing_folder_is_not_replaced_by_another(tmp_path: Path) -> None:
    found = resolve_data_dir(None, str(tmp_path / "typo"), {"XDG_DATA_HOME": str(tmp_path)})
    with pytest.raises(ConfigError, match=r"typo does not exist \(from experiments\.data_dir\)"):
        found.require()


def test_verify_reports_missing_and_changed_files(tmp_path: Path) -> None:
    toy = _synthetic(tmp_path)
    assert {c.status for c in verify(tmp_path, [toy])} == {"ok"}
    (tmp_path / "toy" / "a.csv").write_bytes(b"x,y\n1,3\n")
    (tmp_path / "toy" / "sub" / "b.txt").unlink()
    assert {(c.file, c.status) for c in verify(tmp_path, [toy])} == {("a.csv", "changed"), ("sub/b.txt", "missing")}


def test_fetch_from_a_loopback_mirror_checks_each_hash_and_never_keeps_a_bad_file(tmp_path: Path) -> None:
    toy = _synthetic(tmp_path / "mirror")
    dest = tmp_path / "data"
    with mirror(tmp_path / "mirror") as url:
        first = asyncio.run(fetch([toy], dest, url))
        assert {c.status for c in first} == {"ok"}
        assert verify(dest, [toy]) == first
        # The mirror now serves a tampered file: the intact local copy is kept, not re-downloaded.
        (tmp_path / "mirror" / "toy" / "a.csv").write_bytes(b"evil\n")
        assert {c.status for c in asyncio.run(fetch([toy], dest, url))} == {"ok"}
        # Locally missing and tampered upstream: reported, and nothing written in its place.
        (dest / "toy" / "a.csv").unlink()
        again = asyncio.run(fetch([toy], dest, url))
        assert {(c.file, c.status) for c in again} == {("a.csv", "changed"), ("sub/b.txt", "ok")}
        assert sorted(p.name for p in (dest / "toy").iterdir()) == ["sub"]


def test_fetch_names_the_url_a_mirror_does_not_serve(tmp_path: Path) -> None:
    toy = _synthetic(tmp_path / "elsewhere")
    (tmp_path / "mirror").mkdir()
    with mirror(tmp_path / "mirror") as url, pytest.raises(InputError, match=r"toy/a\.csv: HTTP 404"):
        asyncio.run(fetch([toy], tmp_path / "data", url))


@pytest.mark.needs_data
def test_the_shipped_manifest_matches_the_data() -> None:
    checks = verify(SHARED_DATA)
    assert len(checks) == sum(len(d.files) for d in catalogue())
    assert [c for c in checks if c.status != "ok"] == []


SECRET = "s3cr3tPW"


def _credentialed(url: str) -> str:
    """``url`` with a user:password and signed-link query parameters, each holding SECRET."""
    scheme, rest = url.split("://", 1)
    return f"{scheme}://me:{SECRET}@{rest}/?token={SECRET}&sig={SECRET}&X-Amz-Signature={SECRET}&v=2"


def test_fetch_keeps_the_query_of_a_signed_mirror_url(tmp_path: Path) -> None:
    toy = _synthetic(tmp_path / "mirror")
    with mirror(tmp_path / "mirror") as url:
        got = asyncio.run(fetch([toy], tmp_path / "data", f"{url}/?token=abc"))
    assert {c.status for c in got} == {"ok"}


@pytest.mark.parametrize("failure", ["http 404", "connection refused", "invalid url", "unsupported scheme"])
def test_no_credential_of_the_mirror_url_reaches_a_fetch_error(tmp_path: Path, failure: str) -> None:
    from tests.loopback import free_port

    toy = _synthetic(tmp_path / "elsewhere")
    (tmp_path / "mirror").mkdir()
    with mirror(tmp_path / "mirror") as served:
        base = {
            "http 404": _credentialed(served),
            "connection refused": _credentialed(f"http://127.0.0.1:{free_port()}"),
            "invalid url": _credentialed("http://host:notaport"),
            "unsupported scheme": _credentialed("ftp://host"),
        }[failure]
        with pytest.raises(InputError) as info:
            asyncio.run(fetch([toy], tmp_path / "data", base))
    shown = f"{info.value} {info.value.hint} {info.value.detail}"
    assert SECRET not in shown, shown
    assert "cannot download" in shown and "[redacted]@" in shown and "token=[redacted]" in shown
    assert "v=2" in shown  # a parameter that is no credential stays: the message still names the URL


def test_a_bad_download_from_a_credentialed_mirror_is_reported_without_its_url(tmp_path: Path) -> None:
    toy = _synthetic(tmp_path / "mirror")
    (tmp_path / "mirror" / "toy" / "a.csv").write_bytes(b"tampered\n")
    with mirror(tmp_path / "mirror") as url:
        got = asyncio.run(fetch([toy], tmp_path / "data", _credentialed(url)))
    assert {(c.file, c.status) for c in got} == {("a.csv", "changed"), ("sub/b.txt", "ok")}
    assert SECRET not in repr(got)
