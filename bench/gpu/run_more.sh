#!/bin/bash
# More runs after run_issue22.sh, on the same device (bench/gpu/README.md): PLAN names them,
# e.g. PLAN="night u1 true --units-per-slot 1; bare b5_u1 u1 5; night d2 true"
G=${G:-/tmp/gpu}
source "$(dirname "$0")/lib_issue22.sh"
pid=$(pgrep -f run_issue22.sh); [ -n "$pid" ] && { kill $pid; sleep 1; stop_server; log "stopped run_issue22.sh"; }
eval "$PLAN"
summary
touch $G/more.done
log "more done"
