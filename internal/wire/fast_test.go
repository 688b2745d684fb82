package wire

import (
	"encoding/json"
	"net/http"
	"reflect"
	"testing"
)

// slowMessage is the step-by-step decoding of a served message, the
// reference the one-pass decoding must agree with.
func slowMessage(body []byte) (Message, bool) {
	r := &response{endpoint: EndpointNext, status: http.StatusOK, body: body}
	var m Message
	if r.decodeData(&m) != nil || r.checkMessage(r.data, &m, "data") != nil {
		return Message{}, false
	}
	return m, true
}

// The one-pass decoding accepts a body only if the step-by-step decoding
// accepts it too, and then yields the same message; when it declines, the
// step-by-step decoding decides and names the problem.
func FuzzFastDecodingAgreesWithStepByStep(f *testing.F) {
	for _, s := range []string{
		`{"data":{"id":"m1","content":"x","sender_id":"u1"}}`,
		`{"data":{"id":"m1","content":"","sender_id":"u1","metadata":{"k":[1]}}}`,
		`{"data":{"id":"m1","sender_id":"u1"}}`,
		`{"data":{"id":"m1","content":null,"sender_id":"u1"}}`,
		`{"data":{"id":7,"content":"x","sender_id":"u1"}}`,
		`{"data":{"id":"m1","content":"x","sender_id":"u1","inserted_at":"yesterday"}}`,
		`{"data":null}`, `{"data":[]}`, `[1]`, `{"data":{"id":"m1","content":"x","sender_id":"u1"}} x`,
		`{"data":{"id":"m1","content":"a","content":"b","sender_id":"u1"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		want, slowOK := slowMessage(body)
		r := &response{endpoint: EndpointNext, status: http.StatusOK, body: body}
		s, ok := decodeFast[servedMessage](r)
		if !ok {
			return
		}
		got, ok := s.message()
		if !ok {
			return
		}
		if !slowOK {
			t.Fatalf("one pass accepted %q, step by step refused it", body)
		}
		if !reflect.DeepEqual(got, want) {
			gj, _ := json.Marshal(got)
			wj, _ := json.Marshal(want)
			t.Fatalf("one pass gave %s, step by step %s", gj, wj)
		}
	})
}
