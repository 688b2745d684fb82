package verify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
)

// perLife builds a Shell agent whose handler is made fresh for every life
// (every process), from a per-process id, as a handler that keeps one in
// a global does.
func perLife(h func(pid string) bandonce.Handler) Factory {
	return func() Agent {
		return Shell(h(fmt.Sprintf("p%08x", rand.Uint32())))()
	}
}

// gapCatalogue holds one or more broken agents per gap the widened fault
// model closes. Each passed the verifier before it: the worlds it breaks
// in were never built, or the rule it breaks never judged.
var gapCatalogue = []broken{
	// Worlds: messages that look alike.
	{"a guard that takes anyone's marker for its reply", handLoop(loopFlaws{anySenderGuard: true}),
		[]Option{NoControlSignals()}, []string{"a guard that accepts a marker from any sender"}},
	{"a dedup key derived from the message's text", shellHandler(func(m *bandonce.Message) string {
		sum := sha256.Sum256([]byte(m.Body()))
		return "text:" + hex.EncodeToString(sum[:8])
	}), nil, []string{"the dedup key is too coarse"}},
	{"a dedup key derived from inserted_at, to the second", shellHandler(func(m *bandonce.Message) string {
		return "at:" + m.RoomID + ":" + m.InsertedAt.Truncate(time.Second).Format(time.RFC3339)
	}), nil, []string{"the dedup key is too coarse"}},

	// Worlds: a POST applied and answered badly.
	{"a POST re-sent blind after a 5xx", handLoop(loopFlaws{resendOn5xx: true}),
		// The default run catches it at the lost-reply check's 8th schedule: that one.
		[]Option{NoControlSignals(), Seed(DefaultSeed + 7), Schedules(1)}, []string{"a double post"}},
	{"a POST re-sent blind after the client timed out", handLoop(loopFlaws{resendOnTimeout: true}),
		[]Option{NoControlSignals()}, []string{"a double post"}},
	{"a loop that trusts a read before its POST can no longer land", handLoop(loopFlaws{noSettle: true}),
		[]Option{NoControlSignals()}, []string{"a double post"}},
	// A turn that waits on a model made no mark for longer than the
	// engine's stall window, which fired the kill aimed at its reply
	// before the reply: an unguarded POST was never killed after it.
	{"a loop without a guard whose turn takes 20 s", handLoop(loopFlaws{noGuard: true, think: 20 * time.Second}),
		[]Option{NoControlSignals()}, []string{"a double post"}},

	// Rules: effects and their deliveries.
	{"an effect key with a per-process id in it", perLife(func(pid string) bandonce.Handler {
		return func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
			x := ExternalFrom(ctx)
			if key := "notify:" + m.ID + ":" + pid; x.Performed(key) == 0 {
				if err := x.Effect(ctx, key); err != nil {
					return nil, err
				}
			}
			return reply(m, ""), nil
		}
	}), nil, []string{"the effect key changed between deliveries"}},
	{"an effect fired in a goroutine that outlives its handler", perLife(func(string) bandonce.Handler {
		var inFlight sync.Map // this process's effects on their way, so none is fired twice
		return func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
			x := ExternalFrom(ctx)
			key := "notify:" + m.ID
			if _, busy := inFlight.LoadOrStore(key, true); !busy && x.Performed(key) == 0 {
				go func() { // "fire and forget", with a timeout of its own
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					defer cancel()
					if x.Effect(ctx, key) != nil {
						inFlight.Delete(key)
					}
				}()
			}
			return reply(m, ""), nil
		}
	}), nil, []string{"completed after its turn was over", "never happened"}},
	{"an effect whose failure is ignored", Shell(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
		x := ExternalFrom(ctx)
		if key := "notify:" + m.ID; x.Performed(key) == 0 {
			_ = x.Effect(ctx, key) // best effort: the reply goes out anyway
		}
		return reply(m, ""), nil
	}), nil, []string{"never happened"}},
	{"an effect key that covers the whole room", Shell(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
		x := ExternalFrom(ctx)
		if key := "notify:" + m.RoomID; x.Performed(key) == 0 { // one notification per room, it thought
			if err := x.Effect(ctx, key); err != nil {
				return nil, err
			}
		}
		return reply(m, ""), nil
	}), nil, []string{"none of its deliveries performed an effect", "took it for its own"}},
	{"a loop that lets its effect run on after an interrupt or a stop", sockLoop(sockFlaws{effectUncancelled: true}),
		nil, []string{"completed after the interrupt reached the agent", "completed after the stop reached the agent"}},
	{"a loop that leaves an interrupted message for replay", sockLoop(sockFlaws{replayInterrupt: true}),
		nil, []string{"an interrupted message left for replay"}},
	{"a loop that ignores supersede", sockLoop(sockFlaws{ignoreSupersede: true}),
		nil, []string{"superseded instance"}},

	// Silent gaps.
	{"a Shell whose socket is off, not declared", Shell(ReferenceHandler, bandonce.Config{DisableSocket: true}),
		nil, []string{"never tried to open a socket"}},
	{"a loop that never pauses when it has nothing to do", handLoop(loopFlaws{noPause: true}),
		[]Option{NoControlSignals()}, []string{"a busy loop"}},
	{"a loop that lists its rooms once, at start", handLoop(loopFlaws{listRoomsOnce: true}),
		[]Option{NoControlSignals()}, []string{"never noticed"}},
}

func TestEveryGapHasABrokenAgentCaught(t *testing.T) {
	require.GreaterOrEqual(t, len(gapCatalogue), 12)
	for _, b := range gapCatalogue {
		t.Run(b.name, func(t *testing.T) {
			m := newMockT(t)
			res := ExactlyOnce(m, b.factory, quickly(b.opts...)...)
			require.False(t, res.OK, "the verifier passed a broken agent")
			errs := m.Errors()
			require.Len(t, errs, 1, "one violation is reported through t.Errorf")
			assert.Contains(t, errs[0], res.Reason)
			assert.True(t, containsAny(res.Reason, b.reason), "reason %q names none of %q", res.Reason, b.reason)
			assert.NotEmpty(t, res.Witness)
			t.Logf("%s: %s (seed %d)", res.Check, res.Reason, res.FirstViolatingSeed)
		})
	}
}

// A correct loop whose turns wait on a model for 20 s passes: the kills
// and faults aimed at its replies wait for them.
func TestACorrectLoopWithSlowTurnsPasses(t *testing.T) {
	m := newMockT(t)
	res := ExactlyOnce(m, handLoop(loopFlaws{think: 20 * time.Second}), quickly(NoControlSignals())...)
	require.True(t, res.OK, "%s: %s\n%s", res.Check, res.Reason, strings.Join(res.Witness, "\n"))
	assert.Empty(t, m.Errors())
}

func TestACorrectSocketLoopPasses(t *testing.T) {
	m := newMockT(t)
	res := ExactlyOnce(m, sockLoop(sockFlaws{}), quickly()...)
	require.True(t, res.OK, "%s: %s\n%s", res.Check, res.Reason, strings.Join(res.Witness, "\n"))
	assert.Empty(t, m.Errors())
}

// A socket that never delivers a control push leaves the control checks
// nothing to judge: the check says so, in the result and the log, rather
// than pass in silence.
func TestAControlCheckWhoseSignalsNeverArriveSaysSo(t *testing.T) {
	m := newMockT(t)
	res := Interrupt(m, sockLoop(sockFlaws{noControlTopic: true}))
	require.True(t, res.OK, res.Reason)
	note := "interrupt: none of the"
	assert.True(t, containsAny(strings.Join(res.NotApplicable, "\n"), []string{note}), "%q", res.NotApplicable)
	assert.True(t, containsAny(strings.Join(m.Logs(), "\n"), []string{note}), "logged")
}

// MayPerformNoEffect lifts exactly the rule that every answered message
// had an effect: the room-wide effect key passes with it, and an ignored
// effect failure is still caught.
func TestMayPerformNoEffectLiftsOnlyTheMissingEffectRule(t *testing.T) {
	var roomWide, ignored Factory
	for _, b := range gapCatalogue {
		switch b.name {
		case "an effect key that covers the whole room":
			roomWide = b.factory
		case "an effect whose failure is ignored":
			ignored = b.factory
		}
	}
	require.NotNil(t, roomWide)
	require.NotNil(t, ignored)
	res := ExactlyOnce(newMockT(t), roomWide, quickly(MayPerformNoEffect())...)
	assert.True(t, res.OK, res.Reason)
	res = ExactlyOnce(newMockT(t), ignored, quickly(MayPerformNoEffect())...)
	require.False(t, res.OK)
	assert.Contains(t, res.Reason, "never happened")
}
