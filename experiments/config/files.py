"""Reading experiment files: YAML, `extends:` chains, --set overrides and the paths they name.

A file may start from another with `extends: base.yaml` (resolved against the file's folder) and then
hold only what differs: mappings merge key by key, any other value replaces the base's, and under
`tune.search_space` a key set to null removes the base's search. The `training` section belongs to the
algorithm: a file that changes `algorithm` starts its `training` section afresh. Relative `*_path`/`*_dir` values
resolve against the folder of the file that wrote them, those given with --set against the working
directory (as any path typed in a shell).
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

import envs
from envs import work_counts
from envs.errors import InputError, read_user_text
from experiments.config.experiment import DEFAULT_ALGORITHM

EXTENDS = "extends"
_LIBYAML_LOADER = getattr(yaml, "CSafeLoader", None)  # PyYAML built with libyaml (the wheels are)


@dataclass(frozen=True)
class Override:
    """One --set, parsed once where it enters (`parse_overrides`) and read by every step after."""

    text: str             # as typed, for messages
    path: tuple[str, ...]  # "training.lr" -> ("training", "lr")
    value: Any            # parsed as YAML: "1e-4" -> 0.0001

    @property
    def key(self) -> str:
        return ".".join(self.path)


def parse_override(text: str) -> Override:
    """`training.lr=1e-4` -> Override(path=("training", "lr"), value=0.0001); values are parsed as YAML."""
    work_counts.count(work_counts.OVERRIDE_PARSES)
    if "=" not in text:
        raise InputError(f"--set {text!r}: write KEY=VALUE, e.g. --set training.lr=1e-4")
    key, _, raw = text.partition("=")
    try:
        value = yaml.safe_load(raw)
    except yaml.YAMLError:
        value = raw
    return Override(text, tuple(key.strip().split(".")), value)


def parse_overrides(overrides: Iterable[str | Override]) -> tuple[Override, ...]:
    """Each --set parsed once; ones already parsed pass through, so a caller may mix both."""
    return tuple(item if isinstance(item, Override) else parse_override(item) for item in overrides)


def apply_overrides(raw: dict[str, Any], overrides: Iterable[Override]) -> dict[str, Any]:
    for override in overrides:
        node = raw
        for part in override.path[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise InputError(f"--set {override.text!r}: {part!r} is not a section")
            node = child
        node[override.path[-1]] = override.value
    return raw


def safe_load(text: str) -> Any:
    """`yaml.safe_load`, parsed by libyaml where PyYAML has it: about 10x faster, and `--dry-run` reads every hardware
    preset and the experiment file. Only the parser differs (the same safe constructor and resolver make the values);
    a text libyaml refuses is parsed again by PyYAML's own parser, so a refusal reads (problem, line) as it always
    did."""
    if _LIBYAML_LOADER is not None:
        loader = _LIBYAML_LOADER(text)  # what yaml.safe_load does with SafeLoader, with libyaml's safe loader
        try:
            return loader.get_single_data()
        except yaml.YAMLError:
            pass
        finally:
            loader.dispose()
    return yaml.safe_load(text)


def read_yaml(path: Path) -> dict[str, Any]:
    text = read_user_text(path, "experiment file", "pass one experiment YAML file, e.g. conf/dqn_btc.yaml")
    try:
        raw = safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        raise InputError(f"{path}:{where}: not valid YAML ({getattr(exc, 'problem', exc)}): fix the syntax") from None
    if not isinstance(raw, dict):
        raise InputError(f"{path}: an experiment file is a mapping of sections (name, environment, training, ...)")
    return raw


def read_experiment(path: Path, chain: tuple[Path, ...] = ()) -> dict[str, Any]:
    """The file's mapping with its `extends:` chain merged in and its relative paths resolved."""
    raw = read_yaml(path)
    _resolve_file_paths(raw, path.resolve().parent)
    base_name = raw.pop(EXTENDS, None)
    if base_name is None:
        return raw
    if not isinstance(base_name, str) or not base_name.strip():
        raise InputError(f"{path}: extends: name one experiment file, e.g. extends: dqn_btc.yaml")
    base = (path.resolve().parent / base_name).resolve()
    if base in chain or base == path.resolve():
        cycle = " -> ".join(str(p) for p in (*chain, path.resolve(), base))
        raise InputError(f"{path}: extends: {base_name} is circular ({cycle}): remove one of the extends")
    if not base.exists():
        raise InputError(f"{path}: extends: {base} not found (resolved against this file's folder): fix the name")
    merged_base = read_experiment(base, (*chain, path.resolve()))
    # The file says what it keeps; one that names no algorithm keeps its base's (and its base's training section).
    switch_algorithm(merged_base, raw.get("algorithm", merged_base.get("algorithm", DEFAULT_ALGORITHM)), base.name)
    return merge(merged_base, raw)

# Settings outside `training` that are tuned for one algorithm's sampling (DQN's small fragments, PPO's auto).
ALGORITHM_TUNED = ("env_runners.rollout_fragment_length",)


def switch_algorithm(raw: dict[str, Any], algorithm: Any, source: str) -> dict[str, str]:
    """Make `raw` (another algorithm's experiment) a start for `algorithm`: its `training` section, the searches
    over it and the retrain's training settings are the other algorithm's keys, so they go, as with `extends:`;
    returns what to tell the
    user, keyed by setting: what was dropped, and what stays but was tuned for the other algorithm."""
    before = raw.get("algorithm", DEFAULT_ALGORITHM)
    if algorithm == before:
        return {}
    raw.pop("training", None)
    space = (raw.get("tune") or {}).get("search_space")
    dropped = [key for key in space or {} if key.startswith("training.")]
    for key in dropped:
        del space[key]
    settings = ((raw.get("retrain") or {}).get("incremental") or {}).get("settings")  # a warm start's training keys
    for key in [key for key in settings or {} if key.startswith("training.")]:
        del settings[key]
        dropped.append(f"retrain.incremental.settings.{key}")
    notes = {"algorithm": f"algorithm {before} -> {algorithm}: training, its searches and warm-start settings "
                          f"({', '.join(dropped) or 'none'}) start from {algorithm}'s defaults, not {source}'s"}
    for dotted in ALGORITHM_TUNED:
        section, key = dotted.split(".")
        if key in (raw.get(section) or {}):
            notes[dotted] = (f"{dotted}: {raw[section][key]!r} comes from {source}, chosen for {before}: check it "
                             f"for {algorithm} (--set {dotted}=...)")
    return notes


def merge(base: dict[str, Any], delta: dict[str, Any], at: str = "") -> dict[str, Any]:
    """`base` with `delta` laid over it (see the module docstring)."""
    merged = dict(base)
    for key, value in delta.items():
        if at == "tune.search_space" and value is None:
            merged.pop(key, None)
        elif isinstance(value, dict) and isinstance(merged.get(key), dict) and at != "tune.search_space":
            merged[key] = merge(merged[key], value, f"{at}.{key}" if at else key)
        else:
            merged[key] = value
    return merged


def pin_overridden_searches(raw: dict[str, Any], overrides: Iterable[Override]) -> list[str]:
    """A --set of a key that tune.search_space searches pins it: the override wins and the key leaves
    the search space (the plan says so). Returns the pinned keys."""
    tune = raw.get("tune")
    space = tune.get("search_space") if isinstance(tune, dict) else None
    pinned = []
    for override in overrides:
        key = override.key
        if isinstance(space, dict) and key in space:
            del space[key]
            pinned.append(key)
            if tune.get("group_by") == key:  # one value left: nothing to group by
                del tune["group_by"]
    return pinned


def _path_keys(env_config: dict[str, Any], all_keys: bool = False, named: tuple[str, ...] = ()) -> list[str]:
    """The keys of an env config that hold local file or folder paths (a URI such as s3://... is not one):
    `*_path`, `*_dir` and the env family's own `named` keys (every key with `all_keys`)."""
    return [key for key, value in env_config.items()
            if (all_keys or key.endswith(("_path", "_dir")) or key in named) and isinstance(value, str) and value
            and "://" not in value]


def _path_list_keys(env_config: dict[str, Any]) -> list[str]:
    """The keys `*_paths` whose value is a list of local paths (e.g. several data files learned as one)."""
    return [key for key, value in env_config.items() if key.endswith("_paths") and isinstance(value, list)
            and all(isinstance(path, str) and path and "://" not in path for path in value)]


def absolute_paths(env_config: dict[str, Any], base: Path, all_keys: bool = False, named: tuple[str, ...] = ()) -> None:
    """Tune runs trials in their own folders: relative `*_path`/`*_dir` values and the family's `named` path keys,
    at any depth (e.g. an asset: inside a feature list), are made absolute from `base` (every string value of the
    top level with `all_keys`)."""
    for key in _path_keys(env_config, all_keys, named):
        env_config[key] = str((base / Path(env_config[key]).expanduser()).resolve())
    for key in _path_list_keys(env_config):
        env_config[key] = [str((base / Path(path).expanduser()).resolve()) for path in env_config[key]]
    for value in env_config.values():
        for child in (value if isinstance(value, list) else [value]):
            if isinstance(child, dict):
                absolute_paths(child, base, named=named)


def family_path_keys(raw: dict[str, Any]) -> tuple[str, ...]:
    """The path keys the env family of a raw experiment declares (envs.EnvFamily.path_keys); a file that inherits
    its env through `extends:` gets every family's."""
    environment = raw.get("environment")
    env_id = environment.get("env") if isinstance(environment, dict) else None
    if isinstance(env_id, str):
        return envs.family(env_id).path_keys
    return tuple(dict.fromkeys(key for entry in envs.ENVIRONMENTS.values() for key in entry.path_keys))


def _resolve_file_paths(raw: dict[str, Any], conf_dir: Path) -> None:
    """Relative paths written in the experiment file resolve against the file's folder, wherever the run
    starts from; also the values of a searched `*_path` (e.g. a grid over data files)."""
    named = family_path_keys(raw)
    for section in (raw.get("environment"), raw.get("evaluation")):
        if isinstance(section, dict) and isinstance(section.get("env_config"), dict):
            absolute_paths(section["env_config"], conf_dir, named=named)
    tune = raw.get("tune")
    space = tune.get("search_space") if isinstance(tune, dict) else None
    if not isinstance(space, dict):
        return
    for key, domain in space.items():
        if ".env_config." not in key or not isinstance(domain, dict):
            continue
        for form in ("grid", "choice"):
            if isinstance(domain.get(form), list):
                values = {str(i): v for i, v in enumerate(domain[form])}
                absolute_paths(values, conf_dir, all_keys=key.endswith(("_path", "_dir")), named=named)
                domain[form] = list(values.values())


def check_files_exist(env_config: dict[str, Any], source: str) -> None:
    """A data file that is not there fails here, with where it was looked for and why there."""
    listed = [(f"{key}[{index}]", path) for key in _path_list_keys(env_config)
              for index, path in enumerate(env_config[key])]
    single = [(key, env_config[key]) for key in _path_keys(env_config) if key.endswith("_path")]
    for key, path in single + listed:
        if not Path(path).exists():
            raise InputError(f"{source}: {key}: {path} not found (relative paths in an experiment file "
                             "resolve against the file's folder, those given with --set against the working "
                             "directory): fix the path "
                             "(market data from a CSV: python -m experiments.data import FILE)")
