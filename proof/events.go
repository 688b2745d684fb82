package proof

import (
	"cmp"
	"fmt"
	"net/http"
	"strings"
	"testing/synctest"
	"time"

	"github.com/band-once/bandonce/fakeband"
)

// nextTimed returns when the next event becomes due by its After, if it
// has one.
func (s *sim) nextTimed() (time.Time, bool) {
	if s.cursor >= len(s.sched.Events) {
		return time.Time{}, false
	}
	ev := s.sched.Events[s.cursor]
	if s.armed || ev.After <= 0 || ev.At-1 > s.released || ev.At < 1 {
		return time.Time{}, false
	}
	return s.releasedAt[ev.At-1].Add(ev.After), true
}

// dueNow reports whether the event at the cursor is due: request At is
// parked and about to be released, or its After has run out.
func (s *sim) dueNow(now time.Time) bool {
	if s.cursor >= len(s.sched.Events) {
		return false
	}
	ev := s.sched.Events[s.cursor]
	if ev.At <= s.released+1 && !s.gate.idle() {
		return true
	}
	due, ok := s.nextTimed()
	return ok && !now.Before(due)
}

// fireDue fires the event at the cursor if it is due and acts on the
// world (request-bound events are taken by release instead). It reports
// whether it fired one.
func (s *sim) fireDue(now time.Time) bool {
	if !s.dueNow(now) {
		return false
	}
	ev := s.sched.Events[s.cursor]
	if ev.Kind.requestBound() {
		if ev.At <= s.released+1 {
			return false // release hands it the next matching request
		}
		// Due by time with no request at hand: it waits for the next
		// matching one, whatever its index.
		s.armed = true
		return false
	}
	s.advance()
	s.apply(ev)
	return true
}

// advance moves the cursor past the event it points at.
func (s *sim) advance() {
	s.cursor++
	s.armed = false
}

// fireNext fires the event at the cursor now, because the system stalled
// or went quiet before it came due. A kill then hits the stalled agent;
// any other request-bound event, and a kill once the system is quiet
// (nothing left in flight to cut), is dropped: it never fired.
func (s *sim) fireNext(quiet bool) {
	ev := s.sched.Events[s.cursor]
	s.advance()
	s.progress = time.Now()
	s.trace("stalled or quiet; firing the next event now")
	switch {
	case (ev.Kind == KillBefore || ev.Kind == KillAfter) && !quiet:
		s.faults["kill_idle"]++
		s.kill(cmp.Or(s.holder(), s.slots[0]))
	case ev.Kind.requestBound():
	default:
		s.apply(ev)
	}
}

// release lets one parked request go, through the request-bound event at
// the cursor when it is due and matches.
func (s *sim) release(p *parkedRequest, now time.Time) {
	s.released++
	s.noteRelease(now)
	if s.opts.Trace != nil {
		defer s.trace("req %d (life %d): %s %s", s.released, p.life.n, p.order, s.roomName(p.room))
	}
	s.releasedAt = append(s.releasedAt, now)
	switch p.ep {
	case fakeband.EndpointProcessing, fakeband.EndpointProcessed, fakeband.EndpointFailed, fakeband.EndpointPost:
		s.progress = now
	}
	var ev *Event
	if s.cursor < len(s.sched.Events) {
		e := s.sched.Events[s.cursor]
		if e.Kind.requestBound() && (s.armed || e.At <= s.released) && (e.Endpoint == "" || e.Endpoint == p.ep) && e.Kind.appliesTo(p.ep) {
			ev = &e
			s.advance()
			s.progress = now
		}
	}
	if ev == nil {
		p.verdict <- release
		return
	}
	s.trace("event: %s", ev)
	switch ev.Kind {
	case KillBefore:
		s.faults["kill_before_send"]++
		p.verdict <- sever
		s.kill(p.life)
		return
	case KillAfter:
		s.gate.began(p)
		if resp, err := s.gate.send(p.req); err == nil {
			resp.Body.Close()
		}
		s.gate.answered(p)
		s.faults["kill_after_apply"]++
		p.verdict <- sever
		s.kill(p.life)
		return
	case Throttle:
		f := fakeband.Fault{Endpoint: p.ep, Nth: 1, Kind: fakeband.FailBefore, Status: http.StatusTooManyRequests, RetryAfter: ev.RetryAfter}
		name := "throttle_429_retry_after"
		if ev.RetryAfter == "" {
			f.EmptyBody, name = true, "throttle_429_empty"
		}
		s.band.Inject(f)
		s.faults[name]++
	case ServerError:
		s.band.Inject(fakeband.Fault{Endpoint: p.ep, Nth: 1, Count: max(ev.Count, 1), Kind: fakeband.FailBefore, Status: ev.Status})
	case Latency:
		p.delay = ev.Delay
		s.faults["latency"]++
	case LoseResponse:
		s.band.Inject(fakeband.Fault{Endpoint: p.ep, Nth: 1, Kind: fakeband.LoseResponse})
	case StaleNext:
		if p.ep == fakeband.EndpointNext {
			s.band.Inject(fakeband.Fault{Endpoint: p.ep, Nth: 1, Kind: fakeband.StaleNext})
		}
	case AppliedThen5xx:
		p.answer.status = ev.Status
	case AnswerAfterGiveUp:
		p.answer.delay = ev.Delay
	case ApplyLate:
		p.late = ev.Delay
	}
	p.verdict <- release
}

// apply carries out an event that acts on the world.
func (s *sim) apply(ev Event) {
	s.progress = time.Now()
	s.trace("event: %s", ev)
	switch ev.Kind {
	case Say:
		s.say(ev)
	case Interrupt, Stop, Play:
		s.control(ev, false)
	case DropSocket:
		if s.anySocketOpen() {
			s.faults["socket_drop"]++
		}
		s.band.DropSockets(s.agent.ID)
	case PushFault:
		s.band.InjectSocket(fakeband.SocketFault{Event: ev.PushEvent, Nth: 1, Kind: socketFault(ev.Push), Delay: ev.Delay})
	case Supersede:
		s.supersede()
	case Join:
		if s.band.AddParticipant(s.rooms[s.room(ev.Room)].ID, s.agent.ID) == nil {
			s.faults["room_joined"]++
		}
	case Pause, LedgerOutage, LoseLedgerAnswer, Handover:
		if s.reps != nil {
			s.reps.apply(ev)
		}
	case RateLimit:
		if ev.Rate <= 0 {
			_ = s.band.SetRateLimit(nil)
			break
		}
		l := &fakeband.RateLimit{PerSecond: ev.Rate, Burst: ev.Count, RetryAfter: ev.RetryAfter != "", EmptyBody: ev.RetryAfter == ""}
		if s.band.SetRateLimit(l) == nil {
			s.faults["rate_limit"]++
		}
	}
}

// supersede tells the agent another connection took over. An agent that
// hears it stops on its own (its requests are still served meanwhile) and
// drive starts a new life, as a supervisor would. The push may arrive late
// (behind a held one), so any exit after a supersede sent to an open
// socket is a fair one.
func (s *sim) supersede() {
	var connected []*life
	for _, l := range s.slots {
		if l != nil && l.socketsOpen.Load() > 0 {
			connected = append(connected, l)
		}
	}
	s.band.Supersede(s.agent.ID)
	if len(connected) > 0 {
		s.faults["supersede"]++
	}
	for _, l := range connected {
		l.superseded = true
	}
}

func (s *sim) room(i int) int {
	if i < 0 || i >= len(s.rooms) {
		return 0
	}
	return i
}

func socketFault(m PushMode) fakeband.SocketFaultKind {
	switch m {
	case PushLost:
		return fakeband.LosePush
	case PushDuplicated:
		return fakeband.DuplicatePush
	default:
		return fakeband.DelayPush
	}
}

// control applies an interrupt, stop or play, and records whether its
// push reached the agent at once: the agent read something from its
// socket while the push was the only thing travelling.
func (s *sim) control(ev Event, final bool) {
	rec := &controlRecord{Kind: ev.Kind, Room: ev.Room, Final: final}
	roomID := ""
	if ev.Room >= 0 || ev.Kind != Interrupt {
		rec.Room = s.room(ev.Room)
		roomID = s.rooms[rec.Room].ID
	}
	open := s.anySocketOpen()
	if open && ev.Push != PushNormal {
		s.band.InjectSocket(fakeband.SocketFault{Event: "agent.control", Nth: 1, Kind: socketFault(ev.Push), Delay: ev.Delay})
	}
	rec.InFlight = s.gate.inFlightSends(roomID)
	before := s.stamp()
	var err error
	switch ev.Kind {
	case Interrupt:
		err = s.band.Interrupt(s.agent.ID, roomID)
	case Stop:
		err = s.band.StopRoom(roomID)
	case Play:
		err = s.band.PlayRoom(roomID)
	}
	if err != nil {
		return
	}
	// The fake records the action, then pushes it, unless the agent is
	// not in the room: then there is no action and no push.
	action := s.band.LastEvent()
	pushed := action.Seq > before && action.Kind == controlEventKinds[ev.Kind]
	rec.Seq = action.Seq
	if pushed {
		rec.CorrelationID = action.Detail
	}
	synctest.Wait() // the push travels, if it can
	rec.Until = rec.Seq
	switch {
	case !open || ev.Push == PushLost || !pushed:
		rec.Lost = true
	case ev.Push != PushLate && s.arrivals.arrived(rec.CorrelationID):
		rec.Delivered, rec.At = true, time.Now()
	default:
		// Late, or queued behind a late push: it arrives when the agent
		// reads it from its socket, if ever.
		rec.waiting, rec.Until = true, int(^uint(0)>>1)
	}
	s.controls = append(s.controls, rec)
	s.trace("%s room %d at seq %d: delivered=%v lost=%v in-flight posts=%d", ev.Kind, rec.Room+1, rec.Seq, rec.Delivered, rec.Lost, len(rec.InFlight))
	name := ev.Kind.String()
	switch {
	case final:
		name = "final_play"
	case ev.Kind == Play && !open:
		name = "play_while_disconnected"
	}
	s.faults[name]++
}

// controlEventKinds are the fake's records of each control action.
var controlEventKinds = map[EventKind]string{
	Interrupt: fakeband.EventInterrupt, Stop: fakeband.EventStop, Play: fakeband.EventPlay,
}

// firedFaults is the histogram of what actually fired: the engine's own
// counts, plus what the fake says its injected faults did.
func (s *sim) firedFaults() map[string]int {
	out := make(map[string]int, len(s.faults)+8)
	for k, v := range s.faults {
		out[k] += v
	}
	failBefore := 0
	for key, n := range s.band.FaultsFired() {
		_, kind, _ := strings.Cut(key, "/")
		switch kind {
		case "fail_before":
			failBefore += n
		case "lose_response":
			out["lost_response"] += n
		case "stale_next":
			out["stale_next"] += n
		case "lose_push":
			out["push_lost"] += n
		case "duplicate_push":
			out["push_duplicated"] += n
		case "delay_push":
			out["push_late"] += n
		case "drop_connection":
			out["socket_drop"] += n
		case "rate_limit":
			out["rate_limited_429"] += n
		}
	}
	if n := failBefore - s.faults["throttle_429_retry_after"] - s.faults["throttle_429_empty"]; n > 0 {
		out["server_5xx"] += n
	}
	for k, v := range s.gate.fired.snapshot() {
		out[k] += v
	}
	return out
}

func (s *sim) roomName(id string) string {
	for i, r := range s.rooms {
		if r.ID == id {
			return fmt.Sprintf("(room %d)", i+1)
		}
	}
	return ""
}
