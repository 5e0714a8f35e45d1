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
import datetime as dt
import gzip
import itertools
import json
import re
import shlex
import tomllib
import zoneinfo
from functools import cache
from pathlib import Path, PurePosixPath

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
    assert [error.message for error in ray_validator().iter_errors(config)] == []
    assert validate_config(config) is None  # Ray's own checks raise on what they refuse
    prepared = prepare_config(copy.deepcopy(config))  # merged with Ray's AWS defaults, as `ray up` does
    assert validate_config(prepared) is None
    assert prepared["head_node_type"] in prepared["available_node_types"]


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


# The run's RayJob, and the one the retrain's CronJob creates (kept in its ConfigMap)
RAYJOBS = pytest.mark.parametrize("job", ["rayjob", "retrain_rayjob"])


@RAYJOBS
def test_rayjob_passes_kuberay_crd_schema(job):
    errors = rayjob_validator("v1.7.0").iter_errors(globals()[job]())
    assert [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in errors] == []


@RAYJOBS
def test_rayjob_on_kuberay_1_4_lacks_only_auth_options(job):
    """docs/cluster.md tells KubeRay 1.4 users to delete authOptions and nothing else: keep that true."""
    errors = list(rayjob_validator("v1.4.2").iter_errors(globals()[job]()))
    where = [(list(e.absolute_path), e.validator) for e in errors]
    assert where == [(["spec", "rayClusterSpec"], "additionalProperties")]
    assert "authOptions" in errors[0].message
    without_auth = globals()[job]()
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
@RAYJOBS
def test_kuberay_schema_refuses_a_broken_rayjob(break_it, job):
    document = globals()[job]()
    break_it(document)
    with pytest.raises(jsonschema.ValidationError):
        rayjob_validator("v1.7.0").validate(document)


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


# deploy/kuberay/retrain-cronjob.yaml: the retrain on a schedule. Its Kubernetes documents are checked
# against Kubernetes 1.30's own schemas (strict: unknown fields refused), vendored standalone in
# tests/data/kubernetes (from the kubernetes-validate wheel, see the README there); the RayJob it keeps in
# its ConfigMap against KubeRay's CRD, as rayjob.yaml is.

CRONJOB_FILE = REPO / "deploy" / "kuberay" / "retrain-cronjob.yaml"
K8S_SCHEMAS = REPO / "tests" / "data" / "kubernetes"
K8S_VERSION = "v1.30.0"


@cache
def k8s_validators() -> dict[tuple[str, str], jsonschema.protocols.Validator]:
    """(apiVersion, kind) -> a validator of that kind's schema, from the vendored standalone files."""
    validators = {}
    for path in sorted(K8S_SCHEMAS.glob(f"*-{K8S_VERSION}.json.gz")):
        vendored = json.loads(gzip.decompress(path.read_bytes()))
        source, schema = vendored["source"], vendored["schema"]
        assert source["package"] == "kubernetes-validate" and source["kubernetes"] == K8S_VERSION
        assert len(source["wheel_sha256"]) == 64 and "-local-strict/" in source["path"]
        assert schema["additionalProperties"] is False  # the strict variant
        (gvk,) = schema["x-kubernetes-group-version-kind"]
        api_version = f"{gvk['group']}/{gvk['version']}" if gvk["group"] else gvk["version"]
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
        validators[api_version, gvk["kind"]] = cls(schema)
    return validators


def k8s_validator(doc: dict) -> jsonschema.protocols.Validator:
    return k8s_validators()[doc["apiVersion"], doc["kind"]]


def cron_docs() -> dict[tuple[str, str], dict]:
    """(kind, name) -> document of retrain-cronjob.yaml."""
    docs = [doc for doc in yaml.safe_load_all(CRONJOB_FILE.read_text()) if doc]
    keyed = {(doc["kind"], doc["metadata"]["name"]): doc for doc in docs}
    assert len(keyed) == len(docs), "a kind/name twice"
    return keyed


def cron_doc(kind: str) -> dict:
    """The one document of that kind (ServiceAccount: the submitter's, not the Ray pods' copy)."""
    found = [doc for (k, name), doc in cron_docs().items() if k == kind and name != "rlplatform-ray"]
    assert len(found) == 1, kind
    return found[0]


def retrain_rayjob() -> dict:
    (text,) = cron_doc("ConfigMap")["data"].values()
    return yaml.safe_load(text)


def submit_pod(cronjob: dict) -> dict:
    return cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]


CRON_FIELDS = [  # (name, lowest, highest, names) as Kubernetes' CronJob controller reads them (robfig/cron)
    ("minute", 0, 59, []), ("hour", 0, 23, []), ("day-of-month", 1, 31, []),
    ("month", 1, 12, ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]),
    ("day-of-week", 0, 7, ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]),
]


def cron_field(text: str, name: str, low: int, high: int, names: list[str]) -> set[int]:
    def number(word: str) -> int:
        if word.lower() in names:
            return names.index(word.lower()) + (1 if name == "month" else 0)
        if not word.isdigit() or not low <= int(word) <= high:
            raise ValueError(f"{name}: {word!r} is not in {low}-{high}")
        return int(word)

    values = set()
    for item in text.split(","):
        match = re.fullmatch(r"(\*|[A-Za-z0-9]+(?:-[A-Za-z0-9]+)?)(?:/(\d+))?", item)
        if not match:
            raise ValueError(f"{name}: {item!r}")
        span, step = match.group(1), int(match.group(2) or 1)
        if step < 1:
            raise ValueError(f"{name}: step 0")
        if span == "*":
            first, last = low, high
        else:
            first, _, end = span.partition("-")
            first = number(first)
            last = number(end) if end else (high if match.group(2) else first)
        if first > last:
            raise ValueError(f"{name}: {item!r} runs backwards")
        values.update(range(first, last + 1, step))
    return {0 if name == "day-of-week" and v == 7 else v for v in values}


def parse_cron(schedule: str) -> list[set[int]]:
    """A 5-field cron expression -> the allowed values of each field; ValueError if it is not one."""
    words = schedule.split()
    if len(words) != 5:
        raise ValueError(f"{schedule!r}: {len(words)} fields, not 5")
    return [cron_field(word, *field) for word, field in zip(words, CRON_FIELDS, strict=True)]


def cron_firings(schedule: str, days: int = 4 * 366):
    """The times the schedule fires over `days` days from 2024-01-01 (a leap year), in order."""
    minutes, hours, mdays, months, wdays = parse_cron(schedule)
    dom_star, dow_star = schedule.split()[2].startswith("*"), schedule.split()[4].startswith("*")
    for offset in range(days):
        day = dt.date(2024, 1, 1) + dt.timedelta(days=offset)
        dom, dow = day.day in mdays, (day.isoweekday() % 7) in wdays
        # cron: when both day fields are restricted, either one matching is enough
        day_ok = (dom or dow) if not (dom_star or dow_star) else (dom and dow)
        if day.month in months and day_ok:
            for hour in sorted(hours):
                for minute in sorted(minutes):
                    yield dt.datetime.combine(day, dt.time(hour, minute))


def test_retrain_file_has_the_submitters_rbac_the_rayjob_and_the_cronjob():
    kinds = sorted(kind for kind, _ in cron_docs())
    assert kinds == ["ConfigMap", "CronJob", "Role", "RoleBinding", "ServiceAccount", "ServiceAccount"]
    assert set(k8s_validators()) == {("v1", "ServiceAccount"), ("rbac.authorization.k8s.io/v1", "Role"),
                                     ("rbac.authorization.k8s.io/v1", "RoleBinding"), ("v1", "ConfigMap"),
                                     ("batch/v1", "CronJob")}


@pytest.mark.parametrize("key", sorted(cron_docs()), ids="/".join)
def test_retrain_documents_pass_kubernetes_schemas(key):
    doc = cron_docs()[key]
    errors = k8s_validator(doc).iter_errors(doc)
    assert [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in errors] == []


CRON = ("CronJob", "rlplatform-retrain")


@pytest.mark.parametrize("key, break_it", [
    (CRON, lambda d: d["spec"].pop("schedule")),  # required
    (CRON, lambda d: d["spec"].update(schedul=d["spec"].pop("schedule"))),
    (CRON, lambda d: d["spec"].update(concurency_policy="Forbid")),
    (CRON, lambda d: d["spec"].update(startingDeadlineSeconds="1h")),
    (CRON, lambda d: d.update(apiVersion="batch/v1beta1")),
    (CRON, lambda d: submit_pod(d).update(serviceAccountNam="rlplatform-retrain-submitter")),
    (CRON, lambda d: submit_pod(d)["containers"][0].update(volumeMount=[])),
    (CRON, lambda d: submit_pod(d)["volumes"][0]["configMap"]["items"][0].pop("key")),
    (("Role", "rlplatform-retrain-submitter"), lambda d: d["rules"][0].pop("verbs")),
    (("Role", "rlplatform-retrain-submitter"), lambda d: d["rules"][0].update(verbs="create")),
    (("RoleBinding", "rlplatform-retrain-submitter"), lambda d: d.pop("roleRef")),
    (("RoleBinding", "rlplatform-retrain-submitter"), lambda d: d["subjects"][0].update(serviceAccount="x")),
    (("ServiceAccount", "rlplatform-retrain-submitter"), lambda d: d.update(spec={})),
    (("ConfigMap", "rlplatform-retrain-rayjob"), lambda d: d["data"].update(replicas=1)),  # strings only
], ids=["cron-no-schedule", "cron-schedule-typo", "cron-unknown-key", "cron-int-type", "cron-apiversion",
        "pod-key-typo", "container-key-typo", "volume-item-required", "role-no-verbs", "role-verbs-type",
        "binding-no-roleref", "subject-unknown-key", "sa-unknown-key", "configmap-value-type"])
def test_kubernetes_schemas_refuse_a_broken_retrain_document(key, break_it):
    doc = cron_docs()[key]
    validator = k8s_validator(doc)  # chosen before the break (which may change apiVersion)
    break_it(doc)
    with pytest.raises(jsonschema.ValidationError):
        validator.validate(doc)


def test_retrain_rayjob_runs_experiments_retrain_with_a_conf_of_the_repo():
    words = shlex.split(retrain_rayjob()["spec"]["entrypoint"])
    assert words[:3] == ["python", "-m", "experiments.retrain"]
    conf = Path(words[3])
    assert conf.parent == Path("conf") and conf.suffix == ".yaml" and (REPO / conf).is_file()
    # the flags of rayjob.yaml's run (the same cluster: --hardware is the worker's preset, S3 everywhere)
    assert words[3:] == shlex.split(rayjob()["spec"]["entrypoint"])[3:]


def test_retrain_entrypoint_parses_with_the_retrain_cli():
    """Its flags, read by experiments.retrain's own parser (a flag it does not know fails here)."""
    from experiments.retrain import parse_args  # a rename fails here, as a flag the parser does not know does

    words = shlex.split(retrain_rayjob()["spec"]["entrypoint"])
    assert words[:3] == ["python", "-m", "experiments.retrain"]
    args = parse_args(words[3:])
    assert str(args.conf) == "conf/dqn_btc.yaml" and args.address == "auto" and args.hardware == "g5_xlarge"
    assert args.storage.startswith("s3://") and args.overrides[0].startswith("environment.env_config.data_path=s3://")


def test_retrain_rayjob_is_rayjob_yamls_cluster_under_a_new_name_each_run():
    """Same image, venv (runtime env), code, token auth, dashboard, IRSA account and MLflow Secret as
    rayjob.yaml: the retrain runs where the main job runs. generateName: `kubectl create` names each run."""
    job, main = retrain_rayjob(), rayjob()
    assert (job["apiVersion"], job["kind"]) == (main["apiVersion"], main["kind"])
    for key in ("rayClusterSpec", "runtimeEnvYAML", "submissionMode"):
        assert job["spec"][key] == main["spec"][key], key
    assert "name" not in job["metadata"] and job["metadata"]["generateName"].endswith("-")
    assert job["spec"]["shutdownAfterJobFinishes"] is True and job["spec"]["ttlSecondsAfterFinished"] > 0
    assert 0 < job["spec"]["activeDeadlineSeconds"]
    assert cron_docs()["ServiceAccount", "rlplatform-ray"] == rayjob_docs()["ServiceAccount"]


def test_cronjob_creates_the_rayjob_from_the_mounted_configmap_key():
    cronjob, configmap = cron_doc("CronJob"), cron_doc("ConfigMap")
    pod = submit_pod(cronjob)
    (container,) = pod["containers"]
    assert container["command"][:3] == ["kubectl", "create", "-f"] and len(container["command"]) == 4
    target = PurePosixPath(container["command"][3])
    (mount,) = [m for m in container["volumeMounts"] if target.is_relative_to(m["mountPath"])]
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    assert volume["configMap"]["name"] == configmap["metadata"]["name"]
    (item,) = [i for i in volume["configMap"]["items"]
               if PurePosixPath(mount["mountPath"], i["path"]) == target]
    assert yaml.safe_load(configmap["data"][item["key"]]) == retrain_rayjob()
    assert retrain_rayjob()["kind"] == "RayJob"
    # a pinned kubectl, not :latest
    assert re.fullmatch(r"[\w.-]+(/[\w.-]+)+:v?\d+\.\d+\.\d+", container["image"]), container["image"]
    assert pod["restartPolicy"] == "Never"


def test_cronjob_pod_runs_as_the_bound_account_allowed_to_create_rayjobs():
    pod, binding, role = submit_pod(cron_doc("CronJob")), cron_doc("RoleBinding"), cron_doc("Role")
    account = cron_doc("ServiceAccount")["metadata"]["name"]
    assert pod["serviceAccountName"] == account != "rlplatform-ray"  # no IRSA role for the submitter
    assert pod.get("automountServiceAccountToken", True) is True  # kubectl's in-cluster login
    assert [(s["kind"], s["name"], s.get("namespace")) for s in binding["subjects"]] == \
        [("ServiceAccount", account, None)]  # no namespace: the binding's own
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                  "name": role["metadata"]["name"]}
    granted = {(group, resource, verb) for rule in role["rules"] for group in rule["apiGroups"]
               for resource in rule["resources"] for verb in rule["verbs"]}
    assert ("ray.io", "rayjobs", "create") in granted
    assert granted <= {("ray.io", "rayjobs", verb) for verb in ("create", "get", "list", "watch")}


def test_cronjob_schedule_is_valid_cron_and_runs_cannot_overlap():
    spec = cron_doc("CronJob")["spec"]
    parse_cron(spec["schedule"])
    zoneinfo.ZoneInfo(spec["timeZone"])
    assert "TZ" not in spec["schedule"]  # the API server refuses CRON_TZ/TZ= alongside timeZone
    assert spec["concurrencyPolicy"] == "Forbid" and spec["startingDeadlineSeconds"] > 0
    assert spec["successfulJobsHistoryLimit"] >= 1 and spec["failedJobsHistoryLimit"] >= 1
    # Forbid sees only the minute-long submitting Job: the RayJob's deadline must end a run before the next
    firings = list(cron_firings(spec["schedule"]))
    assert len(firings) > 1
    gap = min((b - a).total_seconds() for a, b in itertools.pairwise(firings))
    job = retrain_rayjob()["spec"]
    assert job["activeDeadlineSeconds"] + job["ttlSecondsAfterFinished"] < gap


@pytest.mark.parametrize("schedule", [
    "0 3 * *", "0 3 * * 1 2", "@weekly", "60 3 * * 1", "0 24 * * 1", "0 3 0 * *", "0 3 * 13 *",
    "0 3 * * 8", "*/0 3 * * *", "0 3 * * MON-", "0 5-3 * * *", "0 3 * * funday", "0,, 3 * * *",
])
def test_cron_check_refuses_a_bad_schedule(schedule):
    with pytest.raises(ValueError):
        parse_cron(schedule)


def test_cron_check_reads_ranges_steps_names_and_either_day_field():
    assert parse_cron("*/15 9-17/4 1,15 jan-mar mon-fri")[:2] == [{0, 15, 30, 45}, {9, 13, 17}]
    assert parse_cron("0 3 * * 7")[4] == {0} and parse_cron("0 3 * * SUN")[4] == {0}
    mondays = list(cron_firings("0 3 * * 1", days=28))
    assert [d.isoweekday() for d in mondays] == [1] * 4 and {d.hour for d in mondays} == {3}
    either = list(cron_firings("0 0 1 * 1", days=31))  # January 2024: the 1st (a Monday) and Mondays
    assert [d.day for d in either] == [1, 8, 15, 22, 29]


def test_the_gpu_job_records_gpu_metrics():
    """The RayJob runs on a GPU node: it installs the `gpu` extra, so trials log GPU utilization and power."""
    runtime_env = yaml.safe_load(rayjob()["spec"]["runtimeEnvYAML"])
    installed = {canonicalize_name(Requirement(dep).name) for dep in runtime_env["pip"]["packages"]}
    extra = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["gpu"]
    assert {canonicalize_name(Requirement(dep).name) for dep in extra} <= installed
