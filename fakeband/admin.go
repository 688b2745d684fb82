package fakeband

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"strings"
)

// AdminPrefix is where the admin API lives when Options.Admin is set. It
// drives the Band from outside the process, as the Go methods do inside
// it: a test harness in any language, or a person with curl, plays the
// humans and the faults and reads the ground truth. Bodies are JSON, with
// Content-Type: application/json; answers are {"data": ...} or
// {"error": {"code", "message"}}. It refuses a foreign Origin, a Host
// that is not the loopback address it serves, and a body of another type
// (see adminRefusal): no web page elsewhere can drive it or read its keys.
//
//	GET    /_admin/setup      the cast: owner, humans, agents (with keys), rooms, URLs
//	POST   /_admin/say        {"room", "text", "from"?, "mentions"?} a message, as a human
//	POST   /_admin/stop       {"room", "agent"?} stop every agent in the room (Band.StopRoom), or the one named
//	POST   /_admin/play       {"room", "agent"?} resume them (Band.PlayRoom), or the one named
//	POST   /_admin/interrupt  {"agent"?, "room"?} (Band.Interrupt)
//	POST   /_admin/participants  {"room", "participant", "role"?} add one (Band.AddParticipantAs)
//	DELETE /_admin/participants  {"room", "participant"} remove one (Band.RemoveParticipant)
//	POST   /_admin/description   {"agent", "description"} (Band.SetDescription)
//	POST   /_admin/contacts      {"agent", "participant"} (Band.AddContact)
//	DELETE /_admin/contacts      {"agent", "participant"} (Band.RemoveContact)
//	POST   /_admin/drop       {"agent"} cut the agent's sockets (Band.DropSockets)
//	POST   /_admin/supersede  {"agent"} supersede them (Band.Supersede)
//	GET    /_admin/faults     the active fault rules (with which are spent) and the fired histogram
//	POST   /_admin/faults     {"request": [Fault...], "socket": [SocketFault...], "rate_limit"?: RateLimit} add rules
//	DELETE /_admin/faults     remove every rule and the rate limit (Band.ClearFaults)
//	GET    /_admin/truth      posts, deliveries, marks, executions, events, request counts
//	GET    /_admin/requests   the request counts alone, cheap to poll while an agent works
//	GET    /_admin/rooms      the rooms, with their members, item counts and stopped agents
//	POST   /_admin/rooms      {"title", "owner"?, "members"?} create a room (Band.AddRoom)
//	GET    /_admin/timeline?room=R&limit=N  a room's latest N items (200; at most 1000), each with its life
//	GET    /_admin/feed       the live feed: server-sent events, one FeedEvent each (see feed.go)
//
// A room is named by its id or its title; a participant by its id, name
// or handle. say sends as the room's owner unless "from" names someone
// else, and mentions every agent in the room but the sender unless
// "mentions" lists whom. interrupt with an agent and no room is
// agent-wide; with a room and no agent it reaches every agent there.
// Faults use their JSON form (see Fault.UnmarshalJSON). Admin calls are
// not counted in Requests and no fault touches them.
const AdminPrefix = "/_admin"

func (b *Band) adminRoutes(mux *http.ServeMux) {
	routes := map[string]func(r *http.Request) (int, any, *Error){
		"GET /setup":           b.adminSetup,
		"POST /say":            b.adminSay,
		"POST /stop":           b.adminRoomControl(true),
		"POST /play":           b.adminRoomControl(false),
		"POST /interrupt":      b.adminInterrupt,
		"POST /participants":   b.adminAddParticipant,
		"DELETE /participants": b.adminRemoveParticipant,
		"POST /description":    b.adminDescription,
		"POST /contacts":       b.adminContact(true),
		"DELETE /contacts":     b.adminContact(false),
		"POST /drop":           b.adminSockets(b.DropSockets),
		"POST /supersede":      b.adminSockets(b.Supersede),
		"GET /faults":          b.adminFaults,
		"POST /faults":         b.adminInject,
		"DELETE /faults":       b.adminClearFaults,
		"GET /truth":           b.adminTruth,
		"GET /requests":        b.adminRequests,
		"GET /rooms":           b.adminRooms,
		"POST /rooms":          b.adminCreateRoom,
		"GET /timeline":        b.adminTimeline,
	}
	for pattern, serve := range routes {
		method, path, _ := strings.Cut(pattern, " ")
		mux.HandleFunc(method+" "+AdminPrefix+path, b.admin(serve))
	}
	mux.HandleFunc("GET "+AdminPrefix+"/feed", b.serveFeed)
	b.consoleRoutes(mux)
}

// admin renders an admin handler's answer; it refuses what adminRefusal
// refuses, and after Close it answers 503.
func (b *Band) admin(serve func(r *http.Request) (int, any, *Error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if e := adminRefusal(r); e != nil {
			writeAdminError(w, e)
			return
		}
		b.mu.Lock()
		closed := b.closed
		b.mu.Unlock()
		if closed {
			writeAdminError(w, errClosedBand)
			return
		}
		status, data, err := serve(r)
		if err != nil {
			writeAdminError(w, err)
			return
		}
		writeJSON(w, status, map[string]any{"data": data})
	}
}

// writeAdminError answers in Band's error envelope, without a request id:
// admin calls are not Band requests and must not shift their numbering.
func writeAdminError(w http.ResponseWriter, e *Error) {
	body := map[string]any{"code": e.Code, "message": e.Message}
	if len(e.Details) > 0 {
		body["details"] = e.Details
	}
	writeJSON(w, e.Status, map[string]any{"error": body})
}

// asError is the refusal a Band method returned, for the admin answer.
func asError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Status: http.StatusInternalServerError, Code: "internal", Message: err.Error()}
}

func badRequest(msg string) *Error {
	return &Error{Status: http.StatusBadRequest, Code: "bad_request", Message: msg}
}

// decodeAdmin reads a JSON object body strictly: an unknown field is a
// typo the caller should hear about, not a silently ignored option.
func decodeAdmin(r *http.Request, v any) *Error {
	data, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil || len(data) > maxBody {
		return badRequest("the body could not be read or is over 1 MiB")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, ErrBadFault) {
			return unprocessable("invalid_fault", err.Error(), "", err.Error())
		}
		return badRequest("invalid JSON body: " + err.Error())
	}
	if dec.More() {
		return badRequest("invalid JSON body: data after the object")
	}
	return nil
}

type sayRequest struct {
	Room     string   `json:"room"`
	From     string   `json:"from"`
	Text     string   `json:"text"`
	Mentions []string `json:"mentions"`
}

type saidJSON struct {
	ID         string   `json:"id"`
	RoomID     string   `json:"room_id"`
	Recipients []string `json:"recipients"`
}

func (b *Band) adminSay(r *http.Request) (int, any, *Error) {
	var req sayRequest
	if err := decodeAdmin(r, &req); err != nil {
		return 0, nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	rm, err := b.roomByRefLocked(req.Room)
	if err != nil {
		return 0, nil, err
	}
	sender, err := b.senderLocked(rm, req.From)
	if err != nil {
		return 0, nil, err
	}
	in, err := b.mentionsLocked(rm, sender, req.Mentions)
	if err != nil {
		return 0, nil, err
	}
	m, err := b.postLocked(rm.id, sender, &req.Text, in)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusCreated, saidJSON{ID: m.id, RoomID: rm.id, Recipients: append([]string{}, m.recipients...)}, nil
}

// senderLocked is who an admin say speaks as: the named participant, or
// the room's owner.
func (b *Band) senderLocked(r *room, ref string) (*participant, *Error) {
	if ref != "" {
		return b.participantByRefLocked(ref)
	}
	if r.ownerID == "" {
		return nil, unprocessable("validation_error", "the room has no owner: name the sender in from", "/from", "is required")
	}
	return b.participants[r.ownerID], nil
}

// mentionsLocked resolves the named mentions, or defaults to every agent
// in the room but the sender.
func (b *Band) mentionsLocked(r *room, sender *participant, refs []string) ([]mentionIn, *Error) {
	var out []mentionIn
	if len(refs) == 0 {
		for _, id := range r.order {
			if p := b.participants[id]; p.isAgent() && p != sender {
				out = append(out, mentionIn{ID: id})
			}
		}
		return out, nil
	}
	for _, ref := range refs {
		p, err := b.participantByRefLocked(ref)
		if err != nil {
			return nil, err
		}
		out = append(out, mentionIn{ID: p.id})
	}
	return out, nil
}

// roomRequest names a room and, for an agent-scope stop or play, the
// agent.
type roomRequest struct {
	Room  string `json:"room"`
	Agent string `json:"agent"`
}

type roomControlledJSON struct {
	RoomID   string   `json:"room_id"`
	Mode     string   `json:"mode"`
	AgentIDs []string `json:"agent_ids"`
}

func (b *Band) adminRoomControl(stop bool) func(r *http.Request) (int, any, *Error) {
	return func(r *http.Request) (int, any, *Error) {
		var req roomRequest
		if err := decodeAdmin(r, &req); err != nil {
			return 0, nil, err
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		rm, err := b.roomByRefLocked(req.Room)
		if err != nil {
			return 0, nil, err
		}
		mode := modePlay
		if stop {
			mode = modeStop
		}
		if req.Agent == "" {
			return http.StatusOK, roomControlledJSON{RoomID: rm.id, Mode: mode, AgentIDs: b.setRoomStoppedLocked(rm, stop)}, nil
		}
		p, err := b.agentByRefLocked(req.Agent)
		if err != nil {
			return 0, nil, err
		}
		if !rm.has(p.id) {
			return 0, nil, notFound("agent " + p.name + " in room " + rm.title)
		}
		b.setStoppedLocked(rm, p, stop, scopeAgent)
		return http.StatusOK, roomControlledJSON{RoomID: rm.id, Mode: mode, AgentIDs: []string{p.id}}, nil
	}
}

type agentRequest struct {
	Agent string `json:"agent"`
	Room  string `json:"room"`
}

type interruptedJSON struct {
	AgentIDs []string `json:"agent_ids"`
	RoomID   *string  `json:"room_id"` // null: agent-wide
}

func (b *Band) adminInterrupt(r *http.Request) (int, any, *Error) {
	var req agentRequest
	if err := decodeAdmin(r, &req); err != nil {
		return 0, nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if req.Agent == "" && req.Room == "" {
		return 0, nil, unprocessable("validation_error", "name an agent, a room, or both", "/agent", "is required without room")
	}
	var agents []*participant
	if req.Agent != "" {
		p, err := b.agentByRefLocked(req.Agent)
		if err != nil {
			return 0, nil, err
		}
		agents = append(agents, p)
	}
	out := interruptedJSON{AgentIDs: []string{}}
	if req.Room == "" {
		b.pushControlLocked(EventInterrupt, controlJSON{Mode: modeInterrupt, Scope: scopeAgent, AgentID: agents[0].id})
		out.AgentIDs = append(out.AgentIDs, agents[0].id)
		return http.StatusOK, out, nil
	}
	rm, err := b.roomByRefLocked(req.Room)
	if err != nil {
		return 0, nil, err
	}
	if agents == nil {
		for _, id := range rm.order {
			if p := b.participants[id]; p.isAgent() {
				agents = append(agents, p)
			}
		}
	}
	for _, p := range agents {
		if !rm.has(p.id) {
			return 0, nil, notFound("agent " + p.name + " in room " + rm.title)
		}
	}
	for _, p := range agents {
		e := b.executions[pairKey{p.id, rm.id}]
		b.pushControlLocked(EventInterrupt, controlJSON{Mode: modeInterrupt, Scope: scopeRoom, AgentID: p.id, RoomID: &rm.id, ExecutionID: &e.id})
		out.AgentIDs = append(out.AgentIDs, p.id)
	}
	out.RoomID = &rm.id
	return http.StatusOK, out, nil
}

// adminSockets resolves the agent and hands it to act, which takes the
// lock itself.
func (b *Band) adminSockets(act func(agentID string)) func(r *http.Request) (int, any, *Error) {
	return func(r *http.Request) (int, any, *Error) {
		var req struct {
			Agent string `json:"agent"`
		}
		if err := decodeAdmin(r, &req); err != nil {
			return 0, nil, err
		}
		b.mu.Lock()
		p, err := b.agentByRefLocked(req.Agent)
		b.mu.Unlock()
		if err != nil {
			return 0, nil, err
		}
		act(p.id)
		return http.StatusOK, map[string]string{"agent_id": p.id}, nil
	}
}

type participantRequest struct {
	Room        string `json:"room"`
	Participant string `json:"participant"`
	Role        string `json:"role"`
}

type participantChangedJSON struct {
	RoomID        string `json:"room_id"`
	ParticipantID string `json:"participant_id"`
	Role          string `json:"role,omitempty"`
}

// resolveParticipantLocked names the room and participant of a request.
func (b *Band) resolveParticipantLocked(req participantRequest) (*room, *participant, *Error) {
	rm, err := b.roomByRefLocked(req.Room)
	if err != nil {
		return nil, nil, err
	}
	p, err := b.participantByRefLocked(req.Participant)
	if err != nil {
		return nil, nil, err
	}
	return rm, p, nil
}

func (b *Band) adminAddParticipant(r *http.Request) (int, any, *Error) {
	var req participantRequest
	if err := decodeAdmin(r, &req); err != nil {
		return 0, nil, err
	}
	if req.Role == "" {
		req.Role = RoleMember
	}
	b.mu.Lock()
	rm, p, err := b.resolveParticipantLocked(req)
	b.mu.Unlock()
	if err != nil {
		return 0, nil, err
	}
	if err := b.AddParticipantAs(rm.id, p.id, req.Role); err != nil {
		return 0, nil, asError(err)
	}
	return http.StatusOK, participantChangedJSON{RoomID: rm.id, ParticipantID: p.id, Role: req.Role}, nil
}

func (b *Band) adminRemoveParticipant(r *http.Request) (int, any, *Error) {
	var req participantRequest
	if err := decodeAdmin(r, &req); err != nil {
		return 0, nil, err
	}
	b.mu.Lock()
	rm, p, err := b.resolveParticipantLocked(req)
	b.mu.Unlock()
	if err != nil {
		return 0, nil, err
	}
	if err := b.RemoveParticipant(rm.id, p.id); err != nil {
		return 0, nil, asError(err)
	}
	return http.StatusOK, participantChangedJSON{RoomID: rm.id, ParticipantID: p.id}, nil
}

func (b *Band) adminDescription(r *http.Request) (int, any, *Error) {
	var req struct {
		Agent       string  `json:"agent"`
		Description *string `json:"description"`
	}
	if err := decodeAdmin(r, &req); err != nil {
		return 0, nil, err
	}
	if req.Description == nil {
		return 0, nil, unprocessable("validation_error", "description is required (it may be empty)", "/description", "is required")
	}
	b.mu.Lock()
	p, err := b.agentByRefLocked(req.Agent)
	b.mu.Unlock()
	if err != nil {
		return 0, nil, err
	}
	_ = b.SetDescription(p.id, *req.Description) // p is an agent, so this cannot fail
	return http.StatusOK, map[string]string{"agent_id": p.id, "description": *req.Description}, nil
}

type faultsJSON struct {
	Request []Fault `json:"request"`
	// Spent says, for each request rule, whether it can fire no more: an
	// Nth rule whose requests have all gone by.
	Spent     []bool         `json:"spent"`
	Socket    []SocketFault  `json:"socket"`
	RateLimit *RateLimit     `json:"rate_limit"` // null: none
	Fired     map[string]int `json:"fired"`
}

func (b *Band) faultsLocked() faultsJSON {
	out := faultsJSON{Request: []Fault{}, Spent: []bool{}, Socket: []SocketFault{}, RateLimit: b.rate.limit, Fired: map[string]int{}}
	for _, r := range b.faults.rules {
		out.Request = append(out.Request, r.Fault)
		out.Spent = append(out.Spent, r.Nth > 0 && r.seen >= r.Nth && r.seen-r.Nth >= max(r.Count, 1)-1)
	}
	for _, r := range b.faults.socket {
		out.Socket = append(out.Socket, r.SocketFault)
	}
	for k, v := range b.faults.fired {
		out.Fired[k] = v
	}
	return out
}

// adminRequests is the request counts by endpoint, as in the truth.
func (b *Band) adminRequests(*http.Request) (int, any, *Error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return http.StatusOK, maps.Clone(b.truth.reqs), nil
}

func (b *Band) adminFaults(*http.Request) (int, any, *Error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return http.StatusOK, b.faultsLocked(), nil
}

func (b *Band) adminInject(r *http.Request) (int, any, *Error) {
	var plan FaultPlan
	if err := decodeAdmin(r, &plan); err != nil {
		return 0, nil, err
	}
	if len(plan.Request) == 0 && len(plan.Socket) == 0 && plan.RateLimit == nil {
		return 0, nil, badRequest(`the plan is empty: give {"request": [...]}, {"socket": [...]} or {"rate_limit": {...}}`)
	}
	if err := b.InjectPlan(plan); err != nil {
		return 0, nil, unprocessable("invalid_fault", err.Error(), "", err.Error())
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return http.StatusOK, b.faultsLocked(), nil
}

func (b *Band) adminClearFaults(*http.Request) (int, any, *Error) {
	b.ClearFaults()
	b.mu.Lock()
	defer b.mu.Unlock()
	return http.StatusOK, b.faultsLocked(), nil
}
