// Package leasemodel is an in-memory model of pgledger's database side:
// the leases table and the fenced writes of its SQL, statement for
// statement, on a clock the caller gives (the prover's virtual time).
// The prover's replicas run against it when they have no PostgreSQL;
// internal/leasetest holds it and pgledger's real SQL to one contract, so
// the two cannot drift.
//
// Each method is one statement of pgledger's schema.go, applied
// atomically: Acquire is the acquire statement (INSERT ... ON CONFLICT
// DO UPDATE ... WHERE expires_at <= now()), Renew, Release and Lookup
// theirs, and Write the fence every write of pgledger carries (the lease
// row has the write's epoch and expires more than margin after now).
// Times are truncated to the microsecond, as PostgreSQL keeps them.
package leasemodel

import (
	"sync"
	"time"

	"github.com/band-once/bandonce"
)

// DB is the model of one database: every agent's lease and records.
type DB struct {
	now func() time.Time

	mu      sync.Mutex
	leases  map[string]*lease
	records map[string]*bandonce.MemoryLedger
	// NoFencing, if set, makes Write apply every write whatever the
	// lease says: the broken model the prover's self-tests must catch.
	NoFencing bool
}

type lease struct {
	epoch               int64
	holder              string
	acquired, expiresAt time.Time
}

// New returns an empty database whose now() is now.
func New(now func() time.Time) *DB {
	return &DB{now: now, leases: map[string]*lease{}, records: map[string]*bandonce.MemoryLedger{}}
}

func (db *DB) clock() time.Time { return db.now().Truncate(time.Microsecond) }

// Acquire takes agent's lease for holder, for d, if there is none, it
// has run out (expires_at <= now()), or holder holds it already (the
// answer to its acquisition was lost), and returns the new epoch; 0 when
// another holder's lease is still current.
func (db *DB) Acquire(agent, holder string, d time.Duration) int64 {
	db.mu.Lock()
	defer db.mu.Unlock()
	now := db.clock()
	l := db.leases[agent]
	switch {
	case l == nil:
		l = &lease{}
		db.leases[agent] = l
	case l.expiresAt.After(now) && l.holder != holder:
		return 0
	}
	l.epoch++
	l.holder, l.acquired, l.expiresAt = holder, now, now.Add(d.Truncate(time.Microsecond))
	return l.epoch
}

// Lookup returns agent's lease: its holder, epoch, and how long it has
// left (zero once it ran out); ok false when there is none.
func (db *DB) Lookup(agent string) (holder string, epoch int64, left time.Duration, ok bool) {
	db.mu.Lock()
	defer db.mu.Unlock()
	l := db.leases[agent]
	if l == nil {
		return "", 0, 0, false
	}
	return l.holder, l.epoch, max(l.expiresAt.Sub(db.clock()), 0), true
}

// Renew extends agent's lease to d from now, if it is still epoch's and
// has not run out; it reports whether it did.
func (db *DB) Renew(agent string, epoch int64, d time.Duration) bool {
	db.mu.Lock()
	defer db.mu.Unlock()
	now := db.clock()
	l := db.leases[agent]
	if l == nil || l.epoch != epoch || !l.expiresAt.After(now) {
		return false
	}
	l.expiresAt = now.Add(d.Truncate(time.Microsecond))
	return true
}

// Release ends agent's lease now, if it is still epoch's and has not run
// out; it reports whether it did.
func (db *DB) Release(agent string, epoch int64) bool {
	db.mu.Lock()
	defer db.mu.Unlock()
	now := db.clock()
	l := db.leases[agent]
	if l == nil || l.epoch != epoch || !l.expiresAt.After(now) {
		return false
	}
	l.expiresAt = now
	return true
}

// Write applies write to agent's records if the fence holds: the lease is
// epoch's and expires more than margin from now. It reports whether the
// fence held; write runs under the database's lock, so a takeover and a
// write are ordered, as FOR SHARE orders them.
func (db *DB) Write(agent string, epoch int64, margin time.Duration, write func(records bandonce.Ledger)) bool {
	db.mu.Lock()
	defer db.mu.Unlock()
	l := db.leases[agent]
	held := l != nil && l.epoch == epoch && l.expiresAt.After(db.clock().Add(margin.Truncate(time.Microsecond)))
	if held || db.NoFencing {
		write(db.recordsOf(agent))
	}
	return held
}

// Read runs read on agent's records: the unfenced reads (Key,
// AckPending, Step).
func (db *DB) Read(agent string, read func(records bandonce.Ledger)) {
	db.mu.Lock()
	defer db.mu.Unlock()
	read(db.recordsOf(agent))
}

func (db *DB) recordsOf(agent string) *bandonce.MemoryLedger {
	r := db.records[agent]
	if r == nil {
		r = bandonce.NewMemoryLedger()
		db.records[agent] = r
	}
	return r
}

// Epoch is the latest epoch acquired for agent, current or not: a holder
// of an older one has been superseded.
func (db *DB) Epoch(agent string) int64 {
	db.mu.Lock()
	defer db.mu.Unlock()
	if l := db.leases[agent]; l != nil {
		return l.epoch
	}
	return 0
}
