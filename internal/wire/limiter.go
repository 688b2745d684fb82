package wire

import (
	"container/heap"
	"context"
	"math"
	"net/http"
	"sync"
	"time"
)

// Limiter is one request budget for a whole agent: every REST request,
// from every room, retries included, passes it. It caps the requests in
// flight, and once Band has throttled the agent (a 429) it paces request
// starts at a rate it adapts: halved on every 429 (and paused for a
// Retry-After), raised a little with every request that is not throttled,
// and lifted once Band has answered liftAfter without a 429.
// So a throttled agent slows down as one client, not as many rooms each
// backing off alone.
//
// A request that must wait joins a queue, and while the pace holds every
// request does. A start that comes free goes, a nanosecond later, to the
// waiting request with the smallest key (method and path), not to
// whichever goroutine woke first: so requests that arrive in the same
// instant are ordered by what they are, and a run in virtual time (the
// prover's, where timers fire together) replays exactly. In real time the
// nanosecond is lost in the noise.
type Limiter struct {
	maxInFlight int
	maxPause    time.Duration

	mu        sync.Mutex
	inFlight  int
	rate      float64     // starts per second; +Inf until the first 429
	nextStart time.Time   // the earliest start the pacing allows
	pauseTill time.Time   // a Retry-After holds every start until then
	cutAt     time.Time   // the last decrease: 429s of requests started before it are the same congestion
	refusedAt time.Time   // the last 429
	waiters   waitQueue   // by key, then arrival
	seq       uint64      // orders waiters with the same key
	grantAt   *time.Timer // a pending grant, if any
	window    [2]startCount
	throttled int
	episode   Pace // the pace as OnPace last heard it
	onPace    func(Pace)
}

// Pace is what OnPace hears: a change of the limiter's pace.
type Pace struct {
	// Paced is true while the limiter paces requests, false once the
	// pace is lifted.
	Paced bool
	// Rate is the pace in starts per second; 0 when lifted.
	Rate float64
	// Since is when the pace first dropped in this episode.
	Since time.Time
	// Refused counts the 429s since the pace first dropped, this one
	// included: counted under the limiter's lock, so an answer racing
	// the report cannot shift it.
	Refused int
	// Cuts counts the times the rate was cut in this episode: 1 at the
	// first drop.
	Cuts int
}

// First reports whether this change is the episode's first drop.
func (p Pace) First() bool { return p.Paced && p.Cuts == 1 }

// waiter is a request waiting for its start.
type waiter struct {
	key   string
	seq   uint64
	ready chan struct{} // closed when granted
	start time.Time
	index int // in waiters; -1 once granted
}

// waitQueue is a heap of waiters, the smallest key first, then the
// earliest: a grant is O(log n) however many rooms wait.
type waitQueue []*waiter

func (q waitQueue) Len() int { return len(q) }
func (q waitQueue) Less(i, j int) bool {
	if q[i].key != q[j].key {
		return q[i].key < q[j].key
	}
	return q[i].seq < q[j].seq
}
func (q waitQueue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index, q[j].index = i, j
}
func (q *waitQueue) Push(x any) {
	w := x.(*waiter)
	w.index = len(*q)
	*q = append(*q, w)
}
func (q *waitQueue) Pop() any {
	old := *q
	w := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	w.index = -1
	return w
}

type startCount struct {
	at time.Time // the half second this count began
	n  int
}

// Rate bounds: the pace never drops below minRate, and a rate grown past
// maxRate is no limit at all.
const (
	minRate = 1.0
	maxRate = 10000.0
	// increase is what the pace gains per second of unthrottled requests
	// at that pace: additive, so it takes the rate tens of seconds to
	// double again after a halving.
	increase = 5.0
	// liftAfter is how long Band must go without a 429 before the pace
	// is lifted altogether: the additive increase alone would take the
	// better part of an hour to climb back to maxRate, and an agent with
	// little to send would stay paced for good.
	liftAfter = 30 * time.Second
)

// NewLimiter returns a Limiter with at most maxInFlight requests in flight
// and pauses of at most maxPause for a Retry-After.
func NewLimiter(maxInFlight int, maxPause time.Duration) *Limiter {
	return &Limiter{maxInFlight: max(maxInFlight, 1), maxPause: maxPause, rate: math.Inf(1)}
}

// OnPace has f called when the limiter starts pacing requests after a
// 429, each time it cuts that rate again, and when the rate has grown
// back to no limit. It is called outside the limiter's lock, on the
// goroutine whose answer moved the pace, and must not block. Call it
// before the first request.
func (l *Limiter) OnPace(f func(Pace)) { l.onPace = f }

// Rate is the pace in starts per second; +Inf while unthrottled.
func (l *Limiter) Rate() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rate
}

// Throttled is how many 429s the limiter has seen.
func (l *Limiter) Throttled() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.throttled
}

// acquire waits until the request named key may start, or ctx ends. It
// returns when the request started.
func (l *Limiter) acquire(ctx context.Context, key string) (time.Time, error) {
	return l.acquireKeyed(ctx, func() string { return key })
}

// acquireKeyed is acquire with the key made only if the request must
// wait: most start at once, and the key costs an allocation.
func (l *Limiter) acquireKeyed(ctx context.Context, keyOf func() string) (time.Time, error) {
	l.mu.Lock()
	now := time.Now()
	if len(l.waiters) == 0 && math.IsInf(l.rate, 1) && l.mayStartLocked(now) {
		l.startLocked(now)
		l.mu.Unlock()
		return now, nil
	}
	key := keyOf()
	l.seq++
	w := &waiter{key: key, seq: l.seq, ready: make(chan struct{})}
	heap.Push(&l.waiters, w)
	l.armLocked(now)
	l.mu.Unlock()

	select {
	case <-w.ready:
		return w.start, nil
	case <-ctx.Done():
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if w.index >= 0 {
		heap.Remove(&l.waiters, w.index)
		return time.Time{}, context.Cause(ctx)
	}
	// Granted as ctx ended: give the start back.
	l.inFlight--
	l.armLocked(time.Now())
	return time.Time{}, context.Cause(ctx)
}

// mayStartLocked reports whether a request may start at now.
func (l *Limiter) mayStartLocked(now time.Time) bool {
	return l.inFlight < l.maxInFlight && !now.Before(l.pauseTill) && !now.Before(l.nextStart)
}

func (l *Limiter) startLocked(now time.Time) {
	l.inFlight++
	if !math.IsInf(l.rate, 1) {
		l.nextStart = now.Add(time.Duration(float64(time.Second) / l.rate))
	}
	l.countStart(now)
}

// armLocked makes sure a grant runs when the next waiter may start, a
// nanosecond after, so the grant sees every request that arrived by then.
// With every start in flight, the next release arms it instead.
func (l *Limiter) armLocked(now time.Time) {
	if len(l.waiters) == 0 || l.grantAt != nil || l.inFlight >= l.maxInFlight {
		return
	}
	at := maxTime(now, maxTime(l.pauseTill, l.nextStart))
	l.grantAt = time.AfterFunc(at.Sub(now)+time.Nanosecond, l.grant)
}

// grant starts the waiting requests that may start now, smallest key
// first, then arms for the rest.
func (l *Limiter) grant() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.grantAt = nil
	now := time.Now()
	for len(l.waiters) > 0 && l.mayStartLocked(now) {
		w := heap.Pop(&l.waiters).(*waiter)
		l.startLocked(now)
		w.start = now
		close(w.ready)
	}
	l.armLocked(now)
}

// release ends a request that started at start, with its answer's status
// (0 for a transport error) and Retry-After.
func (l *Limiter) release(start time.Time, status int, retryAfter time.Duration, hasRetryAfter bool) {
	l.mu.Lock()
	changed, p := l.releaseLocked(start, status, retryAfter, hasRetryAfter)
	l.mu.Unlock()
	if changed && l.onPace != nil {
		l.onPace(p)
	}
}

// releaseLocked is release under the lock; it returns whether the pace
// changed, and the change as OnPace hears it.
func (l *Limiter) releaseLocked(start time.Time, status int, retryAfter time.Duration, hasRetryAfter bool) (changed bool, p Pace) {
	l.inFlight--
	now := time.Now()
	switch {
	case status == http.StatusTooManyRequests:
		l.throttled++
		l.refusedAt = now
		if l.episode.Paced {
			l.episode.Refused++
		}
		if hasRetryAfter {
			l.pauseTill = maxTime(l.pauseTill, now.Add(min(retryAfter, l.maxPause)))
		}
		if start.Before(l.cutAt) {
			break // already halved for this congestion
		}
		if !l.episode.Paced {
			l.episode = Pace{Paced: true, Since: now, Refused: 1}
		}
		l.rate = max(minRate, min(l.rate, l.startRate(now))/2)
		l.cutAt = now
		l.nextStart = maxTime(l.nextStart, now.Add(time.Duration(float64(time.Second)/l.rate)))
		l.episode.Rate = l.rate
		l.episode.Cuts++
		changed, p = true, l.episode
	case status != 0 && !math.IsInf(l.rate, 1):
		l.rate += increase / l.rate
		if l.rate > maxRate || now.Sub(l.refusedAt) >= liftAfter {
			l.rate = math.Inf(1)
			l.episode.Paced, l.episode.Rate = false, 0
			changed, p = true, l.episode
		}
	}
	if l.grantAt != nil {
		// The pause or the pace may have moved: arm again for them.
		l.grantAt.Stop()
		l.grantAt = nil
	}
	l.armLocked(now)
	return changed, p
}

// countStart counts a start in the half-second window.
func (l *Limiter) countStart(now time.Time) {
	const half = 500 * time.Millisecond
	if now.Sub(l.window[1].at) >= half {
		prev := l.window[1]
		if now.Sub(prev.at) >= 2*half {
			prev = startCount{}
		}
		l.window = [2]startCount{prev, {at: now}}
	}
	l.window[1].n++
}

// startRate estimates the starts per second of the last second or so.
func (l *Limiter) startRate(now time.Time) float64 {
	n := l.window[1].n
	span := now.Sub(l.window[1].at)
	if !l.window[0].at.IsZero() {
		n += l.window[0].n
		span = now.Sub(l.window[0].at)
	}
	span = max(span, 100*time.Millisecond)
	return float64(n) / span.Seconds()
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// LimitedTransport sends every request through a Limiter.
type LimitedTransport struct {
	Next    http.RoundTripper
	Limiter *Limiter
}

// RoundTrip waits for the limiter, asks the request's start check (see
// WithStartCheck), sends the request and tells the limiter how it was
// answered.
func (t *LimitedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	start, err := t.Limiter.acquireKeyed(req.Context(), func() string { return req.Method + " " + req.URL.Path })
	if err == nil {
		if check, ok := req.Context().Value(startCheckKey{}).(func() error); ok {
			if cause := check(); cause != nil {
				t.Limiter.release(start, 0, 0, false)
				err = &NotSentError{Err: cause}
			}
		}
	}
	if err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, err
	}
	resp, err := t.Next.RoundTrip(req)
	if err != nil {
		t.Limiter.release(start, 0, 0, false)
		return nil, err
	}
	ra, ok := ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	t.Limiter.release(start, resp.StatusCode, ra, ok)
	return resp, nil
}

type startCheckKey struct{}

// WithStartCheck returns a context whose requests ask check the moment
// the Limiter lets them start, before a byte is sent: an error from it
// keeps the request from being sent at all, and the request fails with a
// *NotSentError. A reply whose fate was decided before a wait in the
// limiter is so still withdrawn by a signal that arrives during the wait.
func WithStartCheck(ctx context.Context, check func() error) context.Context {
	return context.WithValue(ctx, startCheckKey{}, check)
}

// NotSentError is the error of a request its start check refused: it was
// never sent. Err is the check's reason.
type NotSentError struct{ Err error }

func (e *NotSentError) Error() string { return "not sent: " + e.Err.Error() }
func (e *NotSentError) Unwrap() error { return e.Err }
