package fakeband

import (
	"net/http"
	"strconv"
	"strings"
)

// The admin API names rooms and participants the way a person would: by
// id, or by what they are called. Ambiguous names are refused, never
// guessed.

// roomByRefLocked finds a room by id, else by its title.
func (b *Band) roomByRefLocked(ref string) (*room, *Error) {
	if ref == "" {
		return nil, unprocessable("validation_error", "room is required (its id or title)", "/room", "is required")
	}
	if r := b.rooms[ref]; r != nil {
		return r, nil
	}
	var found []*room
	for _, id := range b.roomOrder {
		if r := b.rooms[id]; r.title == ref {
			found = append(found, r)
		}
	}
	switch len(found) {
	case 0:
		return nil, notFound("room " + strconv.Quote(ref))
	case 1:
		return found[0], nil
	}
	return nil, ambiguous("room", ref, len(found))
}

// participantByRefLocked finds a participant by id, handle (with or
// without a leading @) or name; a name matches case-insensitively.
func (b *Band) participantByRefLocked(ref string) (*participant, *Error) {
	if ref == "" {
		return nil, unprocessable("validation_error", "a participant is required (its id, name or handle)", "", "is required")
	}
	if p := b.participants[ref]; p != nil {
		return p, nil
	}
	if p := b.byHandle[strings.TrimPrefix(ref, "@")]; p != nil {
		return p, nil
	}
	var found []*participant
	for _, p := range b.people {
		if strings.EqualFold(p.name, ref) {
			found = append(found, p)
		}
	}
	switch len(found) {
	case 0:
		return nil, notFound("participant " + strconv.Quote(ref))
	case 1:
		return found[0], nil
	}
	return nil, ambiguous("participant", ref, len(found))
}

// agentByRefLocked is participantByRefLocked for agents only.
func (b *Band) agentByRefLocked(ref string) (*participant, *Error) {
	p, err := b.participantByRefLocked(ref)
	if err != nil {
		return nil, err
	}
	if !p.isAgent() {
		return nil, unprocessable("validation_error", strconv.Quote(ref)+" is a human, not an agent", "/agent", "is not an agent")
	}
	return p, nil
}

func ambiguous(what, ref string, n int) *Error {
	return &Error{
		Status:  http.StatusConflict,
		Code:    "ambiguous",
		Message: strconv.Itoa(n) + " " + what + "s are called " + strconv.Quote(ref) + "; use the id",
	}
}
