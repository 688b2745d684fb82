package fakeband

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

// FuzzAppendJSONAgreesWithJSON holds the answers written without
// reflection to encoding/json's, byte for byte and header for header:
// a message served or pushed, a post's answer and a mark, whatever their
// strings hold (quotes, HTML, control characters, invalid UTF-8, U+2028).
func FuzzAppendJSONAgreesWithJSON(f *testing.F) {
	for _, s := range []string{
		"", "plain", `a"b\c`, "<b>&amp;</b>", "line\nbreak\r\ttab\b\f\x00\x1f\x7f",
		"é ü 漢字 🙂", "\xff\xfe bad", "sep\u2028\u2029", "@[[0b2e9c1a-5f3d-4a7b-8c2e-000000000007]] hi",
	} {
		f.Add(s, "0b2e9c1a-5f3d-4a7b-8c2e-000000000007", "Ada", int64(1), true)
		f.Add("id", s, s, int64(-3), false)
	}
	f.Fuzz(func(t *testing.T, a, b, c string, n int64, flag bool) {
		quoted, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendString(nil, a); string(got) != string(quoted) {
			t.Fatalf("appendString(%q) = %s, encoding/json %s", a, got, quoted)
		}
		kind := ""
		if flag {
			kind = c
		}
		for _, v := range []any{
			chatMessageJSON{ID: a, Content: b, MessageType: TypeText, SenderID: c, SenderType: "User", SenderName: b,
				ChatRoomID: a, InsertedAt: c, UpdatedAt: c,
				Metadata: metadataJSON{Mentions: []mentionJSON{{ID: a, Handle: b, Name: c, Kind: kind}, {ID: c}}}},
			chatMessageJSON{ID: a, Metadata: metadataJSON{Mentions: []mentionJSON{}}},
			chatMessageJSON{ID: a, Metadata: metadataJSON{}},
			postedJSON{ID: a, Success: flag, Recipients: []recipientJSON{{ID: a, Handle: b, Name: c}, {}}},
			postedJSON{ID: b, Recipients: []recipientJSON{}},
			postedJSON{ID: c},
			markJSON{ID: a, Status: b, AttemptNumber: int(n), Success: flag},
		} {
			plain, encoded := httptest.NewRecorder(), httptest.NewRecorder()
			if !writeData(plain, 201, v) {
				t.Fatalf("%#v: not written without reflection", v)
			}
			writeJSON(encoded, 201, successBody{Data: v})
			if p, e := plain.Body.String(), encoded.Body.String(); p != e {
				t.Fatalf("%#v:\nwritten %s\nencoder %s", v, p, e)
			}
			for _, h := range []string{"Content-Length", "Content-Type"} {
				if p, e := plain.Header().Get(h), encoded.Header().Get(h); p != e {
					t.Fatalf("%s: written %q, encoder %q", h, p, e)
				}
			}
			if m, ok := v.(chatMessageJSON); ok {
				want, _ := json.Marshal(m)
				if got := marshalPayload(m); string(got) != string(want) {
					t.Fatalf("push payload %s, encoding/json %s", got, want)
				}
			}
		}
	})
}

// An event's metadata is its own object, which only encoding/json
// writes (compacted and HTML-escaped as the event was stored).
func TestAnEventIsLeftToEncodingJSON(t *testing.T) {
	ev := chatMessageJSON{ID: "e", MessageType: "tool_call", Metadata: json.RawMessage(`{"a": "<b>"}`)}
	if writeData(httptest.NewRecorder(), 200, ev) {
		t.Fatal("an event written without reflection")
	}
	want, _ := json.Marshal(ev)
	if got := marshalPayload(ev); string(got) != string(want) {
		t.Fatalf("push payload %s, encoding/json %s", got, want)
	}
}

// BenchmarkWriteAMessage: a message as /next serves it, written without
// reflection and by encoding/json (the fallback), for docs/performance.md.
func BenchmarkWriteAMessage(b *testing.B) {
	m := chatMessageJSON{ID: "0b2e9c1a-5f3d-4a7b-8c2e-000000000042", Content: "@[[0b2e9c1a-5f3d-4a7b-8c2e-000000000007]] what is the status of order 9?",
		MessageType: TypeText, SenderID: "0b2e9c1a-5f3d-4a7b-8c2e-000000000003", SenderType: "User", SenderName: "Ada",
		ChatRoomID: "0b2e9c1a-5f3d-4a7b-8c2e-000000000011", InsertedAt: "2026-12-03T17:00:00.000000Z", UpdatedAt: "2026-12-03T17:00:00.000000Z",
		Metadata: metadataJSON{Mentions: []mentionJSON{{ID: "0b2e9c1a-5f3d-4a7b-8c2e-000000000007", Handle: "ops/bot", Name: "Bot"}}}}
	w := &discardWriter{header: http.Header{}}
	b.Run("plain", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			clear(w.header)
			if !writeData(w, 200, m) {
				b.Fatal("not written plain")
			}
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			clear(w.header)
			writeJSON(w, 200, successBody{Data: m})
		}
	})
}

// discardWriter is a ResponseWriter that keeps nothing but its header.
type discardWriter struct{ header http.Header }

func (w *discardWriter) Header() http.Header         { return w.header }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(int)             {}
