package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
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
	bin := bandonceBin(t)
	w := newRunWorld(t)
	dep := newOrders(t)
	p := start(t, w.env("ORDERS_URL="+dep.srv.URL), bin, "run", "--", testdata(t, "orders.sh"))
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
}
