package examplekit

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"sort"
	"strings"
	"time"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/fakeband"
)

// Stage is the world an example plays a request in: the fake Band with
// the agent and a room of humans (the first is the sender), and the fake
// payment API on a local server. The -fake mode runs the fake in process;
// a process test makes it Listen.
type Stage struct {
	Band     *fakeband.Band
	Agent    fakeband.Agent
	Humans   []fakeband.Human
	Room     fakeband.Room
	Payments *PaymentsServer
	// PaymentsURL is the payment API's root.
	PaymentsURL string

	api   *httptest.Server
	names map[string]string
}

// NewStage makes a fake Band seeded with seed, with the agent called
// agent in a room, "support", with the humans called humans, and a fake
// payment API. Close ends both.
func NewStage(seed int64, agent string, humans ...string) *Stage {
	fb := fakeband.New(fakeband.Options{Seed: seed})
	s := &Stage{Band: fb, Agent: fb.AddAgent(agent), Payments: NewPaymentsServer(), names: map[string]string{}}
	s.names[s.Agent.ID] = s.Agent.Name
	ids := []string{s.Agent.ID}
	for _, name := range humans {
		h := fb.AddHuman(name)
		s.Humans = append(s.Humans, h)
		s.names[h.ID] = h.Name
		ids = append(ids, h.ID)
	}
	s.Room = fb.AddRoom("support", s.Humans[0], ids...)
	s.api = httptest.NewServer(s.Payments)
	s.PaymentsURL = s.api.URL
	return s
}

// Close stops the payment API and the fake Band.
func (s *Stage) Close() {
	s.api.Close()
	_ = s.Band.Close()
}

// Name names a participant in the transcript (the agent and the humans
// are named already).
func (s *Stage) Name(id, name string) { s.names[id] = name }

// Names returns a participant's name, "" for one the stage does not know.
func (s *Stage) Names(id string) string { return s.names[id] }

// Play serves the agent with handler on the in-process fake until the
// sender's message text is processed (or within has passed), then stops
// the shell.
func (s *Stage) Play(ctx context.Context, handler bandonce.Handler, logger *slog.Logger, text string, within time.Duration) error {
	shell, err := bandonce.New(bandonce.Config{
		APIKey:     s.Agent.Key,
		BaseURL:    s.Band.BaseURL(),
		SocketURL:  s.Band.SocketURL(),
		HTTPClient: s.Band.HTTPClient(),
		Handler:    handler,
		Logger:     logger,
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- shell.Run(ctx) }()

	msg, err := s.Band.Say(s.Room.ID, s.Humans[0].ID, text, s.Agent.ID)
	if err == nil {
		err = s.waitProcessed(ctx, msg, within)
	}
	cancel()
	if runErr := <-done; runErr != nil {
		return runErr
	}
	return err
}

// waitProcessed polls the fake's ground truth until the message is
// processed, or gives up after within.
func (s *Stage) waitProcessed(ctx context.Context, msgID string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for s.Band.Status(s.Agent.ID, msgID) != fakeband.StatusProcessed {
		if time.Now().After(deadline) {
			return fmt.Errorf("the message was not processed in %v (status %q)", within, s.Band.Status(s.Agent.ID, msgID))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}

// A Transcript prints what a played request left on the stage, one line
// a thing, each led by a label padded to Width.
type Transcript struct {
	Out   io.Writer
	Width int
	stage *Stage
}

// Transcript prints to out with labels padded to width.
func (s *Stage) Transcript(out io.Writer, width int) Transcript {
	return Transcript{Out: out, Width: width, stage: s}
}

// Line prints one line under label.
func (t Transcript) Line(label, format string, args ...any) {
	fmt.Fprintf(t.Out, "%-*s %s\n", t.Width, label+":", fmt.Sprintf(format, args...))
}

// Room prints the room's messages and events in the order they were
// posted, each under its sender's name, without the shell's dedup marker.
func (t Transcript) Room() {
	s := t.stage
	type line struct {
		seq  int
		who  string
		text string
	}
	var lines []line
	for _, p := range s.Band.Posts(s.Room.ID) {
		to := ""
		for _, id := range p.Mentions {
			to += "@" + s.names[id] + " "
		}
		lines = append(lines, line{p.Seq, s.names[p.SenderID], to + bandonce.StripMentions(FirstLine(p.Content))})
	}
	for _, e := range s.Band.ChatEvents(s.Room.ID) {
		lines = append(lines, line{e.Seq, s.names[e.SenderID], "[" + e.MessageType + "] " + e.Content})
	}
	sort.Slice(lines, func(i, j int) bool { return lines[i].seq < lines[j].seq })
	for _, l := range lines {
		t.Line(l.who, "%s", l.text)
	}
}

// Board prints the room's tasks, each with its status and comments.
func (t Transcript) Board() {
	s := t.stage
	for _, task := range s.Band.Tasks(s.Room.ID) {
		status := "pending"
		for _, a := range task.Assignments {
			status = a.Status
		}
		t.Line("board", "#%d %s [%s]", task.Number, task.Subject, status)
		for _, c := range task.Comments {
			fmt.Fprintf(t.Out, "%*s %s: %s\n", t.Width, "", s.names[c.AuthorID], FirstLine(c.Text))
		}
	}
}

// Refunds prints how many refunds the payment API made per order.
func (t Transcript) Refunds() {
	for order, n := range t.stage.Payments.Refunds() {
		t.Line("payments", "%s refunded %d time(s)", order, n)
	}
}

// FirstLine drops the dedup marker line the shell appends to messages.
func FirstLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}
