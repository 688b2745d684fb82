package verify

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"time"
)

// This file keeps band-once 0.1's conformance contract, so authors coming
// from the Python library find what they know: an agent at the level of an
// idempotency ledger, agent(ledger, dedupKey, attempt, ts) -> Disposition,
// checked over seeded kill-and-duplicate schedules. It judges a one-line
// contract, not a real agent; ExactlyOnce is the check that runs one.

// Disposition is a ledger's verdict on one delivery of a unit of work, in
// band-once 0.1's contract (see VerifyLedgerAgent).
type Disposition int

// Dispositions.
const (
	// Accepted: the first delivery of the key; the work is done.
	Accepted Disposition = iota + 1
	// DuplicateDropped: the key was seen before; the delivery is dropped.
	DuplicateDropped
)

func (d Disposition) String() string {
	switch d {
	case Accepted:
		return "ACCEPTED"
	case DuplicateDropped:
		return "DUPLICATE_DROPPED"
	}
	return fmt.Sprintf("Disposition(%d)", int(d))
}

// LedgerEntry is one delivery as a Ledger recorded it.
type LedgerEntry struct {
	DedupKey    string
	Attempt     int
	TS          time.Time
	Disposition Disposition
}

// Ledger is an idempotency ledger: one Accepted per natural key, every
// later delivery of the key dropped. It outlives the agents that use it,
// as a durable store outlives a crash. Safe for concurrent use. It belongs
// to band-once 0.1's contract (see VerifyLedgerAgent) and is not the
// Shell's bandonce.Ledger.
type Ledger struct {
	mu   sync.Mutex
	seen map[string]LedgerEntry
	log  []LedgerEntry
}

// NewLedger returns an empty Ledger.
func NewLedger() *Ledger { return &Ledger{seen: map[string]LedgerEntry{}} }

// Record records one delivery of dedupKey and returns its entry: Accepted
// the first time the key is seen, DuplicateDropped after.
func (l *Ledger) Record(dedupKey string, attempt int, ts time.Time) LedgerEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := LedgerEntry{DedupKey: dedupKey, Attempt: attempt, TS: ts, Disposition: DuplicateDropped}
	if _, ok := l.seen[dedupKey]; !ok {
		e.Disposition = Accepted
		l.seen[dedupKey] = e
	}
	l.log = append(l.log, e)
	return e
}

// AcceptedKeys returns the keys accepted so far, sorted.
func (l *Ledger) AcceptedKeys() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return sortedKeys(l.seen)
}

// DuplicatesDropped counts the deliveries dropped as duplicates.
func (l *Ledger) DuplicatesDropped() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, e := range l.log {
		if e.Disposition == DuplicateDropped {
			n++
		}
	}
	return n
}

// History returns every recorded delivery, in order.
func (l *Ledger) History() []LedgerEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]LedgerEntry(nil), l.log...)
}

// LedgerAgent is band-once 0.1's agent contract: for one delivery of the
// unit of work dedupKey it must consult ledger and return its verdict. It
// is kept for tests carried over from 0.1; an agent on Band is judged by
// ExactlyOnce, through a Factory.
type LedgerAgent func(ledger *Ledger, dedupKey string, attempt int, ts time.Time) Disposition

// CleanEchoAgent is the reference LedgerAgent: it records the delivery in
// the ledger and returns the ledger's verdict. It is 0.1's reference; the
// reference agent on Band is ReferenceAgent.
func CleanEchoAgent() LedgerAgent {
	return func(ledger *Ledger, dedupKey string, attempt int, ts time.Time) Disposition {
		return ledger.Record(dedupKey, attempt, ts).Disposition
	}
}

// ConformanceResult is VerifyLedgerAgent's verdict, in band-once 0.1's
// shape. ExactlyOnce and the check functions answer a Result instead.
type ConformanceResult struct {
	// OK: exactly-once held on every schedule.
	OK bool
	// SchedulesChecked counts the schedules run: all on a pass, up to and
	// including the violating one on a failure.
	SchedulesChecked int
	// FirstViolatingSeed is the seed of the first schedule that broke the
	// contract; Reason names the defect in one clause.
	FirstViolatingSeed int64
	Reason             string
}

// Ledger schedules, as band-once 0.1 drew them: a handful of keys
// delivered many times, in shuffled order, with random attempt numbers.
const (
	ledgerDeliveries    = 400
	ledgerKeys          = 6
	ledgerKillOneIn     = 20 // a kill between deliveries, one in this many
	defaultLedgerSweeps = 500
)

// VerifyLedgerAgent checks a LedgerAgent over seeded kill-and-duplicate
// schedules, as band-once 0.1's verify_exactly_once did: each schedule
// delivers a handful of keys hundreds of times to agents from factory over
// one shared Ledger, building a fresh agent after each random kill, and
// asserts that every key is accepted exactly once. Schedules (default 500)
// and Seed apply, and the environment overrides them as for ExactlyOnce.
//
// It judges the 0.1 contract, a function over an in-memory Ledger, not an
// agent on Band: use it to carry over a 0.1 test, and ExactlyOnce to judge
// an agent.
func VerifyLedgerAgent(factory func() LedgerAgent, opts ...Option) ConformanceResult {
	cfg := newConfig(append([]Option{Schedules(defaultLedgerSweeps)}, opts...))
	if msg := cfg.envError(); msg != "" {
		return ConformanceResult{Reason: msg}
	}
	for i := range cfg.schedules {
		seed := cfg.seed + int64(i)
		if reason := checkLedgerSchedule(factory, seed); reason != "" {
			return ConformanceResult{SchedulesChecked: i + 1, FirstViolatingSeed: seed, Reason: reason}
		}
	}
	return ConformanceResult{OK: true, SchedulesChecked: cfg.schedules}
}

// checkLedgerSchedule runs one schedule and returns the first defect, or
// "" when exactly-once held.
func checkLedgerSchedule(factory func() LedgerAgent, seed int64) string {
	r := rand.New(rand.NewPCG(uint64(seed), 0x6c6564676572))
	keys := make([]string, ledgerKeys)
	for k := range keys {
		keys[k] = fmt.Sprintf("work:k%d:job-1:round-1", k)
	}
	type delivery struct {
		key     string
		attempt int
	}
	var deliveries []delivery
	for range ledgerDeliveries {
		deliveries = append(deliveries, delivery{keys[r.IntN(len(keys))], 1 + r.IntN(9)})
	}
	for _, k := range keys { // every key at least once, so a lost one shows
		deliveries = append(deliveries, delivery{k, 1 + r.IntN(9)})
	}
	r.Shuffle(len(deliveries), func(i, j int) { deliveries[i], deliveries[j] = deliveries[j], deliveries[i] })

	ledger := NewLedger()
	agent := factory()
	ts := time.Date(2026, 6, 16, 3, 10, 0, 0, time.UTC)
	accepted := map[string]int{}
	for _, d := range deliveries {
		if r.IntN(ledgerKillOneIn) == 0 {
			agent = factory() // a kill: whatever the agent kept in memory is gone
		}
		if agent(ledger, d.key, d.attempt, ts) == Accepted {
			accepted[d.key]++
		}
		ts = ts.Add(time.Second)
	}
	for _, k := range sortedKeys(accepted) {
		if n := accepted[k]; n > 1 {
			return fmt.Sprintf("key %q was ACCEPTED %d times (exactly-once requires exactly 1): a double-post", k, n)
		}
	}
	var lost []string
	for _, k := range keys {
		if accepted[k] == 0 {
			lost = append(lost, k)
		}
	}
	if len(lost) > 0 {
		sort.Strings(lost)
		return fmt.Sprintf("key %q was delivered but never ACCEPTED: a lost message (%d key(s) lost)", lost[0], len(lost))
	}
	if got, want := sortedKeys(accepted), ledger.AcceptedKeys(); fmt.Sprint(got) != fmt.Sprint(want) {
		return "the agent's accepted keys disagree with the ledger's: the agent is not driving exactly-once through the ledger"
	}
	return ""
}
