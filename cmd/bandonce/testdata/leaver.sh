#!/bin/sh
# A command that answers at once and leaves a process behind: a subshell
# starts it in a session of its own and exits, so it is nobody's child.
(setsid sleep 300 & echo $! >> "$PIDS")
echo "done"
