package verify

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/band-once/bandonce/internal/oracle"
	"github.com/band-once/bandonce/proof"
)

// This file watches the agent's socket connections: which of Band's
// topics each joined, read from the replies Band sent it. An agent that
// joins agent_control on its first connection only hears no signal after
// a redial, and a signal it never hears convicts it of nothing: the rule
// here does.

// socketConn is one connection of one instance of the agent.
type socketConn struct {
	rec *recorder
	n   int // the instance's connection number, from 1

	mu sync.Mutex
	// tail keeps the end of what was read, so a reply split across reads
	// is still found.
	tail          []byte
	joinedControl bool // Band answered ok to its join of agent_control
	replied       bool // Band answered some frame on it: the agent speaks on it
}

// watchSocket wraps a connection the agent opened, to read Band's replies.
func (r *recorder) watchSocket(rwc io.ReadWriteCloser, agentID string) io.ReadWriteCloser {
	o := r.o
	o.mu.Lock()
	r.conns++
	c := &socketConn{rec: r, n: r.conns}
	o.sockets = append(o.sockets, c)
	o.mu.Unlock()
	return &watchedSocket{ReadWriteCloser: rwc, c: c, control: []byte(`"agent_control:` + agentID + `","phx_reply",`)}
}

type watchedSocket struct {
	io.ReadWriteCloser
	c       *socketConn
	control []byte
}

// maxTail bounds what a watched socket keeps of its reads.
const maxTail = 512

func (w *watchedSocket) Read(p []byte) (int, error) {
	n, err := w.ReadWriteCloser.Read(p)
	if n > 0 {
		c := w.c
		c.mu.Lock()
		buf := append(c.tail, p[:n]...)
		if i := bytes.Index(buf, w.control); i >= 0 {
			reply := buf[i+len(w.control):]
			reply = reply[:min(len(reply), 64)]
			if bytes.Contains(reply, []byte(`"status":"ok"`)) {
				c.joinedControl = true
			}
		}
		if bytes.Contains(buf, []byte(`"phx_reply"`)) {
			c.replied = true
		}
		if len(buf) > maxTail {
			buf = buf[len(buf)-maxTail:]
		}
		c.tail = append(c.tail[:0], buf...)
		c.mu.Unlock()
	}
	return n, err
}

// controlNotRejoined: an instance of the agent joined agent_control on a
// connection, then spoke with Band on a later one without joining it: on
// that connection no interrupt, stop or play reaches it.
func controlNotRejoined(o *observation) *verdict {
	o.mu.Lock()
	conns := append([]*socketConn(nil), o.sockets...)
	o.mu.Unlock()
	joined := map[*recorder]bool{}
	for _, c := range conns {
		c.mu.Lock()
		ok, replied := c.joinedControl, c.replied
		c.mu.Unlock()
		switch {
		case ok:
			joined[c.rec] = true
		case replied && joined[c.rec]:
			return &verdict{"control-not-rejoined", fmt.Sprintf(
				"signals unheard after a reconnect: life %d joined agent_control on its first connection, but not on connection %d, so no interrupt, stop or play reached it there: "+
					"join agent_control:<agent id> (and every other topic) again on every connection",
				c.rec.life, c.n)}
		}
	}
	return nil
}

// signalHint says where the signals that reached the agent during the
// message msg's turns fell, beyond the window the checks once aimed at:
// agent-wide, after the message was claimed and before its handler
// started, or seconds after another of the same kind. "" when none of
// these applies.
func signalHint(res proof.Result, o *observation, room, msg string, kind proof.EventKind) string {
	var reached []proof.Signal
	for _, s := range res.Signals {
		if s.Reached && s.Kind == kind {
			reached = append(reached, s)
		}
	}
	name := strings.ToLower(kind.String())
	o.mu.Lock()
	defer o.mu.Unlock()
	facts := map[string]bool{}
	var out []string
	add := func(f string) {
		if !facts[f] {
			facts[f] = true
			out = append(out, f)
		}
	}
	for i, s := range reached {
		if s.RoomID != "" && s.RoomID != room {
			continue
		}
		during, early := false, false
		for _, t := range o.turns {
			if t.msg != msg || t.life != s.Life || t.hook {
				continue
			}
			if t.start <= s.Tick && (t.end == 0 || s.Tick <= t.end) {
				during = true
			}
			if s.Tick < t.start && o.claimedBefore(t, s.Tick) {
				during, early = true, true
			}
		}
		if !during {
			continue
		}
		if kind == proof.Interrupt && o.ackedBeforeReply(s, msg) {
			add(fmt.Sprintf("%s was marked processed after the interrupt reached the agent, and its reply sent after that: cancel the turn first, then mark the message processed", o.labels[msg]))
		}
		if early {
			add(fmt.Sprintf("the %s reached the agent after /next served %s and before its handler started: a signal applies to a message from the moment it is served", name, o.labels[msg]))
		}
		if s.RoomID == "" && kind == proof.Interrupt {
			add("the interrupt was agent-wide (its room_id is null): it applies to every room's turn in flight")
		}
		if i > 0 && s.At.Sub(reached[i-1].At) < 10*time.Second {
			add(fmt.Sprintf("it was the second %s within %s: honour every signal, however soon after the last (never debounce one)",
				name, s.At.Sub(reached[i-1].At).Round(time.Millisecond)))
		}
	}
	if len(out) == 0 {
		return ""
	}
	return "; " + strings.Join(out, "; ")
}

// ackedBefore reports whether, in the life s reached, msg was marked
// processed after s and its reply was sent after that mark: the turn
// went on while it was being ended. o.mu is held.
func (o *observation) ackedBeforeReply(s proof.Signal, msg string) bool {
	lm := lifeMessage{s.Life, msg}
	for _, ack := range o.ackedAt[lm] {
		if ack <= s.Tick {
			continue
		}
		for _, post := range o.postedAt[lm] {
			if post > ack {
				return true
			}
		}
	}
	return false
}

// claimedBefore reports whether /next had served t's message to t's life
// before tick, since the message's previous turn in that life ended: it
// was in flight, its handler not started. o.mu is held.
func (o *observation) claimedBefore(t *turn, tick int64) bool {
	var since int64
	for _, u := range o.turns {
		if u != t && u.msg == t.msg && u.life == t.life && u.start < t.start && u.end > since {
			since = u.end
		}
	}
	for _, at := range o.servedAt[lifeMessage{t.life, t.msg}] {
		if at >= since && at < tick {
			return true
		}
	}
	return false
}

// interruptKept: a message was consumed without its reply, and the only
// interrupts that can excuse it reached the agent before any /next that
// served it was even asked: no turn of it was in flight, so an interrupt
// that found none was kept and applied to the room's next message.
func interruptKept(cfg *config, res proof.Result, o *observation) *verdict {
	if cfg.mayNotReply || res.Interrupted == 0 || res.Found[proof.NonePending] != nil {
		return nil
	}
	answered := map[string]bool{}
	unmarked := map[string]bool{} // rooms with a reply that names no message
	landed := map[string]bool{}   // room and marker key
	for _, posts := range res.Posts {
		for _, p := range posts {
			key, ok := oracle.MarkerKey(p.Content)
			if !ok {
				unmarked[p.RoomID] = true
				continue
			}
			landed[p.RoomID+"\x00"+key] = true
			for _, s := range res.Said {
				if strings.Contains(key, s.ID) {
					answered[s.ID] = true
				}
			}
		}
	}
	due := map[string]bool{}       // labels of the messages drawn to be answered
	natural := map[string]string{} // labels: the natural key their text carries
	if res.Schedule != nil {
		for _, e := range res.Schedule.Events {
			if e.Kind == proof.Say && (e.Spec.Outcome == proof.Reply || e.Spec.Outcome == proof.PanicThenReply) {
				due[e.Spec.Label] = true
				natural[e.Spec.Label] = e.Spec.Key
			}
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	// A message is answered under the key the agent sent for it, or under
	// the natural key it shares with others, whatever the key holds.
	for _, s := range res.Said {
		keys := append([]string{natural[s.Label]}, o.keys[s.ID]...)
		for _, k := range keys {
			if k != "" && landed[s.RoomID+"\x00"+k] {
				answered[s.ID] = true
			}
		}
	}
	for _, m := range res.Said {
		if answered[m.ID] || unmarked[m.RoomID] || !due[m.Label] {
			continue
		}
		first := int64(-1)
		for lm, ticks := range o.askedAt {
			if lm.msg != m.ID {
				continue
			}
			for _, t := range ticks {
				if first < 0 || t < first {
					first = t
				}
			}
		}
		if first < 0 {
			continue // never served: nothing consumed it in a turn
		}
		before, during := 0, false
		for _, s := range res.Signals {
			if s.Kind != proof.Interrupt || !s.Reached || (s.RoomID != "" && s.RoomID != m.RoomID) {
				continue
			}
			if s.Tick >= first {
				during = true
			} else {
				before++
			}
		}
		if !during && before > 0 {
			return &verdict{"interrupt-kept", fmt.Sprintf(
				"a lost reply: %s was consumed without its reply, though no interrupt reached the agent while it was in flight: "+
					"an interrupt that found no turn was kept for the room's next message; an interrupt ends the turn in flight, if any, and is then forgotten",
				o.labels[m.ID])}
		}
	}
	return nil
}
