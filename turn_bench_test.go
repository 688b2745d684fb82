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
	trips, elapsed, _ := settleAll(b, band, bandonce.Config{
		APIKey: agent.Key, BaseURL: band.BaseURL(), HTTPClient: band.HTTPClient(), Handler: effectsHandler(k, e),
	})
	b.ReportMetric(float64(trips)/float64(b.N), "round-trips/turn")
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "turns/s")
}
