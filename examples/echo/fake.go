package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/fakeband"
)

// runFake plays a short conversation with the echo agent on the
// in-process fake Band and prints it.
func runFake(ctx context.Context, out io.Writer, logger *slog.Logger) error {
	band := fakeband.New(fakeband.Options{Seed: 1})
	defer band.Close()
	agent := band.AddAgent("echo")
	ada := band.AddHuman("ada")
	room := band.AddRoom("demo", ada, agent.ID)

	shell, err := bandonce.New(bandonce.Config{
		APIKey:     agent.Key,
		BaseURL:    band.BaseURL(),
		SocketURL:  band.SocketURL(),
		HTTPClient: band.HTTPClient(),
		Handler:    Echo(0),
		Logger:     logger,
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- shell.Run(ctx) }()

	lines := []string{"hello there", "is anyone home?", "bye"}
	for _, line := range lines {
		if _, err := band.Say(room.ID, ada.ID, line, agent.ID); err != nil {
			cancel()
			<-done
			return err
		}
	}
	waitErr := waitForReplies(ctx, band, room.ID, agent.ID, len(lines))
	cancel()
	if err := <-done; err != nil {
		return err
	}
	if waitErr != nil {
		return waitErr
	}
	names := map[string]string{agent.ID: agent.Name, ada.ID: ada.Name}
	for _, p := range band.Posts(room.ID) {
		fmt.Fprintf(out, "%-5s %s\n", names[p.SenderID]+":", bandonce.StripMentions(firstLine(p.Content)))
	}
	return nil
}

// waitForReplies polls the fake's ground truth until the agent has posted
// want replies, or gives up after ten seconds.
func waitForReplies(ctx context.Context, band *fakeband.Band, roomID, agentID string, want int) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := 0
		for _, p := range band.Posts(roomID) {
			if p.SenderID == agentID {
				n++
			}
		}
		if n >= want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the agent posted %d of %d replies in 10s", n, want)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// firstLine drops the dedup marker line the shell appends to replies.
func firstLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}
