// Package band is a typed client for the tools of Band's agent API: who
// the agent is, a room's participants (list, add, remove), the peers it
// may add, new rooms, a room's context, the agent's memories (store, list,
// supersede, archive), a room's board (its tasks, their updates and
// history, and its goal) and the agent's contacts (requests, answers,
// removals). It is the client a handler
// reaches through bandonce.Message and the one a setup script or an
// operator's tool uses outside any handler:
//
//	client, err := band.New(band.Config{APIKey: os.Getenv("BAND_API_KEY")})
//	if err != nil { ... }
//	peers, err := client.Peers(ctx, "")
//
// Reads and the writes whose repeat has the effect of one (adds, removes,
// a task's status, the goal, a memory's retirement) are retried on
// transient failures (transport errors, 429, 5xx) with full-jitter
// backoff; creating a room, a memory or a task and commenting on a task
// are sent once, because Band has no idempotency key and a repeat would be
// a second one (bandonce.Message guards them inside a handler).
// Every non-2xx answer is an *APIError, which errors.As also reads as a
// *bandonce.APIError.
//
// Sending messages and events is not here: inside a handler they go through
// bandonce.Message, which guards each against being sent twice.
package band

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/band-once/bandonce/bandtype"
	"github.com/band-once/bandonce/internal/keyguard"
	"github.com/band-once/bandonce/internal/wire"
)

// DefaultBaseURL is Band's production REST root.
const DefaultBaseURL = "https://app.band.ai/api/v1"

// APIError is the error every non-2xx answer from Band becomes. It is
// defined, with its fields, in package bandtype; bandonce.APIError has the
// same fields, and errors.As fills either from an error of the other.
type APIError = bandtype.APIError

// PagingError reports a walk through pages (a room's context, the peers,
// the memories, a room's tasks and a task's history, the contacts) that
// was stopped: the server repeated a cursor or a page already read, or
// announced more pages than the listing's bound (10,000 for the context
// and the peers, MaxMemoryPages and MaxTaskPages for the others). Its fields are Endpoint, URL (the base URL and
// templated path, without ids, query or key), Pages read, and Err, one of
// ErrCursorRepeated and ErrTooManyPages.
type PagingError = wire.PagingError

// Why a walk through pages stopped; a *PagingError matches one of them.
var (
	ErrCursorRepeated = wire.ErrCursorRepeated
	ErrTooManyPages   = wire.ErrTooManyPages
)

// ErrTooLarge is matched by the error of an answer whose body is over
// Config.MaxResponseBytes; its message names the size and the cap.
var ErrTooLarge = wire.ErrTooLarge

// Config configures a Client. Only APIKey is required.
type Config struct {
	// APIKey is the agent's Band API key, sent as X-API-Key. Required.
	APIKey string
	// BaseURL is the REST root. Empty means DefaultBaseURL.
	BaseURL string
	// HTTPClient sends every request. Nil means http.DefaultTransport.
	// Unless it has a Timeout of its own, each request is bounded by
	// RequestTimeout.
	HTTPClient *http.Client
	// RequestTimeout bounds each HTTP request. Zero means 30 s.
	RequestTimeout time.Duration
	// Retry bounds the retries of transient failures. Its zero value is
	// the default.
	Retry RetryPolicy
	// Logger receives one Debug record per retry, with the key scrubbed
	// from it. Nil discards them.
	Logger *slog.Logger
	// MaxResponseBytes caps the body of every answer the Client reads;
	// a body past it is measured but never kept. Zero means 4 MiB. Context
	// asks a page over the cap again with fewer items, down to one, and
	// returns an item too large on its own without its content (see
	// ContextItem.Omitted); any other answer over it is an error that
	// names its size.
	MaxResponseBytes int
	// InsecurePlaintext accepts a plain http BaseURL to a host that is
	// not loopback, where the key would cross the network in clear. False
	// refuses it, as bandonce.Config does (docs/security.md).
	InsecurePlaintext bool
}

// String, GoString, Format and LogValue show a Config with its APIKey
// replaced by "[redacted]", so printing or logging one never shows the key.
func (c Config) String() string { return c.redacted("%+v") }

// GoString is the %#v form, with the APIKey redacted.
func (c Config) GoString() string { return c.redacted("%#v") }

// Format writes GoString for %#v and String for every other verb.
func (c Config) Format(f fmt.State, verb rune) { keyguard.Format(f, verb, c) }

// LogValue is String.
func (c Config) LogValue() slog.Value { return slog.StringValue(c.String()) }

// printableConfig has Config's fields and none of its methods.
type printableConfig Config

func (c Config) redacted(format string) string {
	c.APIKey = keyguard.Redact(c.APIKey)
	return keyguard.SprintAs(format, printableConfig(c), "band.Config")
}

// RetryPolicy bounds the retries of transient failures (transport errors,
// 429 and 5xx) with full-jitter exponential backoff: the n-th wait is
// uniform in [0, min(MaxDelay, BaseDelay·2^n)]. bandonce.RetryPolicy is
// this type, so a Shell and its Client retry alike.
type RetryPolicy struct {
	// MaxAttempts is how many times one request is tried in all. Zero
	// means 5.
	MaxAttempts int
	// BaseDelay is the first backoff ceiling. Zero means 200 ms.
	BaseDelay time.Duration
	// MaxDelay caps every backoff ceiling. Zero means 5 s.
	MaxDelay time.Duration
	// MaxRetryAfter caps a server's Retry-After hint. Zero means MaxDelay.
	MaxRetryAfter time.Duration
	// Seed seeds the jitter. Zero means a seed drawn at random; set it
	// for reproducible runs.
	Seed uint64
}

// Client calls the room tools of Band's agent API. It is safe for
// concurrent use.
type Client struct {
	api *wire.Client
	log *slog.Logger
}

// New validates cfg and returns a Client. It makes no request.
func New(cfg Config) (*Client, error) {
	if strings.TrimSpace(cfg.APIKey) == "" {
		return nil, errors.New("band: Config.APIKey is required")
	}
	base, err := url.Parse(strings.TrimRight(cmp.Or(cfg.BaseURL, DefaultBaseURL), "/"))
	switch {
	case err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "":
		return nil, errors.New("band: Config.BaseURL: want an absolute http(s) URL")
	case keyguard.KeyInURL(base):
		return nil, errors.New("band: Config.BaseURL must not carry a credential: set APIKey, which is sent as a header and never shown")
	case keyguard.InClear(base) && !cfg.InsecurePlaintext:
		return nil, errors.New("band: Config.BaseURL: plain http to a host that is not loopback: the API key would cross the network in clear; use https, or set InsecurePlaintext to accept that")
	}
	p := cfg.Retry
	switch {
	case cfg.RequestTimeout < 0:
		return nil, errors.New("band: Config.RequestTimeout must not be negative")
	case cfg.MaxResponseBytes < 0:
		return nil, errors.New("band: Config.MaxResponseBytes must not be negative")
	case p.MaxAttempts < 0, p.BaseDelay < 0, p.MaxDelay < 0, p.MaxRetryAfter < 0:
		return nil, errors.New("band: Config.Retry: values must not be negative")
	}
	p.MaxAttempts = cmp.Or(p.MaxAttempts, 5)
	p.BaseDelay = cmp.Or(p.BaseDelay, 200*time.Millisecond)
	p.MaxDelay = cmp.Or(p.MaxDelay, 5*time.Second)
	p.MaxRetryAfter = cmp.Or(p.MaxRetryAfter, p.MaxDelay)
	if p.BaseDelay > p.MaxDelay {
		return nil, errors.New("band: Config.Retry.BaseDelay must not exceed MaxDelay")
	}
	if p.Seed == 0 {
		var b [8]byte
		_, _ = rand.Read(b[:])
		p.Seed = binary.LittleEndian.Uint64(b[:])
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	rest, _ := wire.RequestClients(cfg.HTTPClient, cmp.Or(cfg.RequestTimeout, 30*time.Second), wire.NewLimiter(32, p.MaxRetryAfter))
	logger = keyguard.Logger(logger, keyguard.New(cfg.APIKey))
	doer := wire.NewRetryDoer(rest, wire.RetryOptions{
		MaxAttempts: p.MaxAttempts, BaseDelay: p.BaseDelay, MaxDelay: p.MaxDelay,
		MaxRetryAfter: p.MaxRetryAfter, Seed: p.Seed, Logger: logger,
	})
	api := wire.NewClient(base.String(), cfg.APIKey, doer)
	api.SetMaxBodyBytes(cfg.MaxResponseBytes)
	return &Client{api: api, log: logger}, nil
}

// Agent is the agent an API key belongs to.
type Agent struct {
	ID string
	// Name is its display name; Handle is "owner_handle/agent_slug".
	Name, Handle string
	// FeatureFlags are the flags Band turned on or off for the agent, as
	// /agent/me lists them (nil when it lists none): what the API offers
	// this agent today.
	FeatureFlags map[string]any
}

// Participant is one participant of a room.
type Participant struct {
	ID string
	// Type is "User" or "Agent"; Role is "owner", "admin" or "member".
	Type, Role string
	// Name is the display name; Handle the username, or owner/slug for an
	// agent ("" if Band did not say).
	Name, Handle string
	// Status is Band's participant status.
	Status string
}

// Peer is an agent or user this agent may add to a room.
type Peer struct {
	ID string
	// Type is "User" or "Agent"; Name the display name; Handle the
	// handle without "@".
	Type, Name, Handle string
	// Description describes an agent ("" if none).
	Description string
	// Source says how the peer is known: "registry" (the owner, sibling
	// and global agents) or "contact".
	Source    string
	IsContact bool
}

// Room is a chat room.
type Room struct {
	ID string
	// Title is "" when Band has not titled it yet.
	Title      string
	TaskID     string
	InsertedAt time.Time
}

// ContextItem is one entry of a room's context as the agent sees it: its
// own messages and events, and the text messages that mention it.
type ContextItem struct {
	ID string
	// Content is the text as stored, with @[[uuid]] mention markers.
	Content string
	// MessageType is "text" or an event type (thought, tool_call, ...).
	MessageType                      string
	SenderID, SenderType, SenderName string
	InsertedAt                       time.Time
	// Metadata is the message's metadata: an event's own metadata, a text
	// message's mentions.
	Metadata map[string]any
	// Omitted is non-zero for an item too large to read under
	// Config.MaxResponseBytes: the size in bytes of the answer that held
	// it. Its ids and types are set; Content and Metadata are empty.
	Omitted int64
}

// Roles a participant may have.
const (
	RoleOwner  = "owner"
	RoleAdmin  = "admin"
	RoleMember = "member"
)

// Me returns the agent the API key belongs to.
func (c *Client) Me(ctx context.Context) (Agent, error) {
	a, err := c.api.Me(ctx)
	if err != nil {
		return Agent{}, err
	}
	return Agent{ID: a.ID, Name: a.Name, Handle: a.Handle, FeatureFlags: a.FeatureFlags}, nil
}

// Participants lists a room's participants.
func (c *Client) Participants(ctx context.Context, roomID string) ([]Participant, error) {
	ps, err := c.api.Participants(ctx, roomID)
	if err != nil {
		return nil, err
	}
	out := make([]Participant, len(ps))
	for i, p := range ps {
		out[i] = participant(p)
	}
	return out, nil
}

// Participant finds a room's participant by handle, as Band resolves a
// mention by handle: the username of a user, owner/slug of an agent, with
// or without a leading "@". ok is false when no participant has it.
func (c *Client) Participant(ctx context.Context, roomID, handle string) (p Participant, ok bool, err error) {
	ps, err := c.Participants(ctx, roomID)
	if err != nil {
		return Participant{}, false, err
	}
	handle = strings.TrimPrefix(handle, "@")
	i := slices.IndexFunc(ps, func(p Participant) bool { return p.Handle != "" && p.Handle == handle })
	if i < 0 {
		return Participant{}, false, nil
	}
	return ps[i], true, nil
}

// AddParticipant adds participantID to a room with role ("" means
// member). Adding someone already in the room is not an error: when Band
// refuses the add (409 or 422) and the participant is then found in the
// room, that participant is returned, so a repeated add (a redelivered
// message, a retry after a lost answer) has the effect of one.
func (c *Client) AddParticipant(ctx context.Context, roomID, participantID, role string) (Participant, error) {
	p, err := c.api.AddParticipant(ctx, roomID, participantID, role)
	if err == nil {
		return participant(*p), nil
	}
	var apiErr *APIError
	if errors.As(err, &apiErr) && (apiErr.Status == http.StatusConflict || apiErr.Status == http.StatusUnprocessableEntity) {
		if found, ok := c.find(ctx, roomID, participantID); ok {
			return found, nil
		}
	}
	return Participant{}, err
}

// RemoveParticipant takes participantID out of a room. Removing someone
// who is not in it is not an error: when Band answers 404 or 422 and the
// room's list (which Band still serves the agent) does not have them, the
// call succeeds, so a repeated remove has the effect of one.
func (c *Client) RemoveParticipant(ctx context.Context, roomID, participantID string) error {
	_, err := c.api.RemoveParticipant(ctx, roomID, participantID)
	if err == nil {
		return nil
	}
	var apiErr *APIError
	if errors.As(err, &apiErr) && (apiErr.Status == http.StatusNotFound || apiErr.Status == http.StatusUnprocessableEntity) {
		ps, listErr := c.Participants(ctx, roomID)
		if listErr == nil && !slices.ContainsFunc(ps, func(p Participant) bool { return p.ID == participantID }) {
			return nil
		}
	}
	return err
}

func (c *Client) find(ctx context.Context, roomID, participantID string) (Participant, bool) {
	ps, err := c.Participants(ctx, roomID)
	if err != nil {
		return Participant{}, false
	}
	i := slices.IndexFunc(ps, func(p Participant) bool { return p.ID == participantID })
	if i < 0 {
		return Participant{}, false
	}
	return ps[i], true
}

// Peers lists the agents and users this agent may add to rooms, every
// page of them. notInRoom, if set, leaves out that room's participants.
func (c *Client) Peers(ctx context.Context, notInRoom string) ([]Peer, error) {
	ps, err := c.api.Peers(ctx, notInRoom)
	if err != nil {
		c.warnPaging(err)
		return nil, err
	}
	out := make([]Peer, len(ps))
	for i, p := range ps {
		out[i] = Peer{ID: p.ID, Type: p.Type, Name: p.Name, Handle: p.Handle, Description: p.Description, Source: p.Source, IsContact: p.IsContact}
	}
	return out, nil
}

// CreateRoom creates a room owned by the agent. A non-blank title locks
// it; "" lets Band title the room from its first message. The request is
// sent once: after a transport error or a 5xx the room may or may not
// exist, and only the agent's room list can tell.
func (c *Client) CreateRoom(ctx context.Context, title string) (Room, error) {
	r, err := c.api.CreateChat(ctx, title)
	if err != nil {
		return Room{}, err
	}
	return Room{ID: r.ID, Title: r.Title, TaskID: r.TaskID, InsertedAt: r.InsertedAt}, nil
}

// Context reads a room's whole context, oldest first: the agent's own
// messages and events and the text messages that mention it. A page
// over Config.MaxResponseBytes is asked again with fewer items; an item
// too large on its own comes back without its content (Omitted set). A
// server that repeats a cursor, or announces more than 10,000 pages,
// ends the read with a *PagingError (ErrCursorRepeated or
// ErrTooManyPages), after one warning on Config.Logger naming the URL.
func (c *Client) Context(ctx context.Context, roomID string) ([]ContextItem, error) {
	var items []ContextItem
	err := c.api.WalkContext(ctx, roomID, &wire.ContextWalk{}, func(page *wire.ContextPage) error {
		for _, m := range page.Items {
			item := ContextItem{
				ID: m.ID, Content: m.Content, MessageType: m.MessageType,
				SenderID: m.SenderID, SenderType: m.SenderType, SenderName: m.SenderName,
				InsertedAt: m.InsertedAt, Metadata: m.Metadata,
			}
			if page.Oversize != nil {
				item.Omitted = page.Oversize.Size
			}
			items = append(items, item)
		}
		return nil
	})
	if err != nil {
		c.warnPaging(err)
		return nil, err
	}
	return items, nil
}

// warnPaging logs the one warning of a walk through pages that was
// stopped.
func (c *Client) warnPaging(err error) {
	var pe *PagingError
	if errors.As(err, &pe) {
		c.log.Warn("band: stopped paging", "call", pe.Endpoint, "url", pe.URL, "pages", pe.Pages, "err", pe.Err)
	}
}

func participant(p wire.Participant) Participant {
	return Participant{ID: p.ID, Type: p.Type, Role: p.Role, Name: p.Name, Handle: p.Handle, Status: p.Status}
}
