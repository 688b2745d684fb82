// Package bandonce gives an agent on the Band platform exactly-once message
// handling and honours Band's interrupt, stop and play control signals.
//
// A [Shell] serves every room of the agent. For each message Band's
// lifecycle cursor (GET /messages/next) hands it, the shell marks it
// processing, calls the [Handler], posts the [Reply] behind a dedup guard,
// and marks it processed (or failed). The handler only does the work:
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
// Run serves until ctx ends. For an agent run from cron, a CI job or a
// serverless function, [Shell.Drain] answers what is waiting in every room
// and returns by itself.
//
// # Guarantee
//
// Every message the agent receives ends processed (Band's only success
// terminal) or dead-lettered, and at most one reply is posted per dedup key
// and room, however often the process crashes, a response is lost, or Band
// serves a message again. A message whose handler returns a reply gets
// exactly one, unless an interrupt came before the reply was sent.
//
// The assumptions: one running shell per agent (Band's processing mark is not
// a lease; the durable ledger in package boltledger enforces one per host);
// the agent's own posts are visible in the room's /context once their POST
// has answered (read-your-writes); Band applies a POST no later than
// Config.SettleWindow after it was written (twice RequestTimeout unless
// set: raise it if Band, or a proxy before it, can hold a request longer);
// and the dedup key names the unit of work,
// so two messages that must each be answered have different keys. The handler
// itself runs at least once per message and may run again after a crash:
// side effects it performs outside Band need their own idempotency, keyed by
// something stable such as the message id or the reply's dedup key.
//
// # Failure model
//
// The shell decides a message's fate after the handler returns, never while
// it runs, from the handler's result and the cause of any cancellation.
//
//   - A crash before the post leaves the message processing; Band serves it
//     again and the handler runs again.
//   - A crash after the post, or a POST whose answer was lost, is caught by
//     the guard: the key travels as the reply's last line, [dedup_key:KEY],
//     and before posting again the shell reads the agent's own posts in the
//     room (every page, only what is new since its last read) for that exact
//     marker. The read is skipped when it provably cannot find anything: the
//     first attempt of a message with its default key, or a key a durable
//     ledger has no record of, once that ledger was checked against the room
//     in this life (a restored older copy of it may have lost records).
//   - The reply POST is never re-sent blind. After a timeout, a reset or a 5xx
//     the room is read again and the reply posted only if it is still absent.
//   - A POST whose outcome is unknown may still be applied after its sender
//     gave up on it or died, so the room is read for it only once
//     SettleWindow has passed since it was written; a new life (a restart,
//     a takeover) treats every send of an earlier life as unknown until
//     SettleWindow has passed since it began, for the messages an earlier
//     life attempted. The room waits without holding a worker, a message
//     is not marked processed while a send of it may still land, and a
//     first delivery waits for nothing.
//   - If the processed mark fails after the post, only the mark is retried:
//     the handler never runs again for that message, and a message whose reply
//     was posted is never marked failed.
//   - A handler error (or panic, or HandlerTimeout) charges one attempt and
//     marks the message failed; Band serves it again, after a full-jitter
//     exponential wait ([Backoff]; an error made with [RetryAfter] says how
//     long). Its room waits with it, other rooms carry on. After MaxAttempts
//     failures, or at once for an error wrapped with [Permanent], the message
//     is dead-lettered: marked failed with the reason, then consumed, because
//     Band re-serves failed messages at the head of the room and leaving one
//     there would stall every message behind it.
//   - Reads and marks retry transport errors, 429 and 5xx with bounded
//     full-jitter backoff ([RetryPolicy]); a server's Retry-After is honoured
//     but capped. Other 4xx answers are final. A rejected key (401) ends Run
//     with [ErrUnauthorized] at once.
//   - Marks run detached from cancellation with their own timeout
//     (MarkTimeout), so an interrupt or a shutdown cannot strand them.
//
// # Cancellation
//
// Band pushes control signals on the agent's Phoenix socket. The shell applies
// them out of band from the message queue, so they reach a handler already
// running; the handler sees them through context.Cause:
//
//   - interrupt ([ErrInterrupted]): the cycle in flight is aborted, nothing is
//     posted (a reply returned anyway is dropped), and the message is consumed.
//   - stop ([ErrStopped]): the same, but the message is left for replay and
//     the room starts no new cycle, and polls nothing, until play.
//   - play: the room catches up through /next, oldest first, the stopped
//     message first.
//   - shutdown ([ErrShutdown]): when Run's context ends the shell stops
//     fetching, lets running handlers finish for up to ShutdownTimeout, then
//     cancels them. Nothing is marked; the message is served again later.
//   - supersede ([ErrSuperseded]): another connection of the agent took over;
//     every room stops and Run returns the error.
//
// A signal that lands before the handler starts (while /next, the processing
// mark or the context read is in flight) is remembered and honoured before
// the handler would run. Once the reply POST has been sent, a signal no
// longer retracts it. Control aborts never count against MaxAttempts.
//
// # Turns with many effects
//
// A handler that acts as it goes (an LLM tool loop) produces more than
// one reply, and each of its effects gets the reply's guarantee:
//
//   - [Message.Send] posts a message at once, and [Message.Event] posts a
//     thought, tool_call, tool_result, error, task or attention event. Each
//     has its own dedup key (given, or derived from the message id and its
//     place in the turn) and goes through the reply's guard.
//   - [Message.Step] runs a side effect outside Band at most once per
//     message and step name as far as the [Ledger] knows, and hands it an
//     idempotency key that is the same at every delivery.
//   - The writes of Band's agent API that Band has no idempotency key
//     for carry their key in the write itself and go through the same
//     guard: [Message.StoreMemory], [Message.CreateTask], a comment of
//     [Message.UpdateTask], a titled [Message.CreateRoom]. The writes
//     that set state ([Message.SetGoal], a task's status, a contact, a
//     participant) are idempotent by nature.
//   - The room tools ([Message.Participants], [Message.AddParticipant],
//     ...) and package band's client, usable outside a handler, reach the
//     rest of Band's agent API.
//
// After an interrupt or a stop reached the room, an effect sends nothing
// and returns the cause. See docs/turns.md for what a crash can still
// repeat with a forgetful ledger.
//
// # Logs, hooks and telemetry
//
// The shell logs to Config.Logger, slog.Default() when nil: a line at start
// (agent, rooms, socket), a warning for every failure that repeats, naming
// the call and the URL, a line per delivery's outcome (at
// Config.OutcomeLogLevel, Info unless set), a line at
// shutdown. Config.Hooks are for a program that wants the events
// themselves; each is called without blocking the shell for long:
//
//   - Outcome and DeadLetter: a delivery had its outcome, or was given up on.
//   - DeliveryStart and DeliveryEnd bracket one delivery of a message, and
//     HandlerStart and HandlerEnd the handler call inside it; the start
//     hooks may return a context carrying a trace span, which the
//     delivery's requests and the handler then run under.
//   - GuardRead: the dedup guard read the room; Request: one HTTP attempt
//     to Band, with its endpoint, status and attempt number.
//   - Control: a control signal was applied; Socket: the socket came up or
//     went down; Room: a room is served, or no longer; Throttle: Band's
//     429s made the shell pace every request, or the pace was lifted.
//
// Package bandonce/otel (bandonceotel) turns them into OpenTelemetry
// metrics and spans with one call; docs/observability.md lists both.
//
// # Testing your agent
//
// Package fakeband is an in-process Band with fault injection and a record
// of everything it applied; package verify runs an agent through seeded
// crashes, lost responses, duplicates and control signals and judges it from
// that record; package proof and cmd/proof do the same for this shell at
// scale and print a receipt anyone can re-run.
package bandonce
