package fakeband

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"time"
)

// The JSON form of faults, for the admin API and scenario files, where a
// person types them: kinds and endpoints by name, durations as Go
// durations ("250ms"), unknown fields refused so a typo is not a silent
// no-op. For example:
//
//	{"endpoint": "post", "kind": "lose_response", "nth": 1}
//	{"endpoint": "me", "kind": "fail_before", "nth": 1, "status": 429, "empty_body": true}
//	{"endpoint": "processed", "kind": "delay", "nth": 2, "delay": "1m"}
//	{"event": "agent.control", "kind": "lose_push", "nth": 1}

// ErrBadFault is wrapped by every error about a fault's JSON form or
// values.
var ErrBadFault = errors.New("fakeband: invalid fault")

var (
	faultKinds       = []FaultKind{FailBefore, LoseResponse, Delay, StaleNext, LoopCursor, ApplyLate}
	socketFaultKinds = []SocketFaultKind{DropConnection, DuplicatePush, DelayPush, LosePush}
	// endpoints lists every Endpoint a fault may name, in a stable order.
	endpoints = []Endpoint{
		EndpointMe, EndpointChats, EndpointNext, EndpointProcessing, EndpointProcessed, EndpointFailed,
		EndpointPost, EndpointContext, EndpointMessages, EndpointEvent, EndpointActivity,
		EndpointParticipants, EndpointAddParticipant, EndpointRemoveParticipant, EndpointCreateChat, EndpointPeers,
		EndpointCreateMemory, EndpointMemories, EndpointMemory, EndpointMemoryStatus,
		EndpointCreateTask, EndpointTasks, EndpointTask, EndpointUpdateTask, EndpointTaskHistory, EndpointBoard, EndpointPutBoard,
		EndpointChat, EndpointRenameChat, EndpointContacts, EndpointAddContact, EndpointRemoveContact, EndpointContactRequests, EndpointRespondContact,
		EndpointHumanPost, EndpointControl, EndpointSocket,
	}
)

// FaultPlan is a set of fault rules, as the admin API and scenario files
// carry them: {"request": [Fault...], "socket": [SocketFault...]}.
type FaultPlan struct {
	Request []Fault       `json:"request,omitempty"`
	Socket  []SocketFault `json:"socket,omitempty"`
	// RateLimit, when set, replaces the Band's rate limit (see RateLimit).
	RateLimit *RateLimit `json:"rate_limit,omitempty"`
}

// InjectPlan checks every rule of the plan and then adds them all at once
// after the existing ones, request rules in order, then socket rules. When a
// rule is invalid it adds none and returns an error wrapping ErrBadFault.
func (b *Band) InjectPlan(p FaultPlan) error {
	if err := p.validate(); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, f := range p.Request {
		b.faults.rules = append(b.faults.rules, &faultRule{Fault: f})
	}
	for _, f := range p.Socket {
		b.faults.socket = append(b.faults.socket, &socketRule{SocketFault: f})
	}
	if p.RateLimit != nil {
		copied := *p.RateLimit
		b.rate = limiter{limit: &copied, buckets: map[string]*bucket{}}
	}
	b.noteFaultsLocked()
	return nil
}

func (p FaultPlan) validate() error {
	for i, f := range p.Request {
		if err := validateFault(f); err != nil {
			return fmt.Errorf("request[%d]: %w", i, err)
		}
	}
	for i, f := range p.Socket {
		if err := validateSocketFault(f); err != nil {
			return fmt.Errorf("socket[%d]: %w", i, err)
		}
	}
	if p.RateLimit != nil {
		return p.RateLimit.validate()
	}
	return nil
}

// MarshalText names the kind as String does.
func (k FaultKind) MarshalText() ([]byte, error) {
	if !slices.Contains(faultKinds, k) {
		return nil, fmt.Errorf("%w: unknown kind %d", ErrBadFault, int(k))
	}
	return []byte(k.String()), nil
}

// UnmarshalText reads a kind by name: fail_before, lose_response, delay,
// stale_next, loop_cursor or apply_late.
func (k *FaultKind) UnmarshalText(text []byte) error {
	for _, c := range faultKinds {
		if c.String() == string(text) {
			*k = c
			return nil
		}
	}
	return fmt.Errorf("%w: kind %q is not one of %v", ErrBadFault, text, faultKinds)
}

// MarshalText names the kind as String does.
func (k SocketFaultKind) MarshalText() ([]byte, error) {
	if !slices.Contains(socketFaultKinds, k) {
		return nil, fmt.Errorf("%w: unknown socket kind %d", ErrBadFault, int(k))
	}
	return []byte(k.String()), nil
}

// UnmarshalText reads a kind by name: drop_connection, duplicate_push,
// delay_push or lose_push.
func (k *SocketFaultKind) UnmarshalText(text []byte) error {
	for _, c := range socketFaultKinds {
		if c.String() == string(text) {
			*k = c
			return nil
		}
	}
	return fmt.Errorf("%w: socket kind %q is not one of %v", ErrBadFault, text, socketFaultKinds)
}

// faultJSON is Fault as a person writes it.
type faultJSON struct {
	Endpoint    Endpoint   `json:"endpoint,omitempty"`
	Nth         int        `json:"nth,omitempty"`
	Count       int        `json:"count,omitempty"`
	Probability float64    `json:"probability,omitempty"`
	Kind        *FaultKind `json:"kind"` // a pointer so that a missing kind is an error, not fail_before
	Status      int        `json:"status,omitempty"`
	Code        string     `json:"code,omitempty"`
	RetryAfter  string     `json:"retry_after,omitempty"`
	EmptyBody   bool       `json:"empty_body,omitempty"`
	Delay       string     `json:"delay,omitempty"`
}

// MarshalJSON writes the fault's JSON form.
func (f Fault) MarshalJSON() ([]byte, error) {
	j := faultJSON{
		Endpoint: f.Endpoint, Nth: f.Nth, Count: f.Count, Probability: f.Probability, Kind: &f.Kind,
		Status: f.Status, Code: f.Code, RetryAfter: f.RetryAfter, EmptyBody: f.EmptyBody,
	}
	if f.Delay != 0 {
		j.Delay = f.Delay.String()
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads the fault's JSON form and checks its values; every
// error wraps ErrBadFault.
func (f *Fault) UnmarshalJSON(data []byte) error {
	var j faultJSON
	if err := decodeStrict(data, &j); err != nil {
		return err
	}
	if j.Kind == nil {
		return fmt.Errorf("%w: kind is required (one of %v)", ErrBadFault, faultKinds)
	}
	d, err := parseDelay(j.Delay)
	if err != nil {
		return err
	}
	out := Fault{
		Endpoint: j.Endpoint, Nth: j.Nth, Count: j.Count, Probability: j.Probability, Kind: *j.Kind,
		Status: j.Status, Code: j.Code, RetryAfter: j.RetryAfter, EmptyBody: j.EmptyBody, Delay: d,
	}
	if err := validateFault(out); err != nil {
		return err
	}
	*f = out
	return nil
}

// socketFaultJSON is SocketFault as a person writes it.
type socketFaultJSON struct {
	Event       string           `json:"event,omitempty"`
	Nth         int              `json:"nth,omitempty"`
	Probability float64          `json:"probability,omitempty"`
	Kind        *SocketFaultKind `json:"kind"`
	Delay       string           `json:"delay,omitempty"`
}

// MarshalJSON writes the socket fault's JSON form.
func (f SocketFault) MarshalJSON() ([]byte, error) {
	j := socketFaultJSON{Event: f.Event, Nth: f.Nth, Probability: f.Probability, Kind: &f.Kind}
	if f.Delay != 0 {
		j.Delay = f.Delay.String()
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads the socket fault's JSON form and checks its values;
// every error wraps ErrBadFault.
func (f *SocketFault) UnmarshalJSON(data []byte) error {
	var j socketFaultJSON
	if err := decodeStrict(data, &j); err != nil {
		return err
	}
	if j.Kind == nil {
		return fmt.Errorf("%w: kind is required (one of %v)", ErrBadFault, socketFaultKinds)
	}
	d, err := parseDelay(j.Delay)
	if err != nil {
		return err
	}
	out := SocketFault{Event: j.Event, Nth: j.Nth, Probability: j.Probability, Kind: *j.Kind, Delay: d}
	if err := validateSocketFault(out); err != nil {
		return err
	}
	*f = out
	return nil
}

// decodeStrict decodes one JSON object, refusing unknown fields and
// trailing data, and wraps every failure in ErrBadFault.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var typ *json.UnmarshalTypeError
		switch {
		case errors.Is(err, ErrBadFault):
			return err
		case errors.As(err, &typ):
			return fmt.Errorf("%w: %s", ErrBadFault, describeTypeError(typ, "the fault"))
		}
		return fmt.Errorf("%w: %v", ErrBadFault, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%w: data after the fault object", ErrBadFault)
	}
	return nil
}

// describeTypeError says, in JSON's terms rather than Go's, what a field
// should have been; whole names the value when the field is the top.
func describeTypeError(e *json.UnmarshalTypeError, whole string) string {
	field := e.Field
	if field == "" {
		field = whole
	}
	want := "a " + e.Type.Kind().String()
	switch e.Type.Kind() {
	case reflect.Struct, reflect.Map:
		want = "an object"
	case reflect.Slice, reflect.Array:
		want = "a list"
	case reflect.String:
		want = "a string"
	case reflect.Bool:
		want = "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		want = "a whole number"
	case reflect.Float32, reflect.Float64:
		want = "a number"
	}
	return fmt.Sprintf("%s must be %s, not %s", field, want, e.Value)
}

func parseDelay(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%w: delay %q is not a non-negative Go duration such as \"500ms\"", ErrBadFault, s)
	}
	return d, nil
}

// validateFault checks the values a rule needs to make sense; a rule that
// can never fire is refused rather than silently kept.
func validateFault(f Fault) error {
	switch {
	case f.Endpoint != "" && !slices.Contains(endpoints, f.Endpoint):
		return fmt.Errorf("%w: endpoint %q is not one of %v (or empty for any agent endpoint)", ErrBadFault, f.Endpoint, endpoints)
	case !slices.Contains(faultKinds, f.Kind):
		return fmt.Errorf("%w: unknown kind %d", ErrBadFault, int(f.Kind))
	}
	if err := validateTrigger(f.Nth, f.Probability); err != nil {
		return err
	}
	switch {
	case f.Count < 0:
		return fmt.Errorf("%w: count %d is negative", ErrBadFault, f.Count)
	case f.Count > 0 && f.Nth == 0:
		return fmt.Errorf("%w: count needs nth", ErrBadFault)
	case f.Status != 0 && (f.Status < 400 || f.Status > 599):
		return fmt.Errorf("%w: status %d is not an HTTP error status (400-599)", ErrBadFault, f.Status)
	case f.Code != "" && (f.Kind != FailBefore || f.EmptyBody):
		return fmt.Errorf("%w: code only applies to kind fail_before with a body", ErrBadFault)
	case (f.Kind == Delay || f.Kind == ApplyLate) && f.Delay <= 0:
		return fmt.Errorf("%w: kind %s needs a positive delay", ErrBadFault, f.Kind)
	case f.Kind == StaleNext && f.Endpoint != EndpointNext:
		return fmt.Errorf("%w: kind stale_next only applies to endpoint next", ErrBadFault)
	case f.Kind == LoopCursor && f.Endpoint != EndpointContext:
		return fmt.Errorf("%w: kind loop_cursor only applies to endpoint context", ErrBadFault)
	}
	return nil
}

func validateSocketFault(f SocketFault) error {
	if !slices.Contains(socketFaultKinds, f.Kind) {
		return fmt.Errorf("%w: unknown socket kind %d", ErrBadFault, int(f.Kind))
	}
	if err := validateTrigger(f.Nth, f.Probability); err != nil {
		return err
	}
	if f.Kind == DelayPush && f.Delay <= 0 {
		return fmt.Errorf("%w: kind delay_push needs a positive delay", ErrBadFault)
	}
	return nil
}

// validateTrigger insists on exactly one way to fire: the Nth match or a
// probability.
func validateTrigger(nth int, p float64) error {
	switch {
	case nth < 0:
		return fmt.Errorf("%w: nth %d is negative", ErrBadFault, nth)
	case math.IsNaN(p) || p < 0 || p > 1:
		return fmt.Errorf("%w: probability %v is not within 0..1", ErrBadFault, p)
	case nth > 0 && p > 0:
		return fmt.Errorf("%w: set nth or probability, not both", ErrBadFault)
	case nth == 0 && p == 0:
		return fmt.Errorf("%w: set nth (fire on the Nth match) or probability (seeded chance per match); without either it never fires", ErrBadFault)
	}
	return nil
}
