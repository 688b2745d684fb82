// Package proof is band-once's kill-storm prover: it runs an agent (by
// default the real bandonce.Shell, through the real HTTP stack) against the
// fake Band under seeded schedules of crashes, HTTP faults, socket faults
// and control signals, and judges every schedule from the fake's ground
// truth, never from the agent's own account. cmd/proof prints its receipt;
// the conformance verifier reuses the engine for hand-written agents.
//
// # Determinism
//
// Each schedule runs inside a testing/synctest bubble, in virtual time, so
// slow handlers, backoffs and polls cost no wall time. Order comes from a
// lockstep gate: every request of the agent parks at the gate, and the
// engine's driver, once every goroutine of the bubble is blocked, releases
// exactly one, the first by method and path. Faults are decided at the
// gate from the schedule (request index to fault), not by timing, so a
// schedule is its own replay, request totals included.
//
// # Fault model
//
// A schedule draws rooms (some joined mid-run, their room_added push
// sometimes lost) and messages, some of them look-alikes: the same plain
// text in one room, a pasted [dedup_key:...] line in a human's message,
// and, since the fake stamps inserted_at with virtual time, timestamps
// shared by messages said together. Its faults act at the gate on one
// request (kill before or after Band applies it, lose the response, 429,
// 5xx bursts, latency, a stale /next, a request applied and then answered
// 5xx, a request applied and answered only after the client gave up, a
// send held and applied late, after its sender gave up on it or was
// killed) or
// on the world (socket drops, lost, duplicated and late pushes, interrupt,
// stop, play, supersede). The receipt counts what fired.
//
// # Agents and lives
//
// An Agent runs until its context ends; a Factory makes a fresh one for
// every life, so a kill forgets whatever the agent kept in memory. A kill,
// at a request boundary, either keeps the request from the fake
// (KillBefore) or lets the fake apply it and loses the response
// (KillAfter); then the life's connections are severed, its External goes
// dead, its context is cancelled, and once it has returned the next life
// starts on the same fake. Only what the agent kept outside itself
// survives: the fake's state, External, and a durable ledger if the
// schedule has one.
//
// # Invariants
//
// After the system goes quiet (every message processed, nothing in
// flight), the oracle checks each of Invariants: no key posted twice; no
// message left pending; each message in exactly one outcome (processed
// after its one reply; processed without a reply when none was due, an
// interrupt came first, or its key was already posted; or dead-lettered:
// failed with a reason, then processed); no handler started in a room
// between a stop that reached the agent and the room's play; nothing sent
// for an interrupted cycle after the signal reached the agent, and the
// message of a turn an interrupt reached consumed by the life that heard
// it; no message drawn to succeed within the failure budget dead-lettered;
// an agent the supersede reached starts nothing new and returns within
// 10s; and the agent runs until cancelled, returns soon after, and lets
// virtual time advance (2,000 requests at one instant is a busy loop).
//
// A signal "reached the agent" when the agent read its push from the
// socket (a supersede is seen by its frame: a client may read it and never
// read its socket again); late, lost and undeliverable pushes only ever
// excuse an outcome, never convict one. The engine sees a push arrive by its
// correlation id in what the agent reads, not by the first bytes read
// after it was sent, which may be another late push queued ahead of it.
//
// An interrupt applies to the turn in flight when its push reaches the
// agent. Band's push names no turn (its execution_id names the agent's
// execution in the room, not a message), so no agent can tell an
// interrupt sent for a turn that has since ended from one sent for the
// turn now running, and Band's own SDK aborts whatever is in flight. A
// message consumed without its reply is therefore not lost when an
// interrupt that can have reached the agent falls inside its cycle, from
// the interrupt's sending to its arrival; the receipt counts those
// messages apart ("interrupted").
//
// # Assumptions
//
// A killed life's connections close, and a request still travelling
// (latency) never arrives, except one an apply-late fault holds: that one
// is applied when its hold ends, after the sender gave up on it or in the
// next life. Holds last at most 4 s after the request left the agent, the
// bound the shell assumes of Band with its 2 s request timeout
// (Config.SettleWindow's default); the receipt counts applied_late (its
// sender still waited) and applied_late_after_sender_gone. Band's own
// guarantees are the fake's (see package fakeband).
package proof
