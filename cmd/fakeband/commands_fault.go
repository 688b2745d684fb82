package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"strings"

	"github.com/band-once/bandonce/fakeband"
)

// requestOnly and socketOnly are the flags that belong to one family of
// faults; the kind says which family a rule is.
var (
	requestOnly = []string{"endpoint", "count", "status", "code", "retry-after", "empty-body"}
	socketOnly  = []string{"event"}
)

// faultFlags builds one rule from flags, or takes a whole plan with -plan.
// The server checks the values; this only shapes the JSON.
func faultFlags(fs *flag.FlagSet) func(fs *flag.FlagSet) (adminCall, error) {
	plan := fs.String("plan", "", `a whole plan as JSON: {"request": [...], "socket": [...]}; excludes the other flags`)
	kind := fs.String("kind", "", "request kinds: fail_before, lose_response, delay, stale_next, loop_cursor, apply_late; socket kinds: drop_connection, duplicate_push, delay_push, lose_push")
	endpoint := fs.String("endpoint", "", "request faults: me, chats, next, processing, processed, failed, post, context, messages, event, activity, participants, add_participant, remove_participant, create_chat, peers, human_post, control, socket (default: any agent endpoint)")
	event := fs.String("event", "", "socket faults: the push event, e.g. message_created, agent.control (default: any)")
	nth := fs.Int("nth", 0, "fire on the Nth matching request or push (1-based)")
	count := fs.Int("count", 0, "with -nth: fire on this many consecutive matches")
	probability := fs.Float64("probability", 0, "instead of -nth: the seeded chance per match")
	status := fs.Int("status", 0, "fail_before: the HTTP status (default 503)")
	code := fs.String("code", "", "fail_before: the error code (default: named after the status); -status 403 -code limit_reached is Band's plan quota")
	retryAfter := fs.String("retry-after", "", "fail_before: the Retry-After header")
	emptyBody := fs.Bool("empty-body", false, "fail_before: answer with no body, like a load balancer")
	delay := fs.String("delay", "", "delay, apply_late and delay_push: a Go duration such as 2s")
	return func(fs *flag.FlagSet) (adminCall, error) {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if fs.NArg() > 0 {
			return adminCall{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
		}
		if *plan != "" {
			if len(set) > 2 || (len(set) == 2 && !set["url"]) {
				return adminCall{}, errors.New("-plan excludes the other fault flags")
			}
			if !json.Valid([]byte(*plan)) {
				return adminCall{}, errors.New("-plan is not valid JSON")
			}
			return adminCall{method: http.MethodPost, path: "/faults", body: json.RawMessage(*plan)}, nil
		}
		socket, err := isSocketKind(*kind)
		if err != nil {
			return adminCall{}, err
		}
		wrong := requestOnly
		if !socket {
			wrong = socketOnly
		}
		for _, name := range wrong {
			if set[name] {
				return adminCall{}, fmt.Errorf("-%s does not apply to kind %s", name, *kind)
			}
		}
		rule := map[string]any{"kind": *kind}
		for name, value := range map[string]any{
			"endpoint": *endpoint, "event": *event, "nth": *nth, "count": *count, "probability": *probability,
			"status": *status, "code": *code, "retry-after": *retryAfter, "empty-body": *emptyBody, "delay": *delay,
		} {
			if set[name] {
				rule[strings.ReplaceAll(name, "-", "_")] = value
			}
		}
		family := "request"
		if socket {
			family = "socket"
		}
		return adminCall{method: http.MethodPost, path: "/faults", body: map[string]any{family: []any{rule}}}, nil
	}
}

// isSocketKind tells the family of a kind by its name; the two families'
// names do not overlap.
func isSocketKind(kind string) (bool, error) {
	var rk fakeband.FaultKind
	if rk.UnmarshalText([]byte(kind)) == nil {
		return false, nil
	}
	var sk fakeband.SocketFaultKind
	if sk.UnmarshalText([]byte(kind)) == nil {
		return true, nil
	}
	if kind == "" {
		return false, errors.New("-kind is required (or give a whole -plan)")
	}
	return false, fmt.Errorf("-kind %q is neither a request kind (fail_before, lose_response, delay, stale_next, loop_cursor, apply_late) nor a socket kind (drop_connection, duplicate_push, delay_push, lose_push)", kind)
}
