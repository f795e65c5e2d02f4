#!/usr/bin/env bash
# Pictures of the dashboard for the README, taken from the demo: its run
# page and the fleet page, on a desktop (1400x1000) and a phone (390x844).
# Needs a Chromium (chromium, chromium-browser or google-chrome) on the PATH.
#
#   bash scripts/screenshots.sh [OUT_DIR]     # default docs/screenshots
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-docs/screenshots}
mkdir -p "$out"
browser=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [ -z "$browser" ]; then
  echo "screenshots.sh: no chromium, chromium-browser or google-chrome on the PATH" >&2
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
shoot() { # URL WIDTH,HEIGHT FILE
  "$browser" --headless --disable-gpu --no-sandbox --hide-scrollbars --force-device-scale-factor=1 \
    --window-size="$2" --screenshot="$out/$3" "$1" >/dev/null 2>&1
  echo "$out/$3: $1"
}
shoot "$run" 1400,1000 run.png
shoot "${dashboard}fleet" 1400,1000 fleet.png
shoot "$run" 390,844 run-phone.png
shoot "${dashboard}fleet" 390,844 fleet-phone.png
