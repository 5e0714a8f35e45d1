"""The JSON Schema (draft-07) of an experiment file, for editors: completion, hover text and squiggles as you type.

conf/experiment.schema.json is this function's output, and YAML files point at it with a first-lines modeline
(`# yaml-language-server: $schema=experiment.schema.json`). It is generated from the pydantic models, so the
descriptions, bounds and defaults are the models' own, and written deterministically (sorted keys) so a test can
tell a stale committed copy. It is looser than the models where a file is not yet the whole experiment: no key is
required (a file that `extends:` another holds only what differs), and cross-key checks stay in the models. The
`training` section's model follows `algorithm` (dqn when a file names none and extends none) and env_config's
follows `environment.env`, through if/then blocks whose conditions are written without `required`, so no key is
required anywhere.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema
from pydantic_core import to_jsonable_python

import algos
import envs
from experiments.config import catalog
from experiments.config.experiment import ExperimentConfig
from experiments.config.files import EXTENDS
from experiments.config.search_space import _ARITY, SEARCH_FORMS

DRAFT = "http://json-schema.org/draft-07/schema#"
SCHEMA_FILE = Path(__file__).resolve().parents[2] / "conf" / "experiment.schema.json"
# A default under the checkout (e.g. trading's data_path) differs per machine: the description says it instead.
_CHECKOUT = str(Path(__file__).resolve().parents[2])
_REF = "#/definitions/{model}"


def experiment_schema() -> dict[str, Any]:
    """The schema of an experiment file as a JSON-ready mapping."""
    models = catalog.all_models()
    refs, generated = models_json_schema([(model, "validation") for model in models], ref_template=_REF)
    definitions: dict[str, Any] = generated.get("$defs", {})
    names = {model: refs[(model, "validation")]["$ref"].rsplit("/", 1)[-1] for model in models}
    for model, name in names.items():
        _set_defaults(model, definitions[name])
    root = definitions.pop(names[ExperimentConfig])
    extends = catalog.FileKeys.model_fields["extends"]
    root["properties"][EXTENDS] = {"type": "string", "description": extends.description}
    root["properties"]["algorithm"]["enum"] = list(algos.ALGORITHMS)
    root["properties"]["training"] = {"type": "object", "description": root["properties"]["training"]["description"]}
    environment = definitions[names[catalog.ExperimentConfig.model_fields["environment"].annotation]]
    environment["properties"]["env"]["examples"] = list(envs.ENVIRONMENTS)
    tune = definitions[names[catalog.ExperimentConfig.model_fields["tune"].annotation]]
    tune["properties"]["search_space"]["additionalProperties"] = search_domain_schema()
    root["allOf"] = _training_by_algorithm(names) + _env_config_by_family(names)
    root["definitions"] = definitions
    schema = _draft07(root)
    _prune(schema)
    return {"$schema": DRAFT, "title": "experiment file (python -m experiments.config explain KEY)", **schema}


def search_domain_schema() -> dict[str, Any]:
    """One tune.search_space entry: exactly one search form, or null (which removes a base file's search)."""
    forms: dict[str, Any] = {}
    for form in SEARCH_FORMS:
        if form in _ARITY:
            shape = "[low, high]" if _ARITY[form] == 2 else "[low, high, q]"
            forms[form] = {"type": "array", "items": {"type": ["number", "string"]}, "minItems": _ARITY[form],
                           "maxItems": _ARITY[form], "description": f"{form}: {shape}"}
        else:
            forms[form] = {"type": "array", "minItems": 1, "description": f"{form}: the values to try"}
    return {"anyOf": [{"type": "object", "properties": forms, "additionalProperties": False, "minProperties": 1,
                       "maxProperties": 1},
                      {"type": "null", "description": "null removes the search of the file this one extends"}]}


def _set_defaults(model: type[BaseModel], definition: dict[str, Any]) -> None:
    """Every plain field's default as the model has it (default factories called); none on a section, whose keys
    carry their own, or where it names a path of this checkout."""
    for name, info in model.model_fields.items():
        prop = definition["properties"][info.alias or name]
        prop.pop("default", None)
        if info.is_required() or catalog.section_model(info) is not None:
            continue
        default = to_jsonable_python(info.get_default(call_default_factory=True, validated_data={}))
        if not (isinstance(default, str) and default.startswith(_CHECKOUT)):
            prop["default"] = default


def _algorithm_is(name: str) -> dict[str, Any]:
    """The condition "algorithm is `name`", without `required`: written as not(algorithm absent or another name).
    The default algorithm is also the one of a file that names none and extends nothing; a file that extends another
    keeps its base's algorithm, which the schema cannot see, so its training section is checked as a mapping only."""
    named = {"not": {"properties": {"algorithm": {"not": {"const": name}}}}}
    if name != ExperimentConfig.model_fields["algorithm"].default:
        return named
    absent = {"not": {}}  # a property whose schema nothing satisfies must be absent
    return {"anyOf": [named, {"properties": {"algorithm": absent, EXTENDS: absent}}]}


def _training_by_algorithm(names: dict[type[BaseModel], str]) -> list[dict[str, Any]]:
    return [{"if": _algorithm_is(algorithm),
             "then": {"properties": {catalog.TRAINING: {"$ref": _REF.format(model=names[model])}}}}
            for algorithm, model in catalog.training_models().items()]


def _env_config_by_family(names: dict[type[BaseModel], str]) -> list[dict[str, Any]]:
    """env_config (and evaluation.env_config, laid over it) takes the model of environment.env's family."""
    blocks = []
    for model, env_ids in catalog.owners_of(catalog.env_config_models()).items():
        ref = {"$ref": _REF.format(model=names[model])}
        # "environment.env is one of env_ids", written as not(environment lacks env or env is another id).
        condition = {"not": {"properties": {"environment": {"properties": {"env": {"not": {"enum": env_ids}}}}}}}
        blocks.append({"if": condition,
                       "then": {"properties": {"environment": {"properties": {"env_config": ref}},
                                               "evaluation": {"properties": {"env_config": ref}}}}})
    return blocks


def _draft07(node: Any, in_properties: bool = False) -> Any:
    """pydantic writes draft 2020-12: tuples as prefixItems, $ref beside other keywords. Draft-07 has items as a list
    and ignores a $ref's siblings, so those become allOf; titles (the field name again) and `required` go."""
    if isinstance(node, list):
        return [_draft07(item) for item in node]
    if not isinstance(node, dict):
        return node
    if in_properties:  # a mapping of property names to schemas: every key is a name, not a keyword
        return {key: _draft07(value) for key, value in node.items()}
    out = {}
    for key, value in node.items():
        if key in ("title", "required"):
            continue
        if key in ("default", "const", "enum", "examples"):
            out[key] = value
        else:
            out[key] = _draft07(value, in_properties=key in ("properties", "definitions"))
    if "prefixItems" in out:
        out["items"] = out.pop("prefixItems")
        out["additionalItems"] = False
    if "$ref" in out and len(out) > 1:
        out["allOf"] = [{"$ref": out.pop("$ref")}]
    return out


def _prune(schema: dict[str, Any]) -> None:
    """Drop definitions nothing refers to (TrainingBase: `training` is the algorithm's own model)."""
    definitions = schema["definitions"]
    used: set[str] = set()
    pending = _refs({key: value for key, value in schema.items() if key != "definitions"})
    while pending:
        name = pending.pop()
        if name not in used:
            used.add(name)
            pending += _refs(definitions[name])
    schema["definitions"] = {name: definitions[name] for name in sorted(used)}


def _refs(node: Any) -> list[str]:
    """The definition names a schema node refers to."""
    return re.findall(r'"#/definitions/([^"]+)"', json.dumps(node))


def schema_text() -> str:
    """The schema as written to conf/experiment.schema.json: sorted keys, two-space indent, a final newline."""
    return json.dumps(experiment_schema(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def described_keys(schema: dict[str, Any]) -> tuple[int, int]:
    """(described, all) property schemas in `schema`, every definition's properties counted once."""
    counts = [0, 0]

    def visit(node: Any, in_properties: bool = False) -> None:
        if isinstance(node, list):
            for item in node:
                visit(item)
        elif isinstance(node, dict):
            for key, value in node.items():
                if in_properties:
                    counts[1] += 1
                    counts[0] += bool(isinstance(value, dict) and value.get("description"))
                    visit(value)
                elif key not in ("default", "const", "enum", "examples", "allOf", "if", "then"):
                    visit(value, in_properties=key == "properties")
    visit(schema)
    return counts[0], counts[1]
