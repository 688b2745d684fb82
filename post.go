package bandonce

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/band-once/bandonce/internal/core"
	"github.com/band-once/bandonce/internal/wire"
)

// post guards the reply and posts it at most once, then marks the message
// processed. The POST itself is never re-sent blind: after an ambiguous
// outcome (a timeout, a reset, a 5xx) the room is read again and the reply
// posted only if it is still absent.
func (r *room) post(ctx context.Context, cy *cycle, m *wire.Message, attempt int, rep *Reply) step {
	key, isDefault := rep.DedupKey, rep.DedupKey == ""
	if isDefault {
		key = DefaultKey(m.ID)
	}
	ledger := r.s.cfg.Ledger
	state, err := ledger.Key(ctx, r.id, key)
	if err != nil {
		r.s.log.Error("bandonce: ledger read failed", "room", r.id, "key", key, "err", err)
		r.unsent[m.ID] = rep
		return stepBackoff
	}
	facts := core.GuardFacts{Ledger: knowledge(state), Durable: ledger.Durable(), Attempt: attempt, DefaultKey: isDefault}
	for try := 0; ; try++ {
		switch core.Guard(facts) {
		case core.DropDuplicate:
			if cause := r.ctl.commit(cy); cause != nil {
				return r.aborted(ctx, m, attempt, cause)
			}
			if !state.Settled() {
				r.setKey(ctx, key, KeyDuplicateDropped)
			}
			r.s.log.Info("bandonce: reply already in the room; not posting it again", "room", r.id, "message", m.ID, "key", key)
			return r.ack(ctx, m, attempt, Outcome{Kind: DuplicateDropped, DedupKey: key})
		case core.ReadRoom:
			found, err := r.guard.contains(ctx, r.s.api, r.id, r.s.agentID(), key)
			r.guardRead(ctx, found, err)
			if err != nil {
				r.unsent[m.ID] = rep
				return r.failed("GET context", err)
			}
			if found {
				facts.Ledger = core.Settled
				continue
			}
		}
		cause := r.ctl.commit(cy)
		if try > 0 && cause == nil {
			// The reply is not in the room: posting it again would be
			// new output, which a signal since the commit forbids.
			cause = r.ctl.lateSignal(cy)
		}
		if cause != nil {
			return r.aborted(ctx, m, attempt, cause)
		}
		if err := ledger.SetKey(ctx, r.id, key, KeyIntent); err != nil {
			// Without the intent on record a crash could hide this post
			// from a durable ledger: do not send it.
			r.s.log.Error("bandonce: ledger write failed; not posting", "room", r.id, "key", key, "err", err)
			r.unsent[m.ID] = rep
			return stepBackoff
		}
		_, err := r.s.api.Post(ctx, r.id, core.AppendMarker(rep.Content, key), mentions(rep.Mentions))
		if err == nil {
			r.guard.add(key)
			r.setKey(ctx, key, KeyAccepted)
			return r.ack(ctx, m, attempt, Outcome{Kind: Replied, DedupKey: key})
		}
		var apiErr *APIError
		isAPI := errors.As(err, &apiErr)
		switch {
		case isAPI && apiErr.Status == http.StatusForbidden && apiErr.Code == "limit_reached":
			// The plan's quota, not a stop: keep the reply and try again
			// after the room's backoff; the guard runs again first.
			r.s.log.Warn("bandonce: Band refused the reply: plan limit reached; will retry", "room", r.id, "message", m.ID, "err", err)
			r.unsent[m.ID] = rep
			return stepBackoff
		case isAPI && apiErr.Status == http.StatusForbidden:
			// Band refuses posts from an agent stopped in this room: the
			// stop's push may be late or lost, but the gate is the truth.
			r.s.log.Info("bandonce: Band refused the reply (stopped); leaving the message for replay", "room", r.id, "message", m.ID)
			r.ctl.stop()
			r.s.emit(Outcome{Kind: Stopped, RoomID: r.id, MessageID: m.ID, Attempt: attempt, DedupKey: key})
			return stepStopped
		case isAPI && (apiErr.Status == http.StatusNotFound || apiErr.Status == http.StatusUnauthorized):
			return r.failed("POST messages", err)
		case isAPI && !apiErr.Transient():
			refused := Permanent(fmt.Errorf("reply refused by Band: %w", err))
			r.charge(m.ID, refused)
			return r.deadLetter(ctx, m, refused)
		case ctx.Err() != nil:
			return r.failed("POST messages", err)
		}
		// Ambiguous: the post may have landed. Only a fresh read of the
		// room can tell, so the next pass reads before posting again.
		facts.Ledger = core.Intent
		if try+1 >= r.s.cfg.Retry.MaxAttempts {
			r.unsent[m.ID] = rep
			return r.failed("POST messages", err)
		}
		wait := r.s.jitter.Backoff(r.s.cfg.Retry.BaseDelay, r.s.cfg.Retry.MaxDelay, try)
		r.s.log.Warn("bandonce: reply post outcome unknown; re-checking the room before any retry", "room", r.id, "message", m.ID, "err", err, "wait", wait)
		if err := sleep(ctx, wait); err != nil {
			r.unsent[m.ID] = rep
			return stepIdle
		}
	}
}

func (r *room) setKey(ctx context.Context, key string, state KeyState) {
	if err := r.s.cfg.Ledger.SetKey(ctx, r.id, key, state); err != nil {
		r.s.log.Error("bandonce: ledger write failed", "room", r.id, "key", key, "err", err)
	}
}

func knowledge(s KeyState) core.Knowledge {
	switch {
	case s.Settled():
		return core.Settled
	case s == KeyIntent:
		return core.Intent
	default:
		return core.Unknown
	}
}

func mentions(ids []string) []wire.Mention {
	out := make([]wire.Mention, len(ids))
	for i, id := range ids {
		out[i] = wire.Mention{ID: id}
	}
	return out
}
