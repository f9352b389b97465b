"""Settings: the example file, precedence, where the file is found, and the errors people see.

The autouse fixture in conftest.py points XDG_CONFIG_HOME / XDG_DATA_HOME at a
fresh temporary home, removes every GROOVE_* variable and makes that home the
current directory, so no test here can read the developer's own configuration.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any, Iterator

import pytest
from pydantic import BaseModel, ValidationError

from groove.config import ConfigError, Settings, load_settings, user_config_file
from tests.support.common import GROOVE, ROOT, write

EXAMPLE = ROOT / "groove.toml.example"

# Settings that have no default value, so the example can only show them commented out.
COMMENTED_OUT = {"kb_path", "index_path", "store.url"}
NOT_SETTINGS = {"config_file", "config_notice"}  # where the settings came from (and what to say of it); not keys


def leaf_fields(model: type[BaseModel], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted key as written in groove.toml, default value) for every leaf setting."""
    for name, info in model.model_fields.items():
        if not prefix and name in NOT_SETTINGS:
            continue
        key = prefix + (info.alias or name)
        sub = info.annotation
        if isinstance(sub, type) and issubclass(sub, BaseModel):
            yield from leaf_fields(sub, key + ".")
        else:
            yield key, info.get_default(call_default_factory=True)


def lookup(data: dict[str, Any], dotted: str) -> Any:
    node: Any = data
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            raise KeyError(dotted)
        node = node[part]
    return node


# --- groove.toml.example ---------------------------------------------------------------


def test_the_example_file_parses_and_loads_without_unknown_keys_to_the_defaults():
    settings = load_settings(EXAMPLE)  # unknown keys or invalid values would raise ConfigError
    assert settings.config_file == EXAMPLE.resolve()
    assert settings.model_dump() == Settings().model_dump()


def test_the_example_file_sets_every_setting_to_its_default():
    data = tomllib.loads(EXAMPLE.read_text(encoding="utf-8"))
    missing, wrong = [], []
    for key, default in leaf_fields(Settings):
        if key in COMMENTED_OUT:
            continue
        try:
            value = lookup(data, key)
        except KeyError:
            missing.append(key)
            continue
        if value != default or type(value) is not type(default):
            wrong.append(f"{key} = {value!r} (default {default!r})")
    assert not missing, f"groove.toml.example is missing: {', '.join(missing)}"
    assert not wrong, f"groove.toml.example differs from the defaults: {'; '.join(wrong)}"


def test_the_example_file_shows_the_settings_without_a_default_commented_out():
    text = EXAMPLE.read_text(encoding="utf-8")
    data = tomllib.loads(text)
    for key in COMMENTED_OUT:
        assert key not in data, f"{key} has no default, so the example must not set it"
        leaf = key.rsplit(".", 1)[-1]  # written under its section: store.url is `# url = ...` in [store]
        assert re.search(rf"^# {leaf} = \S", text, re.M), f"groove.toml.example has no commented `# {leaf} = ...` line"


def test_every_key_in_the_example_file_has_a_comment_line_above_it():
    lines = EXAMPLE.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        if re.match(r"^[A-Za-z_]+ = ", line):
            assert i > 0 and lines[i - 1].startswith("#"), f"line {i + 1} ({line!r}) has no comment above it"


def test_the_example_file_uses_the_lambda_alias_and_toml_arrays():
    data = tomllib.loads(EXAMPLE.read_text(encoding="utf-8"))
    assert data["search"]["mmr"]["lambda"] == 0.7
    assert "lambda_" not in data["search"]["mmr"]
    assert data["index"]["extensions"] == [".md", ".markdown"]
    assert data["serve"]["http"]["allowed_hosts"] == []


def test_the_configuration_guide_documents_every_key():
    text = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    missing = [
        key for key, _ in leaf_fields(Settings)
        if f"`{key}`" not in text and f"`{key.rsplit('.', 1)[-1]}`" not in text
    ]
    assert not missing, f"docs/configuration.md does not document: {', '.join(missing)}"


# --- precedence: flag > environment > file > default ------------------------------------


def test_a_top_level_key_comes_from_the_flag_then_the_environment_then_the_file_then_the_default(tmp_path, monkeypatch):
    cfg = write(tmp_path / "groove.toml", 'index_path = "/from/file.sqlite"\n')
    assert load_settings(None).index_path is None
    assert load_settings(cfg).index_path == Path("/from/file.sqlite")
    monkeypatch.setenv("GROOVE_INDEX_PATH", "/from/env.sqlite")
    assert load_settings(cfg).index_path == Path("/from/env.sqlite")
    assert load_settings(cfg, index_path=Path("/from/flag.sqlite")).index_path == Path("/from/flag.sqlite")


def test_a_nested_key_comes_from_the_flag_then_the_environment_then_the_file_then_the_default(tmp_path, monkeypatch):
    cfg = write(tmp_path / "groove.toml", "[search.mmr]\nlambda = 0.5\n")
    assert load_settings(None).search.mmr.lambda_ == 0.7
    assert load_settings(cfg).search.mmr.lambda_ == 0.5
    monkeypatch.setenv("GROOVE_SEARCH__MMR__LAMBDA", "0.6")
    assert load_settings(cfg).search.mmr.lambda_ == 0.6
    assert load_settings(cfg, **{"search.mmr.lambda": 0.9}).search.mmr.lambda_ == 0.9


def test_a_flag_not_given_leaves_the_lower_layers_alone(tmp_path):
    cfg = write(tmp_path / "groove.toml", 'index_path = "/from/file.sqlite"\n[log]\nlevel = "debug"\n')
    settings = load_settings(cfg, index_path=None, **{"log.level": None})
    assert settings.index_path == Path("/from/file.sqlite")
    assert settings.log.level == "debug"


def test_a_flag_for_one_nested_key_keeps_its_siblings_from_the_file(tmp_path):
    cfg = write(
        tmp_path / "groove.toml",
        "[search]\ndefault_limit = 20\n[search.mmr]\nenabled = true\nlambda = 0.5\nsame_doc_penalty = 0.3\n",
    )
    settings = load_settings(cfg, **{"search.mmr.lambda": 0.9})
    assert settings.search.mmr.lambda_ == 0.9
    assert settings.search.mmr.enabled is True
    assert settings.search.mmr.same_doc_penalty == 0.3
    assert settings.search.default_limit == 20


def test_an_environment_variable_for_one_nested_key_keeps_its_siblings_from_the_file(tmp_path, monkeypatch):
    cfg = write(tmp_path / "groove.toml", "[search.mmr]\nlambda = 0.5\nsame_doc_penalty = 0.3\n")
    monkeypatch.setenv("GROOVE_SEARCH__MMR__ENABLED", "true")
    mmr = load_settings(cfg).search.mmr
    assert (mmr.enabled, mmr.lambda_, mmr.same_doc_penalty) == (True, 0.5, 0.3)


def test_a_list_setting_can_come_from_the_environment_as_json(monkeypatch):
    monkeypatch.setenv("GROOVE_INDEX__EXCLUDE_DIRS", '["archive", "templates"]')
    assert load_settings(None).index.exclude_dirs == ["archive", "templates"]


# --- where the file is found ------------------------------------------------------------


def _config_with_limit(path: Path, limit: int) -> Path:
    return write(path, f"[search]\ndefault_limit = {limit}\n")


def test_with_no_file_anywhere_every_setting_is_its_default():
    settings = load_settings(None)
    assert settings.config_file is None
    assert settings.model_dump() == Settings().model_dump()


def test_the_file_in_the_user_config_dir_is_used_when_there_is_no_other():
    if sys.platform.startswith("linux"):
        assert user_config_file() == Path(os.environ["XDG_CONFIG_HOME"]) / "groove" / "groove.toml"
    user = _config_with_limit(user_config_file(), 11)
    settings = load_settings(None)
    assert settings.config_file == user.resolve()
    assert settings.search.default_limit == 11


def test_groove_toml_in_the_current_directory_wins_over_the_user_config_dir():
    _config_with_limit(user_config_file(), 11)
    here = _config_with_limit(Path.cwd() / "groove.toml", 12)
    settings = load_settings(None)
    assert settings.config_file == here.resolve()
    assert settings.search.default_limit == 12


def test_the_config_flag_wins_over_the_current_directory_and_the_user_config_dir(tmp_path):
    _config_with_limit(user_config_file(), 11)
    _config_with_limit(Path.cwd() / "groove.toml", 12)
    chosen = _config_with_limit(tmp_path / "elsewhere" / "mine.toml", 13)
    settings = load_settings(chosen)
    assert settings.config_file == chosen.resolve()
    assert settings.search.default_limit == 13


def test_the_groove_config_variable_names_the_file(tmp_path, monkeypatch):
    _config_with_limit(Path.cwd() / "groove.toml", 12)
    chosen = _config_with_limit(tmp_path / "from-env.toml", 14)
    monkeypatch.setenv("GROOVE_CONFIG", str(chosen))
    settings = load_settings(None)
    assert settings.config_file == chosen.resolve()
    assert settings.search.default_limit == 14
    flagged = _config_with_limit(tmp_path / "from-flag.toml", 15)
    assert load_settings(flagged).search.default_limit == 15


def test_a_missing_config_flag_file_is_an_error_naming_it(tmp_path):
    missing = tmp_path / "nope.toml"
    with pytest.raises(ConfigError, match=r"config file .*nope\.toml does not exist"):
        load_settings(missing)


def test_a_missing_groove_config_file_is_an_error_naming_it(tmp_path, monkeypatch):
    monkeypatch.setenv("GROOVE_CONFIG", str(tmp_path / "nope.toml"))
    with pytest.raises(ConfigError, match=r"GROOVE_CONFIG .*nope\.toml.*does not exist"):
        load_settings(None)


# --- errors -----------------------------------------------------------------------------


def _error(path: Path) -> str:
    with pytest.raises(ConfigError) as info:
        load_settings(path)
    return str(info.value)


def test_an_unknown_top_level_key_is_an_error_naming_the_key_and_the_file(tmp_path):
    cfg = write(tmp_path / "groove.toml", 'kb_pth = "notes"\n')
    message = _error(cfg)
    assert "unknown key `kb_pth`" in message
    assert str(cfg) in message
    assert "kb_path" in message  # the valid keys are listed


def test_an_unknown_nested_key_is_an_error_naming_the_dotted_key_and_the_file(tmp_path):
    cfg = write(tmp_path / "groove.toml", "[search.mmr]\nlamda = 0.5\n")
    message = _error(cfg)
    assert "unknown key `search.mmr.lamda`" in message
    assert str(cfg) in message
    assert "lambda" in message


def test_an_unknown_table_is_an_error_naming_its_dotted_key(tmp_path):
    cfg = write(tmp_path / "groove.toml", "[search.fuzion]\nrrf_k = 60.0\n")
    message = _error(cfg)
    assert "unknown key `search.fuzion`" in message
    assert str(cfg) in message


def test_a_value_out_of_range_is_an_error_naming_the_key_the_valid_range_and_the_file(tmp_path):
    cfg = write(tmp_path / "groove.toml", "[search.mmr]\nlambda = 1.7\n")
    message = _error(cfg)
    assert "`search.mmr.lambda`" in message
    assert "0.0 <= lambda <= 1.0" in message
    assert "1.7" in message
    assert str(cfg) in message


def test_a_bad_value_from_the_environment_names_the_variable_not_the_file(tmp_path, monkeypatch):
    cfg = write(tmp_path / "groove.toml", "[search.mmr]\nlambda = 0.5\n")
    monkeypatch.setenv("GROOVE_SEARCH__MMR__LAMBDA", "1.7")
    message = _error(cfg)
    assert "`search.mmr.lambda`" in message
    assert "GROOVE_SEARCH__MMR__LAMBDA" in message
    assert str(cfg) not in message


def test_a_bad_value_from_a_flag_says_it_came_from_the_command_line():
    with pytest.raises(ConfigError, match=r"`search\.mmr\.lambda`.*0\.0 <= lambda <= 1\.0.*command line"):
        load_settings(None, **{"search.mmr.lambda": 1.7})


def test_a_choice_outside_its_options_is_an_error_listing_them(tmp_path):
    cfg = write(tmp_path / "groove.toml", '[serve]\ntransport = "tcp"\n')
    message = _error(cfg)
    assert "`serve.transport`" in message
    assert "'stdio'" in message and "'http'" in message


@pytest.mark.parametrize(
    "text, key",
    [
        ("[search.fusion]\nrrf_k = inf\n", "search.fusion.rrf_k"),
        ("[search.mmr]\nlambda = nan\n", "search.mmr.lambda"),
        ("[search]\nmin_confidence_ratio = 0\n", "search.min_confidence_ratio"),
    ],
)
def test_values_the_search_stages_would_reject_at_query_time_are_rejected_when_loading(tmp_path, text, key):
    cfg = write(tmp_path / "groove.toml", text)
    assert f"`{key}`" in _error(cfg)


def test_a_section_given_as_a_plain_value_is_an_error_asking_for_a_table(tmp_path):
    cfg = write(tmp_path / "groove.toml", "search = 3\n")
    message = _error(cfg)
    assert "`search`" in message and "[search]" in message


def test_invalid_toml_is_an_error_naming_the_file(tmp_path):
    cfg = write(tmp_path / "groove.toml", "[search\ndefault_limit = 5\n")
    message = _error(cfg)
    assert str(cfg) in message
    assert "not valid TOML" in message


# --- paths ----------------------------------------------------------------------------------


def test_a_relative_kb_path_in_a_file_is_relative_to_the_file_not_the_current_directory(tmp_path):
    (tmp_path / "notes").mkdir()
    cfg = write(tmp_path / "conf" / "groove.toml", 'kb_path = "../notes"\nindex_path = "idx/groove.sqlite"\n')
    assert Path.cwd() != cfg.parent
    settings = load_settings(cfg)
    assert settings.require_kb() == (tmp_path / "notes").resolve()
    assert settings.resolved_index_path() == (tmp_path / "conf" / "idx" / "groove.sqlite").resolve()


def test_an_absolute_or_home_relative_kb_path_in_a_file_is_kept(tmp_path):
    cfg = write(tmp_path / "groove.toml", f'kb_path = "{tmp_path / "abs"}"\nindex_path = "~/groove.sqlite"\n')
    settings = load_settings(cfg)
    assert [f.path for f in settings.kb_path] == [tmp_path / "abs"]
    assert settings.index_path == Path.home() / "groove.sqlite"


def test_the_default_index_lives_in_the_user_data_dir_keyed_by_the_notes_folder(tmp_path):
    a, b = tmp_path / "a" / "notes", tmp_path / "b" / "notes"
    a.mkdir(parents=True)
    b.mkdir(parents=True)
    index_a = load_settings(None, kb_path=a).resolved_index_path()
    index_b = load_settings(None, kb_path=b).resolved_index_path()
    if sys.platform.startswith("linux"):
        assert Path(os.environ["XDG_DATA_HOME"]).resolve() in index_a.parents
    assert a.resolve() not in index_a.parents
    assert index_a != index_b
    assert load_settings(None, kb_path=a).resolved_index_path() == index_a


# --- through the real command line ------------------------------------------------------


def run_groove(spawn, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)  # already isolated by the autouse fixture
    env["HF_HUB_OFFLINE"] = "1"
    return spawn.run(
        [*GROOVE, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120,
    )


def test_the_cli_reports_an_unknown_key_in_the_config_file_as_a_usage_error(spawn, tmp_path):
    write(tmp_path / "bad.toml", "[search]\ncolour = 'blue'\n")
    proc = run_groove(spawn, "status", "--config", "bad.toml", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    assert proc.stderr.startswith("groove: error: unknown key `search.colour`")
    assert "bad.toml" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_the_cli_reports_a_missing_notes_folder_as_a_usage_error(spawn, tmp_path):
    proc = run_groove(spawn, "index", "--kb", "missing-dir", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    assert proc.stderr.startswith("groove: error: the notes folder")
    assert "missing-dir" in proc.stderr and "does not exist" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_the_cli_help_lists_the_subcommands(spawn, tmp_path):
    proc = run_groove(spawn, "--help", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    for command in ("index", "status", "search", "eval"):
        assert re.search(rf"^\s+{command}\s", proc.stdout, re.M), f"`groove --help` does not list {command}"


# --- frozen, resolved once, and only regular files read -----------------------------------


def test_loaded_settings_are_frozen_down_to_the_nested_sections(tmp_path):
    settings = load_settings(None, kb_path=tmp_path)
    with pytest.raises(ValidationError):
        settings.kb_path = tmp_path / "other"  # type: ignore[misc]
    with pytest.raises(ValidationError):
        settings.search.mmr.enabled = True  # type: ignore[misc]
    assert settings.kb_path[0].path == tmp_path.resolve() and settings.search.mmr.enabled is False


def test_a_relative_notes_folder_from_a_flag_is_resolved_once_when_loading(tmp_path, monkeypatch):
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    monkeypatch.chdir(tmp_path)
    settings = load_settings(None, kb_path=Path("link"), index_path=Path("idx.sqlite"))
    # Absolute and symlink-free at once, so every component sees the same folder.
    [folder] = settings.kb_path
    assert folder.path == (tmp_path / "real").resolve()
    assert folder.path.is_absolute() and not folder.path.is_symlink()
    assert folder.name == "link"  # named as the person wrote it
    assert settings.index_path == (tmp_path / "idx.sqlite").resolve()
    assert settings.require_kb() == folder.path


def test_a_fifo_named_groove_toml_is_refused_with_a_reason_instead_of_hanging_groove(spawn, tmp_path):
    os.mkfifo(tmp_path / "groove.toml")
    proc = run_groove(spawn, "status", cwd=tmp_path)  # a blocking open would hit the subprocess timeout
    assert proc.returncode == 2, proc.stderr
    assert "groove.toml is not a regular file" in proc.stderr
    assert proc.stdout == ""


def test_a_fifo_given_as_the_config_flag_is_refused_in_process(tmp_path):
    fifo = tmp_path / "pipe.toml"
    os.mkfifo(fifo)
    outcome: list[BaseException | None] = []

    def load() -> None:
        try:
            load_settings(fifo)
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            outcome.append(exc)

    import threading

    worker = threading.Thread(target=load, daemon=True)
    worker.start()
    worker.join(20)
    if worker.is_alive():  # unblock the open so the thread can end, then fail
        with open(fifo, "w"):
            pass
        pytest.fail("load_settings blocked opening a FIFO")
    assert isinstance(outcome[0], ConfigError)
    assert "not a regular file" in str(outcome[0]) and str(fifo) in str(outcome[0])


def test_a_config_file_over_the_size_cap_is_refused_naming_the_size(tmp_path):
    from groove.config import MAX_CONFIG_BYTES

    cfg = write(tmp_path / "groove.toml", "# padding\n" * (MAX_CONFIG_BYTES // 10 + 1))
    message = _error(cfg)
    assert str(cfg) in message and str(MAX_CONFIG_BYTES) in message


def test_a_fifo_named_grooveignore_is_refused_instead_of_hanging_the_scan(tmp_path):
    from groove.corpus.scan import IGNORE_FILE, Ignore

    os.mkfifo(tmp_path / IGNORE_FILE)
    with pytest.raises(ConfigError, match=r"\.grooveignore is not a regular file"):
        Ignore(tmp_path)  # would block forever in open() if the FIFO were opened for reading normally


def test_replace_settings_returns_a_validated_copy_and_leaves_the_original_alone(tmp_path):
    from groove.config import replace_settings

    cfg = write(tmp_path / "groove.toml", "[search.mmr]\nlambda = 0.5\n")
    original = load_settings(cfg)
    changed = replace_settings(original, **{"search.mmr.enabled": True})
    assert (changed.search.mmr.enabled, changed.search.mmr.lambda_) == (True, 0.5)
    assert changed.config_file == original.config_file == cfg.resolve()
    assert original.search.mmr.enabled is False
    with pytest.raises(ConfigError, match=r"`search\.mmr\.lambda`.*0\.0 <= lambda <= 1\.0"):
        replace_settings(original, **{"search.mmr.lambda": 2.0})
