"""The options that are runtime settings too, checked by the runtime's own ``Settings``.

The CDK app hands these to every function as environment variables, which ``jobrunner.config.Settings`` reads at
each cold start. So synth writes them as it would for the functions and reads them back with ``Settings.from_env``:
a value the functions would refuse is refused here, for the same reason, before anything deploys.
"""

from __future__ import annotations

import json
import typing
from typing import Any

from infra.config.errors import ConfigError
from jobrunner.config import Settings, SettingsError

#: Context key -> the ``Settings`` attribute it sets. A runtime option added to the context is one line here.
RUNTIME: dict[str, str] = {
    "segments": "segments",
    "allowed_topics": "allowed_topics",
    "tenant_topics": "tenant_topics",
    "tenant_map": "tenant_map",
    "tenant_limits": "tenant_limit_table",
    "operators": "operators",
    "one_time_rows_expire": "one_time_rows_expire",
}
#: ``existing_cassandra``'s keys -> the ``Settings`` attributes they set.
CASSANDRA: dict[str, str] = {"contact_points": "contact_points", "port": "cassandra_port",
                             "secret_arn": "cassandra_secret_arn"}
#: ``targets``' keys -> the ``Settings`` attributes they set; with ``targets`` null, no kind (``none``).
TARGETS: dict[str, str] = {"kinds": "target_kinds", "lambda_allow": "target_lambda_allow",
                           "sqs_allow": "target_sqs_allow", "address_allow": "target_address_allow"}
#: The topic of a job that names none: the first allowed topic, created by the stack.
DEFAULT_TOPIC = "jobs"


def runtime_settings(values: dict[str, Any], stage: str) -> Settings:
    """The settings the context gives the functions, as they will read them; a refused value raises
    ``ConfigError`` naming the stage, the context key and the reason ``Settings`` gives."""
    given = {attribute: _written(attribute, values[key]) for key, attribute in RUNTIME.items()}
    # The default topic first, then those named: the order the stack creates them in.
    given["allowed_topics"] = (DEFAULT_TOPIC, *_listed(given["allowed_topics"]))
    given["topic"] = DEFAULT_TOPIC
    cassandra = values.get("existing_cassandra")
    if isinstance(cassandra, dict):
        given |= {attribute: _written(attribute, cassandra[key])
                  for key, attribute in CASSANDRA.items() if key in cassandra}
    targets = values.get("targets")
    if isinstance(targets, dict):
        given |= {attribute: _written(attribute, targets[key]) for key, attribute in TARGETS.items() if key in targets}
    elif targets is None:
        given["target_kinds"] = ("none",)  # no delivery function: a job may name no target
    try:
        # Written as the stack writes them and read back as the functions read them (``true`` is no count there),
        # then taken as the stack takes them (an object where names belong would be written as a name).
        settings = Settings.from_env(Settings.model_construct(**given).to_environment(given_only=True))
        Settings.of(**given)
    except SettingsError as exc:
        keys = {attribute: key for key, attribute in RUNTIME.items()}
        keys |= {attribute: f"existing_cassandra.{key}" for key, attribute in CASSANDRA.items()}
        keys |= {attribute: f"targets.{key}" for key, attribute in TARGETS.items()}
        raise ConfigError("\n".join(f"stage {stage}: {keys.get(attribute, attribute)}: {reason}"
                                    for attribute, reason in exc.problems)) from None
    return settings


def _written(attribute: str, value: Any) -> Any:
    """A JSON value as ``Settings.to_environment`` writes one: a list of names comma-separated (as a tuple), any
    other list or object as JSON text (which the reading then checks)."""
    names = typing.get_origin(Settings.model_fields[attribute].annotation) is tuple
    if isinstance(value, list) and names:
        return tuple(item if isinstance(item, str) else json.dumps(item) for item in value)
    if isinstance(value, list | dict) and not names:
        return json.dumps(value)
    return value


def _listed(value: Any) -> tuple[Any, ...]:
    """Names given as a list, or as a comma-separated string (``-c allowed_topics=a,b``)."""
    if isinstance(value, str):
        return tuple(name.strip() for name in value.split(",") if name.strip())
    return value if isinstance(value, tuple) else (value,) if value is not None else ()
