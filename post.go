package bandonce

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/band-once/bandonce/internal/lifecycle"
	"github.com/band-once/bandonce/internal/wire"
)

// post guards the handler's final reply and posts it at most once, then
// marks the message processed. Its signal gate commits the message's fate:
// from the first POST on, a signal no longer retracts the reply, unless
// the POST provably did not land and would be sent again.
func (r *room) post(ctx context.Context, cy *cycle, m *wire.Message, attempt int, rep *Reply) roundEnd {
	key, isDefault := rep.DedupKey, rep.DedupKey == ""
	if isDefault {
		key = DefaultKey(m.ID)
	}
	dup, f := r.send(ctx, attempt, effect{key: key, msg: m.ID, inherited: r.inherited(m.ID), defaultKey: isDefault || derivedKey(m.ID, key), reply: rep}, func(again bool) error {
		cause := r.ctl.commit(cy)
		if (again || cy.resent) && cause == nil {
			// The reply is not in the room: posting it again would be
			// new output, which a signal since the commit forbids.
			cause = r.ctl.lateSignal(cy)
		}
		return cause
	})
	switch {
	case f == nil && dup:
		if cause := r.ctl.commit(cy); cause != nil {
			return r.aborted(ctx, m, attempt, cause)
		}
		return r.ack(ctx, m, attempt, Outcome{Kind: DuplicateDropped, DedupKey: key})
	case f == nil:
		return r.ack(ctx, m, attempt, Outcome{Kind: Replied, DedupKey: key})
	}
	if cause := r.ctl.signalled(cy); cause != nil && f.kind != failAborted {
		// A signal reached the cycle while the send failed (a guard read
		// given up on, an unknown outcome left unresolved): it decides,
		// or a later delivery would send what the signal withdrew.
		return r.aborted(ctx, m, attempt, cause)
	}
	if f.keep {
		// Nothing was sent, or the outcome is unknown: the next delivery
		// guards and posts this reply without running the handler again.
		r.unsent[m.ID] = rep
	}
	switch f.kind {
	case failAborted:
		return r.aborted(ctx, m, attempt, f.err)
	case failLater:
		return endBackoff
	case failStopped:
		r.s.reportOutcome(Outcome{Kind: Stopped, RoomID: r.id, MessageID: m.ID, Attempt: attempt, DedupKey: key})
		return endStopped
	case failRefused:
		r.charge(m.ID, f.err)
		return r.deadLetter(ctx, m, attempt, f.err)
	case failWait:
		return endIdle
	case failSettle:
		// The cycle is held open until then (see round); when it goes
		// on, any POST it makes is a POST again.
		r.settleUntil = f.until
		cy.resent = true
		return endSettle
	default:
		return r.failed(f.call, f.err)
	}
}

// effect is one output of a turn that Band has no idempotency key for: a
// text message or an event. Its dedup key travels with it (a message's
// last line, an event's metadata), where the guard can find it again.
type effect struct {
	key string
	msg string // the id of the message whose turn sends it
	// inherited: an earlier life may have attempted that message (this
	// life's first attempt of it was not Band's first).
	inherited bool
	// defaultKey: the key is derived from the message id, so no other
	// message can have sent it.
	defaultKey bool
	reply      *Reply // a text message, or
	event      *Event // an event
}

// name is the effect's key as the ledger and the room's guard index know
// it: a reply's key as it is (the marker band-once agents in other
// languages share), an event's in a kind of its own, so a reply and an
// event may share one natural key.
func (e effect) name() string {
	if e.event != nil {
		return eventName(e.key)
	}
	return e.key
}

// eventName is an event's key as the ledger and the guard index know it.
func eventName(key string) string { return lifecycle.RecordName("event", key) }

func (e effect) call() string {
	if e.event != nil {
		return "POST events"
	}
	return "POST messages"
}

// text is everything of the effect that would reach the room: content,
// dedup key, mentions and an event's metadata as JSON.
func (e effect) text() string {
	var b strings.Builder
	if e.event != nil {
		meta, _ := json.Marshal(e.event.Metadata) // validateEvent checked it encodes
		b.Grow(len(e.key) + len(e.event.Content) + len(meta) + 2)
		b.WriteString(e.key)
		b.WriteString("\n")
		b.WriteString(e.event.Content)
		b.WriteString("\n")
		b.Write(meta)
		return b.String()
	}
	n := len(e.key) + 1 + len(e.reply.Content)
	for _, m := range e.reply.Mentions {
		n += 1 + len(m)
	}
	b.Grow(n)
	b.WriteString(e.key)
	b.WriteString("\n")
	b.WriteString(e.reply.Content)
	for _, m := range e.reply.Mentions {
		b.WriteString("\n")
		b.WriteString(m)
	}
	return b.String()
}

// sendFailure says why an effect was not sent, or may not have been.
type sendFailure struct {
	kind failKind
	// keep: nothing was sent, or the outcome is unknown, and sending the
	// same effect again later, behind the guard, is right.
	keep bool
	call string // the call that failed, for the room's logs and backoff
	err  error
	// until: failSettle's moment, when the unknown send has settled.
	until time.Time
}

type failKind int

const (
	failAborted failKind = iota + 1 // a signal forbids it; err is the cause
	failLater                       // the ledger failed, or Band's plan limit: nothing sent
	failStopped                     // Band refused it: the agent is stopped in the room
	failRefused                     // Band refused it for good; err is Permanent
	failCall                        // a request failed (the guard's read, 404, 401, ...)
	failWait                        // ctx ended while waiting to re-check an unknown outcome
	failSettle                      // a send of unknown outcome may still land: read the room at until
)

// send guards one effect and sends it at most once: the ledger first, the
// room read only when it can find something, and never a blind re-POST.
// After an ambiguous outcome (a timeout, a reset, a 5xx) the room is read
// again and the effect sent only if it is still absent, and that read
// happens only once the send has settled (Config.SettleWindow): before,
// send returns failSettle with the moment to try again. gate is asked
// before every POST, again true when a POST went before it, and returns
// the signal that forbids sending. dup reports an effect already in the
// room, which is not sent again.
func (r *room) send(ctx context.Context, attempt int, e effect, gate func(again bool) error) (dup bool, f *sendFailure) {
	if r.s.cfg.apiKey.In(e.text()) {
		// Every member of the room could read it: the key never goes
		// there, whatever the handler (or a bridged command) produced.
		r.s.log.Warn("bandonce: refused to send output that contains the agent's API key", "room", r.id, "call", e.call())
		return false, &sendFailure{kind: failRefused, call: e.call(), err: Permanent(ErrKeyInOutput)}
	}
	ledger := r.s.cfg.Ledger
	name := e.name()
	state, err := ledger.Key(ctx, r.id, name)
	if err != nil {
		r.s.ledgerFailed("bandonce: ledger read failed", err, "room", r.id, "key", e.key)
		return false, &sendFailure{kind: failLater, keep: true, err: err}
	}
	facts := lifecycle.GuardFacts{Ledger: knowledge(state), Durable: ledger.Durable(), Checked: r.ledgerChecked, Attempt: attempt, DefaultKey: e.defaultKey}
	for try := 0; ; try++ {
		switch lifecycle.Guard(facts) {
		case lifecycle.DropDuplicate:
			if !state.InRoom() {
				r.setKey(ctx, name, e.key, KeyDuplicateDropped)
			}
			r.s.log.Info("bandonce: already in the room; not sending it again", "room", r.id, "key", e.key)
			return true, nil
		case lifecycle.ReadRoom, lifecycle.CheckLedger:
			if at := r.s.late.settledAt(r.id, name, e.inherited); time.Now().Before(at) && !r.guard.keys[name] {
				// A send of this key, by this life or an earlier one, may
				// still land: a read now that does not find it proves
				// nothing.
				return false, &sendFailure{kind: failSettle, keep: true, call: e.call(), until: at}
			}
			found, err := r.guard.contains(ctx, r.s.api, r.id, r.s.agentID(), name)
			r.guardRead(ctx, found, err)
			if err != nil {
				return false, r.guardFailed(e, err)
			}
			if !facts.Checked && facts.Durable && r.guard.walked {
				// A read covered the whole room: bring the ledger up to it.
				if err := r.catchUpLedger(ctx); err != nil {
					r.s.ledgerFailed("bandonce: ledger check against the room failed", err, "room", r.id)
					return false, &sendFailure{kind: failLater, keep: true, err: err}
				}
				facts.Checked = true
			}
			if found {
				facts.Ledger = lifecycle.InRoom
				continue
			}
		}
		if cause := gate(try > 0); cause != nil {
			return false, &sendFailure{kind: failAborted, err: cause}
		}
		if err := ledger.SetKey(ctx, r.id, name, KeyIntent); err != nil {
			// Without the intent on record a crash could hide this send
			// from a durable ledger: do not send it.
			r.s.ledgerFailed("bandonce: ledger write failed; not sending", err, "room", r.id, "key", e.key)
			return false, &sendFailure{kind: failLater, keep: true, err: err}
		}
		// The POST may wait for the shell's request budget: a signal that
		// arrives meanwhile still withdraws it, up to the moment it leaves.
		err := r.post1(wire.WithStartCheck(ctx, func() error { return gate(true) }), e)
		var notSent *wire.NotSentError
		if errors.As(err, &notSent) {
			return false, &sendFailure{kind: failAborted, err: notSent.Err}
		}
		if err == nil {
			r.guard.add(name)
			r.setKey(ctx, name, e.key, KeyAccepted)
			return false, nil
		}
		var apiErr *APIError
		isAPI := errors.As(err, &apiErr)
		switch {
		case isAPI && apiErr.Status == http.StatusForbidden && apiErr.Code == "limit_reached":
			// The plan's quota, not a stop: send it again after a
			// backoff; the guard runs again first.
			r.s.log.Warn("bandonce: Band refused a send: plan limit reached; will retry", "room", r.id, "key", e.key, "err", err)
			return false, &sendFailure{kind: failLater, keep: true, call: e.call(), err: err}
		case isAPI && apiErr.Status == http.StatusForbidden:
			// Band refuses posts from an agent stopped in this room: the
			// stop's push may be late or lost, but the gate is the truth.
			r.s.log.Info("bandonce: Band refused a send (stopped); leaving the message for replay", "room", r.id, "key", e.key)
			r.ctl.stop()
			return false, &sendFailure{kind: failStopped, call: e.call(), err: fmt.Errorf("%w: %w", ErrStopped, err)}
		case isAPI && (apiErr.Status == http.StatusNotFound || apiErr.Status == http.StatusUnauthorized):
			return false, &sendFailure{kind: failCall, call: e.call(), err: err}
		case isAPI && !apiErr.Transient():
			return false, &sendFailure{kind: failRefused, call: e.call(), err: Permanent(fmt.Errorf("refused by Band: %w", err))}
		case ctx.Err() != nil:
			// Cut off in flight (an interrupt, a shutdown): the request
			// left, so it may still land, and the message must not be
			// consumed, nor the key trusted absent, before it has settled.
			r.s.late.unknown(r.id, e.msg, name, time.Now())
			return false, &sendFailure{kind: failCall, call: e.call(), err: err}
		}
		// Ambiguous: it may have landed, or land later still. Only a
		// read of the room once the send has settled can tell, so the
		// next pass waits for that before it reads, and sends only if
		// the read finds nothing.
		now := time.Now()
		r.s.late.unknown(r.id, e.msg, name, now)
		facts.Ledger = lifecycle.Intent
		r.s.log.Warn("bandonce: send outcome unknown; re-checking the room once it has settled", "room", r.id, "key", e.key,
			"err", err, "wait", r.s.cfg.SettleWindow)
	}
}

// guardFailed says what a failed guard read means for the send: a read
// no retry can complete gives the message up (never sent unguarded, never
// a room wedged behind it); any other failure is retried later.
func (r *room) guardFailed(e effect, err error) *sendFailure {
	if !errors.Is(err, errUnreadableRoom) {
		return &sendFailure{kind: failCall, keep: true, call: "GET context", err: err}
	}
	where := r.s.cfg.baseURL.String()
	if pe := (*wire.PagingError)(nil); errors.As(err, &pe) {
		where = pe.URL
	}
	r.s.log.Warn("bandonce: cannot read the room to guard a send; giving the message up", "room", r.id, "key", e.key,
		"url", where, "err", err)
	return &sendFailure{kind: failRefused, call: "GET context", err: Permanent(err)}
}

// catchUpLedger brings a durable ledger up to the room, once per room and
// life: every key of the agent's that the guard found in the room and the
// ledger has no record of is recorded as posted. A ledger restored from an
// older copy has lost such records, and a pruned one dropped them; either
// would otherwise take "no record" for "never tried". The guard's index
// has just read the whole room.
func (r *room) catchUpLedger(ctx context.Context) error {
	ledger := r.s.cfg.Ledger
	missing := 0
	for key := range r.guard.keys {
		state, err := ledger.Key(ctx, r.id, key)
		if err != nil {
			return err
		}
		if state != KeyUnknown {
			continue
		}
		if err := ledger.SetKey(ctx, r.id, key, KeyAccepted); err != nil {
			return err
		}
		missing++
	}
	if missing > 0 {
		r.s.log.Info("bandonce: the ledger had no record of posts the room holds (an older copy, or pruned); recorded them",
			"room", r.id, "keys", missing)
	}
	r.ledgerChecked = true
	return nil
}

// post1 makes the one POST of an effect, its key attached.
func (r *room) post1(ctx context.Context, e effect) error {
	if e.event != nil {
		_, err := r.s.api.Event(ctx, r.id, string(e.event.Type), e.event.Content, withKey(e.event.Metadata, e.key))
		return err
	}
	_, err := r.s.api.Post(ctx, r.id, lifecycle.AppendMarker(e.reply.Content, e.key), mentions(e.reply.Mentions))
	return err
}

// withKey returns a copy of an event's metadata with the dedup key added.
func withKey(metadata map[string]any, key string) map[string]any {
	out := make(map[string]any, len(metadata)+1)
	for k, v := range metadata {
		out[k] = v
	}
	out[lifecycle.MetadataKey] = key
	return out
}

// setKey records the state of the key named name (effect.name,
// lifecycle.RecordName); a failure is logged under the key itself.
func (r *room) setKey(ctx context.Context, name, key string, state KeyState) {
	if err := r.s.cfg.Ledger.SetKey(ctx, r.id, name, state); err != nil {
		r.s.ledgerFailed("bandonce: ledger write failed", err, "room", r.id, "key", key)
	}
}

func knowledge(s KeyState) lifecycle.Knowledge {
	switch {
	case s.InRoom():
		return lifecycle.InRoom
	case s == KeyIntent:
		return lifecycle.Intent
	default:
		return lifecycle.Unknown
	}
}

// mentions turns a reply's mentions into Band's: a participant id, or a
// handle written with a leading "@", which Band resolves in the room.
func mentions(ids []string) []wire.Mention {
	out := make([]wire.Mention, len(ids))
	for i, id := range ids {
		if handle, ok := strings.CutPrefix(id, "@"); ok {
			out[i] = wire.Mention{Handle: handle}
		} else {
			out[i] = wire.Mention{ID: id}
		}
	}
	return out
}
