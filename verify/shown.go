package verify

import (
	"fmt"
	"sort"
	"strings"

	"github.com/band-once/bandonce/internal/lifecycle"
	"github.com/band-once/bandonce/internal/oracle"
	"github.com/band-once/bandonce/proof"
)

// This file judges what a person in the room sees, message by message:
// each answer shown once, and every message a turn sends shown at all.
// The keys alone cannot tell: a turn that posts its answer with Send and
// returns it as the Reply shows it twice under two good keys, and a
// progress message that takes the reply's key hides the answer behind it.

// sent is one message or event the agent meant the room to show: a
// turn's Send or Event, or the Reply its handler returned.
type sent struct {
	life, delivery int
	room, msg      string
	key, kind      string
	content        string // without the marker line
}

// name is the key as the shell's ledger and guard know it: a message's
// (a Send's or a Reply's) as it is, an event's in a kind of its own, so an
// event and a message may share one natural key.
func (s sent) name() string {
	if strings.HasSuffix(s.kind, " event") {
		return lifecycle.RecordName("event", s.key)
	}
	return s.key
}

// noteReplyLocked records the Reply a handler returned, with the
// delivery it belongs to. o.mu is held.
func (o *observation) noteReplyLocked(life int, room, msg, key, content string) {
	o.replies = append(o.replies, sent{
		life: life, delivery: o.delivery[lifeRoom{life, room}], room: room, msg: msg,
		key: key, kind: "reply", content: strings.TrimRight(content, " \t\r\n"),
	})
}

// allSent lists the turns' messages and events and the replies, in the
// order they were sent or returned.
func (o *observation) allSent() []sent {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make([]sent, 0, len(o.effects)+len(o.replies))
	for _, e := range o.effects {
		out = append(out, sent{life: e.life, delivery: e.delivery, room: e.room, msg: e.msg, key: e.key, kind: e.kind, content: e.content})
	}
	return append(out, o.replies...)
}

// keyTaken: a turn's Send or Event looked up a key another message's turn
// had sent, so the guard took that for its own and sent nothing.
func keyTaken(o *observation) *verdict {
	all := o.allSent()
	o.mu.Lock()
	lookups := append([]sent(nil), o.lookups...)
	o.mu.Unlock()
	for _, l := range lookups {
		for _, s := range all {
			if s.room == l.room && s.name() == l.key && s.msg != l.msg {
				return &verdict{"effect-key-shared", fmt.Sprintf(
					"a lost effect: a turn of %s sent under the key %q that %s's turn had used (%s %q), so the guard took that for its own and sent nothing: "+
						"a key names one message's effect (put the message's ID in it)",
					o.label(l.msg), s.key, o.label(s.msg), article(s.kind), excerptOf(s.content))}
			}
		}
	}
	return nil
}

// keyReused: a dedup key names one thing of its kind the room shows. The
// same key on two messages' effects of a kind, or on two different
// messages one delivery sends, makes the guard take the first for the
// second, which is never shown.
func keyReused(o *observation) *verdict {
	all := o.allSent()
	sort.SliceStable(all, func(i, j int) bool { return all[i].kind != "reply" && all[j].kind == "reply" })
	first := map[string]sent{} // by room and name
	for _, s := range all {
		if s.key == "" {
			continue
		}
		id := s.room + "\x00" + s.name()
		f, seen := first[id]
		if !seen {
			first[id] = s
			continue
		}
		switch {
		case f.msg != s.msg:
			return &verdict{"effect-key-shared", fmt.Sprintf(
				"a lost effect: the turns of %s and %s both sent under the key %q (%s %q, then %s %q), so the guard takes the first for the second, which is never shown: "+
					"a key names one message's effect (put the message's ID in it)",
				o.label(f.msg), o.label(s.msg), s.key, article(f.kind), excerptOf(f.content), article(s.kind), excerptOf(s.content))}
		case f.life == s.life && f.delivery == s.delivery && (f.kind != s.kind || f.content != s.content):
			what := "a lost effect"
			if s.kind == "reply" {
				what = "a lost answer"
			}
			return &verdict{"effect-key-shared", fmt.Sprintf(
				"%s: one delivery of %s sent %s %q and %s %q under the same key %q, so the guard takes the first for the second, which is never shown: give each its own DedupKey",
				what, o.label(s.msg), article(f.kind), excerptOf(f.content), article(s.kind), excerptOf(s.content), s.key)}
		}
	}
	return keyTaken(o)
}

// shownTwice: a person reading the room sees each thing a message's turn
// says once. Two of the agent's posts for one message that say the same
// under different keys show it twice.
func shownTwice(o *observation, res proof.Result) *verdict {
	owner := map[string]string{} // room and name to message
	for _, s := range o.allSent() {
		if s.key != "" {
			owner[s.room+"\x00"+s.name()] = s.msg
		}
	}
	for room, posts := range res.Posts {
		seen := map[string]map[string]string{} // message, text, key
		for _, p := range posts {
			k, ok := oracle.MarkerKey(p.Content)
			if !ok {
				continue
			}
			msg := owner[p.RoomID+"\x00"+k]
			if msg == "" {
				continue
			}
			text := withoutMarker(p.Content)
			if seen[msg] == nil {
				seen[msg] = map[string]string{}
			}
			if other, dup := seen[msg][text]; dup && other != k {
				return &verdict{"shown-twice", fmt.Sprintf(
					"a double post: room %d shows %q twice for %s, under the keys %q and %q: a turn that sends its answer with Message.Send must not return it as the Reply too (return nil, or a Reply that says something else)",
					room+1, excerptOf(text), o.label(msg), other, k)}
			}
			seen[msg][text] = k
		}
	}
	return nil
}

// withoutMarker is a post's text without its marker line.
func withoutMarker(content string) string {
	c := strings.TrimRight(content, " \t\r\n")
	if i := strings.LastIndexByte(c, '\n'); i >= 0 {
		c = c[:i]
	}
	c = strings.TrimRight(c, " \t\r\n")
	// Band shows the mentions the agent asked for before its text.
	for strings.HasPrefix(c, "@[[") {
		end := strings.Index(c, "]]")
		if end < 0 {
			break
		}
		c = strings.TrimLeft(c[end+2:], " ")
	}
	return c
}
