package fakeband

import "time"

// Sender types as Band spells them.
const (
	typeUser  = "User"
	typeAgent = "Agent"
)

// Delivery statuses as Band spells them (per message, per recipient).
const (
	StatusDelivered  = "delivered"
	StatusProcessing = "processing"
	StatusProcessed  = "processed"
	StatusFailed     = "failed"
)

// participant is an agent or a human.
type participant struct {
	id, key, name, handle string
	kind                  string // typeUser or typeAgent
	at                    time.Time
}

func (p *participant) isAgent() bool { return p.kind == typeAgent }

// room is a chat room. Messages only grow, so a position in them is a
// stable cursor.
type room struct {
	id, title string
	ownerID   string
	roles     map[string]string // participant id -> owner|member
	order     []string          // participant ids in join order
	messages  []*message
	at        time.Time
}

func (r *room) has(id string) bool { _, ok := r.roles[id]; return ok }

// mention is one resolved entry of a message's mentions.
type mention struct {
	p    *participant
	kind string // "mention" or "reference"
}

// message is a stored text message.
type message struct {
	id, roomID string
	sender     *participant
	content    string // stored form, markers included
	mentions   []mention
	recipients []string // ids of the kind=mention entries
	at         time.Time
}

func (m *message) mentionsAgent(id string) bool {
	for _, r := range m.recipients {
		if r == id {
			return true
		}
	}
	return false
}

// delivery is one recipient's lifecycle of one message.
type delivery struct {
	roomID   string
	status   string
	attempts int  // attempts opened so far; the newest is number attempts
	open     bool // the newest attempt is still open
}

type deliveryKey struct{ recipientID, messageID string }

// execution is an agent's presence in a room; stop and play act on it.
type execution struct {
	id, agentID, roomID string
	stopped             bool
	stoppedAt           time.Time
}

type pairKey struct{ agentID, roomID string }
