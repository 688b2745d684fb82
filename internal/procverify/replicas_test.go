package procverify

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce/fakeband"
)

// replicaSim is a sim of two replicas' records, with no process or fake
// behind them: enough to judge who may speak to Band.
func replicaSim() (*sim, *life, *life) {
	s := &sim{cfg: &settings{Config: Config{Replicas: 2}}, fired: map[string]int{}, notes: map[string]bool{}, trace: func(string) {}}
	l1, l2 := &life{n: 1}, &life{n: 2}
	s.lives, s.life = []*life{l1, l2}, l1
	return s, l1, l2
}

func speak(s *sim, l *life, ep fakeband.Endpoint) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clock++
	s.speakLocked(l, &attempt{Life: l.n, Tick: s.clock, EP: ep})
}

func TestAHolderTakenOverFromIsFencedWhileTheNewHolderStays(t *testing.T) {
	s, l1, l2 := replicaSim()
	speak(s, l1, fakeband.EndpointNext)
	s.markGone(l1, "")
	s.mu.Lock()
	l1.rep.paused, l1.rep.pauseStart = true, time.Now()
	s.mu.Unlock()
	speak(s, l2, fakeband.EndpointChats)
	require.Same(t, l2, s.life, "the standby took over from the paused holder")
	require.Len(t, s.failovers, 1)
	assert.Equal(t, FailoverPause, s.failovers[0].Cause)

	s.mu.Lock()
	l1.rep.paused = false // SIGCONT
	s.mu.Unlock()
	speak(s, l1, fakeband.EndpointPost)
	require.Len(t, s.fenced, 1, "the woken holder's reply is a fenced send")
	assert.Equal(t, fencedSend{life: 1, by: 2, what: "POST messages (a reply)"}, s.fenced[0])
	assert.Same(t, l2, s.life, "a fenced send takes nothing over")
}

func TestAReplicaMayHoldAgainOnceTheOneThatTookOverIsGone(t *testing.T) {
	s, l1, l2 := replicaSim()
	speak(s, l1, fakeband.EndpointNext)
	s.markGone(l1, FailoverHandOver)
	speak(s, l2, fakeband.EndpointNext)
	s.markGone(l2, FailoverDeath)
	speak(s, l1, fakeband.EndpointProcessing)
	assert.Empty(t, s.fenced, "the one that took over was killed: taking it back is no fenced send")
	assert.Same(t, l1, s.life)
	require.Len(t, s.failovers, 2)
	assert.Equal(t, []string{FailoverHandOver, FailoverDeath}, []string{s.failovers[0].Cause, s.failovers[1].Cause})
}

func TestAStandbyMayAskWhoItIsWithoutTakingOver(t *testing.T) {
	s, l1, l2 := replicaSim()
	speak(s, l1, fakeband.EndpointNext)
	assert.False(t, failoverEndpoint(fakeband.EndpointMe), "GET /agent/me is not speaking as the holder")
	speak(s, l2, fakeband.EndpointSocket)
	assert.Equal(t, 1, s.fired["takeover_from_a_running_holder"], "a takeover from a running holder is counted")
	speak(s, l1, fakeband.EndpointNext)
	assert.Len(t, s.fenced, 1, "and the running holder it took over from must then send nothing")
}

func TestFailoverStatsAreNearestRank(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	st := failoverStats(ds)
	assert.Equal(t, FailoverStats{Count: 100, P50Seconds: 0.05, P99Seconds: 0.099, MaxSeconds: 0.1}, st)
	assert.Equal(t, FailoverStats{}, failoverStats(nil))
}

func TestReplicaChecksRunOnlyWithReplicas(t *testing.T) {
	one, err := Config{Command: []string{"agent"}}.withDefaults()
	require.NoError(t, err)
	scheds, _ := one.schedules()
	for _, sc := range scheds {
		assert.NotContains(t, []string{"pause-holder", "hand-over"}, sc.Check)
		for _, e := range sc.Events {
			assert.NotContains(t, []Kind{Pause, HandOver}, e.Kind, "%s seed %d", sc.Check, sc.Seed)
		}
	}
	_, err = Config{Command: []string{"agent"}, Checks: []string{"pause-holder"}}.withDefaults()
	assert.ErrorContains(t, err, "needs Replicas of 2 or more")
	_, err = Config{Command: []string{"agent"}, Replicas: 2}.withDefaults()
	assert.ErrorIs(t, err, ErrNoPostgres)

	two, err := Config{Command: []string{"agent"}, Replicas: 2, Postgres: "postgres://x@127.0.0.1/db", Schedules: 20}.withDefaults()
	require.NoError(t, err)
	assert.Equal(t, DefaultLeaseTime, two.LeaseTime)
	scheds, _ = two.schedules()
	kinds := map[Kind]bool{}
	for _, sc := range scheds {
		if sc.Check == "storm" {
			for _, e := range sc.Events {
				kinds[e.Kind] = true
			}
		}
	}
	assert.True(t, kinds[Pause] && kinds[HandOver], "a replicas storm pauses and hands over the holder")
}

func TestAStormWithoutReplicasNeverPausesOrHandsOver(t *testing.T) {
	storm, _ := CheckNamed("storm")
	for seed := range int64(50) {
		plain := storm.Build(seed, true)
		for _, e := range plain.Events {
			assert.NotContains(t, []Kind{Pause, HandOver}, e.Kind)
		}
	}
}
