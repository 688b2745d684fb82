// Package fakeband is an in-process fake of the Band agent platform: the
// agent REST API, the human control endpoints and the Phoenix socket, with
// fault injection and a ground-truth record of everything it applied.
//
// It is the yardstick the shell's tests, the kill-storm prover and the
// conformance verifier are judged against, so it follows Band's documented
// semantics (band-api.md §2, §4, §5; control-semantics.md §0.1):
//
//   - /messages/next serves the oldest message delivered to the agent in
//     the room that is not processed (processing and failed ones included),
//     and 204 while the agent is stopped in that room.
//   - /processing opens a new attempt on every call (it is not a claim);
//     /processed and /failed need an open attempt, else 422.
//   - Posting needs at least one kind=mention entry; each mentioned
//     participant gets the message delivered; an @[[uuid]] marker is
//     prepended per mention. Posting while stopped is 403.
//   - Stop, play and interrupt are pushed on agent_control:{agent_id}; the
//     server does not deduplicate them.
//   - Events (POST .../events: tool_call, tool_result, thought, error, task,
//     attention) need no mention, are refused with 403 while the agent is
//     stopped, and are in the sending agent's /context in the room's order,
//     as "all messages the agent sent (any type)" (getAgentChatContext);
//     they mention no one, so no other agent's context holds them, and
//     they are never delivered or served by /next.
//   - Participants added or removed are pushed as participant_added and
//     participant_removed on room_participants:{room}; the agent concerned
//     also gets room_added or room_removed on agent_rooms:{agent}.
//
// Choices the fake makes where Band's behaviour is not documented:
//
//   - Marks keep working while a room is stopped (Band's SDK comments
//     claim 204 for them; that is unverified).
//   - /processing on a processed message is 422 already_processed.
//   - /context and /chats answer 422 for a limit or page_size above 100
//     (or below 1) instead of clamping.
//   - Stopped posting is 403 with code execution_stopped.
//   - Only kind=mention entries deliver, push message_created and make a
//     message part of the mentioned agent's /context; kind=reference
//     entries are recorded in metadata and get a marker, nothing more.
//   - message_created is pushed even while the agent is stopped; a
//     stopped client is expected to ignore it and /next stays gated.
//   - Every agent is owned by one operator human, Band.Owner; only that
//     human may list an agent's executions or interrupt them.
//   - Sockets have no heartbeat timeout. Each connection has an outbox
//     (at most 16 MiB) written by its own goroutine, so a push never
//     blocks the REST call or Go method that caused it; a client that
//     reads nothing for 10 s is dropped.
//   - A socket upgrade with an Origin header (a browser's) must come from
//     the fake's own loopback origin, as the admin API's requests must.
//   - supersede pushes are exempt from socket faults: they are the signal
//     that stops a client from fighting for its connection.
//   - An agent has one execution per room, created when it first joins.
//   - An agent may add its sibling agents (every agent here has the one
//     operator as owner) and the operator; adding someone already in the
//     room is 422; only a room's owner or admin may remove, never the
//     room's only owner (403 cannot_remove_sole_owner).
//   - Peers are the operator, the sibling agents and the agent's contacts
//     (AddContact); there are no global agents, and no contact requests.
//     A contact event's id is the contact's participant id.
//   - event_created is pushed on chat_room:{room} to every agent of the
//     room (the SDKs ignore it; they read events back over REST).
//   - The plan quota (403 limit_reached) is a FailBefore fault with Status
//     403 and Code "limit_reached"; /activity's 503 is a FailBefore too.
//   - Only joined topics get pushes; pushes to an agent with no socket are
//     lost, as Band's are (the durable queue is /next).
//
// Outside Go tests, cmd/fakeband serves a Band over loopback TCP for
// agents in any language: a Scenario file sets up the cast, and the admin
// API (Options.Admin, AdminPrefix) lets a harness or curl play the humans,
// inject faults in their JSON form (FaultPlan) and read the ground truth.
// The same option serves the console, a page at / for a browser that shows
// each room and each message's life (its marks, the agent's requests for
// it, a reply posted twice) and drives the fake through the admin API,
// updated live from the admin API's feed of server-sent events (FeedEvent).
//
// Everything is deterministic for a given Options.Seed and sequence of
// calls: ids come from a seeded counter, timestamps from a clock that
// advances one second per reading, and probabilistic faults from a seeded
// generator. When used under testing/synctest, create the Band inside the
// bubble.
package fakeband
