package fakeband

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Scenario is a cast and a script for a Band: the JSON file cmd/fakeband
// reads with -scenario. For example:
//
//	{
//	  "seed": 7,
//	  "humans": [{"name": "ada"}, {"name": "bob"}],
//	  "agents": [{"name": "echo", "description": "repeats what it is told"}],
//	  "rooms": [
//	    {"title": "support", "owner": "ada", "members": ["echo", "bob"]}
//	  ],
//	  "script": [
//	    {"room": "support", "from": "bob", "text": "hello"},
//	    {"room": "support", "text": "anyone?", "mentions": ["echo"]}
//	  ],
//	  "faults": {"request": [{"endpoint": "post", "kind": "lose_response", "nth": 1}],
//	             "rate_limit": {"per_second": 5, "burst": 10, "retry_after": true}}
//	}
//
// Participants are named once, humans and agents together, and referred
// to by name; "Owner" is the Band's operator (Band.Owner), who owns every
// agent and owns a room whose owner is left out. The script is posted in
// order when the scenario is applied, so the agent finds it on /next;
// a line's sender defaults to the room's owner and its mentions to every
// agent in the room but the sender. Faults are injected after the script,
// so they only touch what the agent does.
type Scenario struct {
	// Seed is for Options.Seed: the same scenario and seed give the same
	// ids and keys. Apply does not use it.
	Seed   int64           `json:"seed"`
	Humans []ScenarioHuman `json:"humans"`
	Agents []ScenarioAgent `json:"agents"`
	Rooms  []ScenarioRoom  `json:"rooms"`
	Script []ScriptLine    `json:"script"`
	Faults FaultPlan       `json:"faults"`
}

// ScenarioHuman is a human participant: a Band user with a key for /me.
type ScenarioHuman struct {
	Name string `json:"name"`
}

// ScenarioAgent is an agent participant, owned by the operator.
// Description is what GET /agent/me answers; empty means
// DefaultDescription(Name) (Band registers every agent with one).
type ScenarioAgent struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
}

// ScenarioRoom is a room: its owner (a human's name; empty means the
// operator) and its other members by name.
type ScenarioRoom struct {
	Title   string   `json:"title"`
	Owner   string   `json:"owner"`
	Members []string `json:"members"`
}

// ScriptLine is one message posted when the scenario is applied.
type ScriptLine struct {
	Room     string   `json:"room"`
	From     string   `json:"from"`
	Text     string   `json:"text"`
	Mentions []string `json:"mentions"`
}

// OperatorName is how a scenario refers to the Band's operator human.
const OperatorName = "Owner"

// ScenarioError is one problem with a scenario: where it is, as a path
// like rooms[1].members[0], and what is wrong.
type ScenarioError struct {
	Path    string
	Problem string
	Err     error // the underlying error, if any (for example ErrBadFault)
}

func (e *ScenarioError) Error() string {
	if e.Path == "" {
		return "scenario: " + e.Problem
	}
	return "scenario: " + e.Path + ": " + e.Problem
}

// Unwrap returns the underlying error.
func (e *ScenarioError) Unwrap() error { return e.Err }

// DefaultScenario is the ready-made cast: a human "ada" who owns a room
// "demo" with one agent "echo" in it, and no script.
func DefaultScenario() *Scenario {
	return &Scenario{
		Seed:   1,
		Humans: []ScenarioHuman{{Name: "ada"}},
		Agents: []ScenarioAgent{{Name: "echo"}},
		Rooms:  []ScenarioRoom{{Title: "demo", Owner: "ada", Members: []string{"echo"}}},
	}
}

// ParseScenario reads a scenario from JSON and validates it. Unknown
// fields are refused; every error is a *ScenarioError, or several joined
// with errors.Join.
func ParseScenario(data []byte) (*Scenario, error) {
	s := &Scenario{}
	// The faults are decoded one by one afterwards, so that an invalid
	// rule's error can say which one it is.
	var file struct {
		*Scenario
		Faults struct {
			Request   []json.RawMessage `json:"request"`
			Socket    []json.RawMessage `json:"socket"`
			RateLimit *RateLimit        `json:"rate_limit"`
		} `json:"faults"`
	}
	file.Scenario = s
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&file); err != nil {
		return nil, &ScenarioError{Problem: describeJSONError(data, err), Err: err}
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, &ScenarioError{Problem: "data after the scenario object"}
	}
	var errs []error
	for i, raw := range file.Faults.Request {
		var f Fault
		if err := json.Unmarshal(raw, &f); err != nil {
			errs = append(errs, faultProblem(fmt.Sprintf("faults.request[%d]", i), err))
		}
		s.Faults.Request = append(s.Faults.Request, f)
	}
	for i, raw := range file.Faults.Socket {
		var f SocketFault
		if err := json.Unmarshal(raw, &f); err != nil {
			errs = append(errs, faultProblem(fmt.Sprintf("faults.socket[%d]", i), err))
		}
		s.Faults.Socket = append(s.Faults.Socket, f)
	}
	s.Faults.RateLimit = file.Faults.RateLimit
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return s, nil
}

// faultProblem says what is wrong with a fault without repeating that it
// is a fault; the error still wraps ErrBadFault.
func faultProblem(path string, err error) *ScenarioError {
	return &ScenarioError{Path: path, Problem: strings.TrimPrefix(err.Error(), ErrBadFault.Error()+": "), Err: err}
}

// describeJSONError says where in the file a decoding error is.
func describeJSONError(data []byte, err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		line, col := lineCol(data, syn.Offset-1) // Offset is just past the bad byte
		return fmt.Sprintf("invalid JSON at line %d, column %d: %v", line, col, syn)
	case errors.As(err, &typ):
		line, col := lineCol(data, typ.Offset-1)               // the value's last byte
		typ.Field = strings.TrimPrefix(typ.Field, "Scenario.") // the embedding in ParseScenario
		return fmt.Sprintf("line %d, column %d: %s", line, col, describeTypeError(typ, "the scenario"))
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "the file ends before the scenario object does"
	}
	return err.Error()
}

func lineCol(data []byte, offset int64) (line, col int) {
	offset = min(max(offset, 0), int64(len(data)))
	before := data[:offset]
	line = bytes.Count(before, []byte("\n")) + 1
	col = int(offset) - bytes.LastIndexByte(before, '\n')
	return line, col
}

// Validate reports every problem with the scenario, each a *ScenarioError,
// joined with errors.Join; nil means Apply will succeed on a new Band.
func (s *Scenario) Validate() error {
	v := &scenarioCheck{s: s, kinds: map[string]string{}, rooms: map[string]*ScenarioRoom{}}
	v.participants()
	v.roomList()
	v.script()
	for i, f := range s.Faults.Request {
		if err := validateFault(f); err != nil {
			v.errs = append(v.errs, faultProblem(fmt.Sprintf("faults.request[%d]", i), err))
		}
	}
	for i, f := range s.Faults.Socket {
		if err := validateSocketFault(f); err != nil {
			v.errs = append(v.errs, faultProblem(fmt.Sprintf("faults.socket[%d]", i), err))
		}
	}
	if l := s.Faults.RateLimit; l != nil {
		if err := l.validate(); err != nil {
			v.errs = append(v.errs, faultProblem("faults.rate_limit", err))
		}
	}
	return errors.Join(v.errs...)
}

// scenarioCheck collects a scenario's problems.
type scenarioCheck struct {
	s     *Scenario
	kinds map[string]string // lower-cased name -> "human" or "agent"
	rooms map[string]*ScenarioRoom
	errs  []error
}

func (v *scenarioCheck) fail(path, problem string, err error) {
	v.errs = append(v.errs, &ScenarioError{Path: path, Problem: problem, Err: err})
}

func (v *scenarioCheck) participants() {
	v.kinds[strings.ToLower(OperatorName)] = "human"
	add := func(path, name, kind string) {
		key := strings.ToLower(name)
		switch {
		case isBlank(name):
			v.fail(path+".name", "a name is required", nil)
		case key == strings.ToLower(OperatorName):
			v.fail(path+".name", fmt.Sprintf("%q is the operator, who is always there; pick another name", name), nil)
		case v.kinds[key] != "":
			v.fail(path+".name", fmt.Sprintf("%q is already the name of a %s (names are case-insensitive)", name, v.kinds[key]), nil)
		default:
			v.kinds[key] = kind
		}
	}
	for i, h := range v.s.Humans {
		add(fmt.Sprintf("humans[%d]", i), h.Name, "human")
	}
	for i, a := range v.s.Agents {
		add(fmt.Sprintf("agents[%d]", i), a.Name, "agent")
	}
	if len(v.s.Agents) == 0 {
		v.fail("agents", "at least one agent is required", nil)
	}
}

func (v *scenarioCheck) roomList() {
	for i := range v.s.Rooms {
		r := &v.s.Rooms[i]
		path := fmt.Sprintf("rooms[%d]", i)
		switch {
		case isBlank(r.Title):
			v.fail(path+".title", "a title is required", nil)
		case v.rooms[r.Title] != nil:
			v.fail(path+".title", fmt.Sprintf("another room is already titled %q", r.Title), nil)
		default:
			v.rooms[r.Title] = r
		}
		if r.Owner != "" && v.kinds[strings.ToLower(r.Owner)] != "human" {
			v.fail(path+".owner", v.notA(r.Owner, "human"), nil)
		}
		seen := map[string]bool{strings.ToLower(ownerOf(r)): true}
		for j, m := range r.Members {
			mpath := fmt.Sprintf("%s.members[%d]", path, j)
			switch key := strings.ToLower(m); {
			case v.kinds[key] == "":
				v.fail(mpath, v.notA(m, "participant"), nil)
			case seen[key] && key != strings.ToLower(ownerOf(r)):
				v.fail(mpath, fmt.Sprintf("%q is listed twice", m), nil)
			default:
				seen[key] = true
			}
		}
	}
}

func (v *scenarioCheck) script() {
	for i, line := range v.s.Script {
		path := fmt.Sprintf("script[%d]", i)
		r := v.rooms[line.Room]
		if r == nil {
			v.fail(path+".room", fmt.Sprintf("no room is titled %q", line.Room), nil)
			continue
		}
		if isBlank(line.Text) {
			v.fail(path+".text", "the text is blank", nil)
		}
		from := line.From
		if from == "" {
			from = ownerOf(r)
		}
		if !v.inRoom(r, from) {
			v.fail(path+".from", fmt.Sprintf("%q is not in room %q", from, r.Title), nil)
			continue
		}
		mentions := line.Mentions
		if len(mentions) == 0 {
			mentions = v.agentsIn(r, from)
			if len(mentions) == 0 {
				v.fail(path+".mentions", fmt.Sprintf("room %q has no agent besides the sender to mention; list whom to mention", r.Title), nil)
			}
		}
		seen := map[string]bool{}
		for j, m := range mentions {
			mpath := fmt.Sprintf("%s.mentions[%d]", path, j)
			switch key := strings.ToLower(m); {
			case !v.inRoom(r, m):
				v.fail(mpath, fmt.Sprintf("%q is not in room %q", m, r.Title), nil)
			case key == strings.ToLower(from):
				v.fail(mpath, "the sender cannot mention itself", nil)
			case seen[key]:
				v.fail(mpath, fmt.Sprintf("%q is mentioned twice", m), nil)
			default:
				seen[key] = true
			}
		}
	}
}

func (v *scenarioCheck) notA(name, what string) string {
	if v.kinds[strings.ToLower(name)] == "" {
		return fmt.Sprintf("no human or agent is named %q", name)
	}
	return fmt.Sprintf("%q is an %s, not a %s", name, v.kinds[strings.ToLower(name)], what)
}

func (v *scenarioCheck) inRoom(r *ScenarioRoom, name string) bool {
	key := strings.ToLower(name)
	if key == strings.ToLower(ownerOf(r)) {
		return true
	}
	for _, m := range r.Members {
		if strings.ToLower(m) == key {
			return true
		}
	}
	return false
}

func (v *scenarioCheck) agentsIn(r *ScenarioRoom, except string) []string {
	var out []string
	for _, m := range r.Members {
		if v.kinds[strings.ToLower(m)] == "agent" && !strings.EqualFold(m, except) {
			out = append(out, m)
		}
	}
	return out
}

func ownerOf(r *ScenarioRoom) string {
	if r.Owner == "" {
		return OperatorName
	}
	return r.Owner
}
