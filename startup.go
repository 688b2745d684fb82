package bandonce

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/band-once/bandonce/internal/wire"
)

// DefaultStartTimeout is how long Run and Drain try to reach Band at start
// when Config.StartTimeout is zero: long enough to ride out a deploy or a
// network blip, short enough that a wrong URL is reported, not waited on.
const DefaultStartTimeout = 2 * time.Minute

// errStartBudget ends the start-up calls when Config.StartTimeout runs out.
var errStartBudget = errors.New("bandonce: start-up budget spent")

// AgentBinder is implemented by a Ledger that belongs to one agent, such as
// those of packages boltledger and pgledger. At every start of Run or
// Drain, once Band has said whose the API key is (GET /agent/me), the
// shell calls BindAgent with that agent's id, before it serves any room;
// an error ends the run. A ledger made for another agent returns an error
// matching ErrAgentMismatch: its records would tell the shell that replies
// were posted that this agent never posted.
type AgentBinder interface {
	BindAgent(ctx context.Context, agentID string) error
}

// AgentID returns the id of the agent the shell serves, as Band answered
// it at the start of the last Run or Drain, or "" before Band has answered.
func (s *Shell) AgentID() string { return s.agentID() }

// identify learns who the agent is, checks it against Config.AgentID and
// binds the ledger to it.
func (s *Shell) identify(ctx context.Context, api *wire.Client) (*wire.Agent, error) {
	me, err := startCall(ctx, s, wire.EndpointMe, api.Me)
	if err != nil {
		return nil, err
	}
	if want := s.cfg.AgentID; want != "" && me.ID != want {
		return nil, fmt.Errorf("%w: Band says the key is agent %s (@%s), but %s is %s",
			ErrAgentMismatch, me.ID, me.Handle, s.cfg.named("AgentID"), want)
	}
	if binder, ok := s.cfg.Ledger.(AgentBinder); ok {
		if err := binder.BindAgent(ctx, me.ID); err != nil {
			if ctx.Err() != nil {
				return nil, context.Cause(ctx) // stopped while binding: not a refusal
			}
			return nil, fmt.Errorf("bandonce: the ledger refused agent %s (@%s): %w", me.ID, me.Handle, err)
		}
	}
	s.mu.Lock()
	s.me = *me
	s.mu.Unlock()
	return me, nil
}

// startClient returns the client for the start-up calls. It tries each
// request once: startCall does the retrying, so that every failed try is
// a warning a person sees at once, not a debug line behind four more.
func (s *Shell) startClient() *wire.Client {
	doer := wire.NewRetryDoer(s.cfg.HTTPClient, wire.RetryOptions{
		MaxAttempts: 1,
		Logger:      s.log,
		Observe:     requestObserver(s.cfg.Hooks.Request),
	})
	c := wire.NewClient(s.cfg.baseURL.String(), s.cfg.apiKey.Value(), doer)
	c.SetMaxBodyBytes(s.cfg.MaxResponseBytes)
	return c
}

// startCall makes one start-up call through outages: after a connection
// error, a timeout, 429 or 5xx it warns and tries again with backoff
// (honouring Retry-After, capped), until the call succeeds, Band gives a
// final answer, ctx ends, or the start-up budget runs out, which ctx
// carries as errStartBudget.
func startCall[T any](ctx context.Context, s *Shell, call string, do func(context.Context) (T, error)) (T, error) {
	var last error
	for n := 1; ; n++ {
		v, err := do(ctx)
		if err == nil {
			if n > 1 {
				s.log.Info("bandonce: Band answered", "call", call, "url", s.cfg.baseURL.String(), "tries", n)
			}
			return v, nil
		}
		if errors.Is(context.Cause(ctx), errStartBudget) {
			return v, s.budgetSpent(call, last, err)
		}
		if ctx.Err() != nil {
			return v, context.Cause(ctx)
		}
		if final := s.finalAtStart(call, err); final != nil {
			return v, final
		}
		last = err
		wait := s.jitter.Backoff(s.cfg.Retry.BaseDelay, s.cfg.Retry.MaxDelay, n-1)
		var apiErr *APIError
		if errors.As(err, &apiErr) && apiErr.RetryAfter > 0 {
			wait = min(apiErr.RetryAfter, s.cfg.Retry.MaxRetryAfter)
		}
		attrs := []any{"call", call, "url", s.cfg.baseURL.String(), "try", n, "retry_in", wait.Round(time.Millisecond)}
		if deadline, ok := ctx.Deadline(); ok {
			attrs = append(attrs, "gives_up_in", time.Until(deadline).Round(time.Second))
		}
		s.log.Warn("bandonce: start-up call failed; retrying", append(attrs, "err", err)...)
		if err := sleep(ctx, wait); err != nil {
			if errors.Is(err, errStartBudget) {
				return v, s.budgetSpent(call, last, err)
			}
			return v, err
		}
	}
}

func (s *Shell) budgetSpent(call string, last, cur error) error {
	if last == nil {
		last = cur // the first try itself outlasted the budget
	}
	return &StartError{URL: s.cfg.baseURL.String(), Call: call, Waited: s.cfg.StartTimeout, Err: last}
}

// finalAtStart returns the error Run should end with when a start-up call
// got an answer no retry will change, or nil when it may be retried.
func (s *Shell) finalAtStart(call string, err error) error {
	if fatal := asFatal(err); fatal != nil {
		return fatal
	}
	var apiErr *APIError
	if errors.As(err, &apiErr) {
		switch {
		case apiErr.Status == http.StatusForbidden:
			// At start-up a 403 means the key is of the wrong kind (a
			// user key on the agent API): no retry will help.
			return fmt.Errorf("%w: %w", ErrUnauthorized, apiErr)
		case apiErr.Status == http.StatusNotFound || apiErr.Status == http.StatusMethodNotAllowed:
			return fmt.Errorf("bandonce: %s is not Band's agent API (it answered %s with %d): %s: %w",
				s.cfg.baseURL, call, apiErr.Status, s.cfg.whereTheRESTRootGoes(), err)
		case !apiErr.Transient():
			return fmt.Errorf("bandonce: Band at %s refused %s: %w", s.cfg.baseURL, call, err)
		}
	}
	var protoErr *wire.ProtocolError
	if errors.As(err, &protoErr) {
		// An answer, but not Band's: a web page where the API was meant.
		return fmt.Errorf("bandonce: %s did not answer %s as Band's agent API does (is it the REST root, ending in /api/v1?): %w",
			s.cfg.baseURL, call, err)
	}
	return nil
}

// socketState names the socket's state for the start-up line.
func (s *Shell) socketState() string {
	switch {
	case s.cfg.DisableSocket:
		return "disabled"
	case s.socketUp.Load():
		return "connected"
	}
	return "connecting"
}

// logServing writes the start-up line once every room is added, with the
// socket's state as start found it.
func (s *Shell) logServing(me *wire.Agent, rooms []string, socket string) {
	s.log.Info("bandonce: serving", "agent", me.ID, "handle", me.Handle, "rooms", len(rooms),
		"socket", socket, "url", s.cfg.baseURL.String())
	if len(rooms) > 0 {
		s.log.Debug("bandonce: rooms", "ids", rooms)
	}
}

// outcomeCounts counts the outcomes of one Run, for its last line.
type outcomeCounts [len(outcomeNames)]int64

func (c *outcomeCounts) attrs() []any {
	var attrs []any
	for kind, n := range c {
		if n > 0 {
			attrs = append(attrs, slog.Int64(OutcomeKind(kind).String(), n))
		}
	}
	return attrs
}

// logStopped writes the last line of a Run: Info for a shutdown the caller
// asked for or a drained Drain, Error for a run that ended on its own.
func (s *Shell) logStopped(err error, clean bool, began time.Time) {
	s.mu.Lock()
	counts := s.counts
	agent := s.me.ID
	s.mu.Unlock()
	attrs := []any{"agent", agent, "ran", time.Since(began).Round(time.Millisecond), slog.Group("outcomes", counts.attrs()...)}
	if clean {
		s.log.Info("bandonce: stopped", attrs...)
		return
	}
	s.log.Error("bandonce: stopped", append(attrs, "err", err)...)
}
