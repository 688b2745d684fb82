// Package bandonce gives an agent on the Band platform exactly-once message
// handling and honours Band's interrupt, stop and play control signals.
//
// A Shell serves every room of the agent. For each message Band's lifecycle
// cursor (GET /messages/next) hands it, the shell marks it processing, calls
// the Handler, posts the Reply behind a dedup guard, and marks it processed
// (or failed). The handler only does the work:
//
//	cfg, err := bandonce.ConfigFromEnv(os.Getenv) // BAND_API_KEY, BAND_BASE_URL, ...
//	if err != nil { ... }
//	cfg.Handler = func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
//		return &bandonce.Reply{Content: "echo: " + m.Body(), Mentions: []string{m.SenderID}}, nil
//	}
//	shell, err := bandonce.New(cfg)
//	if err != nil { ... }
//	err = shell.Run(ctx)
//
// Run serves until ctx ends; Shell.Drain answers what is waiting in every
// room and returns, for cron, a CI job or a serverless function.
//
// # Guarantee
//
// Every message ends processed or dead-lettered, and at most one reply is
// posted per dedup key and room, however often the process crashes, an
// answer is lost, or Band serves a message again. It assumes one running
// shell per agent (boltledger and pgledger enforce it), that the agent's
// own posts show in /context once posted, that Band applies a POST no later
// than Config.SettleWindow after it was written, and that the dedup key
// names the unit of work. The handler runs at least once: a side effect
// outside Band takes Message.Step's key, the same at every delivery.
//
// # Failure model
//
// A message's fate is decided after the handler returns, from its result
// and the cause of any cancellation. A reply's key travels as its last
// line, [dedup_key:KEY]; a POST is never re-sent blind, but only once the
// room, read after SettleWindow, shows it absent. A handler error backs off
// (Backoff) and charges one attempt; after MaxAttempts, or at once for
// Permanent, the message is dead-lettered and the room told. Marks run
// detached from cancellation; a rejected key ends Run with ErrUnauthorized.
//
// # Cancellation
//
// Band's control signals reach a running handler through context.Cause:
// ErrInterrupted (nothing is posted, the message is consumed), ErrStopped
// (the same, but the message is left and the room waits for play),
// ErrShutdown (Run's context ended; nothing is marked) and ErrSuperseded
// (another connection took over). A signal before the handler starts is
// honoured before it would run; once the reply is sent, it stays sent.
//
// # Turns with many effects
//
// Message.Send, Message.Event and Message.Step, and the writes of Band's
// agent API (Message.StoreMemory, Message.CreateTask, ...), each get the
// reply's guarantee under a key of their own; package band is the same API
// outside a handler, and package agentloop a durable LLM tool loop.
//
// # Logs, hooks and testing
//
// The shell logs to Config.Logger; Config.Hooks report every outcome,
// delivery, request and signal, and package bandonce/otel turns them into
// OpenTelemetry. Package fakeband is an in-process Band, package verify
// checks an agent against it under seeded crashes, and cmd/proof proves
// this shell at scale.
//
// The manual, with every case above spelled out, is in docs/: start with
// docs/how-it-works.md.
package bandonce
