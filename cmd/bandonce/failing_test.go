package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/fakeband"
)

// orders is the dependency the orders.sh agent calls: while down it
// answers 503, as a service behind a load balancer does during a deploy.
// It records when each call came.
type orders struct {
	srv   *httptest.Server
	mu    sync.Mutex
	down  bool
	calls []time.Time
}

func newOrders(t *testing.T) *orders {
	o := &orders{down: true}
	o.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		o.mu.Lock()
		o.calls = append(o.calls, time.Now())
		down := o.down
		o.mu.Unlock()
		if down {
			http.Error(w, "deploying", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, "shipped")
	}))
	t.Cleanup(o.srv.Close)
	return o
}

func (o *orders) setDown(down bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.down = down
}

func (o *orders) callTimes() []time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]time.Time(nil), o.calls...)
}

func (w *runWorld) failedMarks(id string) int {
	n := 0
	for _, mk := range w.band.Marks(w.agent.ID, id) {
		if mk.Kind == fakeband.StatusFailed {
			n++
		}
	}
	return n
}

// The orders service, down for 2 s: with the default policy the
// message waits between attempts and is answered once the service is
// back, with no operator action.
func TestRunAnswersOnceAfterADependencyDownForTwoSeconds(t *testing.T) {
	t.Parallel()
	bin := bandonceBin(t)
	w := newRunWorld(t)
	dep := newOrders(t)
	p := start(t, w.env("ORDERS_URL="+dep.srv.URL), bin, "run", "-env", "ORDERS_URL", "--", testdata(t, "orders.sh"))
	_ = p // stopped by start's cleanup
	id := w.say(t, "where is order 17?")
	eventually(t, "the first failure", func() bool { return w.failedMarks(id) > 0 })
	downSince := time.Now()
	time.Sleep(2 * time.Second) // the outage goes on; nothing is asserted about it
	dep.setDown(false)
	upAt := time.Now()
	eventually(t, "the answer", func() bool { return w.band.Status(w.agent.ID, id) == fakeband.StatusProcessed })

	replies := w.replies()
	require.Len(t, replies, 1, "answered once")
	assert.Contains(t, replies[0], "order status: shipped")
	assert.True(t, strings.HasSuffix(replies[0], "[dedup_key:"+bandonce.DefaultKey(id)+"]"))
	calls := dep.callTimes()
	var gaps []string
	for i := 1; i < len(calls); i++ {
		gaps = append(gaps, calls[i].Sub(calls[i-1]).Round(10*time.Millisecond).String())
	}
	t.Logf("outage %s; %d attempts, waits between them %v; answered %s after the service came back",
		upAt.Sub(downSince).Round(10*time.Millisecond), len(calls), gaps, calls[len(calls)-1].Sub(upAt).Round(10*time.Millisecond))
	assert.Equal(t, len(calls)-1, w.failedMarks(id), "every attempt but the last failed, and none was dead-lettered")
	for _, e := range w.band.ChatEvents(w.room.ID) {
		assert.NotEqual(t, "error", e.MessageType, "an answered message's room is told nothing")
	}
}

// Down past the policy's window: the message is dead-lettered, its room
// told once, the dead letter listed by the command, and answered once by a
// replay once the service is back; a second replay posts nothing.
func TestRunDeadLettersAfterALongOutageAndAReplayAnswersOnce(t *testing.T) {
	t.Parallel()
	bin := bandonceBin(t)
	w := newRunWorld(t)
	dep := newOrders(t)
	ledger := filepath.Join(t.TempDir(), "agent.ledger")
	env := w.env("ORDERS_URL=" + dep.srv.URL)
	orders := testdata(t, "orders.sh")
	agent := start(t, env, bin, "run", "-env", "ORDERS_URL", "-ledger", ledger, "-max-attempts", "3", "-backoff-base", "100ms", "-backoff-max", "200ms", "--", orders)
	id := w.say(t, "where is order 17?")
	eventually(t, "the dead letter", func() bool { return w.band.Status(w.agent.ID, id) == fakeband.StatusProcessed })
	require.NoError(t, agent.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 0, agent.wait(t, 20*time.Second), agent.stderr.String())

	assert.Equal(t, 3, w.failedMarks(id), "three failures, the last with the dead-letter reason")
	assert.Empty(t, w.replies(), "no answer while the service is down")
	var told []fakeband.ChatEvent
	for _, e := range w.band.ChatEvents(w.room.ID) {
		if e.SenderID == w.agent.ID && e.MessageType == "error" {
			told = append(told, e)
		}
	}
	require.Len(t, told, 1, "one error event in the room")
	assert.Contains(t, string(told[0].Metadata), bandonce.NoticeKey(id))
	assert.Contains(t, told[0].Content, "could not answer this message")
	assert.NotContains(t, told[0].Content, w.agent.Key)

	list := start(t, env, bin, "deadletters", "list", "-ledger", ledger)
	require.Equal(t, 0, list.wait(t, 20*time.Second), list.stderr.String())
	assert.Contains(t, list.stdout.String(), id)
	assert.Regexp(t, id+`\s+3\s`, list.stdout.String(), "with its three failures")
	assert.Contains(t, list.stdout.String(), "where is order 17?")

	dep.setDown(false)
	replay := start(t, env, bin, "deadletters", "replay", "-ledger", ledger, "-message", id, "-env", "ORDERS_URL", "--", orders)
	require.Equal(t, 0, replay.wait(t, 20*time.Second), replay.stderr.String())
	assert.Contains(t, replay.stdout.String(), id+"\treplied")
	replies := w.replies()
	require.Len(t, replies, 1, "answered once by the replay")
	assert.Contains(t, replies[0], "order status: shipped")
	assert.True(t, strings.HasSuffix(replies[0], "[dedup_key:"+bandonce.DefaultKey(id)+"]"), "under the message's own key")

	again := start(t, env, bin, "deadletters", "replay", "-ledger", ledger, "-message", id, "-env", "ORDERS_URL", "--", orders)
	assert.Equal(t, exitFailed, again.wait(t, 20*time.Second), "nothing left to replay")
	assert.Contains(t, again.stderr.String(), "no dead letter of message "+id)
	assert.Len(t, w.replies(), 1, "a second replay posts nothing")

	empty := start(t, env, bin, "deadletters", "list", "-ledger", ledger)
	require.Equal(t, 0, empty.wait(t, 20*time.Second))
	assert.Contains(t, empty.stdout.String(), "no dead letters")
}
