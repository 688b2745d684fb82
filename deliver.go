package bandonce

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/band-once/bandonce/internal/lifecycle"
	"github.com/band-once/bandonce/internal/wire"
)

// deliver carries one served message to its fate: claim, handler, guarded
// post, mark. The fate is decided after the handler returns, from its
// result and the cause of any cancellation. A message /next served but
// that could not be read (unreadable says why) is dead-lettered instead.
func (r *room) deliver(fetch, hard context.Context, cy *cycle, m *wire.Message, unreadable error) roundEnd {
	ledger := r.s.cfg.Ledger
	pending, err := ledger.AckPending(hard, r.id, m.ID)
	if err != nil {
		r.s.ledgerFailed("bandonce: ledger read failed", err, "room", r.id, "message", m.ID)
		return endBackoff
	}
	if o, ok := r.heldAcks[m.ID]; ok {
		// Its fate was decided; the mark waited for its sends to settle.
		// The record goes once the mark landed (forget).
		return r.ackOnly(hard, m, o)
	}
	if pending || r.consumeOnServe[m.ID] || r.isOwn(m) {
		// The fate is already decided: only the processed mark is owed.
		return r.ackOnly(hard, m, Outcome{Kind: Acknowledged})
	}

	mark, err := r.claim(hard, m)
	if err != nil {
		if claimWithheld(err) {
			// Stopped before the claim (or its retry) left: the message
			// stays for replay, unclaimed.
			return r.aborted(hard, m, 0, ErrStopped)
		}
		if r.ctl.abortedBy(cy, ErrInterrupted) {
			r.consumeOnServe[m.ID] = true
			if ledger.Durable() {
				// Decided: only the processed mark is owed, after a
				// restart too (as for an interrupted message whose mark
				// failed).
				if err := ledger.SetAckPending(hard, r.id, m.ID, true); err != nil {
					r.s.ledgerFailed("bandonce: ledger write failed", err, "room", r.id, "message", m.ID)
				}
			}
		}
		return r.claimFailed(m, err)
	}
	r.lastStale = ""
	attempt := mark.AttemptNumber
	if _, ok := r.firstAttempt[m.ID]; !ok {
		r.firstAttempt[m.ID] = attempt
	}
	if r.ctl.release(m.ID) {
		// An interrupt reached the message while it waited for this
		// attempt: consumed without one.
		return r.aborted(hard, m, attempt, ErrInterrupted)
	}

	if cause, ok := r.deadLettering[m.ID]; ok {
		// Its dead letter began (its failed mark did not land, or the
		// room's notice waited): it finishes that instead of answering.
		return r.resumeDeadLetter(hard, cy, m, attempt, cause)
	}
	if attempt > 1 && r.s.cfg.Ledger.Durable() {
		// A life before a crash may have begun dead-lettering it: the
		// room was being told. It finishes that instead of answering.
		begun, err := r.deadLetterBegun(hard, m.ID)
		if err != nil {
			r.s.ledgerFailed("bandonce: ledger read failed", err, "room", r.id, "message", m.ID)
			return endBackoff
		}
		if begun {
			return r.resumeDeadLetter(hard, cy, m, attempt, errDeadLetteredBefore)
		}
	}
	if unreadable != nil {
		if cause := r.ctl.commit(cy); cause != nil {
			return r.aborted(hard, m, attempt, cause)
		}
		err := Permanent(unreadable)
		r.charge(m.ID, err)
		return r.deadLetter(hard, m, attempt, err)
	}

	reply, ok := r.unsent[m.ID]
	var handlerErr error
	var abort lifecycle.Abort
	var cause error // why the handler's context ended, if it did
	if !ok {
		if fetch.Err() != nil {
			return endIdle // shutting down: start no handler, mark nothing
		}
		hctx, cancel := context.WithCancelCause(hard)
		defer cancel(nil)
		if cause := r.ctl.startHandler(cy, cancel); cause != nil {
			return r.aborted(hard, m, attempt, cause)
		}
		t := r.newTurn(hard, cy, m.ID, attempt)
		r.handlerStarts()
		reply, handlerErr = r.runHandler(hctx, m, t)
		r.handlerEnds()
		t.close()
		if hctx.Err() != nil {
			cause = context.Cause(hctx)
			abort = abortOf(cause)
		}
	}
	if handlerErr == nil && reply != nil {
		reply = withSender(reply, m.SenderID)
		handlerErr = validateReply(reply, r.s.cfg.MaxResponseBytes)
	}
	var perm *PermanentError
	fate := lifecycle.Decide(lifecycle.Result{
		Abort:      abort,
		Err:        handlerErr,
		Permanent:  errors.As(handlerErr, &perm),
		HasReply:   reply != nil,
		Failures:   r.failures[m.ID].charged(),
		MaxAttempt: r.s.cfg.MaxAttempts,
	})
	switch fate {
	case lifecycle.FateConsumeInterrupted:
		return r.aborted(hard, m, attempt, ErrInterrupted)
	case lifecycle.FateLeave:
		// The handler's own cause: a stop must be reported as one, and
		// the room told it is stopped.
		return r.aborted(hard, m, attempt, cause)
	case lifecycle.FatePost:
		return r.post(hard, cy, m, attempt, reply)
	}
	if cause := r.ctl.commit(cy); cause != nil {
		return r.aborted(hard, m, attempt, cause)
	}
	switch fate {
	case lifecycle.FateFail:
		return r.fail(hard, cy, m, attempt, handlerErr)
	case lifecycle.FateDeadLetter:
		r.charge(m.ID, handlerErr)
		return r.deadLetter(hard, m, attempt, handlerErr)
	default:
		return r.ack(hard, m, attempt, Outcome{Kind: NoReply})
	}
}

// claim marks the message processing, opening a new attempt. Every try
// of it, retries included, asks the room's gate the moment it would be
// sent: once a stop reached the room, the agent claims nothing there
// until play, and the claim fails with a *wire.NotSentError.
func (r *room) claim(ctx context.Context, m *wire.Message) (*wire.Mark, error) {
	mctx, cancel := r.s.markCtx(ctx)
	defer cancel()
	return r.s.api.Processing(wire.WithStartCheck(mctx, r.ctl.mayClaim), r.id, m.ID)
}

// claimWithheld reports whether err is a claim the room's gate withheld.
func claimWithheld(err error) bool {
	var notSent *wire.NotSentError
	return errors.As(err, &notSent)
}

// claimFailed handles a processing mark Band refused or never answered.
func (r *room) claimFailed(m *wire.Message, err error) roundEnd {
	var apiErr *APIError
	if errors.As(err, &apiErr) && apiErr.Status == http.StatusUnprocessableEntity {
		// Band says the message is no longer claimable: a stale serve of
		// a message already processed. Ask again, but never in a tight
		// loop if /next keeps serving it.
		r.s.log.Info("bandonce: /next served a message Band will not claim", "room", r.id, "message", m.ID, "err", err)
		if r.lastStale == m.ID {
			return endBackoff
		}
		r.lastStale = m.ID
		return endNext
	}
	return r.failed("POST processing", err)
}

// validateReply rejects a reply Band would refuse or the guard could not
// read back; retrying the handler would not change it. A reply whose
// /context item would be over maxBody could never be read back: posted,
// it would leave every later guard of the room unable to tell.
func validateReply(rep *Reply, maxBody int) error {
	if lifecycle.Blank(rep.Content) {
		return Permanent(errors.New("reply content is blank"))
	}
	if n := readBackSize(rep.Content); n > maxBody {
		return Permanent(fmt.Errorf("reply of %d bytes (%d as Band serves it back) exceeds Config.MaxResponseBytes (%d): the guard could not read it back", len(rep.Content), n, maxBody))
	}
	if rep.DedupKey != "" {
		if err := lifecycle.ValidateKey(rep.DedupKey); err != nil {
			return Permanent(err)
		}
	}
	// The body as post1 sends it, with the longest marker any key makes.
	size, err := postBodySize(lifecycle.AppendMarker(rep.Content, longestKey), mentions(rep.Mentions))
	if err != nil {
		return Permanent(err)
	}
	if size > MaxReplyBytes {
		return Permanent(&ReplyTooLargeError{Bytes: size, Max: MaxReplyBytes})
	}
	return nil
}

// longestKey is a dedup key of the greatest length allowed.
var longestKey = strings.Repeat("k", lifecycle.MaxKeyLen)

// postBody is the JSON body of a reply's POST, members in the order
// wire.Client.Post writes them.
type postBody struct {
	Message struct {
		Content  string         `json:"content"`
		Mentions []wire.Mention `json:"mentions"`
	} `json:"message"`
}

// bodyMeter is an encoder that writes into a buffer kept from reply to
// reply, to measure a body without keeping it.
type bodyMeter struct {
	buf bytes.Buffer
	enc *json.Encoder
}

var bodyMeters = sync.Pool{New: func() any {
	m := new(bodyMeter)
	m.enc = json.NewEncoder(&m.buf)
	return m
}}

// postBodySize is the length of the JSON body a POST of content and
// mentions sends.
func postBodySize(content string, mentions []wire.Mention) (int, error) {
	m := bodyMeters.Get().(*bodyMeter)
	defer func() {
		if m.buf.Cap() <= 64<<10 {
			m.buf.Reset()
			bodyMeters.Put(m)
		}
	}()
	var b postBody
	b.Message.Content, b.Message.Mentions = content, mentions
	if b.Message.Mentions == nil {
		b.Message.Mentions = []wire.Mention{}
	}
	if err := m.enc.Encode(&b); err != nil {
		return 0, err
	}
	return m.buf.Len() - 1, nil // Encode ends the value with a newline
}

// withSender returns rep, or a copy of it that mentions the sender when it
// mentions no one: Band refuses a message without a mention.
func withSender(rep *Reply, sender string) *Reply {
	if len(rep.Mentions) > 0 || sender == "" {
		return rep
	}
	c := *rep
	c.Mentions = []string{sender}
	return &c
}

// readBackSize bounds from above the bytes of a /context answer that holds
// only a message with this content: the content JSON-encoded (an escape
// can take six bytes for one), the marker line, and the item's other
// fields and the envelope.
func readBackSize(content string) int {
	const overhead = 4 << 10
	if len(content) < 1<<10 {
		return len(content)*6 + overhead
	}
	encoded, _ := json.Marshal(content)
	return len(encoded) + overhead
}

func abortOf(cause error) lifecycle.Abort {
	switch {
	case errors.Is(cause, ErrInterrupted):
		return lifecycle.AbortInterrupt
	case errors.Is(cause, ErrStopped):
		return lifecycle.AbortStop
	case errors.Is(cause, ErrSuperseded):
		return lifecycle.AbortSupersede
	case errors.Is(cause, ErrShutdown):
		return lifecycle.AbortShutdown
	}
	return lifecycle.NoAbort
}

// aborted ends a cycle that a signal, a shutdown or a supersede cut off.
// An interrupt consumes the message; everything else leaves it for replay.
// No failure is charged either way.
func (r *room) aborted(ctx context.Context, m *wire.Message, attempt int, cause error) roundEnd {
	delete(r.unsent, m.ID)
	switch {
	case errors.Is(cause, ErrInterrupted):
		r.s.log.Info("bandonce: cycle interrupted; consuming the message", "room", r.id, "message", m.ID)
		return r.ack(ctx, m, attempt, Outcome{Kind: Interrupted})
	case errors.Is(cause, ErrStopped):
		r.s.log.Info("bandonce: cycle stopped; leaving the message for replay", "room", r.id, "message", m.ID)
		r.s.reportOutcome(Outcome{Kind: Stopped, RoomID: r.id, MessageID: m.ID, Attempt: attempt})
		return endStopped
	default:
		return endIdle // shutdown or supersede: Run is ending
	}
}

// ack marks the message processed and reports o. If the mark fails, the
// message is ack-pending: only the mark is retried, never the handler.
// While a send of the message may still land, the mark waits (see
// holdAck).
func (r *room) ack(ctx context.Context, m *wire.Message, attempt int, o Outcome) roundEnd {
	o.RoomID, o.MessageID, o.Attempt = r.id, m.ID, attempt
	ledger := r.s.cfg.Ledger
	if until := r.s.late.messageSettledAt(r.id, m.ID, r.inherited(m.ID), time.Now()); !until.IsZero() {
		return r.holdAck(ctx, m, o, until)
	}
	if ledger.Durable() {
		// Written before the mark, so a crash after it leaves the next
		// delivery only the mark to do.
		if err := ledger.SetAckPending(ctx, r.id, m.ID, true); err != nil {
			r.s.ledgerFailed("bandonce: ledger write failed", err, "room", r.id, "message", m.ID)
		}
	}
	mctx, cancel := r.s.markCtx(ctx)
	defer cancel()
	if _, err := r.s.api.Processed(mctx, r.id, m.ID); err != nil {
		r.s.log.Warn("bandonce: processed mark failed; only the mark will be retried", "room", r.id, "message", m.ID, "err", err)
		if err := ledger.SetAckPending(ctx, r.id, m.ID, true); err != nil {
			r.s.ledgerFailed("bandonce: ledger write failed", err, "room", r.id, "message", m.ID)
		}
		r.s.reportOutcome(Outcome{Kind: AckPending, RoomID: r.id, MessageID: m.ID, Attempt: attempt, DedupKey: o.DedupKey})
		return r.failed("POST processed", err)
	}
	r.forget(ctx, m.ID)
	r.s.reportOutcome(o)
	return endNext
}

// holdAck keeps a message whose fate is decided from being consumed
// until its sends have settled, an earlier life's included: consumed, it
// would let the room go on to later messages, whose guard trusts on their
// first attempt that no send of an earlier message can still land
// (lateSends.settledAt). The room
// waits without a worker and then marks it processed with o; a durable
// ledger records the mark as owed, so a crash meanwhile costs the next
// life the mark alone.
func (r *room) holdAck(ctx context.Context, m *wire.Message, o Outcome, until time.Time) roundEnd {
	if ledger := r.s.cfg.Ledger; ledger.Durable() {
		if err := ledger.SetAckPending(ctx, r.id, m.ID, true); err != nil {
			r.s.ledgerFailed("bandonce: ledger write failed", err, "room", r.id, "message", m.ID)
		}
	}
	r.heldAcks[m.ID] = o
	r.settleUntil = until
	return endSettle
}

// ackOnly finishes a message whose fate was decided by an earlier delivery:
// it opens an attempt (processed needs one) and marks it processed.
func (r *room) ackOnly(ctx context.Context, m *wire.Message, o Outcome) roundEnd {
	mark, err := r.claim(ctx, m)
	if err != nil {
		if claimWithheld(err) {
			return endStopped // the mark is still owed; it goes after play
		}
		var apiErr *APIError
		if errors.As(err, &apiErr) && apiErr.Status == http.StatusUnprocessableEntity {
			// Band will not open an attempt: the earlier mark landed.
			r.forget(ctx, m.ID)
			return endNext
		}
		return r.failed("POST processing", err)
	}
	return r.ack(ctx, m, mark.AttemptNumber, o)
}

// forget drops everything the room kept about a message that is done.
func (r *room) forget(ctx context.Context, id string) {
	delete(r.failures, id)
	delete(r.unsent, id)
	delete(r.heldAcks, id)
	delete(r.firstAttempt, id)
	delete(r.consumeOnServe, id)
	delete(r.deadLettering, id)
	delete(r.silenced, id)
	if err := r.s.cfg.Ledger.SetAckPending(ctx, r.id, id, false); err != nil {
		r.s.ledgerFailed("bandonce: ledger write failed", err, "room", r.id, "message", id)
	}
}

// fail charges one failure and marks the message failed; Band serves it
// again at the head of the room, and the room holds it (and everything
// behind it) until its Backoff wait is over.
func (r *room) fail(ctx context.Context, cy *cycle, m *wire.Message, attempt int, cause error) roundEnd {
	r.charge(m.ID, cause)
	failures := r.failures[m.ID].count
	wait := r.s.cfg.Backoff.wait(r.jitter, failures, cause)
	r.s.log.Warn("bandonce: handler failed; the message will be retried", "room", r.id, "message", m.ID,
		"failures", failures, "max", r.s.cfg.MaxAttempts, "retry_in", wait.Round(time.Millisecond), "err", cause)
	mctx, cancel := r.s.markCtx(ctx)
	defer cancel()
	if _, err := r.s.api.Failed(mctx, r.id, m.ID, failureText(cause)); err != nil {
		r.s.log.Warn("bandonce: failed mark did not land", "room", r.id, "message", m.ID, "err", err)
	}
	r.retryAt = time.Now().Add(wait)
	r.ctl.hold(m.ID, cy)
	r.s.reportOutcome(Outcome{Kind: Failed, RoomID: r.id, MessageID: m.ID, Attempt: attempt, Err: cause})
	return endHeld
}

// deadLetter gives up on a message: failed with the reason, then a fresh
// attempt marked processed, because Band re-serves failed messages at the
// head of the room and leaving one there would stall everything behind it.
// The room is told before the message is consumed: an error event that
// is still owed keeps the message failed, so its next delivery tells the
// room again, behind the event's guard.
func (r *room) deadLetter(ctx context.Context, m *wire.Message, attempt int, cause error) roundEnd {
	return r.giveUp(ctx, m, attempt, cause, true)
}

// giveUp is deadLetter; tell says whether the room is told.
func (r *room) giveUp(ctx context.Context, m *wire.Message, attempt int, cause error, tell bool) roundEnd {
	failures := r.failures[m.ID].charged()
	reason := fmt.Sprintf("dead-lettered after %d failure(s): %v", failures, cause)
	var perm *PermanentError
	if errors.As(cause, &perm) {
		reason = "dead-lettered: " + cause.Error()
	}
	r.s.log.Error("bandonce: giving up on a message", "room", r.id, "message", m.ID, "reason", reason)
	r.deadLettering[m.ID] = cause
	if !tell {
		r.silenced[m.ID] = true // for good: a later delivery that finishes it tells no one either
	}
	mctx, cancel := r.s.markCtx(ctx)
	defer cancel()
	if _, err := r.s.api.Failed(mctx, r.id, m.ID, reason); err != nil {
		return r.failed("POST failed", err)
	}
	d := DeadLetter{RoomID: r.id, MessageID: m.ID, SenderID: m.SenderID, SenderName: m.SenderName, SenderType: m.SenderType,
		Content: m.Content, Failures: failures, Reason: reason, Err: cause, At: deadLetterAt()}
	r.keepDeadLetter(ctx, d)
	if r.s.cfg.Ledger.Durable() {
		// Kept: a later life, after a crash or a stop and a restart,
		// finishes the dead letter instead of running the handler again
		// (and does not keep it twice).
		if err := r.s.cfg.Ledger.SetKey(ctx, r.id, deadLetterName(m.ID), KeyAccepted); err != nil {
			r.s.ledgerFailed("bandonce: ledger write failed", err, "room", r.id, "message", m.ID)
		}
	}
	if !tell {
		r.s.log.Info("bandonce: an interrupt withholds the dead letter's notice", "room", r.id, "message", m.ID)
	} else if next, ok := r.tellRoom(ctx, m, attempt, d); !ok {
		return next
	}
	return r.deadLetterConsumed(ctx, m, cause)
}

// deadLetterConsumed sends a dead letter's consuming marks: from here only
// they are owed, whatever happens.
func (r *room) deadLetterConsumed(ctx context.Context, m *wire.Message, cause error) roundEnd {
	if err := r.s.cfg.Ledger.SetAckPending(ctx, r.id, m.ID, true); err != nil {
		r.s.ledgerFailed("bandonce: ledger write failed", err, "room", r.id, "message", m.ID)
	}
	return r.ackOnly(ctx, m, Outcome{Kind: DeadLettered, Err: cause})
}

// resumeDeadLetter finishes a dead letter decided at an earlier delivery,
// unless a signal reached this one first: a stop leaves it for replay. An
// interrupt finds no turn to abort (the handler gave up already, and never
// runs again): it withholds the room's notice, so nothing is sent, but the
// message stays a dead letter, kept for a replay, never erased as
// interrupted.
func (r *room) resumeDeadLetter(ctx context.Context, cy *cycle, m *wire.Message, attempt int, cause error) roundEnd {
	sig := r.ctl.commit(cy)
	switch {
	case sig == nil:
		return r.giveUp(ctx, m, attempt, cause, !r.silenced[m.ID])
	case errors.Is(sig, ErrInterrupted):
		return r.giveUp(ctx, m, attempt, cause, false)
	default:
		return r.aborted(ctx, m, attempt, sig)
	}
}

// errDeadLetteredBefore is the cause of a dead letter that an earlier
// life of the agent began and a crash interrupted.
var errDeadLetteredBefore = errors.New("given up on before the agent restarted")

// failure is a message's charged handler failures and the last one's error.
type failure struct {
	count int
	last  error
}

func (f *failure) charged() int {
	if f == nil {
		return 0
	}
	return f.count
}

// charge records one handler failure against the message's budget.
func (r *room) charge(id string, err error) {
	f := r.failures[id]
	if f == nil {
		f = &failure{}
		r.failures[id] = f
	}
	f.count++
	f.last = err
}

// failureText is the reason sent with a failed mark; Band refuses an empty
// one.
func failureText(err error) string {
	if text := strings.TrimSpace(err.Error()); text != "" {
		return text
	}
	return fmt.Sprintf("handler failed with an empty %T", err)
}
