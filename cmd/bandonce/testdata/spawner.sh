#!/bin/sh
# An agent that leaves processes behind if its supervisor lets it: two
# sleeps, one in the agent's process group and one in a session of its
# own, then the real agent ($AGENT, with its arguments) in the shell's
# place. Every pid goes to $PIDS, one a line.
sleep 1000 &
echo $! >> "$PIDS"
setsid sleep 1000 &
echo $! >> "$PIDS"
echo $$ >> "$PIDS"
exec "$AGENT" "$@"
