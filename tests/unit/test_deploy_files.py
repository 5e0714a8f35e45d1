"""The deploy files, checked offline against the schemas their tools enforce, so that a typo fails here
and not after `ray up` or `kubectl apply` has started billing: deploy/aws/cluster-*.yaml against Ray's
autoscaler schema (ray/autoscaler/ray-schema.json, from the installed wheel) and Ray's own config checks,
deploy/kuberay/rayjob.yaml against the RayJob v1 schema of KubeRay's CRD (vendored in tests/data/kuberay).
Each schema check also shows that a broken copy is refused, so it can fail. Then the cross-checks a schema
cannot see: instance family = file name, resources and prices = the presets = docs/hardware.md, the
entrypoint = the platform's CLI, the dashboard not exposed, no AWS keys.
"""

from __future__ import annotations

import copy
import gzip
import json
import re
import shlex
import tomllib
from functools import cache
from pathlib import Path

import jsonschema
import pytest
import ray
import ray.autoscaler
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
# What `ray up` runs on a config before it calls AWS (private, but Ray is pinned in pyproject.toml).
from ray.autoscaler._private.util import prepare_config, validate_config

from experiments.hardware import load_preset

REPO = Path(__file__).resolve().parents[2]
CLUSTER_FILES = sorted((REPO / "deploy" / "aws").glob("cluster-*.yaml"))
RAYJOB_FILE = REPO / "deploy" / "kuberay" / "rayjob.yaml"
KUBERAY_SCHEMAS = REPO / "tests" / "data" / "kuberay"
KEY_LIKE = re.compile(
    r"(?<![A-Z0-9])(AKIA|ASIA)[A-Z0-9]{16}(?![A-Z0-9])|aws_secret_access_key|aws_access_key_id", re.IGNORECASE
)


def read_yaml(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


@cache
def ray_validator() -> jsonschema.protocols.Validator:
    schema = json.loads((Path(ray.autoscaler.__file__).parent / "ray-schema.json").read_text())
    return jsonschema.validators.validator_for(schema)(schema)


def strict(node):
    """The CRD schema as the API server applies it with strict field validation (kubectl's default since
    1.27): an object that lists its properties refuses others, unless it preserves unknown fields."""
    if isinstance(node, list):
        return [strict(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: strict(value) for key, value in node.items()}
    open_ended = "additionalProperties" in out or out.get("x-kubernetes-preserve-unknown-fields")
    if "properties" in out and not open_ended:
        out["additionalProperties"] = False
    return out


@cache
def rayjob_validator(tag: str) -> jsonschema.protocols.Validator:
    path = KUBERAY_SCHEMAS / f"rayjob-v1-openapi-{tag}.json.gz"
    vendored = json.loads(gzip.decompress(path.read_bytes()))
    assert vendored["source"]["tag"] == tag and len(vendored["source"]["commit"]) == 40
    return jsonschema.Draft7Validator(strict(vendored["openAPIV3Schema"]))


def rayjob_docs() -> dict[str, dict]:
    docs = [doc for doc in yaml.safe_load_all(RAYJOB_FILE.read_text()) if doc]
    assert len({doc["kind"] for doc in docs}) == len(docs), "one document per kind"
    return {doc["kind"]: doc for doc in docs}


def rayjob() -> dict:
    return rayjob_docs()["RayJob"]


def docs_prices() -> dict[str, str]:
    """instance -> $/hour as written in docs/hardware.md's AWS table."""
    rows = (line.split("|") for line in (REPO / "docs" / "hardware.md").read_text().splitlines())
    return {cells[1].strip(): cells[4].strip() for cells in rows
            if len(cells) > 5 and re.fullmatch(r"[a-z0-9]+\.\w+", cells[1].strip())}


def pods(job: dict) -> list[dict]:
    cluster = job["spec"]["rayClusterSpec"]
    workers = [group["template"] for group in cluster["workerGroupSpecs"]]
    return [cluster["headGroupSpec"]["template"], *workers]


def containers(job: dict) -> list[dict]:
    return [container for pod in pods(job) for container in pod["spec"]["containers"]]


def test_both_families_have_a_cluster_file():
    assert [path.name for path in CLUSTER_FILES] == ["cluster-g5.yaml", "cluster-p3.yaml"]


@pytest.mark.parametrize("path", CLUSTER_FILES, ids=lambda p: p.name)
def test_cluster_yaml_passes_rays_schema_and_config_checks(path):
    config = read_yaml(path)
    ray_validator().validate(config)
    validate_config(config)
    validate_config(prepare_config(copy.deepcopy(config)))  # merged with Ray's AWS defaults, as `ray up` does


@pytest.mark.parametrize("break_it", [
    lambda c: c.update(max_worker=4),  # misspelled top-level key
    lambda c: c.update(max_workers="four"),
    lambda c: c["available_node_types"]["worker.g5.xlarge"]["resources"].update(GPU=0.5),  # integers only
    lambda c: c["available_node_types"]["worker.g5.xlarge"].pop("resources"),
    lambda c: c["available_node_types"]["worker.g5.xlarge"].update(min_worker=0),
], ids=["unknown-key", "max_workers-type", "fractional-gpu", "no-resources", "node-type-typo"])
def test_ray_schema_refuses_a_broken_cluster_yaml(break_it):
    config = read_yaml(REPO / "deploy" / "aws" / "cluster-g5.yaml")
    break_it(config)
    with pytest.raises(jsonschema.ValidationError):
        ray_validator().validate(config)


def test_ray_config_checks_refuse_an_unknown_head_type():
    config = read_yaml(REPO / "deploy" / "aws" / "cluster-g5.yaml")
    config["head_node_type"] = "head.g5.4xlarge"
    with pytest.raises(ValueError, match="head_node_type"):
        validate_config(config)


@pytest.mark.parametrize("path", CLUSTER_FILES, ids=lambda p: p.name)
def test_node_types_are_the_files_family_and_match_their_presets(path):
    """A node type's resources and price are the preset's (what the run plans and estimates with) and
    docs/hardware.md's (where the prices are dated), so a price update cannot miss the cluster files."""
    family = path.stem.removeprefix("cluster-")
    config, text, prices = read_yaml(path), path.read_text(), docs_prices()
    ours = config["metadata"]["rlplatform"]
    for name, node_type in config["available_node_types"].items():
        instance = node_type["node_config"]["InstanceType"]
        assert instance.split(".")[0] == family, f"{name}: {instance} in {path.name}"
        preset = load_preset(ours["presets"][instance])
        assert preset.name == instance.replace(".", "_")
        assert node_type["resources"] == {"CPU": preset.cpus, "GPU": preset.gpu_count}, name
        assert ours["hourly_usd"][instance] == preset.price_per_hour_usd == float(prices[instance]), instance
        assert re.search(rf"# {re.escape(instance)}: .*\${re.escape(prices[instance])}/h", text), \
            f"{name}: no comment quoting ${prices[instance]}/h"


@pytest.mark.parametrize("path", CLUSTER_FILES, ids=lambda p: p.name)
def test_workers_start_at_zero_and_are_capped(path):
    config = read_yaml(path)
    workers = {k: v for k, v in config["available_node_types"].items() if k != config["head_node_type"]}
    assert workers
    for name, node_type in workers.items():
        assert node_type["min_workers"] == 0, name
        assert 1 <= node_type["max_workers"] <= config["max_workers"], name


@pytest.mark.parametrize("path", CLUSTER_FILES, ids=lambda p: p.name)
def test_dashboard_stays_on_loopback_and_ray_requires_the_token(path):
    config = read_yaml(path)
    head, workers = config["head_start_ray_commands"], config["worker_start_ray_commands"]
    starts = [command for command in head if "ray start" in command]
    assert len(starts) == 1 and "--dashboard-host=127.0.0.1" in starts[0]
    assert not any("0.0.0.0" in command for command in head + workers)
    assert all("RAY_AUTH_MODE=token" in command for command in head + workers if "ray start" in command)
    assert config["file_mounts"]["~/.ray/auth_token"] == "~/.ray/auth_token"


@pytest.mark.parametrize("path", CLUSTER_FILES, ids=lambda p: p.name)
def test_nodes_run_this_checkout_with_its_venv_and_an_instance_profile(path):
    config = read_yaml(path)
    assert config["file_mounts"]["~/rlplatform"] == "." and ".gitignore" in config["rsync_filter"]
    assert any("scripts/setup.sh" in command for command in config["setup_commands"])
    for command in config["head_start_ray_commands"] + config["worker_start_ray_commands"]:
        venv = command.startswith("~/rlplatform/.venv/bin/ray ") or "$HOME/rlplatform/.venv/bin" in command
        assert venv, command
    assert config["docker"]["image"] == f"rayproject/ray:{ray.__version__}-py311-gpu"
    for name, node_type in config["available_node_types"].items():
        assert node_type["node_config"]["IamInstanceProfile"]["Name"].startswith("rlplatform-ray-"), name
        assert node_type["node_config"]["ImageId"], f"{name}: Ray's default AMI is Ubuntu 18.04 / CUDA 11.2"


def test_rayjob_passes_kuberay_crd_schema():
    errors = rayjob_validator("v1.7.0").iter_errors(rayjob())
    assert [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in errors] == []


def test_rayjob_on_kuberay_1_4_lacks_only_auth_options():
    """docs/cluster.md tells KubeRay 1.4 users to delete authOptions and nothing else: keep that true."""
    errors = list(rayjob_validator("v1.4.2").iter_errors(rayjob()))
    where = [(list(e.absolute_path), e.validator) for e in errors]
    assert where == [(["spec", "rayClusterSpec"], "additionalProperties")]
    assert "authOptions" in errors[0].message
    without_auth = rayjob()
    del without_auth["spec"]["rayClusterSpec"]["authOptions"]
    rayjob_validator("v1.4.2").validate(without_auth)


@pytest.mark.parametrize("break_it", [
    lambda j: j["spec"].update(entryPoint=j["spec"].pop("entrypoint")),  # misspelled
    lambda j: j.update(specs={}),
    lambda j: j["spec"].update(shutdownAfterJobFinishes="yes"),
    lambda j: j["spec"]["rayClusterSpec"]["workerGroupSpecs"][0].update(replicas="one"),
    lambda j: j["spec"]["rayClusterSpec"]["workerGroupSpecs"][0].pop("groupName"),
    lambda j: j["spec"]["rayClusterSpec"]["authOptions"].update(mode="password"),
], ids=["entrypoint-typo", "unknown-key", "bool-type", "int-type", "required-field", "enum"])
def test_kuberay_schema_refuses_a_broken_rayjob(break_it):
    job = rayjob()
    break_it(job)
    with pytest.raises(jsonschema.ValidationError):
        rayjob_validator("v1.7.0").validate(job)


def test_rayjob_entrypoint_runs_the_platform_cli_on_s3():
    """The head has no GPU, so --hardware must name the worker's preset; every pod writes to --storage."""
    from experiments.run import parse_args

    words = shlex.split(rayjob()["spec"]["entrypoint"])
    assert words[:3] == ["python", "-m", "experiments.run"]
    args = parse_args(words[3:])  # the real parser: a flag it does not know fails here
    assert (REPO / args.conf).is_file() and args.conf.parent == Path("conf")
    assert args.address == "auto" and args.storage.startswith("s3://")
    preset = load_preset(args.hardware)
    worker = rayjob()["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"]
    assert worker["nodeSelector"]["node.kubernetes.io/instance-type"] == preset.name.replace("_", ".", 1)
    assert worker["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == preset.gpu_count


def test_rayjob_cleans_up_after_itself():
    spec = rayjob()["spec"]
    assert spec["shutdownAfterJobFinishes"] is True and spec["ttlSecondsAfterFinished"] > 0
    assert spec["submissionMode"] in ("K8sJobMode", "HTTPMode", "SidecarMode")  # not Interactive: it submits


def test_rayjob_cluster_is_private_and_token_protected():
    assert set(rayjob_docs()) == {"ServiceAccount", "RayJob"}  # no Service, Ingress or Secret of its own
    cluster = rayjob()["spec"]["rayClusterSpec"]
    head = cluster["headGroupSpec"]
    assert head.get("serviceType", "ClusterIP") == "ClusterIP" and not head.get("enableIngress")
    assert head.get("headService", {}).get("spec", {}).get("type", "ClusterIP") == "ClusterIP"
    assert "dashboard-host" in head["rayStartParams"]  # chosen, not inherited (why 0.0.0.0: see the file)
    assert cluster["authOptions"]["mode"] == "token"


def test_rayjob_credentials_come_from_irsa_and_secrets_only():
    """S3 through the service account's IAM role, MLflow's login through a Secret: no credential value
    may appear in the manifest, which is committed and printed by `kubectl get -o yaml`."""
    docs = rayjob_docs()
    account = docs["ServiceAccount"]
    assert account["metadata"]["annotations"]["eks.amazonaws.com/role-arn"].startswith("arn:aws:iam::")
    accounts = {pod["spec"]["serviceAccountName"] for pod in pods(docs["RayJob"])}
    assert accounts == {account["metadata"]["name"]}
    for container in containers(docs["RayJob"]):
        env = {item["name"]: item for item in container["env"]}
        assert env["MLFLOW_TRACKING_URI"]["value"].startswith("https://")
        for name in ("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"):
            assert env[name]["valueFrom"]["secretKeyRef"]["name"] == "mlflow-credentials"
        for name, item in env.items():
            if re.search("PASSWORD|SECRET|TOKEN|KEY|USERNAME", name):
                assert "value" not in item and "secretKeyRef" in item["valueFrom"], name


def test_rayjob_image_matches_the_pinned_ray_and_python():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    (ray_pin,) = [Requirement(dep) for dep in project["dependencies"] if Requirement(dep).name == "ray"]
    assert ray_pin.specifier == f"=={ray.__version__}"
    assert SpecifierSet(project["requires-python"]).contains("3.11")  # the image's py311
    job = rayjob()
    assert job["spec"]["rayClusterSpec"]["rayVersion"] == ray.__version__
    assert {c["image"] for c in containers(job)} == {f"rayproject/ray:{ray.__version__}-py311-gpu"}


def test_rayjob_runtime_env_brings_the_code_and_every_dependency():
    runtime_env = yaml.safe_load(rayjob()["spec"]["runtimeEnvYAML"])
    assert re.fullmatch(r"s3://[^/]+/.+\.zip", runtime_env["working_dir"])
    installed = {canonicalize_name(Requirement(dep).name) for dep in runtime_env["pip"]["packages"]}
    declared = {canonicalize_name(Requirement(dep).name)
                for dep in tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]}
    assert declared <= installed, f"in pyproject.toml, not in runtimeEnvYAML: {declared - installed}"


def deploy_texts() -> dict[str, str]:
    files = [p for p in (REPO / "deploy").rglob("*") if p.is_file()] + [REPO / "docs" / "cluster.md"]
    return {str(p.relative_to(REPO)): p.read_text() for p in files}


def test_no_aws_keys_in_deploy_files():
    texts = deploy_texts()
    assert len(texts) >= 4
    assert {name: KEY_LIKE.findall(text) for name, text in texts.items() if KEY_LIKE.search(text)} == {}
    planted = "AKIA" + "ABCDEFGHIJKLMNOP"  # the scan itself must be able to fail
    assert KEY_LIKE.search(f"aws_key: {planted}") and KEY_LIKE.search("AWS_SECRET_ACCESS_KEY: x")
