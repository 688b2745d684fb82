package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/band-once/bandonce"
)

// Forward mode's wire format. The request:
//
//	POST {URL}
//	Content-Type: application/json
//	Idempotency-Key: {the message's dedup key, the same at every delivery}
//	X-Bandonce-Execution: {the execution id, new for every handler call}
//
//	{"execution_id": "...", "dedup_key": "...", "attempt": 1,
//	 "message": {"id", "room_id", "content", "body", "sender_id",
//	             "sender_type", "sender_name", "inserted_at"}}
//
// A 2xx answer is JSON {"reply": "text"}; an empty or missing reply posts
// nothing. 422 means the message can never be handled (dead-lettered at
// once); any other answer, or none, is a failure that is retried.
//
// The cancel call, sent when the Shell cancels the work (interrupt, stop,
// handler timeout, shutdown) before the answer came:
//
//	POST {CancelURL}
//	Content-Type: application/json
//	Idempotency-Key: cancel:{execution id}
//
//	{"execution_id": "...", "message_id": "...", "room_id": "...",
//	 "reason": "interrupted" | "stopped" | "timeout" | "shutdown" | "superseded"}
//
// It is retried on transport errors and 5xx, detached from the work it
// cancels, for up to CancelTimeout. A remote that ignores it is not
// stopped: its work goes on, but its answer is never posted.
const (
	HeaderIdempotencyKey = "Idempotency-Key"
	HeaderExecution      = "X-Bandonce-Execution"
)

// CancelTimeout bounds the cancel call, its retries included.
const CancelTimeout = 10 * time.Second

// Forward posts every message to a URL.
type Forward struct {
	registry
	url, cancelURL string
	client         *http.Client
	opts           Options
	template       keyTemplate
	cancels        sync.WaitGroup
}

// ForwardOptions configure forward mode.
type ForwardOptions struct {
	Options
	// CancelURL receives the cancel call. Empty means the forward URL's
	// path with "/cancel" appended.
	CancelURL string
	// HTTPClient sends both calls. Nil means a client on
	// http.DefaultTransport with no overall timeout (bandonce run's
	// -timeout bounds the work).
	HTTPClient *http.Client
}

// NewForward returns the bridge that forwards to target.
func NewForward(target string, opts ForwardOptions) (*Forward, error) {
	u, err := url.Parse(target)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("bridge: forward URL %q is not an absolute http(s) URL", target)
	}
	cancel := opts.CancelURL
	if cancel == "" {
		c := *u
		c.Path = strings.TrimRight(u.Path, "/") + "/cancel"
		cancel = c.String()
	} else if c, err := url.Parse(cancel); err != nil || (c.Scheme != "http" && c.Scheme != "https") || c.Host == "" {
		return nil, fmt.Errorf("bridge: cancel URL %q is not an absolute http(s) URL", cancel)
	}
	t, err := parseKeyTemplate(opts.KeyTemplate)
	if err != nil {
		return nil, fmt.Errorf("bridge: %w", err)
	}
	client := opts.HTTPClient
	if client == nil {
		client = &http.Client{}
	}
	return &Forward{url: target, cancelURL: cancel, client: client, opts: opts.Options.withDefaults(), template: t}, nil
}

// CancelURL is where the cancel calls go.
func (f *Forward) CancelURL() string { return f.cancelURL }

type forwardMessage struct {
	ID         string    `json:"id"`
	RoomID     string    `json:"room_id"`
	Content    string    `json:"content"`
	Body       string    `json:"body"`
	SenderID   string    `json:"sender_id"`
	SenderType string    `json:"sender_type"`
	SenderName string    `json:"sender_name"`
	InsertedAt time.Time `json:"inserted_at"`
}

type forwardRequest struct {
	ExecutionID string         `json:"execution_id"`
	DedupKey    string         `json:"dedup_key"`
	Attempt     int            `json:"attempt"`
	Message     forwardMessage `json:"message"`
}

type forwardAnswer struct {
	Reply *string `json:"reply"`
}

type cancelRequest struct {
	ExecutionID string `json:"execution_id"`
	MessageID   string `json:"message_id"`
	RoomID      string `json:"room_id"`
	Reason      string `json:"reason"`
}

// Handle is the Shell's Handler: it forwards m and waits for the answer.
func (f *Forward) Handle(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
	exe := newExecution(m)
	f.add(exe)
	key := f.template.expand(m)
	text, err := f.call(ctx, m, key, exe)
	if err != nil && ctx.Err() != nil {
		// The answer did not come before the cancellation: tell the
		// remote, detached from this call, and keep the execution
		// registered until it is told.
		f.cancels.Add(1)
		go func() {
			defer f.cancels.Done()
			defer f.remove(exe.ID)
			f.cancel(exe, context.Cause(ctx))
		}()
		return nil, errCancelled("the forwarded call", context.Cause(ctx))
	}
	f.remove(exe.ID)
	if err != nil {
		return nil, err
	}
	return reply(m, text, key, f.template), nil
}

// Wait waits for the cancel calls in flight.
func (f *Forward) Wait() { f.cancels.Wait() }

func (f *Forward) call(ctx context.Context, m *bandonce.Message, key string, exe Execution) (string, error) {
	body, err := json.Marshal(forwardRequest{
		ExecutionID: exe.ID, DedupKey: key, Attempt: m.Attempt,
		Message: forwardMessage{ID: m.ID, RoomID: m.RoomID, Content: m.Content, Body: m.Body(),
			SenderID: m.SenderID, SenderType: m.SenderType, SenderName: m.SenderName, InsertedAt: m.InsertedAt},
	})
	if err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.url, bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(HeaderIdempotencyKey, key)
	req.Header.Set(HeaderExecution, exe.ID)
	resp, err := f.client.Do(req)
	if err != nil {
		return "", fmt.Errorf("forwarding: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxReply+1))
	if err != nil {
		return "", fmt.Errorf("forwarding: reading the answer: %w", err)
	}
	switch {
	case resp.StatusCode == http.StatusUnprocessableEntity:
		return "", bandonce.Permanent(fmt.Errorf("the remote cannot handle the message: %s %.200s", resp.Status, data))
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return "", fmt.Errorf("the remote answered %s: %.200s", resp.Status, data)
	case len(data) > MaxReply:
		return "", bandonce.Permanent(fmt.Errorf("the remote's answer is over %d bytes", MaxReply))
	}
	var ans forwardAnswer
	if len(bytes.TrimSpace(data)) > 0 {
		if err := json.Unmarshal(data, &ans); err != nil {
			return "", fmt.Errorf("the remote's answer is not JSON {\"reply\": ...}: %w", err)
		}
	}
	if ans.Reply == nil {
		return "", nil
	}
	return *ans.Reply, nil
}

// reasonOf names a cancellation cause for the remote.
func reasonOf(cause error) string {
	switch {
	case errors.Is(cause, bandonce.ErrInterrupted):
		return "interrupted"
	case errors.Is(cause, bandonce.ErrStopped):
		return "stopped"
	case errors.Is(cause, bandonce.ErrShutdown):
		return "shutdown"
	case errors.Is(cause, bandonce.ErrSuperseded):
		return "superseded"
	case errors.Is(cause, context.DeadlineExceeded), strings.Contains(fmt.Sprint(cause), "timed out"):
		return "timeout"
	}
	return "cancelled"
}

// cancel tells the remote to stop the execution, retrying transport
// errors and 5xx for up to CancelTimeout.
func (f *Forward) cancel(exe Execution, cause error) {
	log := f.opts.Logger.With("message", exe.Message, "room", exe.RoomID, "execution", exe.ID)
	body, _ := json.Marshal(cancelRequest{ExecutionID: exe.ID, MessageID: exe.Message, RoomID: exe.RoomID, Reason: reasonOf(cause)})
	ctx, done := context.WithTimeout(context.Background(), CancelTimeout)
	defer done()
	wait := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := f.sendCancel(ctx, body, exe)
		if err == nil {
			log.Info("bandonce run: told the remote to cancel", "reason", reasonOf(cause))
			return
		}
		var final *finalError
		if errors.As(err, &final) || ctx.Err() != nil {
			log.Warn("bandonce run: the cancel call failed; the remote may still be working", "err", err, "attempts", attempt)
			return
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
		wait = min(2*wait, 2*time.Second)
	}
}

// finalError is an answer to the cancel call that a retry cannot change.
type finalError struct{ status string }

func (e *finalError) Error() string { return "the remote answered " + e.status }

func (f *Forward) sendCancel(ctx context.Context, body []byte, exe Execution) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.cancelURL, bytes.NewReader(body))
	if err != nil {
		return &finalError{status: err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(HeaderIdempotencyKey, "cancel:"+exe.ID)
	resp, err := f.client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode <= 299:
		return nil
	case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests:
		return fmt.Errorf("the remote answered %s", resp.Status)
	}
	return &finalError{status: resp.Status}
}
