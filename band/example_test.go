package band_test

import (
	"context"
	"fmt"

	"github.com/band-once/bandonce/band"
	"github.com/band-once/bandonce/fakeband"
)

// The room tools outside any handler: who am I, which peers may join a
// room, add one, and open a new room. Here against the in-process fake
// Band; in production only APIKey is needed.
func Example() {
	fb := fakeband.New(fakeband.Options{})
	defer fb.Close()
	agent, helper, ada := fb.AddAgent("planner"), fb.AddAgent("helper"), fb.AddHuman("ada")
	room := fb.AddRoom("ops", ada, agent.ID)

	client, err := band.New(band.Config{APIKey: agent.Key, BaseURL: fb.BaseURL(), HTTPClient: fb.HTTPClient()})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	me, _ := client.Me(ctx)
	fmt.Println("me:", me.Name)
	peers, _ := client.Peers(ctx, room.ID)
	for _, p := range peers {
		if p.ID == helper.ID {
			fmt.Println("peer:", p.Name, p.Type)
		}
	}
	for range 2 { // a repeated add has the effect of one
		if _, err := client.AddParticipant(ctx, room.ID, helper.ID, band.RoleMember); err != nil {
			fmt.Println("add:", err)
		}
	}
	ps, _ := client.Participants(ctx, room.ID)
	fmt.Println("participants:", len(ps))
	created, _ := client.CreateRoom(ctx, "Incident 8842")
	fmt.Println("created:", created.Title)
	// Output:
	// me: planner
	// peer: helper Agent
	// participants: 3
	// created: Incident 8842
}
