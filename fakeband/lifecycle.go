package fakeband

// nextLocked returns what /messages/next serves the agent in the room: the
// oldest message delivered to it that is not processed, or nil for 204.
// stale asks for a stale replica's answer: the message most recently
// processed there, if any (it reports whether that happened).
func (b *Band) nextLocked(agent *participant, roomID string, stale bool) (m *message, servedStale bool, err *Error) {
	r, err := b.memberRoom(roomID, agent)
	if err != nil {
		return nil, false, err
	}
	if b.stoppedLocked(agent.id, r.id) {
		return nil, false, nil // the platform's stop gate
	}
	if stale {
		if id, ok := b.lastDone[pairKey{agent.id, r.id}]; ok {
			return b.messages[id], true, nil
		}
	}
	// Processed is terminal and messages are only appended, so the prefix
	// of the room that holds nothing for this agent only grows: /next
	// resumes where it last found the head instead of rescanning a long
	// room on every call.
	pk := pairKey{agent.id, r.id}
	i := b.doneUpTo[pk]
	for ; i < len(r.messages); i++ {
		if d := b.deliveries[deliveryKey{agent.id, r.messages[i].id}]; d != nil && d.status != StatusProcessed {
			break
		}
	}
	b.doneUpTo[pk] = i
	if i < len(r.messages) {
		return r.messages[i], false, nil
	}
	return nil, false, nil
}

// deliveryLocked finds the agent's delivery of a message in a room it is in.
func (b *Band) deliveryLocked(agent *participant, roomID, messageID string) (*delivery, *Error) {
	if _, err := b.memberRoom(roomID, agent); err != nil {
		return nil, err
	}
	d := b.deliveries[deliveryKey{agent.id, messageID}]
	if d == nil || d.roomID != roomID {
		return nil, notFound("message")
	}
	return d, nil
}

// markProcessingLocked opens a new attempt; it is not exclusive, any call
// opens one, and only a processed message refuses.
func (b *Band) markProcessingLocked(agent *participant, roomID, messageID string) (markJSON, *Error) {
	d, err := b.deliveryLocked(agent, roomID, messageID)
	if err != nil {
		return markJSON{}, err
	}
	if d.status == StatusProcessed {
		return markJSON{}, unprocessable(ErrAlreadyProcessed.Code, ErrAlreadyProcessed.Message, "", "message is already processed")
	}
	d.attempts++
	d.open = true
	d.status = StatusProcessing
	b.recordMark(agent.id, roomID, messageID, StatusProcessing, d.attempts, "")
	return markJSON{ID: messageID, Status: d.status, AttemptNumber: d.attempts, Success: true}, nil
}

// markDoneLocked closes the open attempt as processed or failed.
func (b *Band) markDoneLocked(agent *participant, roomID, messageID, status, reason string) (markJSON, *Error) {
	d, err := b.deliveryLocked(agent, roomID, messageID)
	if err != nil {
		return markJSON{}, err
	}
	if !d.open {
		return markJSON{}, unprocessable(ErrNoActiveAttempt.Code, ErrNoActiveAttempt.Message, "", "no active processing attempt")
	}
	d.open = false
	d.status = status
	if status == StatusProcessed {
		b.lastDone[pairKey{agent.id, roomID}] = messageID
	}
	b.recordMark(agent.id, roomID, messageID, status, d.attempts, reason)
	return markJSON{ID: messageID, Status: status, AttemptNumber: d.attempts, Success: true}, nil
}

func (b *Band) recordMark(agentID, roomID, messageID, kind string, attempt int, reason string) {
	seq := b.truth.record(Event{Kind: EventMark, AgentID: agentID, RoomID: roomID, MessageID: messageID, Detail: kind})
	k := deliveryKey{agentID, messageID}
	b.truth.marks[k] = append(b.truth.marks[k], Mark{
		Seq: seq, AgentID: agentID, RoomID: roomID, MessageID: messageID, Kind: kind, Attempt: attempt, Error: reason,
	})
}
