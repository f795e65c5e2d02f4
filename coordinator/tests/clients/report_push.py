"""`lynkeus report push <dir>`, written from the spec (lynkeus-reference
§4.1), not from Argus: the reports-service sequence over plain HTTP. Prints
one JSON line per request: {"step", "status", "body"}.

usage: report_push.py BASE KEY RUN_DIR PROJECT
"""
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request

base, key, run_dir, project = sys.argv[1:5]


def call(step, method, path, body, content_type):
    request = urllib.request.Request(
        base + path,
        data=body,
        method=method,
        headers={"authorization": "Bearer " + key, "content-type": content_type},
    )
    try:
        with urllib.request.urlopen(request) as response:
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as error:
        status, raw = error.code, error.read()
    answer = json.loads(raw) if raw.strip() else None
    print(json.dumps({"step": step, "status": status, "body": answer}), flush=True)
    return status, answer


with open(os.path.join(run_dir, "run.json")) as f:
    run = json.load(f)
status, created = call("create", "POST", "/v1/runs", json.dumps({"project": project, "run": run}).encode(), "application/json")
if not 200 <= status < 300:
    sys.exit(1)
run_id = created["id"]
with open(os.path.join(run_dir, "cases.jsonl"), "rb") as f:
    lines = f.read()
call("cases", "PUT", "/v1/runs/%s/cases" % run_id, lines, "application/x-ndjson")
# Every distinct file a line names, video first, then the screenshots.
paths = []
for line in lines.decode().splitlines():
    if not line.strip():
        continue
    case = json.loads(line)
    for path in [case.get("video")] + [step.get("screenshot") for step in case.get("steps", [])]:
        if path and path not in paths:
            paths.append(path)
for path in paths:
    local = os.path.join(run_dir, path)
    if os.path.exists(local):
        encoded = "/".join(urllib.parse.quote(segment, safe="") for segment in path.split("/"))
        with open(local, "rb") as f:
            call("file " + path, "PUT", "/v1/runs/%s/files/%s" % (run_id, encoded), f.read(), "application/octet-stream")
call("finish", "POST", "/v1/runs/%s/finish" % run_id, b"", "application/json")
