package core

// Knowledge is what the ledger knows of a reply key.
type Knowledge int

const (
	// Unknown: no record of the key.
	Unknown Knowledge = iota
	// Intent: a post was about to be sent and its outcome is not known.
	Intent
	// Settled: the reply is known to be in the room.
	Settled
)

// GuardFacts is everything the shell knows, before reading the room,
// about whether a reply may already have been posted.
type GuardFacts struct {
	Ledger Knowledge
	// Durable is true when the ledger survives crashes, so Unknown means
	// this agent never tried to post the key.
	Durable bool
	// Attempt is Band's attempt number for this delivery of the message.
	Attempt int
	// DefaultKey is true when the key is derived from the message id, so
	// no other message can have posted it.
	DefaultKey bool
}

// GuardStep is what the shell does with a reply before posting it.
type GuardStep int

const (
	// PostNow: nothing can have posted the key; post without reading.
	PostNow GuardStep = iota
	// ReadRoom: the key may be in the room; read the agent's posts first.
	ReadRoom
	// DropDuplicate: the reply is known to be posted already.
	DropDuplicate
)

// Guard decides whether a reply needs the room read before it is posted.
// The read is skipped only when it provably cannot find anything.
func Guard(f GuardFacts) GuardStep {
	switch {
	case f.Ledger == Settled:
		return DropDuplicate
	case f.Ledger == Intent:
		return ReadRoom
	case f.Durable:
		// A durable ledger writes the intent before every post, so no
		// record means no post was ever attempted.
		return PostNow
	case f.DefaultKey && f.Attempt == 1:
		// Every post happens inside an attempt opened by processing; the
		// first attempt of this message has no predecessor that could have
		// posted its own key.
		return PostNow
	default:
		return ReadRoom
	}
}
