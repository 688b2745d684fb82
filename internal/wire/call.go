package wire

import (
	"context"
	"encoding/json"
	"net/url"
)

// Call is one request of Band's agent API that has no method of its own
// here: the typed calls of package band (memories, tasks, the board,
// contacts, rooms) are made of it.
type Call struct {
	// Endpoint names the call in errors and logs, templated ("POST
	// /agent/memories"): no id ever reaches a log line through it.
	Endpoint string
	Method   string
	// Path is below the base URL, each id already escaped with
	// url.PathEscape.
	Path  string
	Query url.Values
	// Body, if not nil, is sent as JSON.
	Body any
	// Retry lets transient failures be retried below the caller. Set it
	// only for reads and for writes whose repeat has the effect of one.
	Retry bool
	// IDs are checked (ErrInvalidID) before anything is sent.
	IDs []string
}

// Answer is the 2xx answer of a Call.
type Answer struct {
	// Status is the HTTP status code.
	Status int
	res    *response
}

// Do sends call and returns its 2xx answer; every non-2xx is an
// *APIError, and no error shows the key.
func (c *Client) Do(ctx context.Context, call Call) (_ *Answer, err error) {
	defer c.scrub(&err)
	if err := checkIDs(call.Endpoint, call.IDs...); err != nil {
		return nil, err
	}
	var body []byte
	if call.Body != nil {
		if body, err = json.Marshal(call.Body); err != nil {
			return nil, err
		}
	}
	res, err := c.send(ctx, request{endpoint: call.Endpoint, method: call.Method, path: call.Path,
		query: call.Query, body: body, retry: call.Retry})
	if err != nil {
		return nil, err
	}
	return &Answer{Status: res.status, res: res}, nil
}

// Data decodes the envelope's data into v: a *ProtocolError when the body
// is no envelope or data is missing or of the wrong shape.
func (a *Answer) Data(v any) error { return a.res.decodeData(v) }

// Metadata decodes the envelope's metadata (after Data) into v; absent
// metadata leaves v as it is.
func (a *Answer) Metadata(v any) error { return a.res.decodeMetadata(v) }

// Meta decodes the envelope's member name (after Data), such as the
// deprecated "meta" of the memories listing; absent leaves v as it is.
func (a *Answer) Meta(name string, v any) error {
	var env map[string]json.RawMessage
	if err := json.Unmarshal(a.res.body, &env); err != nil {
		return a.res.protocolError("envelope: " + err.Error())
	}
	if isAbsent(env[name]) {
		return nil
	}
	return a.res.decodeInto(env[name], v, name)
}

// Protocol returns a *ProtocolError about this answer.
func (a *Answer) Protocol(reason string) error { return a.res.protocolError(reason) }
