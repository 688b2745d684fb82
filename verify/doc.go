// Package verify is the conformance check an agent's author runs in their
// own test suite: an independent grader of exactly-once, so nobody marks
// their own homework.
//
// It runs the author's real agent (a Handler on the Shell, or a loop of its
// own over Band's REST API) through real lifecycles against the fake Band
// of package fakeband, under seeded crashes, lost responses, duplicates,
// 429s and 5xxs (some after Band applied the request), answers that come
// after the client gave up, rooms of look-alike messages, rooms joined
// mid-run, socket faults and interrupt, stop, play and supersede, on the
// engine of package proof (docs/verify.md describes the fault model). It
// re-derives the verdict from the fake's ground truth, from what the agent
// sent on the wire, and from the side effects it performed in an External
// double; never from the agent's own account.
//
// # For authors
//
// One test per agent:
//
//	func TestAgentIsExactlyOnce(t *testing.T) {
//		verify.ExactlyOnce(t, verify.Shell(myHandler))
//	}
//
// ExactlyOnce runs every check of Checks (each is exported, to run alone:
// KillBeforePost, KillAfterPost, LostAck, LostReply, DuplicateDelivery,
// TransientErrors, HandlerErrors, NaturalKeys, LookAlikes, LongRoom,
// JoinedRooms, Interrupt, StopAndPlay, Supersede, Storm) over
// DefaultSchedules seeded schedules each, in about a second for a small
// agent. On the first violation it
// calls t.Errorf with the check, the first violating seed, a one-clause
// reason naming the defect, the schedule shrunk to the events that still
// show it, and the command that replays it alone:
//
//	BANDONCE_VERIFY_CHECK=kill-after-post BANDONCE_VERIFY_SEED=20260619 BANDONCE_VERIFY_SCHEDULES=1 go test -run '^TestAgentIsExactlyOnce$' example.com/youragent
//
// The Result carries the same. What a check could not exercise for this
// agent it logs and lists in Result.NotApplicable: nothing is skipped
// silently. BANDONCE_VERIFY_SCHEDULES makes every check run longer, as
// Watermill's STRESS_TEST_COUNT does. A value the verifier cannot use (a
// check name it does not know, a number it cannot read) fails the test,
// listing the valid values, rather than running something else.
//
// # What is judged
//
// Every message reaches one terminal outcome (processed with its one
// reply, processed without a reply after an interrupt, or dead-lettered);
// at most one reply per dedup key and room; nothing lost or left pending;
// the dedup key of a message is the same at every delivery, and two
// messages do not share one; an interrupted message is consumed, not left
// for replay; no side effect of the External double is performed twice for
// one natural key, and its key is as stable across deliveries as a reply's;
// nothing is posted, performed or started after an interrupt or inside a
// stopped room, and no effect completes after such a signal reached its
// turn; no effect outlives its turn, and a message answered as done had its
// effects done; a handler returns soon after its context ends; a message
// whose reply was posted is never then marked failed; a superseded instance
// stops, judged from the moment the supersede reaches it, and sends nothing
// more; every room the agent is added to is served.
//
// A turn's other effects are judged too (bandonce.Message.Send, Event and
// Step): every message and event at most once per key and room, each
// carrying its key, the same effect under the same key at every delivery,
// none sent after an interrupt or in a stopped room, and no step's fn run
// again after its result was recorded. What a person sees is judged
// message by message: an answer shown twice (sent with Send and returned
// as the Reply), a key two things share (one of them never shown). Rooms
// created and participants added are effects judged like sends; so are
// effects performed from the Shell's hooks. A later life that skips an
// effect an earlier life performed, asking nobody, remembered it in
// memory a real crash loses (KeepsDurableState for an agent with a store
// of its own). External.Model is a model double that answers differently
// at every call, so keys derived from its output are caught.
// External.EffectOnce is the double
// of an API that honours idempotency keys, such as the one Step hands its
// fn: one unit of work performed under two idempotency keys is named as a
// key that is not stable across deliveries.
//
// # The agent model
//
// An Agent runs one life until its context ends, with an Env: an
// *http.Client and URLs bound to the fake, the agent's API key, and the
// External double. A Factory builds a fresh Agent for every life, so a kill
// really forgets what the agent kept in memory. Shell adapts a Handler in
// one line. An agent with its own loop takes the Env directly, and should
// call External.Started when its handler begins: that opens the message's
// turn, to which its effects belong until it marks the message, and lets
// stops and interrupts be judged.
//
// Side effects go through External.Effect, each under the natural key of
// its unit of work and with the context of the work, and an idempotent
// agent asks External.Performed first (see External for the contract). The
// handler takes them as an interface its own package declares, and
// ShellWith hands it the External in the test, so the production binary
// links no test package; a handler that calls ExternalFrom itself would
// link this package, proof, fakeband and testing. An effect the agent makes
// through a client of its own is invisible: when no schedule saw the agent
// call External, the verifier logs so and lists it in Result.NotApplicable.
// ReferenceAgent passes every check; NewReferenceHandler, on its
// ReferenceEffects interface, is the model to copy.
//
// A reply (or any post) that Band refuses with a final 4xx, such as one
// without a mention (422 mentions_required), is a violation reported with
// Band's code and message.
//
// # Capabilities
//
// Agents that legitimately differ say so: MayNotReply (a message may be
// consumed without a reply), MayPerformNoEffect (a message may be answered
// without a side effect), NoControlSignals (no socket: interrupt, stop and
// play, and supersede do not apply), MaxAttempts (the agent's failure
// budget, per message), KeepsDurableState (a store of its own),
// DurableLedger (the Shell adapter's ledger kept across a schedule's
// lives, as a database outlives a crash). An agent that never asks for a
// socket without declaring NoControlSignals fails, rather than pass the
// control checks vacuously.
//
// # Limits
//
// Each schedule runs in a testing/synctest bubble, so ExactlyOnce needs a
// *testing.T (see TestingTer); it must not be called inside a bubble. An
// agent blocked on something the verifier cannot reach (select {}, a
// channel nobody closes) cannot be released when its life is killed: the
// engine reports that it did not stop after its context ended, and its
// goroutines stay blocked for the rest of the test binary. An agent that
// never waits on a timer between requests fails as a busy loop; one that
// spins without ever blocking stops the test binary with that reason after
// two minutes of wall time. Work the agent does outside Env (its own
// network calls, files) is invisible to the verifier.
//
// # band-once 0.1
//
// VerifyLedgerAgent keeps the Python library's contract: a LedgerAgent
// (ledger, dedupKey, attempt, ts) -> Disposition checked over seeded
// kill-and-duplicate schedules, with CleanEchoAgent as its reference and a
// ConformanceResult of the same shape. It judges a one-line function
// against an in-memory Ledger, not an agent on Band: use it only to carry
// over a 0.1 test or to compare with the Python library. Everything else
// (Ledger, LedgerEntry, Disposition) belongs to that contract too. To judge
// an agent, use ExactlyOnce and its Result.
package verify
