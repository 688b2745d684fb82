// Package killtest is the machinery of the examples' process tests: it
// builds an agent's command, runs it as a separate process, and stands a
// proxy between it and the servers it calls (the fake Band, a payment
// API, a model API) that SIGKILLs it at the n-th request of one message's
// turn, before forwarding the request or after the server applied it.
package killtest

import (
	"context"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/band-once/bandonce/internal/safebuf"
)

// Build compiles the command in the current directory into a temporary
// one and returns the binary's path.
func Build(t testing.TB, name string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), name)
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// Upstream is one server behind the proxy: requests whose path starts
// with Prefix go to Target, the rest of the path continuing Target's.
type Upstream struct {
	Prefix string
	Target string
	// Counted says whether a request (its path, Prefix cut) belongs to
	// the turn: only those are numbered and may be killed at.
	Counted func(method, path string) bool
}

// Proxy numbers the counted requests of one message's turn, from its
// processing mark to its processed mark, and at request At SIGKILLs the
// agent: before forwarding it, or (After) once the server applied it and
// before the agent reads the answer. At 0 kills nowhere.
type Proxy struct {
	msg   string
	at    int
	after bool
	ups   []upstream

	mu       sync.Mutex
	counting bool
	n        int
	turn     []string
	kill     func()
	killed   bool
}

type upstream struct {
	Upstream
	proxy *httputil.ReverseProxy
}

// NewProxy returns a proxy for message msg's turn.
func NewProxy(msg string, at int, after bool, ups ...Upstream) *Proxy {
	p := &Proxy{msg: msg, at: at, after: after}
	for _, u := range ups {
		target, err := url.Parse(u.Target)
		if err != nil {
			panic("killtest: upstream " + u.Prefix + ": " + err.Error())
		}
		p.ups = append(p.ups, upstream{u, reverse(target)})
	}
	return p
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

// Front stands a proxy for message msg's turn (see NewProxy) in front of
// a fake Band listening at base (its REST root, as fakeband's Listen
// returns it), under /band, where counted says which of Band's requests
// belong to the turn, and of the other upstreams. It returns the proxy,
// its root URL (the other upstreams are under it at their prefix) and the
// environment that points the agent at it: BAND_API_KEY (key),
// BAND_BASE_URL through the proxy, BAND_WS_URL straight to the fake (the
// socket is not counted), and a short BANDONCE_SETTLE_WINDOW, the wait
// of a restarted life before it reads the room for a send the killed one
// may have made, so the kills stay quick.
func Front(t testing.TB, base, key, msg string, at int, after bool, counted func(method, path string) bool, others ...Upstream) (proxy *Proxy, root string, env []string) {
	t.Helper()
	host, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	apiPath := host.Path
	host.Path = "" // the agent's paths carry the API prefix
	proxy = NewProxy(msg, at, after, append([]Upstream{{Prefix: "/band", Target: host.String(), Counted: counted}}, others...)...)
	front := httptest.NewServer(proxy)
	t.Cleanup(front.Close)
	env = []string{"BAND_API_KEY=" + key, "BAND_BASE_URL=" + front.URL + "/band" + apiPath,
		"BAND_WS_URL=" + strings.Replace(base, "http://", "ws://", 1) + "/socket/websocket",
		"BANDONCE_SETTLE_WINDOW=500ms"}
	return proxy, front.URL, env
}

// SetKill sets what the proxy calls to kill the agent.
func (p *Proxy) SetKill(kill func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.kill = kill
}

// Requests returns the turn's counted requests, in order, as
// "METHOD path" with ids shortened to {id}.
func (p *Proxy) Requests() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.turn...)
}

// Killed reports whether the proxy killed the agent, and how many of the
// turn's requests it had counted by then.
func (p *Proxy) Killed() (killed bool, counted int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.killed, p.n
}

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var up *upstream
	for i := range p.ups {
		if rest, ok := strings.CutPrefix(r.URL.Path, p.ups[i].Prefix); ok {
			up, r.URL.Path = &p.ups[i], rest
			break
		}
	}
	if up == nil {
		http.NotFound(w, r)
		return
	}
	ours := up.Counted == nil || up.Counted(r.Method, r.URL.Path)
	p.mu.Lock()
	if !p.killed && !p.counting && r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/messages/"+p.msg+"/processing") {
		p.counting = true
	}
	hit := false
	if p.counting && ours {
		p.n++
		p.turn = append(p.turn, r.Method+" "+ShortPath(r.URL.Path))
		hit = p.n == p.at
		if strings.HasSuffix(r.URL.Path, "/messages/"+p.msg+"/processed") {
			p.counting = false
		}
	}
	if hit {
		p.counting, p.killed = false, true
	}
	kill := p.kill
	p.mu.Unlock()
	switch {
	case !hit:
		up.proxy.ServeHTTP(w, r)
	case !p.after:
		kill()
		http.Error(w, "the agent is dead", http.StatusBadGateway)
	default:
		rec := httptest.NewRecorder()
		up.proxy.ServeHTTP(rec, r) // the server applies it...
		kill()                     // ...and the agent dies before it reads the answer
		w.WriteHeader(http.StatusBadGateway)
	}
}

// ShortPath is p with every UUID replaced by {id}.
func ShortPath(p string) string {
	parts := strings.Split(strings.Trim(p, "/"), "/")
	for i, s := range parts {
		if len(s) == 36 {
			parts[i] = "{id}"
		}
	}
	return strings.Join(parts, "/")
}

// Proc is an agent running as a separate process.
type Proc struct {
	cmd            *exec.Cmd
	Stdout, Stderr safebuf.Buffer
	done           chan struct{} // closed once the process has exited
	err            error         // Wait's answer, once done is closed
}

// Start starts bin with the test's environment and env, SIGKILLed at the
// test's cleanup if it still runs.
func Start(t testing.TB, bin string, env []string) *Proc {
	t.Helper()
	p := &Proc{done: make(chan struct{})}
	p.cmd = exec.Command(bin)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = &p.Stdout, &p.Stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(p.Kill)
	return p
}

// Exited reports whether the process has exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Kill SIGKILLs the process, unless it already exited, and waits for it.
func (p *Proc) Kill() {
	if !p.Exited() {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
	}
	<-p.done
}

// Stop sends SIGTERM and returns how the process exited.
func (p *Proc) Stop() error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	<-p.done
	return p.err
}

// Eventually waits for cond, failing the test after a minute.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Serve runs the agent bin with env behind proxy until processed says
// the turn is done: a first life, which the proxy kills at its request
// (when it is set to), then a restart. ready is what the agent prints on
// stdout once it serves. The last life is stopped with SIGTERM, which
// must exit 0 with nothing on stderr but a starved lease's warnings.
// Serve returns how many times the lives printed ready: one shell per
// life, and more when a life lost its ledger's lease (a starved renewal
// on a busy machine) and led again.
func Serve(t testing.TB, bin string, env []string, proxy *Proxy, ready string, processed func() bool) (shells int) {
	t.Helper()
	p := Start(t, bin, env)
	proxy.SetKill(p.Kill)
	if proxy.at > 0 {
		Eventually(t, "the kill", p.Exited)
		shells = strings.Count(p.Stdout.String(), ready)
		p = Start(t, bin, env) // the restart
	}
	Eventually(t, "the agent serving", func() bool { return strings.Contains(p.Stdout.String(), ready) })
	Eventually(t, "the message processed", processed)
	if err := p.Stop(); err != nil {
		t.Fatalf("SIGTERM exits %v, want 0; stderr: %s", err, p.Stderr.String())
	}
	if s := alarming(p.Stderr.String()); s != "" {
		t.Errorf("nothing on stderr but warnings of a starved lease; got %s", s)
	}
	return shells + strings.Count(p.Stdout.String(), ready)
}

// alarming is what stderr holds but the lease's warnings: on a busy
// machine a life may miss a renewal, say so, and lead again, which is
// what the agent should say then, and what Serve's count of shells
// allows for. A ledger call that missed its timeout, or that the lost
// lease refused, is said too (starvedLedger).
func alarming(stderr string) string {
	var out []string
	for line := range strings.Lines(stderr) {
		if !strings.Contains(line, "pgledger: lease") && !starvedLedger.MatchString(line) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "")
}

// starvedLedger matches a line whose error is the ledger's failing as a
// starved machine makes it fail: a call past its timeout (a ledger call,
// a campaign, a release, an open), or a write or send refused under a
// lease that ran out meanwhile (or a handler that failed on one and will
// be retried).
var starvedLedger = regexp.MustCompile(`pgledger: .*(refused under lease|context deadline exceeded)`)

// PostgresEnv names the variable pointing the tests at a PostgreSQL.
const PostgresEnv = "BANDONCE_TEST_POSTGRES"

// FreshDatabase creates a database of the test's own on the PostgreSQL
// that PostgresEnv names, dropped at cleanup, and returns its URL (the
// fake's ids repeat from run to run, so a ledger left by an earlier run
// must not be seen). It skips the test when PostgresEnv is not set.
func FreshDatabase(t testing.TB, prefix string) string {
	t.Helper()
	dsn := os.Getenv(PostgresEnv)
	if dsn == "" {
		t.Skip(PostgresEnv + " is not set: this test needs a PostgreSQL server")
	}
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("%s_%08x", prefix, rand.Uint32())
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := admin.Exec(ctx, "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
			t.Error(err)
		}
		_ = admin.Close(ctx)
	})
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}
