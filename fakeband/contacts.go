package fakeband

import (
	"net/http"
	"time"
)

// contactAddedJSON is contact_added on agent_contacts:{agent}, with the
// fields both official SDKs require (PY: ContactAddedPayload in
// src/band/client/streaming/client.py; TS: payloadSchemas.ts). Its id is
// the contact's participant id: the fake keeps no separate contact record.
type contactAddedJSON struct {
	ID          string    `json:"id"`
	Handle      string    `json:"handle"`
	Name        string    `json:"name"`
	Type        string    `json:"type"`
	Description *string   `json:"description"`
	IsExternal  bool      `json:"is_external"`
	InsertedAt  time.Time `json:"inserted_at"`
}

type contactRemovedJSON struct {
	ID string `json:"id"`
}

// AddContact makes participantID one of the agent's contacts, as an
// accepted contact request does on Band: the agent gets contact_added on
// agent_contacts:{agent}, and the contact is listed among its peers with
// source "contact" and is_contact true. Adding a contact again does
// nothing.
func (b *Band) AddContact(agentID, participantID string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	agent, other, err := b.contactPairLocked(agentID, participantID)
	if err != nil {
		return err
	}
	b.addContactLocked(agent, other)
	return nil
}

// addContactLocked makes other a contact of agent, once.
func (b *Band) addContactLocked(agent, other *participant) {
	if b.contacts[agent.id] == nil {
		b.contacts[agent.id] = map[string]bool{}
	}
	if b.contacts[agent.id][other.id] {
		return
	}
	b.contacts[agent.id][other.id] = true
	b.truth.record(Event{Kind: EventContactAdded, AgentID: agent.id, Detail: other.id})
	payload := contactAddedJSON{ID: other.id, Handle: other.handle, Name: other.name, Type: other.kind, InsertedAt: b.stamp()}
	if other.isAgent() {
		d := other.description
		payload.Description = &d
	}
	b.pushLocked(agent.id, "agent_contacts:"+agent.id, "contact_added", payload)
}

// RemoveContact ends the contact: the agent gets contact_removed.
func (b *Band) RemoveContact(agentID, participantID string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	agent, other, err := b.contactPairLocked(agentID, participantID)
	if err != nil {
		return err
	}
	if !b.contacts[agent.id][other.id] {
		return notFound("contact")
	}
	b.removeContactLocked(agent, other)
	return nil
}

// removeContactLocked ends a contact agent has.
func (b *Band) removeContactLocked(agent, other *participant) {
	delete(b.contacts[agent.id], other.id)
	b.truth.record(Event{Kind: EventContactRemoved, AgentID: agent.id, Detail: other.id})
	b.pushLocked(agent.id, "agent_contacts:"+agent.id, "contact_removed", contactRemovedJSON{ID: other.id})
}

func (b *Band) contactPairLocked(agentID, participantID string) (*participant, *participant, *Error) {
	agent := b.participants[agentID]
	if agent == nil || !agent.isAgent() {
		return nil, nil, notFound("agent")
	}
	other := b.participants[participantID]
	if other == nil {
		return nil, nil, notFound("participant")
	}
	if other == agent {
		return nil, nil, unprocessable("validation_error", "an agent cannot be its own contact", "/participant", "is the agent itself")
	}
	return agent, other, nil
}

func (b *Band) adminContact(add bool) func(r *http.Request) (int, any, *Error) {
	return func(r *http.Request) (int, any, *Error) {
		var req struct {
			Agent       string `json:"agent"`
			Participant string `json:"participant"`
		}
		if err := decodeAdmin(r, &req); err != nil {
			return 0, nil, err
		}
		b.mu.Lock()
		agent, err := b.agentByRefLocked(req.Agent)
		var other *participant
		if err == nil {
			other, err = b.participantByRefLocked(req.Participant)
		}
		b.mu.Unlock()
		if err != nil {
			return 0, nil, err
		}
		act := b.RemoveContact
		if add {
			act = b.AddContact
		}
		if err := act(agent.id, other.id); err != nil {
			return 0, nil, asError(err)
		}
		return http.StatusOK, map[string]string{"agent_id": agent.id, "participant_id": other.id}, nil
	}
}
