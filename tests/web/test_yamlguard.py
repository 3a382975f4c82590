"""The untrusted-YAML reader: size, encoding, depth and alias expansion bounded, each refusal naming file and key."""

from __future__ import annotations

import re

import pytest

from spark_watchd.errors import ConfigError
from spark_watchd.web import yamlguard
from spark_watchd.web.yamlguard import MAX_BYTES, MAX_DEPTH, MAX_NODES


def _bomb(levels: int = 9, width: int = 9) -> str:
    """`levels` levels of `width` aliases: width**levels strings once expanded, a few hundred bytes on disk."""
    lines = ["http_server_config:", "  x0: &a0 [" + ", ".join(['"x"'] * width) + "]"]
    for i in range(1, levels):
        lines.append(f"  x{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]")
    return "\n".join([*lines, f"  http2: *a{levels - 1}", ""])


def _nested(depth: int) -> str:
    """A mapping `depth` levels deep: k0: {k1: {... : leaf}}."""
    return (
        "".join(f"{'  ' * i}k{i}:\n" for i in range(depth - 1)) + f"{'  ' * (depth - 1)}k{depth - 1}: leaf\n"
    )


# read_text


def test_read_text_returns_the_utf8_text(tmp_path):
    p = tmp_path / "web.yml"
    p.write_text("basic_auth_users:\n  prom: 'é'\n", encoding="utf-8")
    assert yamlguard.read_text(str(p)) == "basic_auth_users:\n  prom: 'é'\n"


def test_a_missing_file_is_a_config_error_naming_it(tmp_path):
    p = tmp_path / "absent.yml"
    with pytest.raises(ConfigError, match=rf"^{p}: cannot read web config: No such file"):
        yamlguard.read_text(str(p))


def test_a_directory_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="cannot read web config"):
        yamlguard.read_text(str(tmp_path))


def test_a_nul_in_the_path_is_a_config_error_not_a_value_error():
    with pytest.raises(ConfigError, match=r"^'web\\x00.yml': cannot read web config"):
        yamlguard.read_text("web\0.yml")


def test_a_file_of_exactly_the_limit_is_read(tmp_path):
    p = tmp_path / "web.yml"
    p.write_bytes(b"#" * MAX_BYTES)
    assert len(yamlguard.read_text(str(p))) == MAX_BYTES


def test_a_file_over_the_limit_is_refused(tmp_path):
    p = tmp_path / "web.yml"
    p.write_bytes(b"#" * (MAX_BYTES + 1))
    with pytest.raises(ConfigError, match=rf"^{p}: web config is over {MAX_BYTES} bytes"):
        yamlguard.read_text(str(p))


def test_non_utf8_names_the_line_the_text_before_and_the_byte(tmp_path):
    p = tmp_path / "web.yml"
    p.write_bytes(b"a: 1\nkey: val\xff\n")
    with pytest.raises(ConfigError) as exc:
        yamlguard.read_text(str(p))
    assert str(exc.value) == f"{p}: web config is not UTF-8 text: line 2, after 'key: val' (byte 13)"


# load


def test_load_returns_the_document():
    assert yamlguard.load("web.yml", "a:\n  - 1\n  - b\n") == {"a": [1, "b"]}


def test_an_empty_document_is_none():
    assert yamlguard.load("web.yml", "") is None


def test_invalid_yaml_is_one_line_naming_the_file():
    with pytest.raises(ConfigError) as exc:
        yamlguard.load("web.yml", "a: [1, 2\nb: 3\n")
    msg = str(exc.value)
    assert msg.startswith("web.yml: ") and "invalid YAML" in msg and "\n" not in msg


def test_unsafe_tags_are_refused():
    with pytest.raises(ConfigError, match="invalid YAML"):
        yamlguard.load("web.yml", "a: !!python/object/apply:os.system ['true']\n")


def test_nesting_up_to_the_limit_loads():
    doc = yamlguard.load("web.yml", _nested(MAX_DEPTH))
    for i in range(MAX_DEPTH - 1):
        doc = doc[f"k{i}"]
    assert doc == {f"k{MAX_DEPTH - 1}": "leaf"}


def test_nesting_past_the_limit_names_the_key_path():
    path = ".".join(f"k{i}" for i in range(MAX_DEPTH))
    with pytest.raises(ConfigError) as exc:
        yamlguard.load("web.yml", _nested(MAX_DEPTH + 1) + "x: 1\n")
    assert str(exc.value) == f"web.yml: key '{path}': nested deeper than {MAX_DEPTH} levels"


def test_sequence_items_are_named_by_index():
    deep = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    with pytest.raises(ConfigError) as exc:
        yamlguard.load("web.yml", f"a: [0, 1, {deep}]\n")
    assert str(exc.value).startswith("web.yml: key 'a.2.0.0.")


def test_a_syntax_error_names_the_key_the_parser_reached():
    with pytest.raises(ConfigError) as exc:
        yamlguard.load("web.yml", "a: 1\nb: [1, ]]\n")
    assert str(exc.value).startswith("web.yml: key 'b': invalid YAML: ")


def test_a_syntax_error_before_any_key_names_the_document():
    with pytest.raises(ConfigError, match=r"^web.yml: key '\(document\)': invalid YAML: "):
        yamlguard.load("web.yml", "]")


def test_thousands_of_open_brackets_are_a_config_error_not_a_recursion_error():
    with pytest.raises(ConfigError, match=r"^web.yml: key '\(document\)': invalid YAML: .*nesting depth"):
        yamlguard.load("web.yml", "[" * 5000)


def test_alias_bomb_names_where_it_expands():
    with pytest.raises(ConfigError) as exc:
        yamlguard.load("web.yml", _bomb())
    assert re.fullmatch(
        rf"web.yml: key 'http_server_config\.x\d+(\.\d+)*': expands to more than {MAX_NODES} nodes .*",
        str(exc.value),
    )


def test_aliases_that_expand_within_the_limit_load():
    doc = yamlguard.load("web.yml", _bomb(levels=3, width=9))  # 9**3 = 729 strings
    assert len(doc["http_server_config"]["http2"]) == 9
    assert doc["http_server_config"]["http2"][0][0] == ["x"] * 9


def test_aliases_count_as_the_nodes_they_stand_for():
    # each level multiplies: 4 levels of 10 would be 10,000+ strings, 3 levels of 10 are not
    yamlguard.load("web.yml", _bomb(levels=3, width=10))
    with pytest.raises(ConfigError, match="expands to more than"):
        yamlguard.load("web.yml", _bomb(levels=4, width=10))


def test_long_keys_are_cut_in_the_message():
    key = "k" * 200
    with pytest.raises(ConfigError) as exc:
        yamlguard.load("web.yml", f"{key}: " + "[" * MAX_DEPTH + "]" * MAX_DEPTH + "\n")
    assert f"key '{'k' * 60}.0." in str(exc.value) and "k" * 61 not in str(exc.value)
