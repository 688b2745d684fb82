package verify

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/band-once/bandonce/proof"
)

// exercised sums what one check's schedules did to the reference agent.
type exercised struct {
	faults                      map[string]int
	calls, failed, cancelled    int
	superseded, keyed, messages int
	supersedesHeard             int
}

func exercise(t *testing.T, d *checkDef) exercised {
	cfg := newConfig(nil)
	r := &runner{cfg: cfg, f: ReferenceAgent(), tt: t}
	ex := exercised{faults: map[string]int{}}
	for i := range d.count(cfg.schedules) {
		b := newBuilder(cfg.seed+int64(i), d.name, r)
		tr := d.build(b)
		out := r.simulate(tr)
		assert.Nil(t, out.v, "%s seed %d", d.name, cfg.seed+int64(i))
		for k, v := range out.res.Faults {
			ex.faults[k] += v
		}
		ex.messages += out.res.Messages
		calls, _ := out.obs.world.snapshot()
		for _, c := range calls {
			ex.calls++
			switch c.outcome {
			case outcomeFailed:
				ex.failed++
			case outcomeCancelled:
				ex.cancelled++
			}
		}
		if rec := out.obs.supersede; rec != nil && rec.stopped {
			ex.superseded++
		}
		ex.supersedesHeard += out.res.Checks[proof.SupersedeStops]
		for _, e := range tr.sched.Events {
			if e.Spec.Key != "" {
				ex.keyed++
			}
		}
	}
	return ex
}

// TestEveryCheckExercisesWhatItSays guards against vacuous checks: on the
// reference agent, each check's schedules fire the faults it is named for.
func TestEveryCheckExercisesWhatItSays(t *testing.T) {
	for _, d := range allDefs {
		ex := exercise(t, d)
		f := ex.faults
		assert.Positive(t, ex.messages, d.name)
		assert.Positive(t, ex.calls, d.name)
		switch d.name {
		case "kill-before-post":
			assert.Positive(t, f["kill_before_send"], d.name)
		case "kill-after-post", "long-room":
			assert.Positive(t, f["kill_after_apply"], d.name)
		case "lost-ack":
			assert.Positive(t, f["lost_response"]+f["server_5xx"], d.name)
		case "lost-reply":
			assert.Positive(t, f["lost_response"], d.name)
			assert.Positive(t, f["applied_then_5xx"], d.name)
			assert.Positive(t, f["applied_answered_after_give_up"], d.name)
		case "duplicate-delivery":
			assert.Positive(t, f["stale_next"], d.name)
			assert.Positive(t, f["push_duplicated"], d.name)
		case "transient-errors":
			assert.Positive(t, f["server_5xx"], d.name)
			assert.Positive(t, f["throttle_429_empty"]+f["throttle_429_retry_after"], d.name)
			assert.Positive(t, f["latency"], d.name)
		case "handler-errors":
			assert.Positive(t, ex.failed, d.name)
		case "natural-keys":
			assert.Positive(t, ex.keyed, d.name)
		case "look-alikes":
			assert.Positive(t, f["human_same_text"], d.name)
			assert.Positive(t, f["human_same_second"], d.name)
			assert.Positive(t, f["human_quotes_marker"], d.name)
		case "joined-rooms":
			assert.Positive(t, f["room_joined"], d.name)
			assert.Positive(t, f["push_lost"], d.name)
		case "interrupt":
			assert.Positive(t, f["interrupt"], d.name)
			assert.Positive(t, ex.cancelled, "interrupts land while the handler works")
		case "stop-and-play":
			assert.Positive(t, f["stop"], d.name)
			assert.Positive(t, ex.cancelled, "stops land while the handler works")
		case "supersede":
			assert.Positive(t, ex.superseded, d.name)
			assert.Positive(t, ex.supersedesHeard, "the engine saw the supersede reach the instance")
		case "storm":
			assert.Greater(t, len(f), 5, "a storm mixes many faults")
		default:
			t.Errorf("no expectation for check %s", d.name)
		}
	}
}
