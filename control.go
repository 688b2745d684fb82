package bandonce

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"

	"github.com/band-once/bandonce/internal/lifecycle"
)

// controlDedupSize is how many correlation ids the shell remembers. Band
// does not deduplicate its pushes; a stale duplicate must never cancel a
// newer cycle.
const controlDedupSize = 256

// onControl receives the agent_control topic. It runs on the socket's
// receive goroutine, so it only flips flags and cancels contexts; the
// rooms do the I/O.
func (s *Shell) onControl(event string, payload json.RawMessage) {
	switch event {
	case "agent.control":
		s.applyControl(payload)
	case "supersede":
		s.log.Error("bandonce: another connection of this agent took over; stopping", "payload", string(payload))
		s.controlApplied("supersede", "", false)
		s.failRun(ErrSuperseded)
	}
}

// applyControl validates, dedups, routes and applies one signal.
func (s *Shell) applyControl(raw []byte) {
	c, err := lifecycle.ParseControl(raw)
	if err != nil {
		s.log.Warn("bandonce: ignoring an invalid control signal", "err", err, "payload", string(raw))
		if s.cfg.Hooks.InvalidControl != nil {
			s.cfg.Hooks.InvalidControl(raw, err)
		}
		return
	}
	log := s.log.With("mode", c.Mode, "scope", c.Scope, "room", c.RoomID, "correlation_id", c.CorrelationID, "reason", c.Reason)

	s.mu.Lock()
	if s.seen == nil {
		s.seen = lifecycle.NewSeenSet(controlDedupSize)
	}
	if !s.seen.Add(c.CorrelationID) {
		s.mu.Unlock()
		log.Debug("bandonce: duplicate control signal dropped")
		return
	}
	if !c.KnownMode() {
		s.mu.Unlock()
		log.Warn("bandonce: unknown control mode; ignoring")
		return
	}
	ids := make([]string, 0, len(s.rooms))
	for id := range s.rooms {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	targets := lifecycle.Route(c, ids)
	if targets.AgentWide && c.Mode != lifecycle.ModeInterrupt {
		// Rooms that join while an agent-wide stop holds start stopped.
		s.agentStopped = c.Mode == lifecycle.ModeStop
	}
	rooms := make([]*room, 0, len(targets.Rooms))
	for _, id := range targets.Rooms {
		rooms = append(rooms, s.rooms[id])
	}
	s.mu.Unlock()

	switch {
	case targets.Note == "":
	case c.Scope == lifecycle.ScopeRoom && c.RoomID == "":
		// A malformed signal from Band, not a race with a room leaving.
		log.Warn("bandonce: control signal applies to no room: " + targets.Note)
	default:
		log.Info("bandonce: control signal applies to no room: " + targets.Note)
	}
	for _, r := range rooms {
		s.applyToRoom(r, c.Mode, log)
	}
}

// applyToRoom applies one mode to one room. A failure in one room never
// keeps the signal from the others.
func (s *Shell) applyToRoom(r *room, mode string, log *slog.Logger) {
	defer func() {
		if v := recover(); v != nil {
			log.Error("bandonce: applying a control signal failed", "room", r.id, "panic", fmt.Sprint(v))
		}
	}()
	inFlight := false
	switch mode {
	case lifecycle.ModeInterrupt:
		inFlight = r.ctl.interrupt()
	case lifecycle.ModeStop:
		inFlight = r.ctl.stop()
	case lifecycle.ModePlay:
		r.ctl.play()
	}
	s.controlApplied(mode, r.id, inFlight)
}
