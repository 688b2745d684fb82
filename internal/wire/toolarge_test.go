package wire

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// clip passes data through a clipReader cutting at max, in reads of one
// to seven bytes, so that every cut falls across reads somewhere.
func clip(data []byte, max int) []byte {
	var out bytes.Buffer
	c := &clipReader{r: &choppy{data: data}, max: max}
	_, _ = io.Copy(&out, c)
	return out.Bytes()
}

// choppy reads data a few bytes at a time.
type choppy struct {
	data []byte
	n    int
}

func (c *choppy) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	c.n = c.n%7 + 1
	n := copy(p[:min(len(p), c.n)], c.data)
	c.data = c.data[n:]
	return n, nil
}

// Clipped JSON is JSON: every string, number and run of white space cut
// to at most the limit, at a place that keeps it valid, and whatever is
// shorter passed as it came.
func FuzzClipKeepsJSON(f *testing.F) {
	for _, s := range []string{
		`{"data":{"id":"m1","content":"héllo \"quoted\" \\ \u00e9\ud83d\ude00 tail"}}`,
		`[123456789012, -0.5e+10, true, false, null, "\n\t\u0041"]`,
		"{\"a\" :\n\n   [ 1 ,  2 ]  }",
		`"\\\\\\"`,
	} {
		f.Add([]byte(s), 3)
	}
	f.Fuzz(func(t *testing.T, data []byte, max int) {
		if !json.Valid(data) {
			return
		}
		max = int(uint(max)%16) + 1
		out := clip(data, max)
		require.True(t, json.Valid(out), "clipped at %d:\n%s\nto\n%s", max, data, out)
		dec := json.NewDecoder(bytes.NewReader(out))
		dec.UseNumber()
		var v any
		require.NoError(t, dec.Decode(&v))
		eachScalar(v, func(s string) {
			// A cut keeps at most max bytes of the token as written; an
			// escape, or a byte that is not UTF-8, decodes to at most 3.
			assert.LessOrEqual(t, len(s), 3*max+12, "a token past the clip")
		})
		if len(data) <= max {
			assert.Equal(t, string(data), string(out))
		}
		assert.Equal(t, string(data), string(clip(data, len(data)+1)), "nothing to cut")
	})
}

// eachScalar calls f with every string and number in v, keys too.
func eachScalar(v any, f func(string)) {
	switch v := v.(type) {
	case string:
		f(v)
	case json.Number:
		f(string(v))
	case []any:
		for _, e := range v {
			eachScalar(e, f)
		}
	case map[string]any:
		for k, e := range v {
			f(k)
			eachScalar(e, f)
		}
	}
}

// A skim keeps no more than its clip of any token: an answer of 64 MiB
// whose content is one string is read for its ids in a few hundred KB.
func TestSkimmingAHugeAnswerKeepsLittle(t *testing.T) {
	const size = 64 << 20
	body := io.MultiReader(strings.NewReader(`{"data":{"content":"`), &repeat{b: 'z', n: size},
		strings.NewReader(`","id":"m1","sender_id":"u1"}}`))
	resp := &http.Response{StatusCode: 200, ContentLength: -1, Body: io.NopCloser(body)}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	e := tooLarge(EndpointNext, resp, nil, 1000, true)
	runtime.ReadMemStats(&after)
	require.NotNil(t, e.Message)
	assert.Equal(t, "m1", e.Message.ID)
	assert.Equal(t, int64(size+len(`{"data":{"content":"","id":"m1","sender_id":"u1"}}`)), e.Size)
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(4<<20), "bytes allocated to skim %d", size)
}

// repeat reads n bytes b.
type repeat struct {
	b byte
	n int
}

func (r *repeat) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, io.EOF
	}
	n := min(len(p), r.n)
	for i := range p[:n] {
		p[i] = r.b
	}
	r.n -= n
	return n, nil
}

// A skim's memory stays bounded however the body is shaped: nested 16 MiB
// deep, or holding a million messages, it gives up with no ids.
func TestSkimmingIsBoundedInDepthAndItems(t *testing.T) {
	const size = 16 << 20
	for name, body := range map[string]func() io.Reader{
		"nested": func() io.Reader {
			return io.MultiReader(strings.NewReader(`{"data":{"content":`), &repeat{b: '[', n: size})
		},
		"many messages": func() io.Reader {
			item := `{"id":"m1","sender_id":"u1"},`
			return io.MultiReader(strings.NewReader(`{"data":[`), strings.NewReader(strings.Repeat(item, size/len(item))),
				strings.NewReader(`{"id":"m1","sender_id":"u1"}],"metadata":{"has_more":false}}`))
		},
	} {
		t.Run(name, func(t *testing.T) {
			resp := &http.Response{StatusCode: 200, ContentLength: -1, Body: io.NopCloser(body())}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			e := tooLarge(EndpointContext, resp, nil, 1000, true)
			runtime.ReadMemStats(&after)
			assert.Nil(t, e.Message)
			assert.Nil(t, e.Page)
			assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(4<<20), "bytes allocated to skim %d", size)
		})
	}
}

// Only an id the clip cannot have cut is trusted: one cut in its raw bytes
// (long, or long in escapes) gives no message, and a number too large for
// a float64 elsewhere does not stop the scan.
func TestASkimTrustsOnlyWholeIDs(t *testing.T) {
	skim := func(body string) *Message {
		resp := &http.Response{StatusCode: 200, ContentLength: -1, Body: io.NopCloser(strings.NewReader(body))}
		return tooLarge(EndpointNext, resp, nil, 10, true).Message
	}
	for name, id := range map[string]string{
		"long":            strings.Repeat("a", clipAt+100),
		"long in escapes": strings.Repeat(`\u0041`, 20000),
		"just too long":   strings.Repeat("a", wholeBelow),
	} {
		assert.Nil(t, skim(`{"data":{"id":"`+id+`","sender_id":"u1"}}`), name)
	}
	m := skim(`{"data":{"extra":1e400,"big":` + strings.Repeat("9", 70000) + `,"id":"` + strings.Repeat("a", wholeBelow-1) + `","sender_id":"u1"}}`)
	require.NotNil(t, m, "a huge number is skipped, not an error")
	assert.Equal(t, wholeBelow-1, len(m.ID))
}
