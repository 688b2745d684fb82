package lifecycle

// Knowledge is what the ledger knows of a reply key.
type Knowledge int

const (
	// Unknown: no record of the key.
	Unknown Knowledge = iota
	// Intent: a post was about to be sent and its outcome is not known.
	Intent
	// InRoom: the reply is known to be in the room.
	InRoom
)

// GuardFacts is everything the shell knows, before reading the room,
// about whether a reply may already have been posted.
type GuardFacts struct {
	Ledger Knowledge
	// Durable is true when the ledger survives crashes. Its Unknown means
	// "never tried" only while the file or database is the one every
	// earlier life wrote; a restored older copy has lost records.
	Durable bool
	// Checked is true once, in this life, the durable ledger was checked
	// against the room: every key of the agent's in the room was found on
	// record, or recorded. From then on its Unknown is the truth for the
	// room, because this life writes every intent before its post.
	Checked bool
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
	// CheckLedger: read the room once and bring the durable ledger up to
	// it (recording every key the room holds that it lacks), then decide
	// again with Checked.
	CheckLedger
)

// Guard decides whether a reply needs the room read before it is posted.
// The read is skipped only when it provably cannot find anything.
func Guard(f GuardFacts) GuardStep {
	switch {
	case f.Ledger == InRoom:
		return DropDuplicate
	case f.Ledger == Intent:
		return ReadRoom
	case f.DefaultKey && f.Attempt == 1:
		// Every post happens inside an attempt opened by processing; the
		// first attempt of this message has no predecessor that could have
		// posted its own key, whatever the ledger says.
		return PostNow
	case f.Durable && f.Checked:
		// A durable ledger writes the intent before every post, and this
		// life found it complete against the room: no record means no
		// post was ever attempted.
		return PostNow
	case f.Durable:
		// No record, but the file may be an older copy (a backup, a
		// snapshot) that lost the record of a post an earlier life made.
		return CheckLedger
	default:
		return ReadRoom
	}
}
