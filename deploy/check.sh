#!/usr/bin/env bash
# Validates the deploy files with real validators (.ci/run calls it):
# the compose file against the Compose Specification's schema, the
# Kubernetes manifests against Kubernetes' own schemas (unknown fields
# refused), the systemd units with systemd-analyze, and the launchd plist as
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

echo "kubernetes: deploy/kubernetes/*.yaml"
"$venv/bin/kubernetes-validate" --strict deploy/kubernetes/*.yaml

echo "systemd: deploy/systemd/*.service"
# verify wants the ExecStart binary to exist: the units are checked as they
# are, with the path of a built argus in place of /usr/local/bin/argus.
argus=$(command -v argus || true)
[ -n "$argus" ] || argus=$(ls target/debug/argus target/release/argus 2>/dev/null | head -1 || true)
[ -n "$argus" ] || { cargo build -q -p argus && argus=target/debug/argus; }
units=$(mktemp -d)
trap 'rm -rf "$units"' EXIT
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
