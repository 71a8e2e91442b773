"""The one configuration: kernelwright.toml's [kernelwright] table for the general settings, the precedence shared
with the [llm] table, one-line errors, and ``kernelwright config``."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from kernelwright.cli import main
from kernelwright.config import CONFIG_FILE_NAME, DEFAULT, KNOBS, config
from kernelwright.errors import ConfigError
from kernelwright.llm.settings import LLMSettings, resolve_settings

SECRET = "sk-config-test-0123456789"


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty working directory, with no KERNELWRIGHT_* variable for the settings these tests read."""
    monkeypatch.chdir(tmp_path)
    for knob in KNOBS.values():
        monkeypatch.delenv(knob.env, raising=False)
    for name in ("KERNELWRIGHT_LLM_MODEL", "KERNELWRIGHT_LLM_BASE_URL", "KERNELWRIGHT_LLM_MAX_RETRIES",
                 "KERNELWRIGHT_LLM_API_KEY_ENV", "DEEPSEEK_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def _write(folder: Path, text: str) -> Path:
    path = folder / CONFIG_FILE_NAME
    path.write_text(text)
    return path


def test_precedence_scope_over_env_over_toml_over_default(workdir, monkeypatch):
    assert config.resolve("trials") == (5, DEFAULT)
    path = _write(workdir, "[kernelwright]\ntrials = 8\ntimeout_s = 30\nkeep_workdir = true\n")
    assert config.resolve("trials") == (8, str(path))
    assert (config.timeout_s, config.keep_workdir, config.input_sets) == (30.0, True, 4)
    monkeypatch.setenv("KERNELWRIGHT_TRIALS", "6")
    assert config.resolve("trials") == (6, "KERNELWRIGHT_TRIALS")
    with config.scope(trials=2):
        assert config.resolve("trials") == (2, "scope")
    monkeypatch.setenv("KERNELWRIGHT_TRIALS", " ")  # an empty variable counts as unset: the file's value again
    assert config.trials == 8


def test_toml_paths_are_relative_to_the_working_directory_and_expand_home(workdir):
    _write(workdir, '[kernelwright]\ncache_dir = "cache/here"\n')
    assert config.cache_dir == workdir / "cache" / "here"
    _write(workdir, '[kernelwright]\ncache_dir = "~/kw-cache"\n')
    assert config.cache_dir == Path.home() / "kw-cache"


def test_a_changed_file_is_read_again(workdir):
    path = _write(workdir, "[kernelwright]\ntrials = 7\n")
    assert config.trials == 7
    path.write_text("[kernelwright]\ntrials = 12\n# longer, so even a coarse clock sees a change\n")
    assert config.trials == 12


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[kernelwright]\ntrials = "eight"\n',
         "{path}: [kernelwright] trials = 'eight' is not valid (expected an integer); fix the file"),
        ("[kernelwright]\ntrials = 2.5\n",
         "{path}: [kernelwright] trials = 2.5 is not valid (expected an integer); fix the file"),
        ("[kernelwright]\ntimeout_s = 0\n",
         "{path}: [kernelwright] timeout_s = 0 is not valid (expected a number > 0); fix the file"),
        ('[kernelwright]\ndevice = "gpu"\n',
         "{path}: [kernelwright] device = 'gpu' is not valid (expected one of auto, cpu, cuda); fix the file"),
        ("[kernelwright]\nkeep_workdir = 2\n", "{path}: [kernelwright] keep_workdir = 2 is not valid (expected one "
                                               "of 1/0/true/false/yes/no/on/off); fix the file"),
        ("[kernelwright]\ntrails = 3\n", "{path}: unknown [kernelwright] key(s) trails; known: " + ", ".join(KNOBS)),
        ("kernelwright = 3\n", "{path}: 'kernelwright' must be a table ([kernelwright]); fix the file"),
    ],
)
def test_a_malformed_toml_value_is_one_line_naming_the_file_and_key(workdir, text, message):
    path = _write(workdir, text)
    with pytest.raises(ConfigError) as caught:
        config.trials  # noqa: B018 - any read checks the whole table
    assert str(caught.value) == message.format(path=path)


def test_invalid_toml_is_one_line(workdir):
    path = _write(workdir, "[kernelwright]\ntrials = \n")
    with pytest.raises(ConfigError, match=f"^{path} is not valid TOML .*; fix the file$") as caught:
        config.trials  # noqa: B018
    assert "\n" not in str(caught.value)


def test_a_file_value_shadowed_by_the_environment_is_still_checked(workdir, monkeypatch):
    _write(workdir, '[kernelwright]\ntrials = "x"\n')
    monkeypatch.setenv("KERNELWRIGHT_TRIALS", "3")
    with pytest.raises(ConfigError, match=r"\[kernelwright\] trials = 'x' is not valid"):
        config.trials  # noqa: B018


def test_a_malformed_variable_names_it(workdir, monkeypatch):
    monkeypatch.setenv("KERNELWRIGHT_TIMING_MIN_REPS", "many")
    with pytest.raises(ConfigError) as caught:
        config.timing_min_reps  # noqa: B018
    assert str(caught.value) == ("KERNELWRIGHT_TIMING_MIN_REPS='many' is not valid (expected an integer); unset it "
                                 "or fix its value")


def test_other_tables_are_ignored_with_a_warning(workdir, caplog):
    _write(workdir, "[kernelwright]\ntrials = 9\n[tool]\nx = 1\n")
    with caplog.at_level(logging.WARNING, logger="kernelwright.config"):
        assert config.trials == 9
    assert "tool ignored" in caplog.text


def test_the_llm_table_shares_the_rule_every_setting_has_a_variable(workdir, monkeypatch):
    _write(workdir, '[kernelwright]\ntrials = 9\n[llm]\nmodel = "from-toml"\nmax_retries = 1\n')
    monkeypatch.setenv("DEEPSEEK_API_KEY", SECRET)
    monkeypatch.setenv("KERNELWRIGHT_LLM_MAX_RETRIES", "2")
    settings = resolve_settings()
    assert (settings.model, settings.max_retries, settings.api_key) == ("from-toml", 2, SECRET)
    assert resolve_settings(model="from-flag").model == "from-flag"


def test_api_key_env_from_the_environment_is_named_in_the_error(workdir, monkeypatch):
    monkeypatch.setenv("KERNELWRIGHT_LLM_API_KEY_ENV", "MY_UNSET_KEY")
    with pytest.raises(ConfigError, match="KERNELWRIGHT_LLM_API_KEY_ENV names MY_UNSET_KEY as its variable"):
        resolve_settings()


def test_llm_settings_built_directly_are_checked_like_the_file():
    with pytest.raises(ConfigError, match=r"LLM timeout_s 0 is not valid \(expected a number > 0\)"):
        LLMSettings(model="m", base_url="http://localhost:1/v1", api_key="k", key_source="K", timeout_s=0)


def test_config_command_prints_values_and_sources_never_the_key(workdir, monkeypatch, capsys):
    path = _write(workdir, '[kernelwright]\ntrials = 8\n[llm]\nmodel = "deepseek-chat"\n')
    monkeypatch.setenv("KERNELWRIGHT_TIMEOUT_S", "90")
    monkeypatch.setenv("DEEPSEEK_API_KEY", SECRET)
    assert main(["config", "--base-url", "https://api.deepseek.com/"]) == 0
    out = capsys.readouterr().out
    lines = {line.split("#")[0].strip(): line.split("#")[-1].strip() for line in out.splitlines() if " = " in line}
    assert lines["trials = 8"] == str(path)
    assert lines["timeout_s = 90.0"] == "KERNELWRIGHT_TIMEOUT_S"
    assert lines["device = \"auto\""] == DEFAULT
    assert lines['model = "deepseek-chat"'] == str(path)
    assert lines['base_url = "https://api.deepseek.com"'] == "flag --base-url"
    assert lines["price_prompt_per_mtok = 0.28"] == "built-in price table"
    assert "# API key: from DEEPSEEK_API_KEY (set)" in out and SECRET not in out


def test_config_command_with_a_bad_file_exits_2_in_one_line(workdir, capsys):
    path = _write(workdir, "[llm]\ntimeout_s = -1\n")
    assert main(["config"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (f"kernelwright config: {path}: [llm] timeout_s = -1 is not valid (expected a number > 0); "
                            "fix the file\n")
