package verify

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/band-once/bandonce/fakeband"
	"github.com/band-once/bandonce/internal/oracle"
	"github.com/band-once/bandonce/proof"
)

// This file judges the changes a turn makes to Band besides its posts:
// rooms it creates, participants it adds, memories it stores, tasks it
// creates and comments on, the board's goal, contacts it asks for. Each
// kind is a row of bandEffectKinds, judged by one design with two rules:
// in the fake's ground truth, at most one write per key across every
// life (for the kinds whose record carries the key a guard writes); and
// from the requests, at most one write per message and identity within a
// life, as a step is (a life's ledger keeps its records for the life).
// A kind that is idempotent by nature is listed, and never a double. A
// new kind of write plugs in as a row.

// bandEffectKind is one kind of write to Band that a turn may make.
type bandEffectKind struct {
	// name says what the effect is, in a verdict ("a room created").
	name string
	// match reports whether a request is one, from its method and the
	// path's parts after the API prefix.
	match func(method string, parts []string) bool
	// identity names what makes two of them the same effect, from the
	// request's path parts and body.
	identity func(parts []string, body []byte) string
	// truth is the oracle's kind (oracle.WriteMemory, ...) under which
	// the fake's ground truth holds these writes with their keys, and
	// twice the verdict's words for one found twice there (the key and
	// the start of the text fill it); "" for a kind with no such record.
	truth, twice string
	// idempotent: a repeat has the effect of one (Band keeps one goal,
	// answers a repeated contact request with the one pending), so the
	// kind needs no guard and is never judged a double.
	idempotent bool
	// fix is the hint a verdict gives.
	fix string
}

// bandEffectKinds is the table of Band writes the verifier judges.
var bandEffectKinds = []bandEffectKind{
	{
		name:  "a room created",
		match: route(http.MethodPost, "agent", "chats"),
		identity: func(_ []string, body []byte) string {
			var b struct {
				Chat struct {
					Title string `json:"title"`
				} `json:"chat"`
			}
			_ = json.Unmarshal(body, &b)
			return "titled " + fmt.Sprintf("%q", strings.TrimSpace(b.Chat.Title))
		},
		truth: oracle.WriteRoom, twice: "the room with marker %q was created twice (%q)",
		fix: "create it with Message.CreateRoom, which records it as a step, or record the room's id in a Message.Step and reuse it",
	},
	{
		name:  "a participant added",
		match: route(http.MethodPost, "agent", "chats", "*", "participants"),
		identity: func(parts []string, body []byte) string {
			var b struct {
				Participant struct {
					ID string `json:"participant_id"`
				} `json:"participant"`
			}
			_ = json.Unmarshal(body, &b)
			return fmt.Sprintf("%s to room %s", b.Participant.ID, parts[2])
		},
		fix: "record the change in a Message.Step (with the room's state it depends on), so a redelivery does not make it again",
	},
	{
		name:  "a memory stored",
		match: route(http.MethodPost, "agent", "memories"),
		identity: func(_ []string, body []byte) string {
			var b struct {
				Memory struct {
					Content  string `json:"content"`
					Metadata struct {
						Key string `json:"dedup_key"`
					} `json:"metadata"`
				} `json:"memory"`
			}
			_ = json.Unmarshal(body, &b)
			return keyOr(b.Memory.Metadata.Key, b.Memory.Content)
		},
		truth: oracle.WriteMemory, twice: "the memory with key %q was stored twice (%q)",
		fix: "store it with Message.StoreMemory, which finds it again by its key",
	},
	{
		name:  "a task created",
		match: route(http.MethodPost, "agent", "chats", "*", "tasks"),
		identity: func(_ []string, body []byte) string {
			var b struct {
				Subject string `json:"subject"`
				Detail  string `json:"detail"`
			}
			_ = json.Unmarshal(body, &b)
			key, _ := oracle.MarkerKey(b.Detail)
			return keyOr(key, b.Subject)
		},
		truth: oracle.WriteTask, twice: "the task with key %q was created twice on a room's board (%q)",
		fix: "create it with Message.CreateTask, which finds it again by its key",
	},
	{
		name:  "a task comment posted",
		match: route(http.MethodPost, "agent", "chats", "*", "tasks", "*"),
		identity: func(_ []string, body []byte) string {
			var b struct {
				Comment string `json:"comment"`
			}
			_ = json.Unmarshal(body, &b)
			if b.Comment == "" {
				return "" // a change of status or form: setting it twice is setting it once
			}
			key, _ := oracle.MarkerKey(b.Comment)
			return keyOr(key, b.Comment)
		},
		truth: oracle.WriteComment, twice: "the comment with key %q was posted twice on a room's tasks (%q)",
		fix: "post it with Message.UpdateTask, which finds it again by its key",
	},
	{
		name:       "the board's goal set",
		match:      route(http.MethodPut, "agent", "chats", "*", "board"),
		identity:   func(parts []string, _ []byte) string { return "in room " + parts[2] },
		idempotent: true, // the board keeps one goal: setting it again changes nothing
	},
	{
		name:  "a contact asked for",
		match: route(http.MethodPost, "agent", "contacts", "add"),
		identity: func(_ []string, body []byte) string {
			var b struct {
				Handle string `json:"handle"`
			}
			_ = json.Unmarshal(body, &b)
			return "@" + strings.TrimPrefix(b.Handle, "@")
		},
		idempotent: true, // Band answers a repeat with the request pending
	},
	{
		name:       "a contact request answered",
		match:      route(http.MethodPost, "agent", "contacts", "requests", "respond"),
		identity:   func(_ []string, body []byte) string { return string(body) },
		idempotent: true, // a request answered already is answered
	},
}

// route matches a request by method and path parts, "*" matching any
// one part.
func route(method string, want ...string) func(string, []string) bool {
	return func(m string, parts []string) bool {
		if m != method || len(parts) != len(want) {
			return false
		}
		for i, w := range want {
			if w != "*" && w != parts[i] {
				return false
			}
		}
		return true
	}
}

// keyOr names a write by its key, or by its text when it has none.
func keyOr(key, text string) string {
	if key != "" {
		return fmt.Sprintf("key %q", key)
	}
	return fmt.Sprintf("%q", excerptOf(text))
}

// bandEffect is one write of a bandEffectKind a turn made.
type bandEffect struct {
	kind     *bandEffectKind
	turn     *turn
	identity string
	landed   bool // Band answered 2xx
}

// noteBandEffect records a request that is a write of one of the table's
// kinds, attributed to the turn whose context it carries (else the life's
// open loop turn); it returns the record, for the answer to complete.
func (r *recorder) noteBandEffect(req *http.Request) *bandEffect {
	parts := apiParts(req.URL.Path)
	for i := range bandEffectKinds {
		k := &bandEffectKinds[i]
		if !k.match(req.Method, parts) {
			continue
		}
		e := &bandEffect{kind: k, identity: k.identity(parts, peekBody(req))}
		if x := ExternalFrom(req.Context()); x != nil && x.turn != nil {
			e.turn = x.turn
		} else {
			e.turn = r.o.loopTurn(r.life)
		}
		if e.turn == nil {
			return nil
		}
		r.o.mu.Lock()
		r.o.bandEffects = append(r.o.bandEffects, e)
		r.o.mu.Unlock()
		return e
	}
	return nil
}

// apiParts splits a request path after the API prefix.
func apiParts(path string) []string {
	_, rest, ok := strings.Cut(path, fakeband.APIPrefix+"/")
	if !ok {
		return nil
	}
	return strings.Split(strings.Trim(rest, "/"), "/")
}

// bandEffectTwice judges the table's two rules. In the fake's ground
// truth (every life): a write found twice under its key, named by its
// kind (memory-twice, task-twice, comment-twice, room-twice). From the
// requests (one life): a later delivery of a message made a write an
// earlier one had made and Band had applied: the redelivery did not
// recognise it, as a guard recognises a send.
func bandEffectTwice(o *observation, res proof.Result) *verdict {
	var tasks []fakeband.Task
	for _, ts := range res.Tasks {
		tasks = append(tasks, ts...)
	}
	if doubles := oracle.DoubleWrites(res.AgentID, res.Memories, tasks, res.CreatedRooms); len(doubles) > 0 {
		d := doubles[0]
		for _, k := range bandEffectKinds {
			if k.truth == d.Kind {
				return &verdict{d.Kind + "-twice", "a double write: " + fmt.Sprintf(k.twice, d.Key, excerptOf(d.Text)) +
					": a redelivery did not find it again; " + k.fix}
			}
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	type id struct {
		kind          *bandEffectKind
		life          int
		msg, identity string
	}
	first := map[id]*bandEffect{}
	for _, e := range o.bandEffects {
		if !e.landed || e.kind.idempotent || e.identity == "" {
			continue
		}
		k := id{e.kind, e.turn.life, e.turn.msg, e.identity}
		f, seen := first[k]
		if !seen {
			first[k] = e
			continue
		}
		if f.turn != e.turn {
			label := o.labels[e.turn.msg]
			if label == "" {
				label = e.turn.msg
			}
			return &verdict{"band-effect-twice", fmt.Sprintf(
				"a double effect: %s (%s) by two deliveries of %s: the redelivery made it again: %s",
				e.kind.name, e.identity, label, e.kind.fix)}
		}
	}
	return nil
}
