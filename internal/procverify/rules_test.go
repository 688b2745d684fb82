package procverify

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/fakeband"
)

// This file tests every rule of the oracle on truths built by hand: the
// fake's record made by calling it as an agent would, and the engine's
// own records (controls, attempts, lives) written directly.

// world is a fake Band with an agent and a human in rooms, and a sim over
// it whose records a test writes.
type world struct {
	t    *testing.T
	band *fakeband.Band
	s    *sim
	a    agentCalls
}

func newWorld(t *testing.T, rooms int, cfg Config) *world {
	t.Helper()
	if cfg.Command == nil {
		cfg.Command = []string{"agent"}
	}
	set, err := cfg.withDefaults()
	require.NoError(t, err)
	band := fakeband.New(fakeband.Options{Seed: 1})
	t.Cleanup(func() { _ = band.Close() })
	agent, ada := band.AddAgent("agent"), band.AddHuman("ada")
	s := &sim{cfg: set, band: band, agent: agent, human: ada, fired: map[string]int{}, notes: map[string]bool{}, wake: make(chan struct{}, 1), trace: func(string) {}}
	for i := range rooms {
		s.rooms = append(s.rooms, band.AddRoom(fmt.Sprintf("r%d", i+1), ada, agent.ID))
	}
	return &world{t: t, band: band, s: s, a: agentCalls{t: t, band: band, key: agent.Key}}
}

// say posts a human message in room i.
func (w *world) say(i int, label string) *message {
	w.t.Helper()
	id, err := w.band.Say(w.s.rooms[i].ID, w.s.human.ID, label, w.s.agent.ID)
	require.NoError(w.t, err)
	m := &message{ID: id, Room: i, Label: label}
	w.s.messages = append(w.s.messages, m)
	return m
}

func (w *world) room(m *message) string { return w.s.rooms[m.Room].ID }

func (w *world) claim(m *message) { w.a.mark(w.room(m), m.ID, "processing") }
func (w *world) done(m *message)  { w.a.mark(w.room(m), m.ID, "processed") }
func (w *world) failed(m *message) {
	w.a.do("POST", "/agent/chats/"+w.room(m)+"/messages/"+m.ID+"/failed", map[string]string{"error": "boom"})
}
func (w *world) answer(m *message) { w.a.reply(w.room(m), w.s.human.ID, "ok\n[dedup_key:k:"+m.ID+"]") }
func (w *world) seq() int          { return w.s.lastSeq() }
func (w *world) lastPost(room int) fakeband.Post {
	var mine []fakeband.Post
	for _, p := range w.band.Posts(w.s.rooms[room].ID) {
		if p.SenderID == w.s.agent.ID {
			mine = append(mine, p)
		}
	}
	require.NotEmpty(w.t, mine)
	return mine[len(mine)-1]
}

// attempt records a request of life 1 at tick.
func (w *world) attempt(tick int, ep fakeband.Endpoint, room int, msg, postID string) {
	w.s.attempts = append(w.s.attempts, &attempt{Life: 1, Tick: tick, EP: ep, Room: w.s.rooms[room].ID, Msg: msg, PostID: postID})
}

// judge runs every rule of the oracle, as the sim's judge does.
func (w *world) judge() *judgement {
	t := w.s.gather()
	v := newJudgement()
	t.doublePosts(v)
	t.doubleWrites(v)
	t.pending(v)
	t.outcomes(v)
	t.notices(v)
	t.interrupts(v)
	t.stops(v)
	t.superseded(v)
	t.terminated(v)
	return v
}

func reason(v *judgement, inv Invariant) string {
	if f := v.Found[inv]; f != nil {
		return f.Reason
	}
	return ""
}

func TestNoDoublePostFailsTwoRepliesUnderOneMarker(t *testing.T) {
	w := newWorld(t, 1, Config{})
	m := w.say(0, "r1m1")
	w.claim(m)
	w.answer(m)
	w.answer(m)
	w.done(m)
	v := w.judge()
	assert.Equal(t, `room 1 got 2 replies with dedup key "k:`+m.ID+`"`, reason(v, NoDoublePost))
	assert.Equal(t, 1, v.DoublePosts, "the second reply, counted once")
}

// A band-once turn that sends a message with m.Send (a question, a
// progress line) and then replies posts two messages for one, under two
// keys of the library's own, "msg:<id>:send:1" and "msg:<id>": nothing
// was posted twice. A second post under the send's key still is.
func TestNoDoublePostCountsATurnsSendApartFromItsReply(t *testing.T) {
	w := newWorld(t, 1, Config{})
	m := w.say(0, "r1m1")
	w.claim(m)
	send := "Could you confirm the refund?\n[dedup_key:" + bandonce.DefaultKey(m.ID) + ":send:1]"
	w.a.reply(w.room(m), w.s.human.ID, send)
	w.a.reply(w.room(m), w.s.human.ID, "Refunded.\n[dedup_key:"+bandonce.DefaultKey(m.ID)+"]")
	w.done(m)
	v := w.judge()
	assert.Empty(t, reason(v, NoDoublePost), "two keys, each posted once")
	assert.Empty(t, reason(v, OneOutcome))
	assert.Zero(t, v.DoublePosts)

	w.a.reply(w.room(m), w.s.human.ID, send)
	v = w.judge()
	assert.Equal(t, `room 1 got 2 replies with dedup key "`+bandonce.DefaultKey(m.ID)+`:send:1"`, reason(v, NoDoublePost))
}

// A turn that sent "on it" with m.Send and was then acknowledged without
// its reply lost the answer: the send is not the reply.
func TestOneOutcomeFailsATurnThatSentOnlyAProgressMessage(t *testing.T) {
	w := newWorld(t, 1, Config{})
	m := w.say(0, "r1m1")
	w.claim(m)
	w.a.reply(w.room(m), w.s.human.ID, "on it\n[dedup_key:"+bandonce.DefaultKey(m.ID)+":send:1]")
	w.done(m)
	v := w.judge()
	assert.Equal(t, "r1m1 was processed without a reply (lost)", reason(v, OneOutcome))
	assert.Equal(t, 1, v.Lost)
}

func TestNoDoubleWriteFailsAMemoryStoredTwiceUnderOneKey(t *testing.T) {
	w := newWorld(t, 1, Config{})
	remember := func(key string) {
		w.a.do("POST", "/agent/memories", map[string]any{"memory": map[string]any{
			"content": "ada likes tea", "thought": "it matters", "system": "long_term", "type": "semantic",
			"segment": "user", "scope": "subject", "subject_id": w.s.human.ID, "metadata": map[string]string{"dedup_key": key},
		}})
	}
	remember("mem:1")
	remember("mem:2")
	v := w.judge()
	assert.Equal(t, 2, v.Checks[NoDoubleWrite])
	assert.Empty(t, reason(v, NoDoubleWrite), "two keys, two memories")
	remember("mem:1")
	v = w.judge()
	assert.Equal(t, `a memory written twice under key "mem:1" ("ada likes tea")`, reason(v, NoDoubleWrite))
}

func TestNonePendingFailsAMessageThatNeverEndsProcessed(t *testing.T) {
	w := newWorld(t, 1, Config{})
	m1, m2 := w.say(0, "r1m1"), w.say(0, "r1m2")
	w.claim(m1)
	w.answer(m1)
	w.done(m1)
	w.claim(m2)
	v := w.judge()
	assert.Equal(t, `r1m2 was left "processing"`, reason(v, NonePending))
	assert.Equal(t, 2, v.Checks[NonePending])
	assert.Equal(t, 1, v.Lost)
}

func TestOneOutcomeFailsARepliedLateOrLostOrGivenUpMessage(t *testing.T) {
	t.Run("acknowledged before its reply", func(t *testing.T) {
		w := newWorld(t, 1, Config{})
		m := w.say(0, "r1m1")
		w.claim(m)
		w.done(m)
		w.answer(m)
		assert.Equal(t, "r1m1 was marked processed before its reply was posted", reason(w.judge(), OneOutcome))
	})
	t.Run("processed without a reply", func(t *testing.T) {
		w := newWorld(t, 1, Config{})
		m := w.say(0, "r1m1")
		w.claim(m)
		w.done(m)
		v := w.judge()
		assert.Equal(t, "r1m1 was processed without a reply (lost)", reason(v, OneOutcome))
		assert.Equal(t, 1, v.Lost)
	})
	t.Run("given up on", func(t *testing.T) {
		w := newWorld(t, 1, Config{})
		m := w.say(0, "r1m1")
		w.claim(m)
		w.failed(m)
		w.claim(m)
		w.done(m)
		assert.Contains(t, reason(w.judge(), OneOutcome), "r1m1 was given up on without a reply (marked failed")
	})
	t.Run("a reply that answers no message", func(t *testing.T) {
		w := newWorld(t, 1, Config{})
		w.a.reply(w.s.rooms[0].ID, w.s.human.ID, "hello, nobody")
		assert.Contains(t, reason(w.judge(), OneOutcome), "room 1 got a reply that answers no message")
	})
	t.Run("an interrupt in its turn excuses it", func(t *testing.T) {
		w := newWorld(t, 1, Config{})
		m := w.say(0, "r1m1")
		w.claim(m)
		w.s.controls = append(w.s.controls, &control{Kind: Interrupt, Room: 0, Delivered: true, Seq: w.seq(), UntilSeq: w.seq()})
		w.done(m)
		v := w.judge()
		assert.Empty(t, reason(v, OneOutcome))
		assert.Equal(t, 1, v.Interrupted)
		assert.Zero(t, v.Lost)
	})
	t.Run("an interrupt before it was said does not", func(t *testing.T) {
		w := newWorld(t, 1, Config{})
		w.say(0, "r0")
		w.s.messages = nil
		w.s.controls = append(w.s.controls, &control{Kind: Interrupt, Room: 0, Delivered: true, Seq: w.seq(), UntilSeq: w.seq()})
		m := w.say(0, "r1m1")
		w.claim(m)
		w.done(m)
		assert.Equal(t, "r1m1 was processed without a reply (lost)", reason(w.judge(), OneOutcome))
	})
	t.Run("an agent that may not reply", func(t *testing.T) {
		w := newWorld(t, 1, Config{MayNotReply: true})
		m := w.say(0, "r1m1")
		w.claim(m)
		w.done(m)
		assert.Empty(t, reason(w.judge(), OneOutcome))
	})
}

func TestOneOutcomeFailsANoticeForAnAnsweredMessageOrTwoNotices(t *testing.T) {
	notice := func(w *world, m *message) {
		w.a.do("POST", "/agent/chats/"+w.room(m)+"/events", map[string]any{"event": map[string]any{
			"content": "Sorry.", "message_type": string(bandonce.EventError),
			"metadata": map[string]string{"dedup_key": bandonce.NoticeKey(m.ID)},
		}})
	}
	w := newWorld(t, 1, Config{})
	m := w.say(0, "r1m1")
	w.claim(m)
	w.answer(m)
	notice(w, m)
	w.done(m)
	assert.Equal(t, "r1m1 was answered, yet its room was told it was given up on", reason(w.judge(), OneOutcome))

	w = newWorld(t, 1, Config{MayNotReply: true})
	m = w.say(0, "r1m1")
	w.claim(m)
	notice(w, m)
	notice(w, m)
	w.done(m)
	assert.Equal(t, "r1m1's room was told 2 times that it was given up on", reason(w.judge(), OneOutcome))
}

func TestInterruptSilenceFailsAReplySentOnceTheInterruptReachedTheAgent(t *testing.T) {
	setup := func(sentAt int, reclaim bool) *judgement {
		w := newWorld(t, 1, Config{})
		m := w.say(0, "r1m1")
		w.claim(m)
		w.s.controls = append(w.s.controls, &control{Kind: Interrupt, Room: 0, Message: m.ID, Delivered: true, Effective: 10, Seq: w.seq(), UntilSeq: w.seq()})
		if reclaim {
			w.claim(m) // a new turn of the message
		}
		w.answer(m)
		w.attempt(sentAt, fakeband.EndpointPost, 0, "", w.lastPost(0).ID)
		w.done(m)
		return w.judge()
	}
	assert.Equal(t, "r1m1's reply was sent after the interrupt reached the agent", reason(setup(11, false), InterruptSilence))
	assert.Empty(t, reason(setup(9, false), InterruptSilence), "sent before the agent read the push")
	assert.Empty(t, reason(setup(11, true), InterruptSilence), "a new claim opened a new turn")
	assert.Equal(t, 1, setup(9, false).Checks[InterruptSilence])
}

// The life that held a turn (its claim answered) and heard the interrupt
// must consume the message: marking it failed, claiming it again and
// answering it posts the reply the person interrupted. A claim by a
// later life, or by a life whose claim's answer never came, opens a turn
// the interrupt does not cover.
func TestInterruptSilenceFailsTheLifeThatHeardItClaimingAgain(t *testing.T) {
	judge := func(heldBy, reclaimBy int) *judgement {
		w := newWorld(t, 1, Config{})
		m := w.say(0, "r1m1")
		w.claim(m)
		w.s.attempts = append(w.s.attempts, &attempt{Life: 1, Tick: 5, EP: fakeband.EndpointProcessing, Room: w.room(m), Msg: m.ID, Status: 200, Answered: heldBy == 1})
		w.s.controls = append(w.s.controls, &control{Kind: Interrupt, Room: 0, Delivered: true, Effective: 10, Seq: w.seq(), UntilSeq: w.seq()})
		w.failed(m)
		w.s.attempts = append(w.s.attempts, &attempt{Life: 1, Tick: 11, EP: fakeband.EndpointFailed, Room: w.room(m), Msg: m.ID, Status: 200, Answered: true})
		w.claim(m)
		w.s.attempts = append(w.s.attempts, &attempt{Life: reclaimBy, Tick: 12, EP: fakeband.EndpointProcessing, Room: w.room(m), Msg: m.ID, Status: 200, Answered: true})
		w.answer(m)
		w.attempt(13, fakeband.EndpointPost, 0, "", w.lastPost(0).ID)
		w.done(m)
		return w.judge()
	}
	assert.Equal(t, "r1m1's reply was sent after the interrupt reached the agent", reason(judge(1, 1), InterruptSilence))
	assert.Empty(t, reason(judge(1, 2), InterruptSilence), "a later life forgot the interrupt with its crash")
	assert.Empty(t, reason(judge(0, 1), InterruptSilence), "the claim's answer was lost, and the interrupt with it")
}

func TestStopSilenceFailsWorkInAStoppedRoomBeforePlay(t *testing.T) {
	run := func(ep fakeband.Endpoint, tick, playTick int, held bool) string {
		w := newWorld(t, 1, Config{})
		m := w.say(0, "r1m1")
		w.claim(m)
		w.s.controls = append(w.s.controls, &control{Kind: Stop, Room: 0, Message: m.ID, Delivered: true, Effective: 10, Seq: w.seq(), Held: held, PlayTick: playTick})
		w.attempt(tick, ep, 0, m.ID, "")
		return reason(w.judge(), StopSilence)
	}
	assert.Equal(t, "the agent sent a reply in room 1 after its stop reached it, before play", run(fakeband.EndpointPost, 11, 0, false))
	assert.Equal(t, "the agent claimed r1m1 in room 1 after its stop reached it, before play", run(fakeband.EndpointProcessing, 11, 0, false))
	assert.Equal(t, "the agent consumed r1m1 after its stop reached it; a stop leaves the turn for replay", run(fakeband.EndpointProcessed, 11, 0, true))
	assert.Empty(t, run(fakeband.EndpointProcessed, 11, 0, false), "a timed stop only excuses")
	assert.Empty(t, run(fakeband.EndpointPost, 9, 0, false), "before the agent read the push")
	assert.Empty(t, run(fakeband.EndpointPost, 21, 20, false), "after play")
}

func TestSupersedeFailsWorkAfterThePushAndJudgesTheExit(t *testing.T) {
	w := newWorld(t, 1, Config{})
	w.s.lives = []*life{{n: 1, supersedeTick: 10}, {n: 2}}
	w.attempt(9, fakeband.EndpointPost, 0, "", "")
	assert.Empty(t, reason(w.judge(), SupersedeExit), "sent before the push")
	w.attempt(11, fakeband.EndpointNext, 0, "", "")
	assert.Empty(t, reason(w.judge(), SupersedeExit), "a read is not work")
	w.attempt(12, fakeband.EndpointProcessing, 0, "m", "")
	assert.Equal(t, "the agent (life 1) sent POST processing after it was superseded", reason(w.judge(), SupersedeExit))

	exitAfterSupersede := func(t *testing.T, exitCode bool, command ...string) *Violation {
		sm := newTestSim(t, Config{Command: command, SupersedeExitCode: exitCode}, &Schedule{Check: "t", Rooms: 1})
		require.NoError(t, sm.startLife())
		l := sm.current()
		l.markSuperseded(1)
		if command[0] != "sleep" {
			<-l.proc.Done()
		}
		l.judgeSupersede(sm)
		return sm.failure
	}
	assert.Nil(t, exitAfterSupersede(t, false, "true"), "exit 0 is Band's way")
	v := exitAfterSupersede(t, true, "true")
	require.NotNil(t, v)
	assert.Equal(t, "the agent (life 1) exited 0 after it was superseded; -supersede-exit asks for a non-zero status", v.Reason)
	assert.Nil(t, exitAfterSupersede(t, true, "false"))
	v = exitAfterSupersede(t, false, "sleep", "60")
	require.NotNil(t, v)
	assert.Contains(t, v.Reason, "the agent (life 1) was still running")
}

func TestSigtermFailsAnAgentThatDoesNotExitZeroInTime(t *testing.T) {
	w := newWorld(t, 1, Config{})
	now := time.Now()
	w.s.lives = []*life{{n: 1}, {n: 2, termAt: now, termExit: "exit status 0"}}
	v := w.judge()
	assert.Equal(t, 1, v.Checks[TermExit], "only the life sent SIGTERM")
	assert.Empty(t, reason(v, TermExit))
	w.s.lives[1].termExit = "exit status 3"
	assert.Equal(t, `the agent ended with "exit status 3" after SIGTERM; want exit 0`, reason(w.judge(), TermExit))
	w.s.lives[1].termKilled, w.s.lives[1].termTook = true, 15*time.Second
	assert.Equal(t, "the agent was still running 15s after SIGTERM", reason(w.judge(), TermExit))
}

func TestAgentLifecycleFailsAnAgentThatExitsOnItsOwn(t *testing.T) {
	sm := newTestSim(t, Config{Command: []string{"true"}}, &Schedule{Check: "t", Rooms: 1})
	require.NoError(t, sm.startLife())
	<-sm.current().proc.Done()
	assert.False(t, sm.step(time.Now().Add(time.Hour)), "the schedule is over")
	require.NotNil(t, sm.failure)
	assert.Equal(t, AgentLifecycle, sm.failure.Invariant)
	assert.Equal(t, "the agent (life 1) exited on its own (exit status 0)", sm.failure.Reason)
}

func TestQuietFailsAStallLongerThanTheQuietPeriodAndItsExcuses(t *testing.T) {
	stalled := func(t *testing.T, owed int, end time.Time) *Violation {
		sm := newTestSim(t, Config{Quiet: time.Second}, &Schedule{Check: "t", Rooms: 1})
		id, err := sm.band.Say(sm.rooms[0].ID, sm.human.ID, "r1m1", sm.agent.ID)
		require.NoError(t, err)
		sm.messages = append(sm.messages, &message{ID: id, Label: "r1m1"}) // never processed: not quiet
		require.NoError(t, sm.startLife())
		sm.arrive(sm.current(), "", "", "")
		sm.leave()
		sm.excuse(owed)
		sm.mu.Lock()
		sm.progress = time.Now().Add(-2 * time.Second)
		sm.mu.Unlock()
		sm.step(end)
		return sm.failure
	}
	later := time.Now().Add(time.Hour)
	v := stalled(t, 0, later)
	require.NotNil(t, v)
	assert.Equal(t, Quiet, v.Invariant)
	assert.Regexp(t, `^no claim, mark or reply for 2s: the system did not go quiet: r1m1 is "`, v.Reason)
	assert.Nil(t, stalled(t, 3, later), "three failures injected excuse three quiet periods")
	v = stalled(t, 3, time.Now().Add(-4*time.Second))
	require.NotNil(t, v, "and the deadline moves by as much")
	assert.Contains(t, v.Reason, "the schedule ran past its deadline")
}

// An interrupt silences a turn's other messages (m.Send) as well as its
// reply: one sent after the interrupt reached the agent fails.
func TestInterruptSilenceFailsATurnsSendAfterTheInterrupt(t *testing.T) {
	w := newWorld(t, 1, Config{})
	m := w.say(0, "r1m1")
	w.claim(m)
	w.s.attempts = append(w.s.attempts, &attempt{Life: 1, Tick: 5, EP: fakeband.EndpointProcessing, Room: w.room(m), Msg: m.ID, Status: 200, Answered: true})
	w.s.controls = append(w.s.controls, &control{Kind: Interrupt, Room: 0, Message: m.ID, Delivered: true, Effective: 10, Seq: w.seq(), UntilSeq: w.seq()})
	w.a.reply(w.room(m), w.s.human.ID, "still working on it\n[dedup_key:"+bandonce.DefaultKey(m.ID)+":send:1]")
	w.attempt(11, fakeband.EndpointPost, 0, "", w.lastPost(0).ID)
	w.done(m) // consumed, as an interrupt does
	v := w.judge()
	assert.NotEmpty(t, reason(v, InterruptSilence), "the turn's message was sent after the interrupt reached the agent")
}

// A stop left r1m1's turn for replay, and an interrupt reached the agent
// while the room was still stopped: no turn was in flight, so it does
// nothing (control-semantics 1.4). After play the same life claims r1m1
// again and answers it: a new turn, though that life held one before.
func TestInterruptSilencePassesAReplayAfterAStopAnInterruptAndPlay(t *testing.T) {
	w := newWorld(t, 1, Config{})
	m := w.say(0, "r1m1")
	w.claim(m)
	w.s.attempts = append(w.s.attempts, &attempt{Life: 1, Tick: 5, EP: fakeband.EndpointProcessing, Room: w.room(m), Msg: m.ID, Status: 200, Answered: true})
	// The stop cuts the turn; the message stays processing for replay.
	w.s.controls = append(w.s.controls, &control{Kind: Stop, Room: 0, Delivered: true, Effective: 8, Seq: w.seq(), UntilSeq: w.seq(), PlayTick: 20})
	// While stopped, an interrupt: nothing is in flight.
	w.s.controls = append(w.s.controls, &control{Kind: Interrupt, Room: 0, Delivered: true, Effective: 12, Seq: w.seq(), UntilSeq: w.seq()})
	// Play; the replay.
	w.claim(m)
	w.s.attempts = append(w.s.attempts, &attempt{Life: 1, Tick: 21, EP: fakeband.EndpointProcessing, Room: w.room(m), Msg: m.ID, Status: 200, Answered: true})
	w.answer(m)
	w.attempt(22, fakeband.EndpointPost, 0, "", w.lastPost(0).ID)
	w.done(m)
	v := w.judge()
	assert.Empty(t, reason(v, StopSilence))
	assert.Empty(t, reason(v, InterruptSilence), "the interrupt found no turn in flight: the replay after play is a new turn")
}
