"""The public evaluation data: which datasets there are, where the data directory is, whether its
files are intact, and fetching them from a mirror.

The catalogue (``data/datasets.yaml``, shipped in the package) names every dataset folder the
suites, calibrations and corpora read, with each file's sha256 and size.

The data directory resolves, first match wins:

1. the command's ``--data`` flag;
2. ``$PSYCHOALIGN_DATA_DIR``;
3. ``experiments.data_dir`` in the configuration;
4. ``../shared/data`` beside the source checkout (when running from one and it exists);
5. the user data directory: ``$XDG_DATA_HOME/psychoalign/data`` (default ``~/.local/share``),
   where ``psychoalign data fetch`` puts the files.

The first three are explicit: they are used even when the folder is missing, so an error names
the folder the user chose rather than silently reading another.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field

from .errors import ConfigError, InputError, redact_url
from .yamlio import load_yaml_model

__all__ = [  # the names other packages (cli, experiments, models) import
    "DATA_HINT",
    "DataDir",
    "Dataset",
    "FileCheck",
    "catalogue",
    "dataset",
    "fetch",
    "resolve_data_dir",
    "verify",
]

DATA_ENV = "PSYCHOALIGN_DATA_DIR"
#: The fix named by errors about a missing data file.
DATA_HINT = (
    "get it with `psychoalign data fetch DATASET --from MIRROR` or as the README's Data section says;"
    " `psychoalign data list` shows where the data is looked for, `psychoalign data verify` what is missing"
)
#: The checkout root when running from a source tree (src/psychoalign/datasets.py -> the root).
_CHECKOUT = Path(__file__).resolve().parents[2]


class DataFile(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    bytes: int = Field(ge=0)


class Dataset(BaseModel):
    """One folder of the data directory."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    title: str
    licence: str
    source: str = Field(description="Where the bytes came from (repository@commit and path, or package).")
    used_by: str
    files: dict[str, DataFile]

    @property
    def bytes(self) -> int:
        return sum(f.bytes for f in self.files.values())


class _Catalogue(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    datasets: list[Dataset]


@cache
def catalogue() -> tuple[Dataset, ...]:
    """Every dataset of the shipped catalogue, in its order."""
    text = resources.files("psychoalign").joinpath("data/datasets.yaml").read_text(encoding="utf-8")
    return tuple(load_yaml_model(text, "datasets.yaml", _Catalogue).datasets)


def dataset(name: str) -> Dataset:
    for d in catalogue():
        if d.name == name:
            return d
    known = ", ".join(d.name for d in catalogue())
    raise InputError(f"unknown dataset '{name}'", hint=f"known datasets: {known} (or 'all')")


Origin = Literal["--data", "PSYCHOALIGN_DATA_DIR", "experiments.data_dir", "beside the checkout", "user data dir"]


@dataclass(frozen=True)
class DataDir:
    """The resolved data directory, why it was chosen, and every place looked at in order."""

    path: Path
    origin: Origin
    looked: tuple[tuple[Origin, Path | None], ...]

    @property
    def exists(self) -> bool:
        return self.path.is_dir()

    def require(self) -> Path:
        """The path, or a one-line error naming where it was looked for and how to get the data."""
        if self.exists:
            return self.path
        raise ConfigError(
            f"evaluation data folder {self.path} does not exist (from {self.origin})",
            hint="run `psychoalign data fetch all --from URL`, point PSYCHOALIGN_DATA_DIR at a copy, "
            "or see `psychoalign data list`",
        )


def user_data_dir(environ: Mapping[str, str]) -> Path:
    base = environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "psychoalign" / "data"


def resolve_data_dir(
    flag: str | Path | None = None,
    configured: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> DataDir:
    """The data directory by the precedence of the module doc."""
    environ = os.environ if environ is None else environ
    env = environ.get(DATA_ENV) or None
    beside = _CHECKOUT.parent / "shared" / "data" if (_CHECKOUT / "pyproject.toml").is_file() else None
    candidates: list[tuple[Origin, Path | None, bool]] = [
        ("--data", Path(flag).expanduser() if flag else None, True),
        ("PSYCHOALIGN_DATA_DIR", Path(env).expanduser() if env else None, True),
        ("experiments.data_dir", Path(configured).expanduser() if configured else None, True),
        ("beside the checkout", beside, False),
        ("user data dir", user_data_dir(environ), True),
    ]
    looked = tuple((origin, path) for origin, path, _ in candidates)
    for origin, path, explicit in candidates:
        if path is not None and (explicit or path.is_dir()):
            return DataDir(path, origin, looked)
    raise AssertionError("the user data dir is always a candidate")  # pragma: no cover


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass(frozen=True)
class FileCheck:
    dataset: str
    file: str
    status: Literal["ok", "missing", "changed"]


def verify(data_dir: Path, datasets: list[Dataset] | None = None) -> list[FileCheck]:
    """Each catalogued file of ``datasets`` (default: all) under ``data_dir``: present with its
    sha256, missing, or changed."""
    out = []
    for d in datasets if datasets is not None else catalogue():
        for rel, meta in d.files.items():
            path = data_dir / d.name / rel
            if not path.is_file():
                status: Literal["ok", "missing", "changed"] = "missing"
            else:
                status = "ok" if sha256_file(path) == meta.sha256 else "changed"
            out.append(FileCheck(d.name, rel, status))
    return out


def _file_url(base_url: str, rel: str) -> str:
    """``rel`` under the mirror ``base_url``, any query of the base (a signed link's token) kept
    after the path."""
    try:
        parts = urlsplit(base_url)
    except ValueError:  # its text would not say which part: name the URL, redacted
        raise InputError(
            f"the --from URL {redact_url(base_url)} is not a valid URL", hint="e.g. https://mirror.example/data"
        ) from None
    return urlunsplit(parts._replace(path=f"{parts.path.rstrip('/')}/{rel}"))


async def fetch(
    datasets: list[Dataset],
    dest: Path,
    base_url: str,
    *,
    timeout_s: float = 60.0,
    progress: Callable[[str, str], None] | None = None,
) -> list[FileCheck]:
    """Download each file of ``datasets`` from ``base_url``/<dataset>/<file> into ``dest`` (a
    query on ``base_url``, such as a signed link's token, is kept on every file's URL).

    A file already present with its sha256 is not downloaded again. Each download is written to a
    temporary file and renamed into place only when its sha256 matches the catalogue, so a wrong or
    cut-off download never replaces anything (status ``changed``; the others go on).
    """
    import httpx

    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        # checked before anything is fetched: no "fetching …" line, then a failure on the first file
        raise InputError(
            f"cannot download from {redact_url(base_url)!r}: not an http(s) URL",
            hint="give the mirror's base URL, e.g. --from http://127.0.0.1:8765 (README, Data)",
        )
    out: list[FileCheck] = []
    async with httpx.AsyncClient(timeout=timeout_s, follow_redirects=True) as client:
        for d in datasets:
            for rel, meta in d.files.items():
                target = dest / d.name / rel
                if target.is_file() and sha256_file(target) == meta.sha256:
                    out.append(FileCheck(d.name, rel, "ok"))
                    continue
                if progress is not None:
                    progress(d.name, rel)
                url = _file_url(base_url, f"{d.name}/{rel}")
                # Every message names the URL through redact_url: a mirror's URL may carry a
                # user:password or a signed query (the exception's own text is never shown).
                try:
                    response = await client.get(url)
                except (httpx.HTTPError, httpx.InvalidURL) as exc:
                    why = "invalid URL" if isinstance(exc, httpx.InvalidURL) else type(exc).__name__
                    raise InputError(
                        f"cannot download {redact_url(url)}: {why}", hint="check the --from URL and the network"
                    ) from None
                if response.status_code != 200:
                    raise InputError(
                        f"cannot download {redact_url(url)}: HTTP {response.status_code}",
                        hint="the mirror must serve <dataset>/<file> as `psychoalign data list --json` names them",
                    )
                body = response.content
                if hashlib.sha256(body).hexdigest() != meta.sha256:
                    out.append(FileCheck(d.name, rel, "changed"))
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                partial = target.with_name(target.name + ".partial")
                partial.write_bytes(body)
                os.replace(partial, target)
                out.append(FileCheck(d.name, rel, "ok"))
    return out
