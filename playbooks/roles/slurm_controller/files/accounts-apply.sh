#!/bin/sh
# Installed by clusterctl: make slurmdbd's accounts and users match FILE (lines: ACCOUNT SHARE USER,USER or -).
# Adds missing accounts and users and updates fair-share weights; never removes anything (removing an account drops its
# usage history: do that by hand). Prints "changed" when it changed something, so a second run is a no-op.
# Usage: accounts-apply.sh FILE CLUSTER. Names come from the spec's allow-lists (no spaces or shell metacharacters).
set -eu
file=$1 cluster=$2
assoc=$(sacctmgr -n -P show assoc cluster="$cluster" format=account,user,fairshare)
has() { printf '%s\n' "$assoc" | awk -F'|' -v a="$1" -v u="$2" '$1 == a && $2 == u { found = 1 } END { exit !found }'; }
share_of() { printf '%s\n' "$assoc" | awk -F'|' -v a="$1" '$1 == a && $2 == "" { print $3; exit }'; }
changed=
while read -r account share users; do
    [ -n "$account" ] || continue
    if ! has "$account" ""; then
        sacctmgr -i add account "$account" cluster="$cluster" fairshare="$share" >/dev/null
        changed=1
    elif [ "$(share_of "$account")" != "$share" ]; then
        sacctmgr -i modify account where name="$account" cluster="$cluster" set fairshare="$share" >/dev/null
        changed=1
    fi
    [ "$users" = - ] && continue
    for user in $(printf '%s' "$users" | tr ',' ' '); do
        if ! has "$account" "$user"; then
            sacctmgr -i add user "$user" account="$account" cluster="$cluster" >/dev/null
            changed=1
        fi
    done
done < "$file"
[ -z "$changed" ] || echo changed
