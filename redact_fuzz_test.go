package bandonce_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/fakeband"
	"github.com/band-once/bandonce/internal/bridge"
	"github.com/band-once/bandonce/internal/keyguard"
)

// The seed corpus lives in testdata/fuzz/FuzzKeyNeverLeaks; `go test`
// replays it, `go test -fuzz=FuzzKeyNeverLeaks -run '^$'` explores.

// FuzzKeyNeverLeaks runs a shell against the in-process fake Band through
// a transport that, byte by byte of the input, lets a request through or
// fails it in a way that quotes the key: a transport error naming it, a
// 5xx echoing it (cut anywhere), a malformed 2xx, an error envelope, a
// redirect to another host, a refused upgrade. The handler panics, fails
// or replies, quoting the key, as the input says. Whatever happens, the
// key is in no log record, no error, no outcome, no failure reason Band
// stores, and never reaches another host.
//
// Then, as bandonce run does, it bridges a command (a real process) that
// prints on stdout and stderr what the input says: the key in its forms,
// among lines of any length, some longer than the log's line limit so
// that the cut falls anywhere in the key. The key reaches neither the
// room nor the logs.
func FuzzKeyNeverLeaks(f *testing.F) {
	f.Add([]byte{0, 1, 2, 4, 5, 6, 7, 8, 9, 3})
	f.Fuzz(func(t *testing.T, script []byte) {
		synctest.Test(t, func(t *testing.T) { keyNeverLeaks(t, script) })
		childNeverLeaks(t, script)
	})
}

// childOutput is what the bridged command prints on stdout and stderr,
// from script: each byte picks a piece, alternately for each stream.
func childOutput(script []byte, key string) (stdout, stderr []byte) {
	out := [2]*bytes.Buffer{{}, {}}
	for i, b := range script {
		w := out[i%2]
		switch b % 8 {
		case 0:
			w.WriteString(key)
		case 1:
			w.WriteString(url.QueryEscape(key))
		case 2:
			w.WriteString(strconv.Quote(key))
		case 3:
			w.WriteString("\n")
		case 4:
			// Long enough, in some runs, to be cut at the log's line
			// limit; b moves where the cut falls.
			w.WriteString(strings.Repeat("x", int(b)*300))
		case 5:
			w.WriteString("BAND_API_KEY=" + key + "\r\n")
		case 6:
			w.WriteString(strings.Repeat("y", int(b)))
		default:
			w.WriteString("env ")
		}
	}
	return out[0].Bytes(), out[1].Bytes()
}

func childNeverLeaks(t *testing.T, script []byte) {
	band := fakeband.New(fakeband.Options{Seed: 6})
	defer band.Close()
	agent := band.AddAgent("bridged")
	human := band.AddHuman("human")
	room := band.AddRoom("r", human, agent.ID)
	id, err := band.Say(room.ID, human.ID, "run", agent.ID)
	if err != nil {
		t.Fatal(err)
	}
	key := agent.Key
	stdout, stderr := childOutput(script, key)
	dir := t.TempDir()
	outFile, errFile := filepath.Join(dir, "out"), filepath.Join(dir, "err")
	if err := os.WriteFile(outFile, stdout, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(errFile, stderr, 0o600); err != nil {
		t.Fatal(err)
	}
	o := &observed{}
	cfg := bandonce.Config{APIKey: key, BaseURL: band.BaseURL(), SocketURL: band.SocketURL(), HTTPClient: band.HTTPClient(),
		DisableSocket: true, MaxAttempts: 1}
	o.observe(&cfg)
	secret := keyguard.New(key)
	cmd, err := bridge.NewCommand([]string{"/bin/sh", "-c", `cat "$1"; cat "$2" >&2`, "child", outFile, errFile},
		bridge.Options{Logger: keyguard.Logger(cfg.Logger, secret), Key: secret, PassKey: true})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Handler = cmd.Handle
	s, err := bandonce.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ended := make(chan error, 1)
	go func() { ended <- s.Run(ctx) }()
	deadline := time.Now().Add(20 * time.Second)
	for band.Status(agent.ID, id) != fakeband.StatusProcessed && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
	cancel()
	o.runErr = <-ended
	if got := band.Status(agent.ID, id); got != fakeband.StatusProcessed {
		t.Fatalf("the message is %s, not processed, after 20 s; logs:\n%.4000s", got, o.logs.String())
	}
	texts := o.texts()
	for _, m := range band.Marks(agent.ID, id) {
		texts = append(texts, m.Error)
	}
	for _, p := range band.Posts(room.ID) {
		texts = append(texts, p.Content)
	}
	for _, text := range texts {
		for _, trace := range traces(key) {
			if i := strings.Index(text, trace); i >= 0 {
				t.Fatalf("%q appears in: ...%s...", trace, text[max(0, i-200):min(len(text), i+200)])
			}
		}
	}
}

func keyNeverLeaks(t *testing.T, script []byte) {
	band := fakeband.New(fakeband.Options{Seed: 5})
	defer band.Close()
	agent := band.AddAgent("agent")
	human := band.AddHuman("human")
	room := band.AddRoom("r", human, agent.ID)
	var ids []string
	for i := range 3 {
		body := []string{"reply", "panic", "fail"}[int(at(script, i))%3]
		id, err := band.Say(room.ID, human.ID, body, agent.ID)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	key := agent.Key
	rt := &scriptedTransport{next: band.HTTPClient().Transport, script: script, pos: 3, key: key}
	cfg := bandonce.Config{
		APIKey:     key,
		BaseURL:    band.BaseURL(),
		SocketURL:  band.SocketURL(),
		HTTPClient: &http.Client{Transport: rt},
		Handler: func(_ context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
			switch m.Body() {
			case "panic":
				panic("calling https://x/?api_key=" + key)
			case "fail":
				return nil, fmt.Errorf("X-Api-Key %s refused", key)
			}
			return &bandonce.Reply{Content: "ok", Mentions: []string{m.SenderID}}, nil
		},
		MaxAttempts: 2,
	}
	o := &observed{}
	o.observe(&cfg)
	cfg.Retry = bandonce.RetryPolicy{MaxAttempts: 2, BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second, Seed: 9}
	s, err := bandonce.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ended := make(chan error, 1)
	go func() { ended <- s.Run(ctx) }()
	select {
	case o.runErr = <-ended:
	case <-time.After(20 * time.Second):
		cancel()
		o.runErr = <-ended
	}
	cancel()

	texts := o.texts()
	for _, id := range ids {
		for _, m := range band.Marks(agent.ID, id) {
			texts = append(texts, m.Error)
		}
	}
	for _, text := range texts {
		for _, trace := range traces(key) {
			if strings.Contains(text, trace) {
				t.Fatalf("%q appears in:\n%s", trace, text)
			}
		}
	}
	if n := rt.keysElsewhere(); n > 0 {
		t.Fatalf("another host received the key %d time(s)", n)
	}
}

// at is script[i], or 0 past its end: every request after it passes.
func at(script []byte, i int) byte {
	if i < len(script) {
		return script[i]
	}
	return 0
}

// scriptedTransport answers request n as script[pos+n] says.
type scriptedTransport struct {
	next   http.RoundTripper
	script []byte
	key    string

	mu        sync.Mutex
	pos       int // the next byte to use; the first three chose the messages
	elsewhere int // requests to another host that carried the key
}

func (s *scriptedTransport) keysElsewhere() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.elsewhere
}

func (s *scriptedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	s.mu.Lock()
	if req.URL.Hostname() != fakeband.Host {
		if req.Header.Get("X-Api-Key") != "" || strings.Contains(req.URL.RawQuery, "api_key") {
			s.elsewhere++
		}
		s.mu.Unlock()
		return s.answer(req, http.StatusNotFound, nil, "")
	}
	action, arg := at(s.script, s.pos), at(s.script, s.pos+1)
	s.pos += 2
	s.mu.Unlock()

	key := s.key
	echo := strings.Repeat("x", int(arg)*3) + key // a cut excerpt may end anywhere in the key
	upgrade := req.Header.Get("Upgrade") != ""
	switch action % 10 {
	case 4:
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, &url.Error{Op: req.Method, URL: req.URL.String() + "?api_key=" + key, Err: errors.New("proxy: " + key)}
	case 5:
		status := []int{500, 502, 503, 504}[arg%4]
		return s.answer(req, status, http.Header{"X-Request-Id": {key}}, "<html>"+echo+"</html>")
	case 6:
		if upgrade {
			return s.answer(req, http.StatusServiceUnavailable, nil, `{"error":{"code":"`+key+`","message":"`+echo+`"}}`)
		}
		return s.answer(req, http.StatusOK, nil, `{"data":{"id":`+strconv.Quote(echo)[:int(arg)%(len(echo)+2)])
	case 7:
		status := []int{400, 401, 403, 404, 409, 422, 429}[arg%7]
		return s.answer(req, status, http.Header{"Retry-After": {"1"}},
			`{"error":{"code":"`+key+`","message":"`+key+`","request_id":"`+key+`","details":{"/`+key+`":["`+key+`"]}}}`)
	case 8:
		to := "http://elsewhere.invalid/collect?k=" + key
		return s.answer(req, []int{301, 302, 307, 308}[arg%4], http.Header{"Location": {to}}, "")
	case 9:
		return s.answer(req, http.StatusOK, nil, echo[:int(arg)%(len(echo)+1)])
	}
	return s.next.RoundTrip(req)
}

func (s *scriptedTransport) answer(req *http.Request, status int, header http.Header, body string) (*http.Response, error) {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	if header == nil {
		header = http.Header{}
	}
	return &http.Response{StatusCode: status, Status: strconv.Itoa(status) + " " + http.StatusText(status),
		Header: header, Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)), Request: req}, nil
}
