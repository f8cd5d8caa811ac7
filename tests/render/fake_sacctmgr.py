"""Stand-in for sacctmgr: the few commands accounts-apply.sh uses, associations kept in $FAKE_SACCTMGR_STATE."""

import json
import os
import sys
from pathlib import Path

state_file = Path(os.environ["FAKE_SACCTMGR_STATE"])
state = json.loads(state_file.read_text()) if state_file.exists() else {"assoc": [], "writes": []}
args = sys.argv[1:]
kv = dict(a.split("=", 1) for a in args if "=" in a)
if args[:3] == ["-n", "-P", "show"]:
    for account, user, share in state["assoc"]:
        print(f"{account}|{user}|{share}")
    sys.exit(0)
state["writes"].append(args)
if args[1:3] == ["add", "account"]:
    state["assoc"].append([args[3], "", kv["fairshare"]])
elif args[1:3] == ["modify", "account"]:
    for row in state["assoc"]:
        if row[0] == kv["name"] and row[1] == "":
            row[2] = kv["fairshare"]
elif args[1:3] == ["add", "user"]:
    state["assoc"].append([kv["account"], args[3], "1"])
else:
    sys.exit(f"fake sacctmgr: unexpected {args}")
state_file.write_text(json.dumps(state))
