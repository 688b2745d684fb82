package fakeband

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
)

// errorJSON is the body of every error answer but the load balancer's.
type errorJSON struct {
	Code      string              `json:"code"`
	Message   string              `json:"message"`
	RequestID string              `json:"request_id"`
	Details   map[string][]string `json:"details,omitempty"`
}

func errorBody(e *Error, reqID string) any {
	return map[string]errorJSON{"error": {Code: e.Code, Message: e.Message, RequestID: reqID, Details: e.Details}}
}

// successBody is the success envelope; metadata only on lists.
type successBody struct {
	Data     any `json:"data"`
	Metadata any `json:"metadata,omitempty"`
	Meta     any `json:"meta,omitempty"` // the deprecated copy of metadata /context still carries
}

// sunset is when Band removes page/page_size paging (API 2.0.0), as its
// document says; it is the Sunset header of every answer to such paging.
const sunset = "Thu, 01 Oct 2026 00:00:00 GMT"

// writeReply renders a handler's answer in Band's envelopes.
func writeReply(w http.ResponseWriter, rep reply, reqID string) {
	w.Header()["X-Request-Id"] = []string{reqID} // X-Request-ID, canonical: Set would canonicalise it every time
	switch {
	case rep.err != nil:
		writeJSON(w, rep.err.Status, errorBody(rep.err, reqID))
	case rep.data == nil:
		w.WriteHeader(rep.status)
	default:
		if rep.meta == nil && !rep.deprecated && writeData(w, rep.status, rep.data) {
			return
		}
		body := successBody{Data: rep.data, Metadata: rep.meta}
		if rep.legacyMeta {
			body.Meta = rep.meta
		}
		if rep.deprecated {
			w.Header().Set("Deprecation", "true")
			w.Header().Set("Sunset", sunset)
		}
		writeJSON(w, rep.status, body)
	}
}

// writeFailBefore answers for a FailBefore fault, as a load balancer or
// an overloaded platform would.
func writeFailBefore(w http.ResponseWriter, f *Fault, reqID string) {
	w.Header().Set("X-Request-ID", reqID)
	status := f.Status
	if status == 0 {
		status = http.StatusServiceUnavailable
	}
	if f.RetryAfter != "" {
		w.Header().Set("Retry-After", f.RetryAfter)
	}
	if f.EmptyBody {
		w.Header().Set("Content-Length", "0")
		w.WriteHeader(status)
		return
	}
	e := &Error{Status: status, Code: f.Code, Message: http.StatusText(status)}
	if e.Code == "" {
		e.Code = codeForStatus(status)
	}
	if e.Code == "limit_reached" {
		e.Message = "plan quota limit reached"
	}
	writeJSON(w, status, errorBody(e, reqID))
}

// codeForStatus names the error code a FailBefore answer carries.
func codeForStatus(status int) string {
	switch status {
	case http.StatusTooManyRequests:
		return "too_many_requests"
	case http.StatusServiceUnavailable:
		return "service_unavailable"
	case http.StatusBadGateway:
		return "bad_gateway"
	case http.StatusGatewayTimeout:
		return "gateway_timeout"
	}
	return "internal_server_error"
}

// jsonContentType is every JSON answer's Content-Type, shared: a header
// value is only read, and an append to it copies (its capacity is one).
var jsonContentType = []string{"application/json"}

// writeJSON renders v; the values are the fake's own structs, so encoding
// cannot fail, and a failed write means the client has gone.
func writeJSON(w http.ResponseWriter, status int, v any) {
	j := jsonWriters.Get().(*jsonWriter)
	defer j.put()
	_ = j.enc.Encode(v)
	j.write(w, status)
}

// writeData writes {"data":v} without reflection for the shapes
// appendData knows, and reports whether it did.
func writeData(w http.ResponseWriter, status int, v any) bool {
	j := jsonWriters.Get().(*jsonWriter)
	defer j.put()
	b, ok := appendData(j.buf.AvailableBuffer(), v)
	if !ok {
		return false
	}
	j.buf.Write(append(b, '\n'))
	j.write(w, status)
	return true
}

// write answers with status and the JSON in j's buffer.
func (j *jsonWriter) write(w http.ResponseWriter, status int) {
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h["Content-Length"] = []string{strconv.Itoa(j.buf.Len())}
	w.WriteHeader(status)
	_, _ = w.Write(j.buf.Bytes())
}

// jsonWriter is an encoder and its buffer, used again from answer to
// answer: an answer then costs its JSON, not a buffer and an encoder.
type jsonWriter struct {
	buf bytes.Buffer
	enc *json.Encoder
}

var jsonWriters = sync.Pool{New: func() any {
	j := new(jsonWriter)
	j.enc = json.NewEncoder(&j.buf)
	return j
}}

// put returns j to the pool, unless an answer grew its buffer past what
// most answers need.
func (j *jsonWriter) put() {
	if j.buf.Cap() > 64<<10 {
		return
	}
	j.buf.Reset()
	jsonWriters.Put(j)
}
