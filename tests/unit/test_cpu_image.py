"""containers/triton-cpu/build_image.py's pure parts: the mirror debootstrap uses is the one apt uses (deb822 or
one-line sources), and the image's tag changes with what goes into it."""

from __future__ import annotations

import pytest

from tests.docker.builder import image_builder

builder = image_builder()


def test_the_mirror_is_apts_first_debian_suite_in_deb822(tmp_path) -> None:
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\n# a comment: with a colon\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\n"
        "Components: main\n\nTypes: deb\nURIs: http://mirror.example/debian-security\nSuites: bookworm-security\n"
    )
    assert builder.apt_mirror(tmp_path) == ("http://mirror.example/debian", "bookworm")


def test_the_mirror_is_read_from_a_one_line_sources_list_with_options(tmp_path) -> None:
    (tmp_path / "sources.list").write_text(
        "# deb http://old.example/debian buster main\n"
        "deb-src http://src.example/debian trixie main\n"
        "deb [arch=amd64 signed-by=/usr/share/keyrings/k.gpg] http://mirror.example/debian trixie main\n"
    )
    assert builder.apt_mirror(tmp_path) == ("http://mirror.example/debian", "trixie")


def test_no_debian_source_is_one_line_saying_so(tmp_path) -> None:
    (tmp_path / "sources.list").write_text("deb https://packages.example/apt cloud-sdk main\n")
    with pytest.raises(builder.BuildFailed, match=r"no Debian mirror found in .*sources.list\*"):
        builder.apt_mirror(tmp_path)


def test_the_tag_names_the_wheel_and_changes_with_the_suite() -> None:
    bookworm, trixie = builder.image_tag("bookworm"), builder.image_tag("trixie")
    assert bookworm.startswith(f"recommender-triton-cpu:{builder.versions()['nvidia-pytriton']}-")
    assert bookworm != trixie and builder.image_tag("bookworm") == bookworm
