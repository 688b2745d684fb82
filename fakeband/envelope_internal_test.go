package fakeband

import (
	"net/http/httptest"
	"testing"
)

// A mark's answer written without reflection is the one writeJSON writes,
// byte for byte; a mark whose strings need escaping is left to writeJSON.
func TestPlainMarkIsWhatTheEncoderWrites(t *testing.T) {
	for _, m := range []markJSON{
		{ID: "0b2e9c1a-5f3d-4a7b-8c2e-000000000007", Status: "processing", AttemptNumber: 1, Success: true},
		{ID: "m", Status: "processed", AttemptNumber: 123456789, Success: false},
		{ID: "", Status: "", AttemptNumber: -3},
	} {
		plain, encoded := httptest.NewRecorder(), httptest.NewRecorder()
		if !writePlainMark(plain, 200, m) {
			t.Fatalf("%+v: not written plain", m)
		}
		writeJSON(encoded, 200, successBody{Data: m})
		if p, e := plain.Body.String(), encoded.Body.String(); p != e {
			t.Fatalf("plain %q, encoder %q", p, e)
		}
		if p, e := plain.Header(), encoded.Header(); p.Get("Content-Length") != e.Get("Content-Length") || p.Get("Content-Type") != e.Get("Content-Type") {
			t.Fatalf("plain header %v, encoder %v", p, e)
		}
	}
	for _, id := range []string{`a"b`, `a\b`, "a<b", "a>b", "a&b", "a\nb", "é", "a\x7fb"} {
		if writePlainMark(httptest.NewRecorder(), 200, markJSON{ID: id}) {
			t.Fatalf("%q written plain", id)
		}
	}
}
