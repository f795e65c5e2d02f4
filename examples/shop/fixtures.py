"""The shop's fixtures server: one JSON line in, one JSON line out.

lynkeus (and argus) start it once per run and send it the non-app steps of
each case. It keeps its users in memory, so a run starts from nothing.
"""

import json
import sys

users = {}
calls = {"warm_cache": 0}


def answer(command, params):
    if command == "lynkeus.describe":
        return {"commands": ["create_user", "give_points", "inspect", "warm_cache"]}
    if command == "create_user":
        user_id = f"u_{len(users) + 1}"
        users[user_id] = {"user_id": user_id, "name": params.get("name", "Ana"), "points": 0}
        return {"ok": True, **users[user_id]}
    if command == "give_points":
        user = users.get(params.get("user_id"))
        if user is None:
            return {"ok": False, "error": f"no user {params.get('user_id')}"}
        user["points"] += int(params.get("points", 0))
        return {"ok": True, "user_id": user["user_id"], "points": user["points"]}
    if command == "inspect":
        user = users.get(params.get("user_id"))
        if user is None:
            return {"ok": False, "error": f"no user {params.get('user_id')}"}
        return {"ok": True, **user}
    if command == "warm_cache":
        # A flaky backend: cold on the first call of a run, warm after.
        calls["warm_cache"] += 1
        if calls["warm_cache"] == 1:
            return {"ok": False, "error": "the cache is cold"}
        return {"ok": True}
    return {"ok": False, "error": f"no fixture {command}"}


for line in sys.stdin:
    line = line.strip()
    if not line:
        continue
    request = json.loads(line)
    reply = answer(request.get("command"), request.get("params") or {})
    print(json.dumps(reply), flush=True)
