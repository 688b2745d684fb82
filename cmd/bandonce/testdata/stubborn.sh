#!/bin/sh
# A command that will not go quietly: it ignores SIGTERM, starts children
# that start their own (one in a session of its own), writes every pid to
# $PIDS and waits; it would answer after a long while.
trap '' TERM
(sleep 300 & echo $! >> "$PIDS"; wait) &
echo $! >> "$PIDS"
setsid sleep 300 &
echo $! >> "$PIDS"
echo $$ >> "$PIDS"
sleep "${STUBBORN_FOR:-300}"
printf 'too late: '; cat
