"""Every model an experiment file can contain, and a walk over their fields.

An experiment file is more than `ExperimentConfig`: its `training` section is the model of the algorithm it names
(`algos.ALGORITHMS`) and its `environment.env_config` the model of the env family of `environment.env`
(`envs.ENVIRONMENTS`). `explain`, `schema` and the test that every key is described all need that whole set, so
it is gathered here once, without importing Ray.
"""
from __future__ import annotations

import types
import typing
from dataclasses import dataclass
from typing import Any, Iterator, get_args, get_origin

from pydantic import BaseModel, Field
from pydantic.fields import FieldInfo

import algos
import envs
from envs.validation import StrictModel
from experiments.config.experiment import ExperimentConfig
from experiments.config.files import EXTENDS

TRAINING = "training"
ENV_CONFIG = "environment.env_config"
# Where a file writes a partial env_config that is merged over environment.env_config (the family's keys too).
EVALUATION_ENV_CONFIG = "evaluation.env_config"


class FileKeys(StrictModel):
    """Keys of the file that the reader consumes before validation (experiments.config.files), so no section model
    holds them."""

    extends: str | None = Field(
        default=None, alias=EXTENDS,
        description="Another experiment file this one starts from (resolved against this file's folder): mappings "
                    "merge key by key and other values replace the base's, so the file holds only what differs; a "
                    "file that changes `algorithm` starts its training section afresh.")


@dataclass(frozen=True)
class FieldRef:
    """One field of one model, at its dotted key in an experiment file."""

    key: str
    model: type[BaseModel]
    name: str
    info: FieldInfo


def training_models() -> dict[str, type[BaseModel]]:
    """The `training` model of each algorithm, by algorithm name (table order)."""
    return {name: algos.algorithm(name).training_section for name in algos.ALGORITHMS}


def env_config_models() -> dict[str, type[BaseModel]]:
    """The env_config model of each env family that declares one, by env id (table order)."""
    models = {}
    for family in envs.FAMILIES:
        if (model := family.config_model()) is not None:
            models[family.env_id] = model
    return models


def owners_of(models: dict[str, type[BaseModel]]) -> dict[type[BaseModel], list[str]]:
    """Each distinct model with the names (algorithms, env ids) that use it, in first-seen order."""
    owners: dict[type[BaseModel], list[str]] = {}
    for owner, model in models.items():
        owners.setdefault(model, []).append(owner)
    return owners


def nested_models(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models inside a field's annotation (itself, a union member, a list's item...)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found: list[type[BaseModel]] = []
    for arg in get_args(annotation):
        for model in nested_models(arg):
            if model not in found:
                found.append(model)
    return found


def section_model(info: FieldInfo) -> type[BaseModel] | None:
    """The model of a field that is a section (a model, or an optional one); None for a plain value."""
    annotation = info.annotation
    if get_origin(annotation) in (typing.Union, types.UnionType):
        members = [arg for arg in get_args(annotation) if arg is not type(None)]
        annotation = members[0] if len(members) == 1 else None
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def walk(model: type[BaseModel], prefix: str = "") -> Iterator[FieldRef]:
    """Every field of `model` and of the sections below it, depth first, with its dotted key."""
    for name, info in model.model_fields.items():
        key = f"{prefix}{name}"
        yield FieldRef(key, model, name, info)
        child = section_model(info)
        if child is not None:
            yield from walk(child, f"{key}.")


def all_models() -> list[type[BaseModel]]:
    """Every model an experiment file can contain: the experiment's sections, every algorithm's training
    section and every env family's env_config, nested models included (each once)."""
    return models_under([ExperimentConfig, *training_models().values(), *env_config_models().values()])


def models_under(roots: list[type[BaseModel]]) -> list[type[BaseModel]]:
    """`roots` and every model their fields hold, at any depth (each once, breadth first)."""
    seen: list[type[BaseModel]] = []
    pending = list(roots)
    while pending:
        model = pending.pop(0)
        if model in seen:
            continue
        seen.append(model)
        for info in model.model_fields.values():
            pending += [child for child in nested_models(info.annotation) if child not in seen]
    return seen


def declared_in(model: type[BaseModel], name: str) -> type:
    """The class that declares field `name` of `model` (a subclass inherits its base's fields)."""
    return next(cls for cls in model.__mro__ if name in getattr(cls, "__annotations__", {}))


def undescribed(models: list[type[BaseModel]]) -> list[str]:
    """`Class.field` of every field without a description, each declared field once (an inherited field is
    its declaring class's; one a subclass redeclares is the subclass's own)."""
    missing: dict[str, None] = {}
    for model in models:
        for name, info in model.model_fields.items():
            if not (info.description or "").strip():
                missing[f"{declared_in(model, name).__name__}.{name}"] = None
    return list(missing)


def declared_fields(models: list[type[BaseModel]]) -> list[str]:
    """`Class.field` of every declared field of `models` (each once, as `undescribed` counts them)."""
    return list(dict.fromkeys(f"{declared_in(model, name).__name__}.{name}"
                              for model in models for name in model.model_fields))
