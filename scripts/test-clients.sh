#!/usr/bin/env bash
# Installs the real WebDriver clients the facade's tests drive it with
# (cli/tests/webdriver.rs): Appium-Python-Client and selenium in a Python
# virtualenv, selenium-webdriver for Node; and what checks the webhooks'
# payloads (cli/tests/webhooks.rs): Slack's Block Kit types, GitHub's
# OpenAPI description, TypeScript and ajv. Idempotent; .ci/run calls it.
set -euo pipefail
cd "$(dirname "$0")/.."
clients=cli/tests/clients
into=target/test-clients
mkdir -p "$into"
if [ ! -x "$into/venv/bin/python" ]; then
  python3 -m venv "$into/venv"
fi
"$into/venv/bin/pip" install --quiet --disable-pip-version-check -r "$clients/requirements.txt"
mkdir -p "$into/node"
cp "$clients/package.json" "$into/node/package.json"
cp "$clients/validate_webhooks.js" "$into/node/validate_webhooks.js"
npm install --silent --no-audit --no-fund --prefix "$into/node" >/dev/null
echo "WebDriver test clients in $into: $("$into/venv/bin/python" -c 'import appium, selenium; print("selenium", selenium.__version__)'), node selenium-webdriver $(node -p "require('./$into/node/node_modules/selenium-webdriver/package.json').version")"
