package verify

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/band-once/bandonce/fakeband"
)

// This file judges the changes a turn makes to Band besides its posts:
// rooms it creates, participants it adds. Each kind is a row of
// bandEffectKinds, read from the request and judged by one rule: at most
// once per message and identity within a life, as a step is (a life's
// ledger keeps its records for the life). A new kind of write plugs in
// as a row.

// bandEffectKind is one kind of write to Band that a turn may make.
type bandEffectKind struct {
	// name says what the effect is, in a verdict ("a room created").
	name string
	// match reports whether a request is one, from its method and the
	// path's parts after the API prefix.
	match func(method string, parts []string) bool
	// identity names what makes two of them the same effect, from the
	// request's path parts and body ("" when the request says too little).
	identity func(parts []string, body []byte) string
	// fix is the hint a verdict gives.
	fix string
}

// bandEffectKinds is the table of Band writes the verifier judges.
var bandEffectKinds = []bandEffectKind{
	{
		name: "a room created",
		match: func(method string, parts []string) bool {
			return method == http.MethodPost && len(parts) == 2 && parts[0] == "agent" && parts[1] == "chats"
		},
		identity: func(_ []string, body []byte) string {
			var b struct {
				Chat struct {
					Title string `json:"title"`
				} `json:"chat"`
			}
			_ = json.Unmarshal(body, &b)
			return "titled " + fmt.Sprintf("%q", strings.TrimSpace(b.Chat.Title))
		},
		fix: "create it with Message.CreateRoom, which records it as a step, or record the room's id in a Message.Step and reuse it",
	},
	{
		name: "a participant added",
		match: func(method string, parts []string) bool {
			return method == http.MethodPost && len(parts) == 4 && parts[0] == "agent" && parts[1] == "chats" && parts[3] == "participants"
		},
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

// bandEffectTwice: a later delivery of a message, in the same life, made
// a write an earlier one had made and Band had applied: the redelivery
// did not recognise it, as a guard recognises a send.
func bandEffectTwice(o *observation) *verdict {
	o.mu.Lock()
	defer o.mu.Unlock()
	type id struct {
		kind          *bandEffectKind
		life          int
		msg, identity string
	}
	first := map[id]*bandEffect{}
	for _, e := range o.bandEffects {
		if !e.landed {
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
