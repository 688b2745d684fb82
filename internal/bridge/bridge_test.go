package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/internal/procgroup"
	"github.com/band-once/bandonce/internal/safebuf"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func msg(id string) *bandonce.Message {
	return &bandonce.Message{ID: id, RoomID: "room-1", SenderID: "ada", Attempt: 2,
		Content: "@[[0b6c3f5e-8f1a-4c1e-9d2b-3a4b5c6d7e8f]] hello there"}
}

// quiet is Options whose logs go nowhere.
func quiet() Options { return Options{Logger: slog.New(slog.DiscardHandler)} }

func script(t *testing.T, body string) []string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "agent.sh")
	require.NoError(t, os.WriteFile(path, []byte(body), 0o755))
	return []string{"sh", path}
}

func TestCommandGetsTheMessageAndItsOutputIsTheReply(t *testing.T) {
	var logs safebuf.Buffer
	c, err := NewCommand(script(t, `
printf 'body=%s\n' "$(cat)"
echo "id=$BAND_MESSAGE_ID room=$BAND_ROOM_ID sender=$BAND_SENDER_ID attempt=$BAND_ATTEMPT key=$BAND_DEDUP_KEY"
echo "working on it" >&2
printf '\n\n'
`), Options{KeyTemplate: "echo:{message_id}", Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, err)
	rep, err := c.Handle(context.Background(), msg("m-1"))
	require.NoError(t, err)
	require.NotNil(t, rep)
	assert.Equal(t, "body=hello there\nid=m-1 room=room-1 sender=ada attempt=2 key=echo:m-1", rep.Content, "trailing newlines trimmed")
	assert.Equal(t, []string{"ada"}, rep.Mentions)
	assert.Equal(t, "echo:m-1", rep.DedupKey)
	assert.Contains(t, logs.String(), `msg="m-1: working on it"`, "stderr goes to the log, prefixed with the message id")
	assert.Empty(t, c.InFlight())
}

func TestCommandWithoutATemplateUsesTheDefaultKey(t *testing.T) {
	c, err := NewCommand(script(t, `echo "$BAND_DEDUP_KEY"`), quiet())
	require.NoError(t, err)
	rep, err := c.Handle(context.Background(), msg("m-2"))
	require.NoError(t, err)
	assert.Equal(t, bandonce.DefaultKey("m-2"), rep.Content)
	assert.Empty(t, rep.DedupKey, "the Shell fills in the default key")
}

func TestCommandExitStatusesAndSilence(t *testing.T) {
	cases := []struct {
		body      string
		permanent bool
		noReply   bool
	}{
		{body: "echo partial; exit 1"},
		{body: "exit 65", permanent: true},
		{body: "kill -KILL $$"},
		{body: "printf '  \\n\\n'", noReply: true},
		{body: "printf '\\357\\273\\277\\n'", noReply: true}, // a byte-order mark alone, as .NET tools print
		{body: "true", noReply: true},
	}
	for _, tc := range cases {
		c, err := NewCommand(script(t, tc.body), quiet())
		require.NoError(t, err)
		rep, err := c.Handle(context.Background(), msg("m"))
		if tc.noReply {
			assert.NoError(t, err, tc.body)
			assert.Nil(t, rep, tc.body)
			continue
		}
		require.Error(t, err, tc.body)
		assert.Nil(t, rep, tc.body)
		var perm *bandonce.PermanentError
		assert.Equal(t, tc.permanent, errors.As(err, &perm), "%s: %v", tc.body, err)
	}
}

func TestNewCommandRefusesWhatCannotWork(t *testing.T) {
	_, err := NewCommand([]string{"/nonexistent/agent"}, Options{})
	assert.Error(t, err)
	_, err = NewCommand([]string{"true"}, Options{KeyTemplate: "x:{msg}"})
	assert.ErrorContains(t, err, "unknown placeholder")
	_, err = NewCommand([]string{"true"}, Options{KeyTemplate: " x:{message_id}"})
	assert.ErrorContains(t, err, "leading or trailing space")
	// Without the message's id every message of a room shares one key,
	// and all but the first would be taken for answered.
	for _, tmpl := range []string{"echo:{room_id}", "echo:{sender_id}", "echo"} {
		_, err = NewCommand([]string{"true"}, Options{KeyTemplate: tmpl})
		assert.ErrorContains(t, err, "{message_id}", tmpl)
	}
	// Checked with ids as long as Band's, not one letter.
	_, err = NewCommand([]string{"true"}, Options{KeyTemplate: strings.Repeat("k", 240) + ":{message_id}"})
	assert.ErrorContains(t, err, "longer than 256 bytes")
	_, err = NewCommand([]string{"true"}, Options{KeyTemplate: strings.Repeat("k", 200) + ":{message_id}"})
	assert.NoError(t, err)
}

// waitPids waits for a file of pids to hold n of them.
func waitPids(t *testing.T, path string, n int) []int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		data, _ := os.ReadFile(path)
		var pids []int
		for _, f := range strings.Fields(string(data)) {
			p, err := strconv.Atoi(f)
			require.NoError(t, err)
			pids = append(pids, p)
		}
		if len(pids) >= n {
			return pids
		}
		require.True(t, time.Now().Before(deadline), "the command never wrote %d pids", n)
		time.Sleep(5 * time.Millisecond)
	}
}

// A cancelled command's whole group ends: SIGTERM, then SIGKILL after the
// grace for a command that ignores it; a grandchild in the group and one
// in a session of its own go too, and nothing it printed is used.
func TestCancellationEndsTheWholeGroup(t *testing.T) {
	for _, ignoreTERM := range []bool{false, true} {
		pids := filepath.Join(t.TempDir(), "pids")
		trap := ""
		if ignoreTERM {
			trap = "trap '' TERM"
		}
		c, err := NewCommand(script(t, trap+`
echo "a reply that must never be posted"
sleep 300 & echo $! >> `+pids+`
setsid sleep 300 & echo $! >> `+pids+`
echo $$ >> `+pids+`
wait`), Options{Grace: 300 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
		require.NoError(t, err)
		ctx, cancel := context.WithCancelCause(context.Background())
		type result struct {
			rep *bandonce.Reply
			err error
		}
		done := make(chan result, 1)
		go func() {
			rep, err := c.Handle(ctx, msg("m"))
			done <- result{rep, err}
		}()
		all := waitPids(t, pids, 3)
		require.Len(t, c.InFlight(), 1)
		start := time.Now()
		cancel(bandonce.ErrInterrupted)
		r := <-done
		took := time.Since(start)
		assert.Nil(t, r.rep)
		assert.ErrorIs(t, r.err, bandonce.ErrInterrupted)
		if ignoreTERM {
			assert.GreaterOrEqual(t, took, 300*time.Millisecond, "SIGKILL only after the grace")
		}
		assert.Empty(t, procgroup.Alive(all), "ignoreTERM=%v: every process of the command is gone when Handle returns", ignoreTERM)
		assert.Empty(t, c.InFlight())
	}
}

// Two executions in one room are two registry entries: cancelling one
// ends its process only, and the other's reply comes back.
func TestExecutionsAreRegisteredPerCycleNotPerRoom(t *testing.T) {
	dir := t.TempDir()
	c, err := NewCommand(script(t, `echo $$ > `+dir+`/$BAND_MESSAGE_ID
if [ "$BAND_MESSAGE_ID" = a ]; then sleep 300; fi
echo "done $BAND_MESSAGE_ID"`), quiet())
	require.NoError(t, err)
	ctxA, cancelA := context.WithCancelCause(context.Background())
	type result struct {
		rep *bandonce.Reply
		err error
	}
	resA, resB := make(chan result, 1), make(chan result, 1)
	mA, mB := msg("a"), msg("b") // the same room
	go func() { rep, err := c.Handle(ctxA, mA); resA <- result{rep, err} }()
	pidA := waitPids(t, filepath.Join(dir, "a"), 1)
	go func() { rep, err := c.Handle(context.Background(), mB); resB <- result{rep, err} }()
	b := <-resB
	require.NoError(t, b.err)
	assert.Equal(t, "done b", b.rep.Content)
	require.Len(t, c.InFlight(), 1, "b's end removed b's entry only")
	assert.Equal(t, "a", c.InFlight()[0].Message)
	assert.NotEmpty(t, procgroup.Alive(pidA), "a still runs")
	cancelA(bandonce.ErrStopped)
	a := <-resA
	assert.ErrorIs(t, a.err, bandonce.ErrStopped)
	assert.Empty(t, procgroup.Alive(pidA))
}

// remote is a forward target that records what it is sent.
type remote struct {
	mu       sync.Mutex
	calls    []forwardRequest
	keys     []string
	cancels  []cancelRequest
	hang     bool
	status   int
	answer   string
	received chan struct{}
}

func newRemote(t *testing.T) (*remote, *httptest.Server) {
	r := &remote{status: http.StatusOK, received: make(chan struct{}, 16)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		data, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		if strings.HasSuffix(req.URL.Path, "/cancel") {
			var c cancelRequest
			_ = json.Unmarshal(data, &c)
			r.cancels = append(r.cancels, c)
			r.mu.Unlock()
			r.received <- struct{}{}
			return
		}
		var f forwardRequest
		_ = json.Unmarshal(data, &f)
		r.calls = append(r.calls, f)
		r.keys = append(r.keys, req.Header.Get(HeaderIdempotencyKey))
		hang, status, answer := r.hang, r.status, r.answer
		r.mu.Unlock()
		r.received <- struct{}{}
		if hang {
			<-req.Context().Done()
			return
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, answer)
	}))
	t.Cleanup(srv.Close)
	return r, srv
}

func TestForwardPostsTheMessageAndItsAnswerIsTheReply(t *testing.T) {
	r, srv := newRemote(t)
	r.answer = `{"reply": "echo: hello there\n"}`
	opts := quiet()
	opts.KeyTemplate = "fw:{message_id}"
	f, err := NewForward(srv.URL+"/agent", ForwardOptions{Options: opts})
	require.NoError(t, err)
	assert.Equal(t, srv.URL+"/agent/cancel", f.CancelURL())
	rep, err := f.Handle(context.Background(), msg("m-1"))
	require.NoError(t, err)
	assert.Equal(t, "echo: hello there", rep.Content)
	assert.Equal(t, "fw:m-1", rep.DedupKey)
	require.Len(t, r.calls, 1)
	assert.Equal(t, "fw:m-1", r.keys[0], "Idempotency-Key is the dedup key")
	assert.Equal(t, "hello there", r.calls[0].Message.Body)
	assert.Equal(t, 2, r.calls[0].Attempt)
	assert.True(t, strings.HasPrefix(r.calls[0].ExecutionID, "exe_"))

	r.answer = `{"reply": ""}`
	rep, err = f.Handle(context.Background(), msg("m-2"))
	require.NoError(t, err)
	assert.Nil(t, rep)

	r.status, r.answer = http.StatusUnprocessableEntity, `{"error": "no"}`
	_, err = f.Handle(context.Background(), msg("m-3"))
	var perm *bandonce.PermanentError
	assert.ErrorAs(t, err, &perm)

	r.status = http.StatusBadGateway
	_, err = f.Handle(context.Background(), msg("m-4"))
	require.Error(t, err)
	assert.False(t, errors.As(err, &perm), "a 502 is retried")
	assert.Empty(t, r.cancels, "nothing was cancelled")
}

func TestForwardCancelsTheRemoteExecution(t *testing.T) {
	r, srv := newRemote(t)
	r.hang = true
	f, err := NewForward(srv.URL+"/agent", ForwardOptions{Options: quiet()})
	require.NoError(t, err)
	ctx, cancel := context.WithCancelCause(context.Background())
	errc := make(chan error, 1)
	go func() { _, err := f.Handle(ctx, msg("m-1")); errc <- err }()
	<-r.received
	inflight := f.InFlight()
	require.Len(t, inflight, 1)
	cancel(bandonce.ErrInterrupted)
	assert.ErrorIs(t, <-errc, bandonce.ErrInterrupted)
	f.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	require.Len(t, r.cancels, 1)
	assert.Equal(t, cancelRequest{ExecutionID: inflight[0].ID, MessageID: "m-1", RoomID: "room-1", Reason: "interrupted"}, r.cancels[0])
	assert.Empty(t, f.InFlight(), "the entry goes once the remote was told")
}

// A command that answers and exits leaves nothing behind, not even a
// process in a session of its own, which no signal to its group reaches.
func TestACommandThatExitsLeavesNothingBehind(t *testing.T) {
	pids := filepath.Join(t.TempDir(), "pids")
	c, err := NewCommand(script(t, `setsid sleep 300 & echo $! > `+pids+`
sleep 0.3
echo answered`), quiet())
	require.NoError(t, err)
	rep, err := c.Handle(context.Background(), msg("m"))
	require.NoError(t, err)
	assert.Equal(t, "answered", rep.Content)
	assert.Empty(t, procgroup.Alive(waitPids(t, pids, 1)))
}
