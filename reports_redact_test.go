package bandonce_test

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/fakeband"
	"github.com/band-once/bandonce/proof"
	"github.com/band-once/bandonce/verify"
)

// fakeKey matches any key the fake Band hands out (band_a_ for agents,
// band_u_ for humans, then 22 hex digits), whole or cut short.
var fakeKey = regexp.MustCompile(`band_[au]_[0-9a-f]{8,}`)

// recordingT keeps what the verifier reports instead of failing the test.
type recordingT struct {
	*testing.T
	mu  sync.Mutex
	out strings.Builder
	bad bool
}

func (r *recordingT) TestingT() *testing.T { return r.T }
func (r *recordingT) Logf(format string, a ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(&r.out, format+"\n", a...)
}
func (r *recordingT) Errorf(format string, a ...any) {
	r.Logf(format, a...)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.bad = true
}
func (r *recordingT) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.bad
}

// The prover's and the verifier's reports, passing and failing, with
// every line they can print: no key the fake handed out appears.
func TestProverAndVerifierReportsShowNoKey(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the prover and the verifier")
	}
	band := fakeband.New(fakeband.Options{})
	defer band.Close()
	require.Regexp(t, fakeKey, band.AddAgent("a").Key, "the pattern still matches the fake's keys")
	require.Regexp(t, fakeKey, band.AddHuman("h").Key)

	var trace bytes.Buffer
	var traceMu sync.Mutex
	rep := proof.Run(t, proof.RunConfig{Seed: 18, Schedules: 3, Workers: 1, Verbose: true,
		Engine: proof.Options{Trace: func(line string) {
			traceMu.Lock()
			defer traceMu.Unlock()
			trace.WriteString(line + "\n")
		}}})
	var text, js bytes.Buffer
	require.NoError(t, rep.WriteText(&text))
	require.NoError(t, rep.WriteJSON(&js))
	traceMu.Lock()
	defer traceMu.Unlock()
	require.NotEmpty(t, trace.String(), "the trace ran")
	for name, out := range map[string]string{
		"text": text.String(), "json": js.String(), "lines": strings.Join(rep.Lines, "\n"),
		"final": rep.FinalLine(), "trace": trace.String(),
	} {
		assert.Empty(t, fakeKey.FindAllString(out, -1), "prover %s:\n%s", name, out)
	}

	// An agent that repeats a side effect on redelivery fails the
	// verifier, which then reports a shrunk witness and a replay.
	twice := func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
		if err := verify.ExternalFrom(ctx).Effect(ctx, "email:"+m.Body()); err != nil {
			return nil, err
		}
		return &bandonce.Reply{Content: "sent", Mentions: []string{m.SenderID}}, nil
	}
	for name, h := range map[string]bandonce.Handler{"passing": echo, "failing": twice} {
		rt := &recordingT{T: t}
		res := verify.KillBeforePost(rt, verify.Shell(h), verify.Schedules(4))
		out := rt.out.String() + fmt.Sprintf("%+v", res) + strings.Join(res.Witness, "\n")
		assert.Equal(t, name == "passing", res.OK, "%s:\n%s", name, out)
		assert.Empty(t, fakeKey.FindAllString(out, -1), "verifier, %s agent:\n%s", name, out)
	}
}
