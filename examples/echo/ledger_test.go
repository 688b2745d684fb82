package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
)

func TestAnUnknownLedgerIsAClearError(t *testing.T) {
	env := map[string]string{"BAND_API_KEY": "k", "BAND_BASE_URL": "http://127.0.0.1:1/api/v1", "BANDONCE_LEDGER": "sqlite:/tmp/x"}
	err := run(context.Background(), func(k string) string { return env[k] }, io.Discard, slog.New(slog.DiscardHandler), false)
	require.Error(t, err)
	assert.Equal(t, `BANDONCE_LEDGER="sqlite:/tmp/x" is neither bolt:PATH nor a postgres:// URL`, err.Error())

	// Band unreachable: the agent's id is asked, and asked again, until
	// the context ends.
	env["BANDONCE_LEDGER"] = "postgres://127.0.0.1:1/x"
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second) // ample for a refused loopback connection, on a loaded machine too
	defer cancel()
	err = run(ctx, func(k string) string { return env[k] }, io.Discard, slog.New(slog.DiscardHandler), true)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "GET /agent/me")
	assert.Contains(t, err.Error(), "connection refused")
}

// whoAmI asks Band for the agent's id: it retries a server in trouble,
// stops at a rejected key, and never follows a redirect with the key.
func TestWhoAmI(t *testing.T) {
	var calls atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the redirect was followed, with X-API-Key %q", r.Header.Get("X-API-Key"))
	}))
	defer elsewhere.Close()
	band := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		switch key := r.Header.Get("X-API-Key"); {
		case r.URL.Path != "/api/v1/agent/me":
			http.NotFound(w, r)
		case key == "moved":
			http.Redirect(w, r, elsewhere.URL+"/steal", http.StatusFound)
		case key != "good":
			http.Error(w, `{"error":{"code":"unauthorized"}}`, http.StatusUnauthorized)
		case n == 1:
			http.Error(w, "try later", http.StatusServiceUnavailable)
		default:
			fmt.Fprint(w, `{"data":{"id":"agent-42","name":"echo"}}`)
		}
	}))
	defer band.Close()
	ask := func(key string) (string, error) {
		return whoAmI(context.Background(), bandonce.Config{APIKey: key, BaseURL: band.URL + "/api/v1/"}, slog.New(slog.DiscardHandler))
	}

	id, err := ask("good")
	require.NoError(t, err)
	assert.Equal(t, "agent-42", id)
	assert.Equal(t, int32(2), calls.Load(), "the 503 was retried")

	_, err = ask("bad")
	require.ErrorContains(t, err, "the API key in BAND_API_KEY was rejected by Band (GET /agent/me: 401 Unauthorized)")
	_, err = ask("moved")
	require.ErrorContains(t, err, "GET /agent/me: 302 Found")
}

// With BANDONCE_LEDGER=bolt:PATH the agent keeps its ledger in that file:
// it answers, and a second process of the same agent on the same file is
// refused while the first holds it.
func TestEchoProcessWithABoltLedger(t *testing.T) {
	bin, band, base := agentWorld(t, 9)
	agent, ada := band.AddAgent("echo"), band.AddHuman("ada")
	room := band.AddRoom("ops", ada, agent.ID)
	path := filepath.Join(t.TempDir(), "echo.ledger")
	env := []string{"BAND_API_KEY=" + agent.Key, "BAND_BASE_URL=" + base, "BANDONCE_LEDGER=bolt:" + path}
	p := startAgent(t, bin, env...)
	var ids []string
	for i := range 3 {
		id, err := band.Say(room.ID, ada.ID, fmt.Sprint("ping ", i), agent.ID)
		require.NoError(t, err)
		ids = append(ids, id)
	}
	eventually(t, "every message echoed", func() bool {
		for _, id := range ids {
			if band.Status(agent.ID, id) != "processed" {
				return false
			}
		}
		return true
	})

	second := startAgent(t, bin, env...)
	require.Error(t, <-second.done)
	assert.Contains(t, second.stderr.String(), "is in use by another process")

	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, <-p.done, "stderr: %s", p.stderr.String())
	assert.FileExists(t, path)
	for i, id := range ids {
		assert.Equal(t, 1, repliesTo(band, room.ID, agent.ID, id), "message %d echoed once", i)
	}
}

// With BAND_AGENT_ID given, the ledger is named without asking Band (the
// shell checks the id at start); without it, asking Band is bounded by
// the shell's start-up budget. The budget is long enough for a loaded
// machine to see a refused connection before it runs out.
func TestWhoAmIUsesTheGivenIDAndTheStartBudget(t *testing.T) {
	id, err := whoAmI(context.Background(), bandonce.Config{AgentID: "agent-7", BaseURL: "http://127.0.0.1:1/api/v1"}, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	assert.Equal(t, "agent-7", id)

	began := time.Now()
	_, err = whoAmI(context.Background(), bandonce.Config{APIKey: "k", BaseURL: "http://127.0.0.1:1/api/v1", StartTimeout: 2 * time.Second}, slog.New(slog.DiscardHandler))
	require.ErrorIs(t, err, context.DeadlineExceeded, "gave up when the start-up budget ran out")
	assert.Contains(t, err.Error(), "connection refused")
	t.Logf("gave up after %s", time.Since(began).Round(time.Millisecond))
}

// A server answering GET /agent/me without end (64 MiB, then nothing) does
// not make echo read it whole: it reads 1 MiB, says so, and exits.
func TestEchoProcessBoundsTheAnswerThatNamesItsLedger(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the agent as a process")
	}
	bin := buildEcho(t)
	var written atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"data":{"id":"`)
		chunk := bytes.Repeat([]byte("a"), 64<<10)
		for range 1024 { // 64 MiB
			n, err := w.Write(chunk)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
		<-r.Context().Done()
	}))
	defer srv.Close()
	p := runExactly(t, bin, []string{"BAND_API_KEY=" + canaryKey, "BAND_BASE_URL=" + srv.URL + "/api/v1",
		"BANDONCE_LEDGER=bolt:" + filepath.Join(t.TempDir(), "l.db"), "BANDONCE_START_TIMEOUT=30s"})
	var err error
	select {
	case err = <-p.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("still running; stderr:\n%.2000s", p.stderr.String())
	}
	require.Error(t, err)
	assert.Contains(t, p.stderr.String(), "GET /agent/me: the answer is over 1048576 bytes")
	assert.Less(t, written.Load(), int64(32<<20), "echo stopped reading long before the end")
}
