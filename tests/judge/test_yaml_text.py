"""YAML is read with libyaml's safe loader: the same values as the pure Python one, the
same refusal of anything but plain data, errors that name the line."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from judge.yaml_text import LOADER, load_yaml

ROOT = Path(__file__).resolve().parents[2]


def _shipped_yaml() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "*.yaml", "*.yml"], cwd=ROOT, capture_output=True, text=True
    )
    paths = [ROOT / name for name in listed.stdout.split()]
    return paths or sorted(ROOT.glob("*/*.yaml"))  # not a git checkout: the shipped files


def test_the_wheel_s_libyaml_is_used() -> None:
    assert yaml.__with_libyaml__, "PyYAML without libyaml: the pure Python loader is slower"
    assert LOADER is yaml.CSafeLoader


@pytest.mark.parametrize("path", _shipped_yaml(), ids=lambda p: p.name)
def test_every_shipped_document_reads_as_the_pure_python_safe_loader_reads_it(
    path: Path,
) -> None:
    text = path.read_text(encoding="utf-8")
    assert load_yaml(text) == yaml.safe_load(text)


def test_values_of_every_plain_kind_read_alike() -> None:
    text = (
        "a: 1\nb: 1.5\nc: true\nd: null\ne: 2026-12-05\nf: [x, 'y', \"z\"]\n"
        "g: {h: -3}\ni: |\n  two\n  lines\nj: &k [1]\nl: *k\nm: 0o17\nn: .inf\no: ''\n"
    )
    assert load_yaml(text) == yaml.safe_load(text)
    assert load_yaml("") is None


@pytest.mark.parametrize(
    "text",
    [
        "!!python/object/apply:os.system ['true']",
        "x: !!python/name:os.system",
        "!!python/object:pathlib.Path {}",
    ],
)
def test_anything_but_plain_data_is_refused(text: str) -> None:
    with pytest.raises(yaml.YAMLError):
        load_yaml(text)


def test_an_error_names_its_line_and_column() -> None:
    with pytest.raises(yaml.YAMLError) as raised:
        load_yaml("scenarios:\n  - id: a\n    ground_truth: b: c\n")
    assert "line 3" in str(raised.value) and "column" in str(raised.value)


@pytest.mark.parametrize("loader", [LOADER, yaml.SafeLoader], ids=["libyaml", "pure"])
def test_a_document_nested_past_the_loader_is_a_yaml_error(
    loader: type[yaml.SafeLoader], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("judge.yaml_text.LOADER", loader)
    # libyaml's parser goes far deeper than Python before it fails; the pure one does not
    for depth in (1_200, 50_000) if loader is LOADER else (1_200,):
        with pytest.raises(yaml.YAMLError, match="nest"):
            load_yaml("[" * depth + "]" * depth)
