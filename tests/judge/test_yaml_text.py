"""YAML is read with libyaml's safe loader: the same values as the pure Python one, the
same refusal of anything but plain data, errors that name the line, and a key given
twice in one mapping refused."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from judge.inputs import RepeatedKey
from judge.yaml_text import LOADER, RepeatedYamlKey, _PureLoader, load_yaml

ROOT = Path(__file__).resolve().parents[2]


def _shipped_yaml() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "*.yaml", "*.yml"], cwd=ROOT, capture_output=True, text=True
    )
    paths = [ROOT / name for name in listed.stdout.split()]
    return paths or sorted(ROOT.glob("*/*.yaml"))  # not a git checkout: the shipped files


def test_the_wheel_s_libyaml_is_used() -> None:
    assert yaml.__with_libyaml__, "PyYAML without libyaml: the pure Python loader is slower"
    assert issubclass(LOADER, yaml.CSafeLoader)


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


@pytest.mark.parametrize("loader", [LOADER, _PureLoader], ids=["libyaml", "pure"])
def test_a_key_given_twice_is_refused_naming_its_place_and_line(
    loader: type[yaml.SafeLoader], monkeypatch: pytest.MonkeyPatch
) -> None:
    """PyYAML keeps a repeated key's last value; which one the writer meant is unknown,
    so the document is refused, as JSON with a key given twice is."""
    monkeypatch.setattr("judge.yaml_text.LOADER", loader)
    text = "scenarios:\n  - id: a\n    ground_truth: port 9999\n    ground_truth: port 8086\n"
    with pytest.raises(RepeatedYamlKey) as raised:
        load_yaml(text)
    assert isinstance(raised.value, yaml.YAMLError) and isinstance(raised.value, RepeatedKey)
    assert raised.value.args == ("ground_truth",)
    assert raised.value.path == ("scenarios", 0)
    assert "line 4, column 5" in str(raised.value)
    with pytest.raises(RepeatedYamlKey, match="given twice"):
        load_yaml("a: 1\n'a': 2\n")  # the same key, however quoted
    with pytest.raises(RepeatedYamlKey):
        load_yaml("!!set {x, x}")


def test_a_merged_key_given_again_is_an_override_not_a_repetition() -> None:
    text = (
        "base: &base {judge: a, rubric: r}\n"
        "mine: &mine\n  <<: *base\n  judge: b\n"
        "again: *mine\n"
        "inline:\n  <<: &inner {x: 1}\n  x: 2\nreused: *inner\n"
    )
    assert load_yaml(text) == yaml.safe_load(text)
    assert load_yaml(text)["mine"] == {"judge": "b", "rubric": "r"}


def test_a_key_given_twice_behind_an_alias_bomb_is_found_at_once() -> None:
    """Aliases of aliases name a node exponentially many times: the place of a repeated
    key is looked for visiting each node once."""
    text = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
    for name, before in zip("bcdefghijklmnopqrstuvwxy", "abcdefghijklmnopqrstuvwx", strict=True):
        text += f"{name}: &{name} [{', '.join(['*' + before] * 9)}]\n"
    text += "z: [{k: 1, k: 2}]\n"
    with pytest.raises(RepeatedYamlKey) as raised:
        load_yaml(text)
    assert raised.value.path == ("z", 0)
