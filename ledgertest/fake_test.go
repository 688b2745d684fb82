package ledgertest_test

import (
	"bytes"
	"context"
	"maps"
	"sync"

	"github.com/band-once/bandonce"
)

// fault is one way a ledger can break the contract, for the suite to catch.
type fault int

const (
	noFault       fault = iota
	joinedNames         // a record's name is its strings joined, so "ab"+"c" is "a"+"bc"
	sharedResult        // a step's result is the caller's buffer, and handed out as is
	writeBehind         // a write reaches the store at the next call, not before it returns
	halfCancelled       // an ended context fails SetKey after it wrote
)

// fakeLedger is a ledger in maps. Its store is what a crash leaves; reopen
// opens a copy of it.
type fakeLedger struct {
	durable bool
	fault   fault

	mu      sync.Mutex
	store   *fakeStore
	pending func() // writeBehind's write not yet in the store
}

type fakeStore struct {
	keys  map[string]bandonce.KeyState
	acks  map[string]bool
	steps map[string][]byte
}

func newFake(durable bool, f fault) *fakeLedger {
	return &fakeLedger{durable: durable, fault: f, store: &fakeStore{
		keys: map[string]bandonce.KeyState{}, acks: map[string]bool{}, steps: map[string][]byte{},
	}}
}

// reopen is what a crash and a restart find: the store without a pending
// write.
func (l *fakeLedger) reopen() *fakeLedger {
	l.mu.Lock()
	defer l.mu.Unlock()
	again := newFake(l.durable, l.fault)
	again.store.keys, again.store.acks, again.store.steps = maps.Clone(l.store.keys), maps.Clone(l.store.acks), maps.Clone(l.store.steps)
	return again
}

func (l *fakeLedger) name(parts ...string) string {
	sep := "\x00"
	if l.fault == joinedNames {
		sep = ""
	}
	var b bytes.Buffer
	for _, p := range parts {
		b.WriteString(p)
		b.WriteString(sep)
	}
	return b.String()
}

// do runs a call: a pending write first, then this call's work.
func (l *fakeLedger) do(write bool, work func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pending != nil {
		l.pending()
		l.pending = nil
	}
	if write && l.fault == writeBehind {
		l.pending = work
		return
	}
	work()
}

func (l *fakeLedger) Key(ctx context.Context, room, key string) (state bandonce.KeyState, err error) {
	l.do(false, func() { state = l.store.keys[l.name(room, key)] })
	return state, nil
}

func (l *fakeLedger) SetKey(ctx context.Context, room, key string, state bandonce.KeyState) error {
	if l.fault != halfCancelled && ctx.Err() != nil {
		return ctx.Err()
	}
	l.do(true, func() { l.store.keys[l.name(room, key)] = state })
	return ctx.Err()
}

func (l *fakeLedger) AckPending(ctx context.Context, room, messageID string) (pending bool, err error) {
	l.do(false, func() { pending = l.store.acks[l.name(room, messageID)] })
	return pending, nil
}

func (l *fakeLedger) SetAckPending(ctx context.Context, room, messageID string, pending bool) error {
	l.do(true, func() {
		if pending {
			l.store.acks[l.name(room, messageID)] = true
		} else {
			delete(l.store.acks, l.name(room, messageID))
		}
	})
	return nil
}

func (l *fakeLedger) Step(ctx context.Context, room, messageID, name string) (result []byte, ok bool, err error) {
	l.do(false, func() { result, ok = l.store.steps[l.name(room, messageID, name)] })
	if l.fault != sharedResult {
		result = bytes.Clone(result)
	}
	return result, ok, nil
}

func (l *fakeLedger) SetStep(ctx context.Context, room, messageID, name string, result []byte) error {
	if l.fault != sharedResult {
		result = append([]byte{}, result...)
	}
	l.do(true, func() { l.store.steps[l.name(room, messageID, name)] = result })
	return nil
}

func (l *fakeLedger) Durable() bool { return l.durable }
