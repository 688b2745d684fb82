package bandonce_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/fakeband"
)

// refusing is a transport where nothing listens: every request fails as a
// refused connection does.
type refusing struct{ tries atomic.Int32 }

func (r *refusing) RoundTrip(*http.Request) (*http.Response, error) {
	r.tries.Add(1)
	return nil, errors.New("dial tcp 127.0.0.1:9: connect: connection refused")
}

// Band unreachable at start: the shell warns at every retry, naming the
// call and the URL, and after the production start-up budget Run returns a
// *StartError that names the URL. Virtual time: the two minutes pass at
// once.
func TestRunGivesUpOnAnUnreachableBandAfterTheStartBudget(t *testing.T) {
	for _, drain := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			transport := &refusing{}
			logs := &logs{}
			s, err := bandonce.New(bandonce.Config{
				APIKey: "k", BaseURL: "http://127.0.0.1:9/api/v1", Handler: echo,
				HTTPClient: &http.Client{Transport: transport}, Logger: logs.logger(),
			})
			require.NoError(t, err)
			began := time.Now()
			if drain {
				_, err = s.Drain(context.Background())
			} else {
				err = s.Run(context.Background())
			}
			var start *bandonce.StartError
			require.ErrorAs(t, err, &start)
			assert.Equal(t, bandonce.DefaultStartTimeout, time.Since(began), "the default budget, spent whole")
			assert.Equal(t, "http://127.0.0.1:9/api/v1", start.URL)
			assert.Equal(t, "GET /agent/me", start.Call)
			assert.Contains(t, err.Error(), "http://127.0.0.1:9/api/v1")
			assert.Contains(t, err.Error(), "connection refused", "the last failure says why")

			tries := int(transport.tries.Load())
			warns := logs.count(slog.LevelWarn, "start-up call failed", "url=http://127.0.0.1:9/api/v1", "call=GET /agent/me")
			assert.Greater(t, tries, 20, "it kept trying, with backoff capped at MaxDelay")
			assert.Equal(t, tries, warns, "a warning for every failed try")
			assert.Zero(t, logs.count(slog.LevelError), "the error is Run's to return, not to log as well")
			assert.Empty(t, s.AgentID(), "Band never said who the agent is")
		})
	}
}

// The first failed try is a warning at once, not after the transport's own
// retries: a person watching sees it in the first second.
func TestStartWarnsAtTheFirstFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := &logs{}
		s, err := bandonce.New(bandonce.Config{
			APIKey: "k", BaseURL: "http://127.0.0.1:9/api/v1", Handler: echo, StartTimeout: time.Hour,
			HTTPClient: &http.Client{Transport: &refusing{}}, Logger: logs.logger(),
		})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		synctest.Wait()
		assert.Equal(t, 1, logs.count(slog.LevelWarn, "start-up call failed", "try=1"))
		cancel()
		assert.NoError(t, <-done, "ending ctx during start-up is a clean shutdown")
	})
}

// Band is back within the budget: the shell serves, and says so.
func TestStartRidesOutAShortOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		w.band.Inject(fakeband.Fault{Endpoint: fakeband.EndpointMe, Nth: 1, Count: 4, Kind: fakeband.FailBefore, Status: 503})
		id := w.say(w.rooms[0], "hello")
		logs := &logs{}
		cfg := w.config(echo)
		cfg.Logger = logs.logger()
		out := make(chan bandonce.Outcome, 1)
		cfg.Hooks.Outcome = func(o bandonce.Outcome) { out <- o }
		stop := w.start(cfg)
		o := <-out
		require.NoError(t, stop())
		assert.Equal(t, id, o.MessageID)
		assert.Equal(t, 4, logs.count(slog.LevelWarn, "start-up call failed"))
		assert.True(t, logs.has(slog.LevelInfo, "bandonce: Band answered", "tries=5"))
	})
}

// A URL that is not Band's agent API (a host root where the REST root was
// meant) fails at once with a hint, instead of retrying a 404 forever.
func TestStartFailsAtOnceOnAURLThatIsNotTheAPI(t *testing.T) {
	w := newWorld(t, 1)
	cfg := w.config(echo)
	cfg.BaseURL = strings.TrimSuffix(cfg.BaseURL, "/api/v1")
	s, err := bandonce.New(cfg)
	require.NoError(t, err)
	err = s.Run(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "is not Band's agent API")
	assert.Contains(t, err.Error(), "Config.BaseURL is the REST root, ending in /api/v1")
	var apiErr *bandonce.APIError
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, http.StatusNotFound, apiErr.Status)
}

// Config.AgentID (BAND_AGENT_ID) is checked against Band's answer: a key of
// another agent fails at start, before any room is served.
func TestAgentIDMismatchFailsAtStart(t *testing.T) {
	w := newWorld(t, 1)
	w.say(w.rooms[0], "hello")
	other := w.band.AddAgent("other")
	cfg := w.config(echo)
	cfg.AgentID = other.ID
	s, err := bandonce.New(cfg)
	require.NoError(t, err)
	err = s.Run(context.Background())
	require.ErrorIs(t, err, bandonce.ErrAgentMismatch)
	assert.Contains(t, err.Error(), w.agent.ID, "says whose the key is")
	assert.Contains(t, err.Error(), "but Config.AgentID is "+other.ID, "and what was expected, by the field set")
	assert.Zero(t, w.band.Requests()[fakeband.EndpointNext], "nothing fetched")
	assert.Zero(t, w.band.Requests()[fakeband.EndpointChats], "no room listed")
}

// The right AgentID passes, and the shell says whose it is once known.
func TestShellAgentIDOnceKnown(t *testing.T) {
	w := newWorld(t, 1)
	w.say(w.rooms[0], "hello")
	cfg := w.config(echo)
	cfg.AgentID = w.agent.ID
	s, err := bandonce.New(cfg)
	require.NoError(t, err)
	assert.Empty(t, s.AgentID(), "unknown before Run")
	res, err := s.Drain(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 1, res.Outcomes[bandonce.Replied])
	assert.Equal(t, w.agent.ID, s.AgentID())
}

// binder is a Ledger that belongs to one agent.
type binder struct {
	*bandonce.MemoryLedger
	owner string
	bound []string
}

func (b *binder) BindAgent(_ context.Context, id string) error {
	b.bound = append(b.bound, id)
	if id != b.owner {
		return errors.Join(bandonce.ErrAgentMismatch, errors.New("ledger of agent "+b.owner))
	}
	return nil
}

// A Ledger that implements AgentBinder is bound to Band's answer at every
// start; one of another agent fails the run before any room is served.
func TestLedgerIsBoundToTheAgentBandNames(t *testing.T) {
	w := newWorld(t, 1)
	w.say(w.rooms[0], "hello")
	cfg := w.config(echo)

	mine := &binder{MemoryLedger: bandonce.NewMemoryLedger(), owner: w.agent.ID}
	cfg.Ledger = mine
	s, err := bandonce.New(cfg)
	require.NoError(t, err)
	_, err = s.Drain(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{w.agent.ID}, mine.bound)

	looked := w.band.Requests()[fakeband.EndpointNext]
	theirs := &binder{MemoryLedger: bandonce.NewMemoryLedger(), owner: "someone-else"}
	cfg.Ledger = theirs
	s, err = bandonce.New(cfg)
	require.NoError(t, err)
	err = s.Run(context.Background())
	require.ErrorIs(t, err, bandonce.ErrAgentMismatch)
	assert.Contains(t, err.Error(), "the ledger refused agent "+w.agent.ID)
	assert.Equal(t, looked, w.band.Requests()[fakeband.EndpointNext], "the second run fetched nothing")
}

// count counts the records at level that mention every one of parts.
func (l *logs) count(level slog.Level, parts ...string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.records {
		all := r.level == level
		for _, p := range parts {
			all = all && strings.Contains(r.text, p)
		}
		if all {
			n++
		}
	}
	return n
}

// slowBinder binds only once its context ends, as a ledger on a slow disk
// or a distant database would when the shell is stopped meanwhile.
type slowBinder struct{ *bandonce.MemoryLedger }

func (slowBinder) BindAgent(ctx context.Context, _ string) error {
	<-ctx.Done()
	return fmt.Errorf("read the ledger's agent: %v", context.Cause(ctx)) // as bbolt says it: not wrapped
}

// A shell stopped while its ledger is binding stops cleanly: the binding
// was cut off, not refused (found by examples/tools' process test, whose
// SIGTERM came during the bbolt ledger's binding).
func TestStoppedWhileTheLedgerBindsIsACleanStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		cfg := w.config(echo)
		cfg.Ledger = slowBinder{bandonce.NewMemoryLedger()}
		s, err := bandonce.New(cfg)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		assert.NoError(t, s.Run(ctx))
	})
}

// Start-up errors about what the environment set name the variable: the
// agent id, and a REST root that is not Band's agent API, in the
// convention the user chose.
func TestStartErrorsNameTheVariableTheUserSet(t *testing.T) {
	w := newWorld(t, 1)
	other := w.band.AddAgent("other")
	host := strings.TrimSuffix(w.band.BaseURL(), "/api/v1")
	run := func(vars map[string]string) error {
		vars["BAND_API_KEY"] = w.agent.Key
		cfg, err := bandonce.ConfigFromEnv(func(name string) string { return vars[name] })
		require.NoError(t, err)
		cfg.Handler, cfg.HTTPClient, cfg.DisableSocket = echo, w.band.HTTPClient(), true
		s, err := bandonce.New(cfg)
		require.NoError(t, err)
		return s.Run(context.Background())
	}

	err := run(map[string]string{"BAND_BASE_URL": w.band.BaseURL(), "BAND_AGENT_ID": other.ID})
	require.ErrorIs(t, err, bandonce.ErrAgentMismatch)
	assert.Contains(t, err.Error(), "but BAND_AGENT_ID is "+other.ID)

	err = run(map[string]string{"BAND_BASE_URL": host + "/v1"})
	assert.Contains(t, err.Error(), "is not Band's agent API")
	assert.Contains(t, err.Error(), "BAND_BASE_URL is the REST root, ending in /api/v1 (BAND_REST_URL is the host root)")

	err = run(map[string]string{"BAND_REST_URL": host + "/band"})
	assert.Contains(t, err.Error(), "BAND_REST_URL is the host root, to which the shell adds /api/v1")
}
