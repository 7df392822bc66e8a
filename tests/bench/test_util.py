"""The section writer behind `make bench`: each bench rewrites its own block of docs/performance.md
and nothing else."""

from __future__ import annotations

from pathlib import Path

from bench._util import Target, publish, write_section

INTRO = "# Performance\n\nIntro paragraph, kept as it is.  \n"
OTHER = "<!-- bench:other start -->\n## Other\n\nfigures of another bench\n<!-- bench:other end -->\n"


def test_replaces_only_its_own_block(tmp_path: Path) -> None:
    doc = tmp_path / "performance.md"
    mine_old = "<!-- bench:mine start -->\nold figures\nmore old lines\n<!-- bench:mine end -->\n"
    tail = "\nA closing paragraph without a trailing newline"
    doc.write_text(INTRO + "\n" + mine_old + "\n" + OTHER + tail, encoding="utf-8")

    write_section("mine", "new figures", doc)

    expected = INTRO + "\n" + "<!-- bench:mine start -->\nnew figures\n<!-- bench:mine end -->\n" + "\n" + OTHER + tail
    assert doc.read_text(encoding="utf-8") == expected
    write_section("mine", "new figures", doc)  # idempotent
    assert doc.read_text(encoding="utf-8") == expected


def test_appends_the_block_when_missing_and_keeps_the_rest_byte_identical(tmp_path: Path) -> None:
    doc = tmp_path / "performance.md"
    before = INTRO + "\n" + OTHER
    doc.write_text(before, encoding="utf-8")

    write_section("mine", "figures\n", doc)

    after = doc.read_text(encoding="utf-8")
    assert after.startswith(before)
    assert after[len(before) :] == "\n<!-- bench:mine start -->\nfigures\n<!-- bench:mine end -->\n"


def test_creates_the_file_and_leaves_a_block_with_a_similar_name_alone(tmp_path: Path) -> None:
    doc = tmp_path / "new.md"
    write_section("web", "web figures", doc)
    write_section("web-load", "load figures", doc)
    write_section("web", "web figures again", doc)
    assert doc.read_text(encoding="utf-8") == (
        "<!-- bench:web start -->\nweb figures again\n<!-- bench:web end -->\n"
        "\n<!-- bench:web-load start -->\nload figures\n<!-- bench:web-load end -->\n"
    )


def test_publish_names_command_mode_machine_figures_and_targets(tmp_path: Path) -> None:
    doc = tmp_path / "performance.md"
    doc.write_text(INTRO, encoding="utf-8")
    publish(
        "demo",
        "Demo bench",
        "  per call   1.00 ms\n",
        [Target("per call", "1.00 ms", "< 2 ms", True), Target("throughput", "10/s", ">= 20/s", False)],
        quick=True,
        path=doc,
    )
    text = doc.read_text(encoding="utf-8")
    assert text.startswith(INTRO)
    block = text[len(INTRO) :]
    assert "## Demo bench" in block
    assert "(quick mode)" in block
    assert "Command: `python bench/" in block
    assert "Machine: " in block and "Python " in block
    assert "  per call   1.00 ms" in block
    assert "| per call | 1.00 ms | < 2 ms | met |" in block
    assert "| throughput | 10/s | >= 20/s | **missed** |" in block
    for private in ("/work/", "/tmp/", "/root/", "/home/"):
        assert private not in block
