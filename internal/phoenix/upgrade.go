package phoenix

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/band-once/bandonce/internal/keyguard"
)

// UpgradeError is a WebSocket upgrade the server answered with an HTTP
// status instead of 101. Band explains refusals in a JSON body
// {"error":{"code":...,"retry_after":...}}, which may also be empty.
type UpgradeError struct {
	// Status is the HTTP status code.
	Status int
	// Code is error.code from the body, empty when there was none.
	Code string
	// RetryAfter is the server's hint: error.retry_after seconds, else
	// the Retry-After header; zero when neither was given. Not capped.
	RetryAfter time.Duration
	// Body is the start of the response body, for diagnosis.
	Body string
}

// Error describes the refusal without echoing the whole body.
func (e *UpgradeError) Error() string {
	s := fmt.Sprintf("phoenix: upgrade refused: %d", e.Status)
	if e.Code != "" {
		s += " " + e.Code
	}
	if e.RetryAfter > 0 {
		s += fmt.Sprintf(" (retry after %s)", e.RetryAfter)
	}
	return s
}

// Fatal reports whether retrying cannot help: 400 (a bad request such as
// invalid_on_conflict), 401 and 403 (authentication) and 409
// (connection_conflict, which Band says must not be retried).
func (e *UpgradeError) Fatal() bool {
	switch e.Status {
	case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusConflict:
		return true
	}
	return false
}

// retryHint is how long a refusal asks to be left alone; only a 429's
// hint is honoured, every other retryable failure uses the backoff.
func (e *UpgradeError) retryHint() time.Duration {
	if e.Status != http.StatusTooManyRequests {
		return 0
	}
	return e.RetryAfter
}

// socketURL adds the query parameters Band expects to raw and takes out
// an api_key parameter, so that no error of the dialer quotes a key (New
// has already adopted it when Config.APIKey was empty).
func socketURL(raw, agentID string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrBadURL, err)
	}
	switch u.Scheme {
	case "ws", "wss", "http", "https":
	default:
		return "", fmt.Errorf("%w: scheme %q is not ws, wss, http or https", ErrBadURL, u.Scheme)
	}
	if u.Host == "" {
		return "", fmt.Errorf("%w: no host", ErrBadURL)
	}
	q := u.Query()
	q.Del("api_key")
	q.Set("vsn", "2.0.0")
	if agentID != "" {
		q.Set("agent_id", agentID)
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// keyFromURL is the api_key parameter of raw, if it parses and has one.
func keyFromURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Query().Get("api_key")
}

// dial makes one upgrade attempt, bounded by one heartbeat interval so a
// black-holed server cannot stall Run forever. A refusal comes back as
// *UpgradeError; anything else is a transport error. Neither shows the
// key: it is only in the header, and what the server answered is
// scrubbed of it.
func (c *Client) dial(ctx context.Context, target string) (*websocket.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.HeartbeatInterval)
	defer cancel()
	header := http.Header{}
	if c.key.Value() != "" {
		header.Set("x-api-key", c.key.Value())
	}
	conn, resp, err := websocket.Dial(ctx, target, &websocket.DialOptions{
		HTTPClient: c.cfg.HTTPClient,
		HTTPHeader: header,
	})
	if err == nil {
		conn.SetReadLimit(MaxFrameSize)
		return conn, nil
	}
	if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
		var body []byte
		if resp.Body != nil {
			// Dial has already cut the body down to its first KiB; the
			// limit here keeps it so whatever the dialer does.
			body, _ = io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		}
		ue := parseUpgradeError(resp.StatusCode, resp.Header, body)
		ue.Code = c.key.Scrub(ue.Code)
		ue.Body = c.key.ScrubCut(ue.Body)
		return nil, ue
	}
	return nil, c.key.Error(err)
}

// parseUpgradeError reads Band's refusal envelope defensively: the body
// may be empty, not JSON, or JSON of another shape.
func parseUpgradeError(status int, header http.Header, body []byte) *UpgradeError {
	e := &UpgradeError{Status: status, Body: string(body)}
	var envelope struct {
		Error struct {
			Code       string          `json:"code"`
			RetryAfter json.RawMessage `json:"retry_after"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &envelope) == nil {
		e.Code = envelope.Error.Code
		e.RetryAfter = parseSeconds(envelope.Error.RetryAfter)
	}
	if e.RetryAfter == 0 {
		e.RetryAfter = parseRetryAfterHeader(header.Get("Retry-After"))
	}
	return e
}

// maxHintSeconds keeps a hostile hint from overflowing a Duration; it is
// far above any cap a caller would set.
const maxHintSeconds = 365 * 24 * 3600

// parseSeconds accepts a JSON number or a numeric string of seconds.
// Anything else, negative or not finite, is no hint.
func parseSeconds(raw json.RawMessage) time.Duration {
	if len(raw) == 0 {
		return 0
	}
	var text string
	if json.Unmarshal(raw, &text) != nil {
		text = string(raw)
	}
	secs, err := strconv.ParseFloat(strings.TrimSpace(text), 64)
	if err != nil {
		return 0
	}
	return secondsToDuration(secs)
}

// parseRetryAfterHeader accepts delta-seconds or an HTTP date.
func parseRetryAfterHeader(v string) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		return secondsToDuration(secs)
	}
	if when, err := http.ParseTime(v); err == nil {
		return min(max(time.Until(when), 0), maxHintSeconds*time.Second)
	}
	return 0
}

func secondsToDuration(secs float64) time.Duration {
	if math.IsNaN(secs) || secs <= 0 {
		return 0
	}
	secs = min(secs, maxHintSeconds)
	return time.Duration(secs * float64(time.Second))
}

// isFatal reports whether err ends Run instead of being retried: an
// upgrade refused for good, or a redirect to another origin, which no
// retry can change and which would carry the key.
func isFatal(err error) bool {
	var ue *UpgradeError
	return errors.As(err, &ue) && ue.Fatal() || errors.Is(err, keyguard.ErrCrossOriginRedirect)
}
