package bandonce_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/fakeband"
)

// A minimal agent: echo every message back to its sender. Here it runs
// against the in-process fake Band; in production only APIKey and Handler
// are needed.
func Example() {
	band := fakeband.New(fakeband.Options{})
	defer band.Close()
	agent, ada := band.AddAgent("echo"), band.AddHuman("ada")
	room := band.AddRoom("demo", ada, agent.ID)
	msg, _ := band.Say(room.ID, ada.ID, "hello", agent.ID)

	outcome := make(chan bandonce.Outcome, 1)
	shell, err := bandonce.New(bandonce.Config{
		APIKey: agent.Key,
		Handler: func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
			return &bandonce.Reply{Content: "echo: " + m.Body(), Mentions: []string{m.SenderID}}, nil
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
	fmt.Println("run:", <-done)
	for _, p := range band.Posts(room.ID) {
		fmt.Printf("%q\n", strings.ReplaceAll(bandonce.StripMentions(p.Content), msg, "<id>"))
	}
	// Output:
	// outcome: replied
	// run: <nil>
	// "hello"
	// "echo: hello\n[dedup_key:msg:<id>]"
}

// A handler learns why its context ended through context.Cause: here Band
// interrupts a slow cycle, so nothing is posted and the message is consumed.
func Example_interrupt() {
	band := fakeband.New(fakeband.Options{})
	defer band.Close()
	agent, ada := band.AddAgent("slow"), band.AddHuman("ada")
	room := band.AddRoom("demo", ada, agent.ID)
	msg, _ := band.Say(room.ID, ada.ID, "think hard", agent.ID)

	started := make(chan struct{})
	outcome := make(chan bandonce.Outcome, 1)
	shell, _ := bandonce.New(bandonce.Config{
		APIKey: agent.Key,
		Handler: func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
			close(started)
			<-ctx.Done() // the work; it honours ctx
			if errors.Is(context.Cause(ctx), bandonce.ErrInterrupted) {
				fmt.Println("handler: interrupted")
			}
			return nil, context.Cause(ctx)
		},
		BaseURL: band.BaseURL(), SocketURL: band.SocketURL(), HTTPClient: band.HTTPClient(),
		Hooks: bandonce.Hooks{Outcome: func(o bandonce.Outcome) { outcome <- o }},
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- shell.Run(ctx) }()
	<-started
	_ = band.Interrupt(agent.ID, "") // what a human's interrupt button does
	fmt.Println("outcome:", (<-outcome).Kind)
	cancel()
	<-done
	fmt.Println("status:", band.Status(agent.ID, msg), "replies:", len(band.Posts(room.ID))-1)
	// Output:
	// handler: interrupted
	// outcome: interrupted
	// status: processed replies: 0
}

// A failure retrying cannot fix is wrapped with Permanent: the message is
// dead-lettered at once (marked failed with the reason, then consumed) and
// the room moves on.
func ExamplePermanent() {
	band := fakeband.New(fakeband.Options{})
	defer band.Close()
	agent, ada := band.AddAgent("strict"), band.AddHuman("ada")
	room := band.AddRoom("demo", ada, agent.ID)
	_, _ = band.Say(room.ID, ada.ID, "do the impossible", agent.ID)

	dead := make(chan bandonce.Outcome, 1)
	shell, _ := bandonce.New(bandonce.Config{
		APIKey: agent.Key,
		Handler: func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
			return nil, bandonce.Permanent(fmt.Errorf("unsupported request %q", m.Body()))
		},
		BaseURL: band.BaseURL(), SocketURL: band.SocketURL(), HTTPClient: band.HTTPClient(),
		Hooks: bandonce.Hooks{DeadLetter: func(o bandonce.Outcome) { dead <- o }},
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- shell.Run(ctx) }()
	o := <-dead
	cancel()
	<-done
	fmt.Println(o.Kind, "-", o.Err)
	for _, mk := range band.Marks(agent.ID, o.MessageID) {
		fmt.Println(strings.TrimSpace(mk.Kind + " " + mk.Error))
	}
	// Output:
	// dead-lettered - permanent: unsupported request "do the impossible"
	// processing
	// failed dead-lettered: permanent: unsupported request "do the impossible"
	// processing
	// processed
}

// Shutdown is two-phase: when Run's context ends the shell stops fetching,
// lets a running handler finish for up to ShutdownTimeout, then cancels it
// with ErrShutdown. Nothing is marked for a handler cut off that way.
func Example_shutdown() {
	band := fakeband.New(fakeband.Options{})
	defer band.Close()
	agent, ada := band.AddAgent("slow"), band.AddHuman("ada")
	room := band.AddRoom("demo", ada, agent.ID)
	msg, _ := band.Say(room.ID, ada.ID, "a long job", agent.ID)

	started := make(chan struct{})
	shell, _ := bandonce.New(bandonce.Config{
		APIKey: agent.Key,
		Handler: func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
			close(started)
			<-ctx.Done()
			fmt.Println("handler:", context.Cause(ctx))
			return nil, context.Cause(ctx)
		},
		ShutdownTimeout: 50 * time.Millisecond,
		BaseURL:         band.BaseURL(), SocketURL: band.SocketURL(), HTTPClient: band.HTTPClient(),
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- shell.Run(ctx) }()
	<-started
	cancel()
	fmt.Println("run:", <-done)
	fmt.Println("status:", band.Status(agent.ID, msg))
	// Output:
	// handler: bandonce: shutting down
	// run: <nil>
	// status: processing
}

func ExampleStripMentions() {
	fmt.Println(bandonce.StripMentions("@[[2f0c8b1e-5d7a-4c3b-9e1f-0a1b2c3d4e5f]] deploy   the fix"))
	// Output: deploy   the fix
}

// Replies carry their dedup key as a last line; a reply without a key gets
// one derived from the message id.
func ExampleDefaultKey() {
	fmt.Println(bandonce.DefaultKey("5f0c"))
	// Output: msg:5f0c
}

// A one-shot agent, as run from cron or a CI job: Drain answers what is
// waiting in every room, then returns by itself. The context still bounds
// the whole run.
func ExampleShell_Drain() {
	band := fakeband.New(fakeband.Options{})
	defer band.Close()
	agent, ada := band.AddAgent("batch"), band.AddHuman("ada")
	for _, title := range []string{"one", "two", "three"} {
		room := band.AddRoom(title, ada, agent.ID)
		_, _ = band.Say(room.ID, ada.ID, "waiting in "+title, agent.ID)
	}
	shell, err := bandonce.New(bandonce.Config{
		APIKey: agent.Key,
		Handler: func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
			return &bandonce.Reply{Content: "done: " + m.Body(), Mentions: []string{m.SenderID}}, nil
		},
		BaseURL: band.BaseURL(), SocketURL: band.SocketURL(), HTTPClient: band.HTTPClient(),
	})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := shell.Drain(ctx)
	fmt.Println("drained:", res.Drained, "err:", err)
	fmt.Println("rooms:", res.Rooms, "replied:", res.Outcomes[bandonce.Replied], "stopped:", len(res.Stopped))
	// Output:
	// drained: true err: <nil>
	// rooms: 3 replied: 3 stopped: 0
}
