package bandonce_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/fakeband"
)

// A turn with many effects: a thought event, a journaled step whose result
// comes back on any redelivery, a question to a second participant
// mentioned by handle, and the final reply. Each is posted once per dedup
// key, whatever crashes and redeliveries happen.
func ExampleMessage_Send() {
	band := fakeband.New(fakeband.Options{})
	defer band.Close()
	agent, ada, bea := band.AddAgent("refunds"), band.AddHuman("ada"), band.AddHuman("bea")
	room := band.AddRoom("support", ada, agent.ID, bea.ID)
	msg, _ := band.Say(room.ID, ada.ID, "refund order-17", agent.ID)

	outcome := make(chan bandonce.Outcome, 1)
	shell, err := bandonce.New(bandonce.Config{
		APIKey: agent.Key,
		Handler: func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
			if err := m.Event(ctx, bandonce.Event{Type: bandonce.EventThought, Content: "a refund, then a confirmation"}); err != nil {
				return nil, err
			}
			receipt, err := m.Step(ctx, "refund", func(ctx context.Context, idempotencyKey string) ([]byte, error) {
				return []byte("re_1"), nil // the payment API call, with idempotencyKey
			})
			if err != nil {
				return nil, err
			}
			if err := m.Send(ctx, bandonce.Reply{Content: "please confirm " + string(receipt), Mentions: []string{"@bea"}}); err != nil {
				return nil, err
			}
			return &bandonce.Reply{Content: "refunded", Mentions: []string{m.SenderID}}, nil
		},
		BaseURL: band.BaseURL(), SocketURL: band.SocketURL(), HTTPClient: band.HTTPClient(),
		Hooks: bandonce.Hooks{Outcome: func(o bandonce.Outcome) { outcome <- o }},
	})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- shell.Run(ctx) }()
	fmt.Println("outcome:", (<-outcome).Kind)
	cancel()
	<-done
	for _, e := range band.ChatEvents(room.ID) {
		fmt.Printf("event %s: %s %s\n", e.MessageType, e.Content, strings.ReplaceAll(string(e.Metadata), msg, "<id>"))
	}
	for _, p := range band.Posts(room.ID)[1:] {
		fmt.Printf("post: %q\n", strings.ReplaceAll(bandonce.StripMentions(p.Content), msg, "<id>"))
	}
	// Output:
	// outcome: replied
	// event thought: a refund, then a confirmation {"dedup_key":"msg:<id>:event:1"}
	// post: "please confirm re_1\n[dedup_key:msg:<id>:send:1]"
	// post: "refunded\n[dedup_key:msg:<id>]"
}
