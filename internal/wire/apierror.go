package wire

import (
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// newAPIError turns a non-2xx answer into an *APIError. It never fails:
// Band's own errors carry the JSON envelope, but a load balancer's 429 has
// an empty body and a proxy's 502 is HTML, and each must still come out
// as a usable error.
func newAPIError(endpoint string, resp *http.Response, body []byte) *APIError {
	e := &APIError{Endpoint: endpoint, Status: resp.StatusCode}
	if d, ok := ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
		e.RetryAfter = d
	}
	if !readEnvelope(e, body) {
		e.Body = excerpt(body)
	}
	if e.RequestID == "" {
		e.RequestID = resp.Header.Get("X-Request-ID")
	}
	return e
}

// readEnvelope fills e from {"error": {code, message, request_id,
// details}} and reports whether body was that envelope in full. It takes
// what it can from a partial one: each member is read on its own, so one
// wrongly typed member does not lose the others.
func readEnvelope(e *APIError, body []byte) bool {
	var env struct {
		Error json.RawMessage `json:"error"`
	}
	if len(body) > MaxBodyBytes || json.Unmarshal(body, &env) != nil || isAbsent(env.Error) {
		return false
	}
	// Some servers put a bare string in "error".
	if json.Unmarshal(env.Error, &e.Message) == nil {
		return false
	}
	var members struct {
		Code      json.RawMessage `json:"code"`
		Message   json.RawMessage `json:"message"`
		RequestID json.RawMessage `json:"request_id"`
		Details   json.RawMessage `json:"details"`
	}
	if json.Unmarshal(env.Error, &members) != nil {
		return false
	}
	whole := readString(members.Code, &e.Code)
	whole = readString(members.Message, &e.Message) && whole
	whole = readString(members.RequestID, &e.RequestID) && whole
	if !isAbsent(members.Details) {
		var details map[string][]string
		if json.Unmarshal(members.Details, &details) == nil {
			e.Details = details
		} else {
			whole = false
		}
	}
	return whole && (e.Code != "" || e.Message != "")
}

// readString decodes a JSON string member into dst and reports whether it
// was one. An absent member counts as fine; the caller decides whether
// the envelope as a whole is usable.
func readString(raw json.RawMessage, dst *string) bool {
	if isAbsent(raw) {
		return true
	}
	return json.Unmarshal(raw, dst) == nil
}

// ParseRetryAfter reads a Retry-After value: delay-seconds or an HTTP date
// (a date in the past means no wait). ok is false when the value is
// absent or neither form. Absurdly large values saturate rather than
// overflow.
func ParseRetryAfter(v string, now time.Time) (d time.Duration, ok bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseUint(v, 10, 64); err == nil {
		if secs > uint64(math.MaxInt64/int64(time.Second)) {
			return time.Duration(math.MaxInt64), true
		}
		return time.Duration(secs) * time.Second, true
	}
	if strings.IndexFunc(v, func(r rune) bool { return r < '0' || r > '9' }) < 0 {
		// All digits but too long for a uint64: still a delay, a huge one.
		return time.Duration(math.MaxInt64), true
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(at.Sub(now), 0), true
}
