package main

import (
	"bytes"
	"context"
	"encoding/json"
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
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce/internal/safebuf"
)

// postgresEnv names the variable pointing the tests at a PostgreSQL; .ci/run
// starts one and sets it.
const postgresEnv = "BANDONCE_TEST_POSTGRES"

// testLease is the lease the replicas run with: short, so that twenty
// failovers fit in a test, but not so short that a loaded machine's
// PostgreSQL misses the ledger's call timeout (half the lease) and the
// replica rightly warns of it: at 1.5 s one did. BANDONCE_TEST_LEASE_TIME
// overrides it (10s to measure the default's failover).
func testLease(t *testing.T) time.Duration {
	t.Helper()
	d, err := parseDuration("BANDONCE_TEST_LEASE_TIME", os.Getenv("BANDONCE_TEST_LEASE_TIME"))
	require.NoError(t, err)
	if d == 0 {
		return 3 * time.Second
	}
	return d
}

// freshDatabase creates a database of the test's own on the test server,
// dropped at cleanup, and returns its URL: fakeband's ids repeat from run
// to run, so a ledger left by an earlier run must not be seen.
func freshDatabase(t *testing.T) string {
	t.Helper()
	dsn := os.Getenv(postgresEnv)
	if dsn == "" {
		t.Skip(postgresEnv + " is not set: this test needs a PostgreSQL server (.ci/run starts one; .ci/postgres start DIR prints a DSN)")
	}
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	name := fmt.Sprintf("echo_failover_%08x", rand.Uint32())
	_, err = admin.Exec(ctx, "CREATE DATABASE "+name)
	require.NoError(t, err)
	t.Cleanup(func() {
		_, err := admin.Exec(ctx, "DROP DATABASE "+name+" WITH (FORCE)")
		assert.NoError(t, err)
		_ = admin.Close(ctx)
	})
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	u.Path = "/" + name
	return u.String()
}

// fakebandServer is cmd/fakeband run as a process, as users run it.
type fakebandServer struct {
	env   map[string]string // the export lines it printed
	admin string            // its admin API root
}

func startFakebandServer(t *testing.T) *fakebandServer {
	t.Helper()
	bin := buildFakeband(t)
	cmd := exec.Command(bin, "-addr", "127.0.0.1:0")
	var stdout, stderr safebuf.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-done
		// fakeband logs its serving and stopped records there (cmdlog),
		// and nothing at Warn or above unless something went wrong.
		for line := range strings.Lines(stderr.String()) {
			assert.Contains(t, line, " level=INFO ", "fakeband's stderr")
		}
	})
	eventually(t, "fakeband to say it is ready", func() bool { return strings.Contains(stdout.String(), "fakeband: ready") })
	f := &fakebandServer{env: map[string]string{}}
	for _, line := range strings.Split(stdout.String(), "\n") {
		if k, v, ok := strings.Cut(strings.TrimPrefix(line, "export "), "="); ok && strings.HasPrefix(line, "export ") {
			f.env[k] = v
		}
	}
	for _, k := range []string{"BAND_API_KEY", "BAND_BASE_URL", "BAND_WS_URL", "FAKEBAND_URL"} {
		require.NotEmpty(t, f.env[k], "fakeband printed %s", k)
	}
	f.admin = f.env["FAKEBAND_URL"] + "/_admin"
	return f
}

// say posts a message from the room's owner, mentioning the agent, and
// returns its id.
func (f *fakebandServer) say(t *testing.T, text string) string {
	t.Helper()
	body, err := json.Marshal(map[string]string{"room": "demo", "text": text})
	require.NoError(t, err)
	res, err := http.Post(f.admin+"/say", "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	defer res.Body.Close()
	var said struct{ Data struct{ ID string } }
	require.NoError(t, json.NewDecoder(res.Body).Decode(&said))
	require.NotEmpty(t, said.Data.ID)
	return said.Data.ID
}

// fakeTruth is the part of the admin API's ground truth these tests read.
type fakeTruth struct {
	Rooms []struct {
		Posts []struct {
			SenderType string `json:"sender_type"`
			Content    string
		}
	}
	Deliveries []struct {
		MessageID string `json:"message_id"`
		Status    string
	}
}

func (f *fakebandServer) truth(t *testing.T) fakeTruth {
	t.Helper()
	res, err := http.Get(f.admin + "/truth")
	require.NoError(t, err)
	defer res.Body.Close()
	var tr struct{ Data fakeTruth }
	require.NoError(t, json.NewDecoder(res.Body).Decode(&tr))
	return tr.Data
}

// processed counts the messages Band holds as processed.
func (tr fakeTruth) processed(ids []string) int {
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	n := 0
	for _, d := range tr.Deliveries {
		if want[d.MessageID] && d.Status == "processed" {
			n++
		}
	}
	return n
}

// requireEveryMessageEchoedOnce checks the ground truth: every message
// processed, with exactly one echo, and no other agent post.
func (tr fakeTruth) requireEveryMessageEchoedOnce(t *testing.T, ids []string) {
	t.Helper()
	echoes := map[string]int{}
	agentPosts := 0
	for _, r := range tr.Rooms {
		for _, p := range r.Posts {
			if p.SenderType != "Agent" {
				continue
			}
			agentPosts++
			if _, key, ok := strings.Cut(p.Content, "[dedup_key:echo:"); ok {
				echoes[strings.TrimSuffix(key, "]")]++
			}
		}
	}
	for i, id := range ids {
		assert.Equal(t, 1, echoes[id], "message %d (%s) echoed exactly once", i, id)
	}
	assert.Equal(t, len(ids), tr.processed(ids), "every message processed")
	assert.Equal(t, len(ids), agentPosts, "one agent post per message, no more")
}

// tap is a recording reverse proxy in front of the fake for one replica
// slot: every request a replica in the slot sends passes here, stamped
// with the time it arrived, and a kill can be armed to SIGKILL the
// replica at its nth request, before the request reaches Band or after
// Band applied it and before the answer gets back.
type tap struct {
	srv       *httptest.Server
	transport *http.Transport

	mu    sync.Mutex
	proc  *exec.Cmd // the replica now in the slot
	reqs  []tapped
	armed *killPoint
}

type tapped struct {
	at           time.Time
	proc         *exec.Cmd
	method, path string
}

// killPoint kills the slot's replica at its nth request from now.
type killPoint struct {
	nth   int
	after bool // after Band answered, before the replica reads it
	seen  int
	fired chan struct{}
}

type tapKey struct{}

func newTap(t *testing.T, target string) *tap {
	t.Helper()
	u, err := url.Parse(target)
	require.NoError(t, err)
	tp := &tap{transport: &http.Transport{}}
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: u.Scheme, Host: u.Host})
	rp.Transport = tp.transport
	rp.ErrorLog = log.New(io.Discard, "", 0) // a killed replica's broken connections are expected
	rp.ModifyResponse = func(res *http.Response) error {
		if kp, _ := res.Request.Context().Value(tapKey{}).(*killPoint); kp != nil {
			tp.kill(kp) // Band applied it; the answer dies with the replica
		}
		return nil
	}
	tp.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tp.mu.Lock()
		tp.reqs = append(tp.reqs, tapped{at: time.Now(), proc: tp.proc, method: r.Method, path: r.URL.Path})
		kp := tp.armed
		if kp != nil {
			if kp.seen++; kp.seen == kp.nth {
				tp.armed = nil
			} else {
				kp = nil
			}
		}
		tp.mu.Unlock()
		switch {
		case kp == nil:
		case !kp.after:
			tp.kill(kp)
			http.Error(w, "killed", http.StatusBadGateway)
			return
		default:
			r = r.WithContext(context.WithValue(r.Context(), tapKey{}, kp))
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		tp.srv.CloseClientConnections()
		tp.srv.Close()
		tp.transport.CloseIdleConnections()
	})
	return tp
}

func (tp *tap) kill(kp *killPoint) {
	tp.mu.Lock()
	proc := tp.proc
	tp.mu.Unlock()
	_ = proc.Process.Signal(syscall.SIGKILL)
	close(kp.fired)
}

// arm kills the slot's replica at its nth request from now.
func (tp *tap) arm(nth int, after bool) *killPoint {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	kp := &killPoint{nth: nth, after: after, fired: make(chan struct{})}
	tp.armed = kp
	return kp
}

// disarm takes kp back unless it already fired; it reports whether it did.
func (tp *tap) disarm(kp *killPoint) bool {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	if tp.armed != kp {
		return false
	}
	tp.armed = nil
	return true
}

// waitKill waits until kp fired (false) or moved says the lease went
// elsewhere first (true), for up to a minute.
func waitKill(t *testing.T, kp *killPoint, moved func() bool) bool {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		select {
		case <-kp.fired:
			return false
		case <-time.After(50 * time.Millisecond):
		}
		if moved() {
			return true
		}
		if time.Now().After(deadline) {
			t.Fatalf("the holder never reached its request %d", kp.nth)
		}
	}
}

// requestsOf returns the requests a replica sent through the tap.
func (tp *tap) requestsOf(proc *exec.Cmd) []tapped {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	var out []tapped
	for _, r := range tp.reqs {
		if r.proc == proc {
			out = append(out, r)
		}
	}
	return out
}

// replicaEnv wires a replica to the fake through its slot's tap.
func (tp *tap) replicaEnv(f *fakebandServer, dsn string, lease time.Duration) []string {
	return []string{
		"BAND_API_KEY=" + f.env["BAND_API_KEY"],
		"BAND_BASE_URL=" + tp.srv.URL + "/api/v1",
		"BAND_WS_URL=ws" + strings.TrimPrefix(tp.srv.URL, "http") + "/api/v1/socket/websocket",
		"BANDONCE_LEDGER=" + dsn,
		"BANDONCE_LEASE_TIME=" + lease.String(),
		// A new holder answers what the killed one attempted once the
		// dead holder's sends have settled; the fake applies nothing
		// late, so a short window keeps the failovers short.
		"BANDONCE_SETTLE_WINDOW=1s",
	}
}

// startIn starts a replica in the tap's slot.
func (tp *tap) startIn(t *testing.T, bin string, env []string) *agentProc {
	t.Helper()
	tp.mu.Lock()
	defer tp.mu.Unlock()
	p := startAgent(t, bin, env...)
	tp.proc = p.cmd
	return p
}

// percentile returns the p-th percentile (nearest rank) of ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := int(p/100*float64(len(s))+0.999999) - 1
	return s[max(0, min(rank, len(s)-1))]
}

// The acceptance test of issue 16: two echo replicas on one PostgreSQL
// and one fakeband, all separate processes. The replica holding the lease
// is SIGKILLed twenty times during a backlog, each time at a seeded point
// of its term (a delay within a lease time, then a seeded request, killed
// before it reaches Band or after Band applied it and before the answer
// gets back); the other takes over; the dead one comes back as the
// standby. Every message is answered exactly once, and the failover
// time (the old holder's last request to the new holder's first) is
// reported.
func TestReplicasSurviveTwentyKillsOfTheHolder(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs fakeband and two echo replicas as processes")
	}
	t.Parallel() // one of the slowest: it runs beside the others
	dsn := freshDatabase(t)
	lease := testLease(t)
	bin := buildEcho(t)
	f := startFakebandServer(t)
	slots := [2]*tap{newTap(t, f.env["FAKEBAND_URL"]), newTap(t, f.env["FAKEBAND_URL"])}
	procs := [2]*agentProc{}
	slow := "ECHO_DELAY=50ms" // the backlog lasts while the kill points are drawn
	for i, tp := range slots {
		procs[i] = tp.startIn(t, bin, append(tp.replicaEnv(f, dsn, lease), slow))
	}

	var ids []string
	topUp := func() {
		for f.truth(t).processed(ids) > len(ids)-30 {
			for range 10 {
				ids = append(ids, f.say(t, fmt.Sprint("ping ", len(ids))))
			}
		}
	}
	topUp()
	// The holder is the slot whose replica talks to Band beyond its
	// start-up question (GET /agent/me, asked before the lease).
	holder := -1
	eventually(t, "a holder", func() bool {
		for i, tp := range slots {
			if len(tp.requestsOf(procs[i].cmd)) > 1 {
				holder = i
				return true
			}
		}
		return false
	})

	rng := rand.New(rand.NewPCG(16, 20260616))
	var failovers []time.Duration
	for kill := 0; kill < 20; {
		old, next := holder, 1-holder
		// A seeded point of the holder's term: anywhere in its renewal
		// cycle, then at a seeded request.
		time.Sleep(time.Duration(rng.Int64N(int64(lease))))
		topUp()
		standby := len(slots[next].requestsOf(procs[next].cmd))
		kp := slots[old].arm(1+rng.IntN(30), rng.IntN(2) == 1)
		if moved := waitKill(t, kp, func() bool { return len(slots[next].requestsOf(procs[next].cmd)) > standby }); moved && slots[old].disarm(kp) {
			// The holder missed its renewals (a starved machine) and the
			// standby took over without a kill: nothing to measure.
			t.Logf("the lease moved to the other replica without a kill")
			holder = next
			continue
		}
		<-procs[old].done
		killed := slots[old].requestsOf(procs[old].cmd)
		last := killed[len(killed)-1].at
		eventually(t, fmt.Sprintf("kill %d: the standby taking over", kill), func() bool {
			return len(slots[next].requestsOf(procs[next].cmd)) > standby
		})
		first := slots[next].requestsOf(procs[next].cmd)[standby].at
		failovers = append(failovers, first.Sub(last))
		kill++
		t.Logf("kill %2d at request %2d (after Band applied it: %-5v): failover %s", kill, kp.nth, kp.after, first.Sub(last).Round(time.Millisecond))
		// The machine comes back, as the standby now.
		procs[old] = slots[old].startIn(t, bin, append(slots[old].replicaEnv(f, dsn, lease), slow))
		eventually(t, "the new standby asking who it is", func() bool { return len(slots[old].requestsOf(procs[old].cmd)) > 0 })
		holder = next
	}

	eventually(t, "every message answered", func() bool { return f.truth(t).processed(ids) == len(ids) })
	for _, p := range procs {
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
		require.NoError(t, <-p.done, "SIGTERM exits 0; stderr: %s", p.stderr.String())
		assertQuietButForAStarvedLedger(t, p.stderr.String())
	}
	f.truth(t).requireEveryMessageEchoedOnce(t, ids)
	t.Logf("%d messages, %d kills of the holder, lease %s: failover p50 %s, p99 %s, max %s",
		len(ids), len(failovers), lease, percentile(failovers, 50).Round(time.Millisecond),
		percentile(failovers, 99).Round(time.Millisecond), slices.Max(failovers).Round(time.Millisecond))
}

// starvedLedger matches the warnings a replica rightly logs when its
// PostgreSQL misses a call's timeout (half the test's short lease): a
// machine running other suites beside this one starves it so, and the
// replica must say it. They are the only lines allowed on stderr here.
var starvedLedger = regexp.MustCompile(`level=(WARN|ERROR) msg="(pgledger: lease (renewal failed|lost)[^"]*"|bandonce: ledger (read|write) failed[^"]*".*(deadline exceeded|timeout|lease))`)

// assertQuietButForAStarvedLedger asserts that a replica's stderr holds
// nothing but the warnings of a starved ledger, and logs how many.
func assertQuietButForAStarvedLedger(t *testing.T, stderr string) {
	t.Helper()
	starved := 0
	for line := range strings.Lines(stderr) {
		if starvedLedger.MatchString(line) {
			starved++
			continue
		}
		assert.Fail(t, "nothing on stderr unless asked, or a starved ledger's warning", "%s", line)
	}
	if starved > 0 {
		t.Logf("%d warnings of a ledger call past its timeout: the machine was starved", starved)
	}
}

// isReply reports whether a tapped request is a reply post.
func isReply(r tapped) bool {
	return r.method == http.MethodPost && strings.HasSuffix(r.path, "/messages") && strings.Contains(r.path, "/agent/chats/")
}

// The holder is paused (SIGSTOP) past its lease with replies in flight; the
// standby takes over and serves; the old holder is resumed (SIGCONT): it
// posts nothing, gives the lease up and waits as a standby, and every
// message is still answered exactly once.
func TestAPausedHolderPostsNothingWhenItWakes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs fakeband and two echo replicas as processes")
	}
	dsn := freshDatabase(t)
	lease := testLease(t)
	bin := buildEcho(t)
	f := startFakebandServer(t)
	a, b := newTap(t, f.env["FAKEBAND_URL"]), newTap(t, f.env["FAKEBAND_URL"])
	slow := "ECHO_DELAY=30ms" // a reply is in flight most of the time
	pa := a.startIn(t, bin, append(a.replicaEnv(f, dsn, lease), slow))
	var ids []string
	for i := range 60 {
		ids = append(ids, f.say(t, fmt.Sprint("ping ", i)))
	}
	t.Cleanup(func() {
		if t.Failed() { // what the first replica said and sent, for the reader of a red run
			t.Logf("the first replica's stderr:\n%s", pa.stderr.String())
			for _, r := range a.requestsOf(pa.cmd) {
				t.Logf("first replica: %s %s %s", r.at.Format("15:04:05.000"), r.method, r.path)
			}
		}
	})
	// A minute, not 20 s: on a loaded machine (CI runs cmd/bandonce's
	// process tests beside this package) a race-built replica can lose its
	// 3 s lease before it answers, and take it again a lease later.
	eventuallyWithin(t, time.Minute, "the first replica answering", func() bool { return f.truth(t).processed(ids) >= 5 })
	pb := b.startIn(t, bin, append(b.replicaEnv(f, dsn, lease), slow))
	eventually(t, "the standby asking who it is", func() bool { return len(b.requestsOf(pb.cmd)) == 1 })
	require.Len(t, b.requestsOf(pb.cmd), 1, "the standby sends nothing else while it stands by")

	require.NoError(t, pa.cmd.Process.Signal(syscall.SIGSTOP))
	stopped := f.truth(t).processed(ids)
	eventually(t, "the standby taking over", func() bool { return len(b.requestsOf(pb.cmd)) > 1 })
	eventually(t, "the new holder answering", func() bool { return f.truth(t).processed(ids) >= stopped+5 })

	resumed := time.Now()
	require.NoError(t, pa.cmd.Process.Signal(syscall.SIGCONT))
	// Time to do harm, if it would, measured in events rather than on the
	// wall clock: the woken holder has noticed that it lost the lease
	// (or its socket), and the new holder has answered everything.
	eventually(t, "the woken holder noticing it lost the lease", func() bool {
		return regexp.MustCompile(`lease lost|supersed|took over`).MatchString(pa.stderr.String())
	})
	eventually(t, "every message answered", func() bool { return f.truth(t).processed(ids) == len(ids) })
	var after []string
	for _, r := range a.requestsOf(pa.cmd) {
		if r.at.After(resumed) {
			after = append(after, r.method+" "+r.path)
			assert.False(t, isReply(r), "the woken holder posted a reply: %s %s", r.method, r.path)
		}
	}
	assert.Empty(t, after, "the woken holder sends nothing more to Band")
	select {
	case err := <-pa.done:
		t.Logf("the woken holder exited: %v; stderr: %s", err, pa.stderr.String())
		pa.done <- err
	default:
		t.Log("the woken holder waits as a standby")
	}
	select {
	case err := <-pb.done:
		t.Fatalf("the new holder stopped: %v; stderr: %s", err, pb.stderr.String())
	default:
	}

	eventually(t, "every message answered", func() bool { return f.truth(t).processed(ids) == len(ids) })
	for _, p := range []*agentProc{pa, pb} {
		select {
		case <-p.done:
			continue
		default:
		}
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
		require.NoError(t, <-p.done, "SIGTERM exits 0; stderr: %s", p.stderr.String())
	}
	assertQuietButForAStarvedLedger(t, pb.stderr.String())
	// The woken holder says what happened to it, and only that: its lease
	// ran out (so its writes and requests were refused), the new holder's
	// connection superseded its socket, and a ledger call it had in flight
	// when it was stopped missed its timeout.
	for _, line := range strings.Split(strings.TrimSpace(pa.stderr.String()), "\n") {
		if line != "" && !starvedLedger.MatchString(line) {
			assert.Regexp(t, `lease|supersed|took over`, line, "the woken holder reports only that it lost its lease")
		}
	}
	f.truth(t).requireEveryMessageEchoedOnce(t, ids)
}
