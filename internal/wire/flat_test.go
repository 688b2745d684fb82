package wire

import (
	"net/http"
	"testing"
)

// jsonMark is a mark's answer as encoding/json decodes it, the reference
// flatMark must agree with.
func jsonMark(body []byte) (*Mark, bool) {
	m, err := decode[Mark](&response{endpoint: EndpointProcessing, status: http.StatusOK, body: body})
	return m, err == nil
}

var markBodies = []string{
	`{"data":{"id":"m1","status":"processing","attempt_number":1,"success":true}}` + "\n",
	` { "data" : { "id" : "m1" , "status" : "processed" , "attempt_number" : 12 , "success" : false } } `,
	`{"data":{}}`, `{"data":{"attempt_number":-0}}`, `{"data":{"id":"a","id":"b"}}`,
	`{"data":{"id":"a"},"data":{"status":"s"}}`,
	`{"data":{"attempt_number":01}}`, `{"data":{"attempt_number":1.0}}`, `{"data":{"attempt_number":1e2}}`,
	`{"data":{"attempt_number":1234567890123456789}}`, `{"data":{"attempt_number":-}}`,
	`{"data":{"success":truex}}`, `{"data":{"success":null}}`, `{"data":{"ID":"m1"}}`, `{"data":{"extra":1}}`,
	`{"data":{"id":"\u0041"}}`, `{"data":{"id":"é"}}`, `{"data":{"id":"a` + "\x01" + `"}}`,
	`{"data":null}`, `{"data":[]}`, `{"data":{"id":"m1"},"metadata":{}}`, `{"Data":{"id":"m1"}}`,
	`{"data":{"id":"m1"}} x`, `{"data":{"id":"m1"},}`, `{"data":{"id":"m1",}}`, `{}`, ``, `[`,
	`{"data":{"id":"m1"}`, `{"data":{"id":"m1}}`,
}

// flatMark accepts a body only if encoding/json accepts it too, and then
// gives the same mark.
func FuzzFlatMarkAgreesWithJSON(f *testing.F) {
	for _, s := range markBodies {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, ok := flatMark(body)
		if !ok {
			return
		}
		want, jsonOK := jsonMark(body)
		if !jsonOK {
			t.Fatalf("flatMark accepted %q, encoding/json refused it", body)
		}
		if *got != *want {
			t.Fatalf("%q: flatMark gave %+v, encoding/json %+v", body, *got, *want)
		}
	})
}

// The plain answers the fake and Band give are read without encoding/json.
func TestFlatMarkReadsPlainAnswers(t *testing.T) {
	for _, s := range markBodies[:6] {
		got, ok := flatMark([]byte(s))
		if !ok {
			t.Fatalf("flatMark declined %q", s)
		}
		want, _ := jsonMark([]byte(s))
		if *got != *want {
			t.Fatalf("%q: flatMark gave %+v, encoding/json %+v", s, *got, *want)
		}
	}
	if m, _ := flatMark([]byte(markBodies[0])); *m != (Mark{ID: "m1", Status: "processing", AttemptNumber: 1, Success: true}) {
		t.Fatalf("got %+v", *m)
	}
}
