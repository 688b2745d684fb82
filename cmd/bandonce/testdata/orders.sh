#!/bin/sh
# An agent for bandonce run that asks an orders service (ORDERS_URL) for
# the status of the order in the message, and fails when the service does.
status=$(curl -sf --max-time 5 "$ORDERS_URL/status") || { echo "orders service unreachable" >&2; exit 1; }
printf 'order status: %s' "$status"
