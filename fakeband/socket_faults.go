package fakeband

import (
	"fmt"
	"time"
)

// SocketFaultKind says what a firing SocketFault does to a push.
type SocketFaultKind int

// Socket fault kinds.
const (
	// DropConnection closes the connection where the push would have
	// been written: frames queued before it are delivered, it and
	// everything after are not.
	DropConnection SocketFaultKind = iota
	// DuplicatePush delivers the push twice in a row.
	DuplicatePush
	// DelayPush holds the connection's writer for Delay before the push,
	// so later frames wait too (order is kept, as on one TCP stream).
	DelayPush
	// LosePush never delivers the push; the connection stays up.
	LosePush
)

func (k SocketFaultKind) String() string {
	switch k {
	case DropConnection:
		return "drop_connection"
	case DuplicatePush:
		return "duplicate_push"
	case DelayPush:
		return "delay_push"
	case LosePush:
		return "lose_push"
	}
	return fmt.Sprintf("SocketFaultKind(%d)", int(k))
}

// SocketFault disturbs server pushes (not replies). Rules are checked in
// the order injected; the first that fires applies. Only pushes that
// reach a joined topic count.
type SocketFault struct {
	Event       string          // "" matches any push, else e.g. "message_created", "agent.control"
	Nth         int             // fire on the Nth matching push (1-based); 0 = use Probability
	Probability float64         // with Nth == 0: seeded chance per matching push
	Kind        SocketFaultKind // what firing does
	Delay       time.Duration   // DelayPush: how long
}

type socketRule struct {
	SocketFault
	seen int
}

// InjectSocket adds a socket fault rule after the existing ones.
func (b *Band) InjectSocket(f SocketFault) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.faults.socket = append(b.faults.socket, &socketRule{SocketFault: f})
	b.noteFaultsLocked()
}

// enqueuePushLocked queues a push frame on c, disturbed by the first
// socket fault that fires. Faults are decided here, at push time, so they
// follow the order of the actions that caused the pushes.
func (b *Band) enqueuePushLocked(c *conn, event string, frame []byte) {
	var chosen *SocketFault
	for _, r := range b.faults.socket {
		if r.Event != "" && r.Event != event {
			continue
		}
		r.seen++
		var fire bool
		if r.Nth > 0 {
			fire = r.seen == r.Nth
		} else {
			fire = b.rng.Float64() < r.Probability
		}
		if fire && chosen == nil {
			chosen = &r.SocketFault
		}
	}
	if chosen == nil {
		c.out.put(outItem{frame: frame})
		return
	}
	b.faults.fired["socket/"+chosen.Kind.String()]++
	switch chosen.Kind {
	case DropConnection:
		c.out.put(outItem{close: dropAbruptly})
		b.sockets.remove(c)
	case DuplicatePush:
		c.out.put(outItem{frame: frame})
		c.out.put(outItem{frame: frame})
	case DelayPush:
		c.out.put(outItem{frame: frame, delay: chosen.Delay})
	case LosePush:
	}
}
