package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce/fakeband"
	"github.com/band-once/bandonce/internal/safebuf"
)

// buildTools compiles this command into dir.
func buildTools(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "tools")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, string(out))
	return bin
}

// killProxy stands between the agent process and the two servers it
// calls, the fake Band and the payment API, and numbers the requests of
// one message's turn (from its processing mark to its processed mark). At
// request at it SIGKILLs the agent: before forwarding it, or after the
// server applied it and before the agent reads the answer.
type killProxy struct {
	band, payments *httputil.ReverseProxy
	room, msg      string
	at             int
	after          bool

	mu       sync.Mutex
	counting bool
	n        int
	turn     []string // the turn's requests, in order
	kill     func()
	killed   bool
}

func newKillProxy(bandBase, paymentsBase, room, msg string, at int, after bool) *killProxy {
	b, _ := url.Parse(bandBase)
	b.Path = "" // the agent's paths carry the API prefix
	p, _ := url.Parse(paymentsBase)
	return &killProxy{band: reverse(b), payments: reverse(p), msg: msg, room: room, at: at, after: after}
}

// reverse proxies to target, whose path the request's path continues.
func reverse(target *url.URL) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.URL.Path = strings.TrimRight(target.Path, "/") + r.In.URL.Path
			r.Out.URL.RawPath = ""
		},
		// A request cut off by the kill is expected, not news.
		ErrorLog: log.New(io.Discard, "", 0),
	}
}

func (k *killProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	next := http.Handler(k.band)
	ours := false // a request of the turn's room or to the payment API
	if p, ok := strings.CutPrefix(r.URL.Path, "/pay"); ok {
		r.URL.Path, next, ours = p, k.payments, true
	} else {
		r.URL.Path = strings.TrimPrefix(r.URL.Path, "/band")
		ours = strings.Contains(r.URL.Path, "/chats/"+k.room+"/") || strings.Contains(r.URL.Path, "/agent/memories")
	}
	k.mu.Lock()
	if !k.killed && !k.counting && r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/messages/"+k.msg+"/processing") {
		k.counting = true
	}
	hit := false
	if k.counting && ours {
		k.n++
		k.turn = append(k.turn, r.Method+" "+shortPath(r.URL.Path))
		hit = k.n == k.at
		if strings.HasSuffix(r.URL.Path, "/messages/"+k.msg+"/processed") {
			k.counting = false
		}
	}
	if hit {
		k.counting, k.killed = false, true
	}
	kill := k.kill
	k.mu.Unlock()
	if hit && !k.after {
		kill()
		http.Error(w, "the agent is dead", http.StatusBadGateway)
		return
	}
	if !hit {
		next.ServeHTTP(w, r)
		return
	}
	rec := httptest.NewRecorder()
	next.ServeHTTP(rec, r) // the server applies it...
	kill()                 // ...and the agent dies before it reads the answer
	w.WriteHeader(http.StatusBadGateway)
}

func shortPath(p string) string {
	parts := strings.Split(strings.Trim(p, "/"), "/")
	for i, s := range parts {
		if len(s) == 36 {
			parts[i] = "{id}"
		}
	}
	return strings.Join(parts, "/")
}

func (k *killProxy) requests() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.turn...)
}

// agentProc is the tools agent running as a separate process.
type agentProc struct {
	cmd            *exec.Cmd
	stdout, stderr safebuf.Buffer
	done           chan struct{} // closed once the process has exited
	err            error         // Wait's answer, once done is closed
}

func startAgent(t *testing.T, bin string, env []string) *agentProc {
	t.Helper()
	p := &agentProc{done: make(chan struct{})}
	p.cmd = exec.Command(bin)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	require.NoError(t, p.cmd.Start())
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(p.sigkill)
	return p
}

func (p *agentProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// sigkill kills the process, unless it already exited, and waits for it.
func (p *agentProc) sigkill() {
	if !p.exited() {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
	}
	<-p.done
}

// stop sends SIGTERM and returns how the process exited.
func (p *agentProc) stop() error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	<-p.done
	return p.err
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// turnRun is one refund request served by the agent process, killed at
// request at of its turn (never, for at 0), then restarted.
type turnRun struct {
	band     *fakeband.Band
	agent    fakeband.Agent
	room     fakeband.Room
	msg      string
	payments *PaymentsServer
	proxy    *killProxy
}

func runTurn(t *testing.T, bin string, at int, after bool, ledger string) *turnRun {
	t.Helper()
	fb := fakeband.New(fakeband.Options{Seed: 11})
	t.Cleanup(func() { _ = fb.Close() })
	base, err := fb.Listen("127.0.0.1:0")
	require.NoError(t, err)
	agent := fb.AddAgent("refunds")
	ada, bea := fb.AddHuman("ada"), fb.AddHuman("bea")
	room := fb.AddRoom("support", ada, agent.ID, bea.ID)
	payments := NewPaymentsServer()
	api := httptest.NewServer(payments)
	t.Cleanup(api.Close)
	msg, err := fb.Say(room.ID, ada.ID, "please refund order-17", agent.ID)
	require.NoError(t, err)

	proxy := newKillProxy(base, api.URL, room.ID, msg, at, after)
	front := httptest.NewServer(proxy)
	t.Cleanup(front.Close)
	ws := strings.Replace(base, "http://", "ws://", 1) + "/socket/websocket"
	env := []string{"BAND_API_KEY=" + agent.Key, "BAND_BASE_URL=" + front.URL + "/band" + apiPath(base),
		"BAND_WS_URL=" + ws, "TOOLS_PAYMENTS_URL=" + front.URL + "/pay",
		// A restarted life waits this long before it reads the room for a
		// send the killed one may have made: short, so the kills stay quick.
		"BANDONCE_SETTLE_WINDOW=500ms"}
	if ledger != "" {
		env = append(env, "TOOLS_LEDGER="+ledger)
	}
	p := startAgent(t, bin, env)
	proxy.mu.Lock()
	proxy.kill = p.sigkill
	proxy.mu.Unlock()
	if at > 0 {
		eventually(t, "the kill", p.exited)
		p = startAgent(t, bin, env) // the restart
	}
	eventually(t, "the agent serving", func() bool { return strings.Contains(p.stdout.String(), "tools: serving") })
	eventually(t, "the message processed", func() bool { return fb.Status(agent.ID, msg) == fakeband.StatusProcessed })
	require.NoError(t, p.stop(), "SIGTERM exits 0; stderr: %s", p.stderr.String())
	assert.Empty(t, p.stderr.String(), "nothing on stderr unless asked")
	return &turnRun{band: fb, agent: agent, room: room, msg: msg, payments: payments, proxy: proxy}
}

func apiPath(base string) string {
	u, _ := url.Parse(base)
	return u.Path
}

// check asserts that every effect of the turn happened once.
func (r *turnRun) check(t *testing.T) {
	t.Helper()
	keys := map[string]int{}
	for _, p := range r.band.Posts(r.room.ID) {
		if p.SenderID != r.agent.ID {
			continue
		}
		lines := strings.Split(p.Content, "\n")
		keys[lines[len(lines)-1]]++
	}
	prefix := "msg:" + r.msg
	assert.Equal(t, map[string]int{"[dedup_key:" + prefix + ":send:1]": 1, "[dedup_key:" + prefix + "]": 1}, keys, "the question and the reply, once each")
	events := map[string]int{}
	for _, e := range r.band.ChatEvents(r.room.ID) {
		var meta map[string]any
		require.NoError(t, json.Unmarshal(e.Metadata, &meta))
		events[fmt.Sprintf("%s %v", e.MessageType, meta["dedup_key"])]++
	}
	assert.Equal(t, map[string]int{
		"thought " + prefix + ":event:1":     1,
		"tool_call " + prefix + ":event:2":   1,
		"tool_result " + prefix + ":event:3": 1,
	}, events, "each event once")
	tasks := r.band.Tasks(r.room.ID)
	require.Len(t, tasks, 1, "one task on the board")
	assert.True(t, strings.HasSuffix(tasks[0].Detail, "[dedup_key:"+prefix+":task:1]"), tasks[0].Detail)
	require.Len(t, tasks[0].Comments, 1, "one comment on it")
	assert.True(t, strings.HasSuffix(tasks[0].Comments[0].Text, "[dedup_key:"+prefix+":comment:1]"), tasks[0].Comments[0].Text)
	assert.Equal(t, []fakeband.TaskAssignment{{AssigneeID: r.agent.ID, Status: "completed", ActiveForm: "refunding order-17"}}, tasks[0].Assignments)
	memories := r.band.Memories()
	require.Len(t, memories, 1, "one memory")
	var meta map[string]any
	require.NoError(t, json.Unmarshal(memories[0].Metadata, &meta))
	assert.Equal(t, prefix+":memory:1", meta["dedup_key"])
	assert.Equal(t, map[string]int{"order-17": 1}, r.payments.Refunds(), "one refund")
	assert.Len(t, r.payments.Calls(), 1, "one idempotency key at every delivery")
}

// The agent as users run it: a separate process, SIGKILLed at every
// request boundary of one turn in turn (before the request and after Band
// or the payment API applied it), restarted each time. Every send and
// event of the turn is in the fake's truth once, and the payment API saw
// one idempotency key and refunded once.
func TestToolsProcessSurvivesSIGKILLAtEveryRequestOfATurn(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the agent as a process, dozens of times")
	}
	bin := buildTools(t)
	dry := runTurn(t, bin, 0, false, "")
	dry.check(t)
	turn := dry.proxy.requests()
	t.Logf("the turn's requests: %s", strings.Join(turn, ", "))
	require.GreaterOrEqual(t, len(turn), 13, "processing, the task, its status, 3 events, the refund, the task's completion, the memory, participants, the question, the reply, processed")
	for _, ledger := range []string{"memory", "bolt"} {
		for at := 1; at <= len(turn); at++ {
			for _, after := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s ledger, kill at %d (%s), after=%v", ledger, at, turn[at-1], after), func(t *testing.T) {
					path := ""
					if ledger == "bolt" {
						path = filepath.Join(t.TempDir(), "agent.ledger")
					}
					r := runTurn(t, bin, at, after, path)
					r.proxy.mu.Lock()
					killed, seen := r.proxy.killed, r.proxy.n
					r.proxy.mu.Unlock()
					require.True(t, killed, "the agent was killed at the turn's request %d", at)
					require.Equal(t, at, seen, "the kill came at the turn's request %d", at)
					r.check(t)
					t.Logf("room reads after the restart: %d", r.band.Requests()[fakeband.EndpointContext])
					if ledger == "bolt" && !(after && strings.Contains(turn[at-1], "refunds")) {
						// Only a kill between the refund and its record
						// makes the step call the API again.
						for key, n := range r.payments.Calls() {
							assert.Equal(t, 1, n, "the journal kept the step from running again (%s)", key)
						}
					}
				})
			}
		}
	}
}

// -fake plays the scripted request and prints the room.
func TestFakeModePrintsTheTurn(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, runFake(t.Context(), &out, slog.New(slog.DiscardHandler))) // nil would be slog.Default()
	text := out.String()
	for _, want := range []string{"[thought]", "[tool_call] refund(order-17)", "[tool_result] refunded order-17", "Could you confirm refund", "Refunded order-17", "payments: order-17 refunded 1 time(s)",
		"board:   #1 Refund order-17 [completed]", "refunds: Refunded order-17, receipt", "memory:  about ada: Asked for a refund of order-17"} {
		assert.Contains(t, text, want)
	}
}
