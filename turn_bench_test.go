package bandonce_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/fakeband"
)

// effectsHandler sends k messages and posts e events, then replies.
func effectsHandler(k, e int) bandonce.Handler {
	return func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
		for i := range e {
			if err := m.Event(ctx, bandonce.Event{Type: bandonce.EventThought, Content: fmt.Sprint("step ", i)}); err != nil {
				return nil, err
			}
		}
		for i := range k {
			if err := m.Send(ctx, bandonce.Reply{Content: fmt.Sprint("note ", i), Mentions: []string{m.SenderID}}); err != nil {
				return nil, err
			}
		}
		return &bandonce.Reply{Content: "done", Mentions: []string{m.SenderID}}, nil
	}
}

// A first delivery of a turn with k sends and e events costs k + e + 4
// requests: /next, processing, the k sends, the e events, the reply,
// processed. No room is read.
func TestAFirstDeliveryOfATurnCostsKPlusEPlusFourRequests(t *testing.T) {
	for _, c := range []struct{ k, e int }{{0, 0}, {1, 0}, {0, 1}, {3, 2}, {5, 5}} {
		t.Run(fmt.Sprintf("k=%d e=%d", c.k, c.e), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := newWorld(t, 1)
				const messages = 3
				for i := range messages {
					w.say(w.rooms[0], fmt.Sprint("m", i))
				}
				before := w.band.Requests()
				stop := w.start(w.config(effectsHandler(c.k, c.e)))
				runFor(10 * time.Second)
				require.NoError(t, stop())
				after := w.band.Requests()
				assert.Equal(t, messages*(c.k+c.e+4), messageRequests(before, after, messages))
				assert.Zero(t, after[fakeband.EndpointContext], "no room read")
				assert.Len(t, w.replies(w.rooms[0]), messages*(c.k+1))
				assert.Len(t, w.band.ChatEvents(w.rooms[0].ID), messages*c.e)
			})
		})
	}
}

// BenchmarkTurn carries b.N first deliveries of a turn with 3 sends and 2
// events through the in-memory fake Band and reports the round trips each
// turn cost (at most k + e + 4 = 9), turns per second, and allocations.
func BenchmarkTurn(b *testing.B) {
	const k, e = 3, 2
	band := fakeband.New(fakeband.Options{Seed: 1})
	defer band.Close()
	agent, human := band.AddAgent("bench"), band.AddHuman("ada")
	room := band.AddRoom("bench", human, agent.ID)
	for i := range b.N {
		if _, err := band.Say(room.ID, human.ID, fmt.Sprint("m", i), agent.ID); err != nil {
			b.Fatal(err)
		}
	}
	trips, elapsed, _ := serveAll(b, band, bandonce.Config{
		APIKey: agent.Key, BaseURL: band.BaseURL(), HTTPClient: band.HTTPClient(), Handler: effectsHandler(k, e),
	})
	b.ReportMetric(float64(trips)/float64(b.N), "round-trips/turn")
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "turns/s")
}

// A key of the handler's own under the message's key ("msg:<id>:...", as
// package agentloop's are) names work of that message alone, so a first
// delivery writes under it without reading Band, as under a default key;
// a key of any other shape is read for first.
func TestAFirstDeliveryWritesUnderKeysDerivedFromTheMessageWithoutARead(t *testing.T) {
	for _, derived := range []bool{true, false} {
		t.Run(fmt.Sprintf("derived=%v", derived), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := newWorld(t, 1)
				room := w.rooms[0]
				id := w.say(room, "refund order 17")
				key := func(m *bandonce.Message, what string) string {
					if derived {
						return bandonce.DefaultKey(m.ID) + ":mine:" + what
					}
					return "mine:" + m.ID + ":" + what
				}
				stop := w.start(w.config(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
					if err := m.Send(ctx, bandonce.Reply{Content: "on it", DedupKey: key(m, "send")}); err != nil {
						return nil, err
					}
					if err := m.Event(ctx, bandonce.Event{Type: bandonce.EventThought, Content: "thinking", DedupKey: key(m, "event")}); err != nil {
						return nil, err
					}
					if _, err := m.StoreMemory(ctx, bandonce.Memory{Content: "asked for a refund", System: "long_term", Type: "episodic",
						Segment: "user", Thought: "to recall it", SubjectID: m.SenderID, DedupKey: key(m, "memory")}); err != nil {
						return nil, err
					}
					task, err := m.CreateTask(ctx, bandonce.Task{Subject: "refund", DedupKey: key(m, "task")})
					if err != nil {
						return nil, err
					}
					if _, err := m.UpdateTask(ctx, task.ID, bandonce.TaskUpdate{Status: "completed", Comment: "done", DedupKey: key(m, "comment")}); err != nil {
						return nil, err
					}
					return &bandonce.Reply{Content: "done", Mentions: []string{m.SenderID}, DedupKey: key(m, "reply")}, nil
				}))
				runFor(10 * time.Second)
				require.NoError(t, stop())
				assert.Equal(t, "processed", w.band.Status(w.agent.ID, id))
				reqs := w.band.Requests()
				reads := reqs[fakeband.EndpointContext] + reqs[fakeband.EndpointMemories] + reqs[fakeband.EndpointTasks] + reqs[fakeband.EndpointTaskHistory]
				if derived {
					assert.Zero(t, reads, "no read: %v", reqs)
				} else {
					assert.Positive(t, reads, "a key of another shape is read for first")
				}
				assert.Len(t, w.replies(room), 2, "the send and the reply, once each")
				assert.Len(t, w.band.Memories(), 1)
				assert.Len(t, w.band.Tasks(room.ID), 1)
			})
		})
	}
}
