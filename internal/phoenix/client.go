package phoenix

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/band-once/bandonce/internal/keyguard"
)

// Client keeps one Phoenix socket to Band open: it connects, joins every
// registered topic, heartbeats, and reconnects and rejoins after any
// failure until its context ends. Join, Leave and Connected are safe to
// call from any goroutine, including from a Handler.
type Client struct {
	cfg       Config // APIKey emptied: the key is in key
	key       *keyguard.Secret
	log       *slog.Logger
	running   atomic.Bool
	connected atomic.Bool

	mu      sync.Mutex // guards everything below and the current session's state
	order   []*registration
	byTopic map[string]*registration
	sess    *session // nil while disconnected
	lastRef uint64
	backoff *jitter
}

// registration is one topic the caller asked for; it outlives connections.
type registration struct {
	topic   string
	handler Handler
	// joinRef is the ref of this topic's join on the current connection,
	// empty when it is not (or no longer) joined there. Pushes carrying
	// another join_ref belong to an earlier join and are dropped.
	joinRef string
	// rejoins counts consecutive server-side channel failures, for the
	// rejoin backoff; a channel that stayed joined a heartbeat interval
	// resets it (one the server ends at once after every join must not
	// be rejoined at the base backoff for ever).
	rejoins int
	// joinedAt is when its current join was answered ok.
	joinedAt time.Time
}

// New returns a Client; nothing happens until Run.
func New(cfg Config) *Client {
	cfg = cfg.withDefaults()
	key := keyguard.New(cmp.Or(cfg.APIKey, keyFromURL(cfg.URL)))
	cfg.APIKey = ""
	cfg.HTTPClient = keyguard.SameOriginRedirects(cfg.HTTPClient)
	return &Client{
		cfg:     cfg,
		key:     key,
		log:     cfg.Logger,
		byTopic: make(map[string]*registration),
		backoff: newJitter(cfg.ReconnectBase, cfg.ReconnectMax, cfg.Seed),
	}
}

// Join registers h for topic's pushes. It is safe before Run and while
// running: the topic is joined now if connected, and again after every
// reconnect, in registration order. Joining a registered topic again only
// replaces its handler. The empty topic and the protocol's own "phoenix"
// topic are ignored. A nil h discards the pushes.
//
// A refused join goes to OnJoinError and is tried again only after the
// next reconnect; a channel the server ends (phx_error, phx_close) is
// rejoined after a backoff.
func (c *Client) Join(topic string, h Handler) {
	if topic == "" || topic == TopicPhoenix {
		c.log.Warn("phoenix: ignoring join of a reserved topic", "topic", topic)
		return
	}
	if h == nil {
		h = func(string, json.RawMessage) {}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if r := c.byTopic[topic]; r != nil {
		r.handler = h
		return
	}
	r := &registration{topic: topic, handler: h}
	c.byTopic[topic] = r
	c.order = append(c.order, r)
	if c.sess != nil {
		c.sess.join(r)
	}
}

// Leave unregisters topic and, if it is joined, sends phx_leave. No push
// for it is dispatched after Leave returns, except one the receive
// goroutine had already begun dispatching.
func (c *Client) Leave(topic string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.byTopic[topic]
	if r == nil {
		return
	}
	delete(c.byTopic, topic)
	for i, o := range c.order {
		if o == r {
			c.order = append(c.order[:i], c.order[i+1:]...)
			break
		}
	}
	if c.sess != nil && r.joinRef != "" {
		c.sess.leave(r)
	}
	r.joinRef = ""
}

// Connected reports whether a socket is currently open. Its topics may
// still be joining; OnConnected says when they have all been answered.
func (c *Client) Connected() bool { return c.connected.Load() }

// Run connects and serves, reconnecting with backoff after every failure,
// until ctx ends (it returns context.Cause(ctx)) or the server refuses the
// upgrade for good (it returns the *UpgradeError; see Fatal). It returns
// ErrBadURL for a URL it cannot dial and ErrAlreadyRunning if called
// while another Run is active. Every goroutine it started has ended by
// the time it returns.
func (c *Client) Run(ctx context.Context) error {
	if !c.running.CompareAndSwap(false, true) {
		return ErrAlreadyRunning
	}
	defer c.running.Store(false)
	target, err := socketURL(c.cfg.URL, c.cfg.AgentID)
	if err != nil {
		return c.key.Error(err)
	}
	// failures counts the attempts since the last healthy connection: one
	// whose joins all succeeded and that then stayed up a heartbeat
	// interval. A server that drops every connection soon after its joins
	// (a frame too large, a crash loop) is reconnected to ever more
	// slowly, not twice a second for ever.
	failures := 0
	for {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		var wait time.Duration
		conn, err := c.dial(ctx, target)
		if err != nil {
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			if isFatal(err) {
				c.log.Error("phoenix: upgrade refused for good", "err", err)
				return err
			}
			wait = c.retryWait(err, failures)
			failures++
			c.log.Warn("phoenix: connect failed", "err", err, "retry_in", wait)
		} else {
			c.log.Info("phoenix: connected")
			up := time.Now()
			healthy, err := c.serve(ctx, conn)
			healthy = healthy && time.Since(up) >= c.cfg.HeartbeatInterval
			err = c.key.Error(err)
			if c.cfg.OnDisconnected != nil {
				c.cfg.OnDisconnected(err)
			}
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			if healthy {
				failures = 0
			}
			wait = c.retryWait(nil, failures)
			failures++
			c.log.Warn("phoenix: disconnected", "err", err, "reconnect_in", wait)
		}
		if !sleep(ctx, wait) {
			return context.Cause(ctx)
		}
	}
}

// retryWait honours a 429's hint, capped, and otherwise draws a backoff.
func (c *Client) retryWait(err error, attempt int) time.Duration {
	var ue *UpgradeError
	if errors.As(err, &ue) {
		if hint := ue.retryHint(); hint > 0 {
			return min(hint, c.cfg.MaxRetryAfter)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.backoff.delay(attempt)
}

// newRef returns the next message ref. Refs keep increasing across
// connections so a late reply can never match a newer request. Callers
// hold c.mu.
func (c *Client) newRef() string {
	c.lastRef++
	return strconv.FormatUint(c.lastRef, 10)
}

// sleep waits d or until ctx ends, reporting whether the full d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
