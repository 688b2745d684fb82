// Package procverify is the engine of bandonce verify: the kill-storm for
// an agent in any language, run as the process it is.
//
// For every schedule it serves a fresh fake Band (package fakeband) on
// loopback and starts the agent's command in a process group of its own,
// with BAND_API_KEY, BAND_AGENT_ID, BAND_BASE_URL, BAND_REST_URL and
// BAND_WS_URL pointing at a proxy that stands between the two. The proxy
// is where the schedule acts: it holds a chosen request, SIGKILLs the
// agent's whole process tree and then applies the request or not; it
// loses answers, answers 429 and 5xx, delays; it holds an answer while an
// interrupt or a stop travels to the agent's socket, so the signal
// provably reaches the agent before it can send its reply. The agent is
// restarted after every kill, superseded now and then, and stopped with
// SIGTERM at the end. With Config.Replicas several copies run at once
// on a database of the schedule's own, the faults aim at the one that
// holds (see replicas.go), and a replica taken over from must send
// nothing more (Fenced).
//
// The verdict comes from the fake's ground truth and from what the
// proxies saw the agent send, judged by the rules of Invariants; the
// first violation is shrunk to a minimal witness by re-running smaller
// schedules (see docs/bandonce.md for the rules, the attribution of
// replies without a dedup marker, and the timing assumptions).
//
// Unlike package proof this runs in real time against a real process, so
// a schedule is not exactly repeatable: its events are tied to requests
// by endpoint and count, not to a global order, and a witness is a
// schedule that showed the violation again when it was re-run.
package procverify
