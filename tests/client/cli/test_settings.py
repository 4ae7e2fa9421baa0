"""Where the CLI finds the API: flags, then environment variables, then .local/env."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from jobrunner_client.cli.settings import UsageError, read_env_file, region_of, resolve

if TYPE_CHECKING:
    from pathlib import Path


def write_env(folder: Path, text: str) -> Path:
    path = folder / ".local" / "env"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_the_local_stacks_env_file_is_found_from_a_subfolder(tmp_path: Path) -> None:
    write_env(tmp_path, "JOBRUNNER_API_URL=http://127.0.0.1:8080\nJOBRUNNER_TOKEN=abc\nKAFKA_BOOTSTRAP=127.0.0.1:9092\n")
    (tmp_path / "a" / "b").mkdir(parents=True)
    found = resolve(url=None, token=None, sigv4=False, region=None, environ={}, cwd=tmp_path / "a" / "b")
    assert (found.url, found.token, found.kafka_bootstrap) == ("http://127.0.0.1:8080", "abc", "127.0.0.1:9092")
    assert found.env_file == tmp_path / ".local" / "env"


def test_flags_beat_environment_variables_which_beat_the_file(tmp_path: Path) -> None:
    write_env(tmp_path, "JOBRUNNER_API_URL=http://file\nJOBRUNNER_TOKEN=file-token\n")
    environ = {"JOBRUNNER_API_URL": "http://env", "JOBRUNNER_TOKEN": "env-token"}
    from_env = resolve(url=None, token=None, sigv4=False, region=None, environ=environ, cwd=tmp_path)
    assert (from_env.url, from_env.token) == ("http://env", "env-token")
    from_flags = resolve(url="http://flag", token="flag-token", sigv4=False, region=None, environ=environ,
                         cwd=tmp_path)
    assert (from_flags.url, from_flags.token) == ("http://flag", "flag-token")


def test_env_files_may_export_quote_and_comment(tmp_path: Path) -> None:
    path = write_env(tmp_path, "# written by make run\nexport JOBRUNNER_API_URL='http://x:1'\n\nJOBRUNNER_TOKEN=\"t\"\n")
    assert read_env_file(path) == {"JOBRUNNER_API_URL": "http://x:1", "JOBRUNNER_TOKEN": "t"}


def test_no_url_anywhere_is_a_usage_error(tmp_path: Path) -> None:
    connection = resolve(url=None, token=None, sigv4=False, region=None, environ={}, cwd=tmp_path)
    with pytest.raises(UsageError, match="no API URL"):
        connection.api_url()


def test_an_env_file_given_explicitly_must_exist(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no env file"):
        resolve(url=None, token=None, sigv4=False, region=None, environ={}, cwd=tmp_path,
                env_file=tmp_path / "missing")


def test_sigv4_uses_no_token_and_takes_its_region_from_the_flag_env_or_url(tmp_path: Path) -> None:
    url = "https://abc123.execute-api.eu-west-3.amazonaws.com/prod"
    environ = {"JOBRUNNER_TOKEN": "ignored"}
    from_url = resolve(url=url, token=None, sigv4=True, region=None, environ=environ, cwd=tmp_path)
    assert (from_url.token, from_url.signing_region()) == (None, "eu-west-3")
    from_env = resolve(url=url, token=None, sigv4=True, region=None, environ={"AWS_REGION": "us-west-2"},
                       cwd=tmp_path)
    assert from_env.signing_region() == "us-west-2"
    custom = resolve(url="https://api.example.com", token=None, sigv4=True, region=None, environ={}, cwd=tmp_path)
    with pytest.raises(UsageError, match="needs a region"):
        custom.signing_region()
    assert region_of("http://127.0.0.1:8080") is None
