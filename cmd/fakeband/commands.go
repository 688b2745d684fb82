package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/band-once/bandonce/fakeband"
)

// command is one sub-command: its flags, and the admin call they make.
// envelope prints the answer whole, {"data": ...}, as the admin API gives
// it, so that the jq filters written against the API work on the output.
type command struct {
	summary  string
	flags    func(fs *flag.FlagSet) func(fs *flag.FlagSet) (adminCall, error)
	envelope bool
}

// adminCall is one request to the admin API. body nil means none.
type adminCall struct {
	method, path string
	body         any
}

var commands = map[string]command{
	"setup":          {summary: "print who is here, with keys", flags: get("/setup")},
	"faults":         {summary: "print the active fault rules and how often each kind fired", flags: get("/faults")},
	"truth":          {summary: "print the ground truth, as the admin API answers it ({\"data\": ...})", flags: get("/truth"), envelope: true},
	"clear-faults":   {summary: "remove every fault rule", flags: simple(http.MethodDelete, "/faults")},
	"say":            {summary: "post a message as a human", flags: sayFlags},
	"stop":           {summary: "stop every agent in a room", flags: roomFlags("/stop")},
	"play":           {summary: "resume every agent in a room", flags: roomFlags("/play")},
	"interrupt":      {summary: "interrupt an agent (agent-wide), or the agents of a room", flags: interruptFlags},
	"add":            {summary: "add a participant to a room", flags: participantFlags(http.MethodPost)},
	"remove":         {summary: "remove a participant from a room", flags: participantFlags(http.MethodDelete)},
	"describe":       {summary: "set an agent's description (what GET /agent/me answers)", flags: describeFlags},
	"contact-add":    {summary: "make a participant one of an agent's contacts (contact_added)", flags: contactFlags(http.MethodPost)},
	"contact-remove": {summary: "end a contact (contact_removed)", flags: contactFlags(http.MethodDelete)},
	"drop":           {summary: "cut an agent's sockets, as a network failure would", flags: agentFlags("/drop")},
	"supersede":      {summary: "supersede an agent's sockets", flags: agentFlags("/supersede")},
	"fault":          {summary: "add a fault rule", flags: faultFlags},
	"rate-limit":     {summary: "throttle each agent's REST calls with a token bucket (429s)", flags: rateLimitFlags},
}

// run parses the command line, makes the call and prints the answer's
// data as indented JSON.
func (c command) run(ctx context.Context, name string, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("fakeband "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "fakeband %s: %s\n\nflags:\n", name, c.summary)
		fs.PrintDefaults()
	}
	url := fs.String("url", getenv("FAKEBAND_URL"), "the running fakeband's `root` URL (default $FAKEBAND_URL)")
	build := c.flags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	call, err := build(fs)
	if err == nil && *url == "" {
		err = errors.New("no server: pass -url or set FAKEBAND_URL (fakeband prints it when it starts)")
	}
	if err != nil {
		fmt.Fprintf(stderr, "fakeband %s: %v\n", name, err)
		return exitUsage
	}
	data, err := do(ctx, strings.TrimSuffix(*url, "/"), call)
	if err != nil {
		fmt.Fprintf(stderr, "fakeband %s: %v\n", name, err)
		return exitError
	}
	if c.envelope {
		data, _ = json.Marshal(struct {
			Data json.RawMessage `json:"data"`
		}{data})
	}
	var out bytes.Buffer
	if json.Indent(&out, data, "", "  ") != nil {
		out.Reset()
		out.Write(data)
	}
	out.WriteByte('\n')
	_, _ = stdout.Write(out.Bytes())
	return exitOK
}

// adminError is the error envelope of the admin API.
type adminError struct {
	Status  int
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *adminError) Error() string {
	return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message)
}

// maxAdminAnswer bounds an admin answer the commands read.
const maxAdminAnswer = 64 << 20

// do makes the call and returns the "data" of the answer, or the error
// the server gave.
func do(ctx context.Context, root string, call adminCall) (json.RawMessage, error) {
	var body io.Reader
	if call.body != nil {
		data, err := json.Marshal(call.body)
		if err != nil {
			return nil, err
		}
		body = bytes.NewReader(data)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, call.method, root+fakeband.AdminPrefix+call.path, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	// One request per run: a kept-alive connection would only linger.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("is fakeband running at %s? %w", root, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAdminAnswer+1))
	if err != nil {
		return nil, err
	}
	if len(raw) > maxAdminAnswer {
		return nil, fmt.Errorf("%s answered %s %s with more than %d MiB, more than this command reads; read the admin API in pages or with a client of your own", root, call.method, call.path, maxAdminAnswer>>20)
	}
	var env struct {
		Data  json.RawMessage `json:"data"`
		Error *adminError     `json:"error"`
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		return nil, fmt.Errorf("%s answered %d with no admin API envelope (is it a fakeband?): %.200s", root, resp.StatusCode, raw)
	}
	if env.Error != nil {
		env.Error.Status = resp.StatusCode
		return nil, env.Error
	}
	return env.Data, nil
}

func simple(method, path string) func(fs *flag.FlagSet) func(fs *flag.FlagSet) (adminCall, error) {
	return func(*flag.FlagSet) func(fs *flag.FlagSet) (adminCall, error) {
		return func(fs *flag.FlagSet) (adminCall, error) {
			if fs.NArg() > 0 {
				return adminCall{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
			}
			return adminCall{method: method, path: path}, nil
		}
	}
}

func get(path string) func(fs *flag.FlagSet) func(fs *flag.FlagSet) (adminCall, error) {
	return simple(http.MethodGet, path)
}

// listFlag collects a repeatable flag; each value may also be a comma list.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(s string) error {
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			*l = append(*l, v)
		}
	}
	return nil
}

func sayFlags(fs *flag.FlagSet) func(fs *flag.FlagSet) (adminCall, error) {
	room := fs.String("room", "", "the room's id or title (required)")
	from := fs.String("from", "", "the sender's id, name or handle (default: the room's owner)")
	text := fs.String("text", "", "the message (default: the arguments after the flags)")
	var mentions listFlag
	fs.Var(&mentions, "mention", "whom to mention, by id, name or handle; repeatable (default: every agent in the room)")
	return func(fs *flag.FlagSet) (adminCall, error) {
		msg := *text
		if msg == "" {
			msg = strings.Join(fs.Args(), " ")
		} else if fs.NArg() > 0 {
			return adminCall{}, fmt.Errorf("give the text with -text or as arguments, not both")
		}
		if *room == "" || strings.TrimSpace(msg) == "" {
			return adminCall{}, errors.New("say needs -room and a text, e.g. fakeband say -room demo hello")
		}
		body := map[string]any{"room": *room, "text": msg}
		if *from != "" {
			body["from"] = *from
		}
		if len(mentions) > 0 {
			body["mentions"] = []string(mentions)
		}
		return adminCall{method: http.MethodPost, path: "/say", body: body}, nil
	}
}

func roomFlags(path string) func(fs *flag.FlagSet) func(fs *flag.FlagSet) (adminCall, error) {
	return func(fs *flag.FlagSet) func(fs *flag.FlagSet) (adminCall, error) {
		room := fs.String("room", "", "the room's id or title (required)")
		return func(fs *flag.FlagSet) (adminCall, error) {
			if *room == "" || fs.NArg() > 0 {
				return adminCall{}, errors.New("needs -room R and nothing else")
			}
			return adminCall{method: http.MethodPost, path: path, body: map[string]string{"room": *room}}, nil
		}
	}
}

func agentFlags(path string) func(fs *flag.FlagSet) func(fs *flag.FlagSet) (adminCall, error) {
	return func(fs *flag.FlagSet) func(fs *flag.FlagSet) (adminCall, error) {
		agent := fs.String("agent", "", "the agent's id, name or handle (required)")
		return func(fs *flag.FlagSet) (adminCall, error) {
			if *agent == "" || fs.NArg() > 0 {
				return adminCall{}, errors.New("needs -agent A and nothing else")
			}
			return adminCall{method: http.MethodPost, path: path, body: map[string]string{"agent": *agent}}, nil
		}
	}
}

func interruptFlags(fs *flag.FlagSet) func(fs *flag.FlagSet) (adminCall, error) {
	agent := fs.String("agent", "", "the agent's id, name or handle; without -room the interrupt is agent-wide")
	room := fs.String("room", "", "the room's id or title; without -agent every agent in it is interrupted")
	return func(fs *flag.FlagSet) (adminCall, error) {
		if (*agent == "" && *room == "") || fs.NArg() > 0 {
			return adminCall{}, errors.New("needs -agent A, -room R, or both")
		}
		body := map[string]string{}
		if *agent != "" {
			body["agent"] = *agent
		}
		if *room != "" {
			body["room"] = *room
		}
		return adminCall{method: http.MethodPost, path: "/interrupt", body: body}, nil
	}
}

func participantFlags(method string) func(fs *flag.FlagSet) func(fs *flag.FlagSet) (adminCall, error) {
	return func(fs *flag.FlagSet) func(fs *flag.FlagSet) (adminCall, error) {
		room := fs.String("room", "", "the room's id or title (required)")
		who := fs.String("participant", "", "the participant's id, name or handle (required)")
		var role *string
		if method == http.MethodPost {
			role = fs.String("role", "member", "owner, admin or member")
		}
		return func(fs *flag.FlagSet) (adminCall, error) {
			if *room == "" || *who == "" || fs.NArg() > 0 {
				return adminCall{}, errors.New("needs -room R -participant P and nothing else")
			}
			body := map[string]string{"room": *room, "participant": *who}
			if role != nil {
				body["role"] = *role
			}
			return adminCall{method: method, path: "/participants", body: body}, nil
		}
	}
}

func describeFlags(fs *flag.FlagSet) func(fs *flag.FlagSet) (adminCall, error) {
	agent := fs.String("agent", "", "the agent's id, name or handle (required)")
	return func(fs *flag.FlagSet) (adminCall, error) {
		if *agent == "" {
			return adminCall{}, errors.New(`needs -agent A and the description, e.g. fakeband describe -agent echo "repeats what it hears"; "" clears it`)
		}
		return adminCall{method: http.MethodPost, path: "/description",
			body: map[string]string{"agent": *agent, "description": strings.Join(fs.Args(), " ")}}, nil
	}
}

func rateLimitFlags(fs *flag.FlagSet) func(fs *flag.FlagSet) (adminCall, error) {
	perSecond := fs.Float64("per-second", 0, "calls per second each agent may sustain (required)")
	burst := fs.Int("burst", 1, "calls an agent may make at once")
	retryAfter := fs.Bool("retry-after", false, "send Retry-After with the seconds until the next call is allowed")
	emptyBody := fs.Bool("empty-body", false, "answer 429 with no body at all, like Band's load balancer")
	return func(fs *flag.FlagSet) (adminCall, error) {
		if *perSecond <= 0 || fs.NArg() > 0 {
			return adminCall{}, errors.New("needs -per-second N (and optionally -burst, -retry-after, -empty-body); fakeband clear-faults lifts it")
		}
		limit := map[string]any{"per_second": *perSecond, "burst": *burst, "retry_after": *retryAfter, "empty_body": *emptyBody}
		return adminCall{method: http.MethodPost, path: "/faults", body: map[string]any{"rate_limit": limit}}, nil
	}
}

func contactFlags(method string) func(fs *flag.FlagSet) func(fs *flag.FlagSet) (adminCall, error) {
	return func(fs *flag.FlagSet) func(fs *flag.FlagSet) (adminCall, error) {
		agent := fs.String("agent", "", "the agent's id, name or handle (required)")
		who := fs.String("participant", "", "the contact's id, name or handle (required)")
		return func(fs *flag.FlagSet) (adminCall, error) {
			if *agent == "" || *who == "" || fs.NArg() > 0 {
				return adminCall{}, errors.New("needs -agent A -participant P and nothing else")
			}
			return adminCall{method: method, path: "/contacts", body: map[string]string{"agent": *agent, "participant": *who}}, nil
		}
	}
}
