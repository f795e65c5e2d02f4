#!/usr/bin/env bash
# Pictures of the dashboard for the README, taken from the demo: its run
# page, why a case failed with its replay open, the live fleet and a
# device's page, on a desktop (1400x1000) and a phone (390x844), through
# chromedriver (scripts/screenshots.py; selenium from the test clients'
# virtualenv, which scripts/test-clients.sh makes).
# Needs chromium and chromedriver on the PATH.
#
#   bash scripts/screenshots.sh [OUT_DIR]     # default docs/screenshots
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-docs/screenshots}
mkdir -p "$out"
if ! command -v chromedriver >/dev/null; then
  echo "screenshots.sh: no chromedriver on the PATH (Debian: apt-get install chromium chromium-driver)" >&2
  exit 2
fi
cargo build --release -q
log=$(mktemp)
state=$(mktemp -d)
./target/release/argus demo --state "$state" >"$log" 2>&1 &
demo=$!
trap 'kill "$demo" 2>/dev/null || true; wait "$demo" 2>/dev/null || true; rm -rf "$state" "$log"' EXIT
for _ in $(seq 1 600); do
  grep -q "serving until Ctrl-C" "$log" && break
  kill -0 "$demo" 2>/dev/null || { cat "$log" >&2; exit 1; }
  sleep 0.5
done
dashboard=$(sed -n 's/^dashboard: //p' "$log" | head -1)
run=$(grep -o "${dashboard}runs/[0-9a-f]*" "$log" | head -1)
if [ -z "$run" ]; then
  echo "screenshots.sh: the demo printed no run page" >&2
  cat "$log" >&2
  exit 1
fi
python=target/test-clients/venv/bin/python
if [ ! -x "$python" ]; then
  bash scripts/test-clients.sh >/dev/null
fi
"$python" scripts/screenshots.py "$dashboard" "$run" "$out"
