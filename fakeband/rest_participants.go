package fakeband

import (
	"net/http"
	"slices"
)

func (b *Band) serveParticipants(c *call) reply {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, err := b.memberRoom(c.r.PathValue("chat_id"), c.who)
	if err != nil {
		return errReply(err)
	}
	out := make([]participantJSON, 0, len(r.order))
	for _, id := range r.order {
		out = append(out, renderParticipant(b.participants[id], r.roles[id]))
	}
	return okReply(http.StatusOK, out)
}

// serveAddParticipant adds a participant the way Band lets an agent:
// its sibling agents (every agent of the fake has the one operator as
// owner) and its owner, with a role that defaults to member.
func (b *Band) serveAddParticipant(c *call) reply {
	var body struct {
		Participant *struct {
			ParticipantID *string `json:"participant_id"`
			Role          *string `json:"role"`
		} `json:"participant"`
	}
	bodyErr := decodeBody(c.r, &body)
	b.mu.Lock()
	defer b.mu.Unlock()
	r, err := b.memberRoom(c.r.PathValue("chat_id"), c.who)
	if err != nil {
		return errReply(err)
	}
	if bodyErr != nil || body.Participant == nil {
		return errReply(unprocessable("validation_error", `body must be {"participant": {"participant_id", "role"?}}`, "/participant", "is invalid"))
	}
	in := body.Participant
	if in.ParticipantID == nil || !isUUID(*in.ParticipantID) {
		return errReply(unprocessable("validation_error", "participant_id must be a UUID", "/participant/participant_id", "is invalid"))
	}
	role := RoleMember
	if in.Role != nil {
		role = *in.Role
	}
	if !validRole(role) {
		return errReply(unprocessable("validation_error", "role must be owner, admin or member", "/participant/role", "is invalid"))
	}
	p := b.participants[*in.ParticipantID]
	if p == nil {
		return errReply(notFound("participant"))
	}
	if !p.isAgent() && p != b.owner {
		return errReply(forbidden("an agent may add its sibling agents, global agents and its owner"))
	}
	if r.has(p.id) {
		return errReply(unprocessable("validation_error", "the participant is already in this chat", "/participant/participant_id", "is already a participant"))
	}
	b.joinLocked(r, p, role)
	return okReply(http.StatusCreated, renderParticipant(p, role))
}

// serveRemoveParticipant removes a participant; Band lets only the room's
// owner or an admin do it, and never removes the room's only owner.
func (b *Band) serveRemoveParticipant(c *call) reply {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, err := b.memberRoom(c.r.PathValue("chat_id"), c.who)
	if err != nil {
		return errReply(err)
	}
	if role := r.roles[c.who.id]; role != RoleOwner && role != RoleAdmin {
		return errReply(forbidden("only the chat's owner or an admin may remove participants"))
	}
	id := c.r.PathValue("id")
	if !r.has(id) {
		return errReply(notFound("participant"))
	}
	role := r.roles[id]
	if role == RoleOwner && b.ownersLocked(r) == 1 {
		return errReply(&Error{Status: http.StatusForbidden, Code: "cannot_remove_sole_owner", Message: "the chat's only owner cannot be removed"})
	}
	p := b.participants[id]
	b.leaveLocked(r, p)
	return okReply(http.StatusOK, renderParticipant(p, role))
}

func (b *Band) ownersLocked(r *room) int {
	n := 0
	for _, role := range r.roles {
		if role == RoleOwner {
			n++
		}
	}
	return n
}

// isUUID reports the 8-4-4-4-12 hexadecimal form Band's ids take.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if slices.Contains([]int{8, 13, 18, 23}, i) {
			if c != '-' {
				return false
			}
			continue
		}
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}
