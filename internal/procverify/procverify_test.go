package procverify

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/band-once/bandonce/fakeband"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestSchedulesAreTheirSeedsAndDifferByCheck(t *testing.T) {
	for _, c := range Checks {
		a, b := c.Build(7, true), c.Build(7, true)
		assert.Equal(t, a, b, "%s: a seed draws one schedule", c.Name)
		assert.Equal(t, c.Name, a.Check)
		assert.Positive(t, a.said(), "%s: every schedule says something", c.Name)
		for _, e := range a.Events {
			assert.NotContains(t, e.String(), "Kind(", "%s: every event has words", c.Name)
		}
	}
	assert.NotEqual(t, Checks[0].Build(7, true).Events, Checks[1].Build(7, true).Events)
}

func TestAnAgentWithoutASocketGetsNoSignalInAStorm(t *testing.T) {
	storm, ok := CheckNamed("storm")
	require.True(t, ok)
	for seed := range int64(200) {
		for _, e := range storm.Build(seed, false).Events {
			switch e.Kind {
			case Interrupt, Stop, Play, DropSocket, Supersede:
				t.Fatalf("seed %d: a socket-less storm drew %s", seed, e)
			}
		}
	}
}

func TestEventsReadAsWitnessLines(t *testing.T) {
	cases := map[string]Event{
		`a human says "r1m1" in room 1`: {Kind: Say, Label: "r1m1"},
		"on the 2nd POST messages (a reply): SIGKILL the agent's process group, then apply the request (its answer is lost)": {
			Kind: KillAfter, Endpoint: fakeband.EndpointPost, Skip: 1},
		"on the 1st POST processing: apply it, hold its answer, interrupt the agent in that room, then answer": {
			Kind: Interrupt, Endpoint: fakeband.EndpointProcessing},
		"200ms later: stop the agent in room 2":                                    {Kind: Stop, Room: 1, After: 200e6},
		"on the 1st request: answer 503 to it and the 2 after it to that endpoint": {Kind: ServerError, Status: 503, Count: 3},
	}
	for want, e := range cases {
		assert.Equal(t, want, e.String())
	}
	assert.Equal(t, "11th", ordinal(11))
	assert.Equal(t, "22nd", ordinal(22))
}

func TestShellQuoteReadsBackAsTheArguments(t *testing.T) {
	assert.Equal(t, "python3 agent.py", ShellQuote([]string{"python3", "agent.py"}))
	assert.Equal(t, `sh -c 'echo "it'\''s" $HOME'`, ShellQuote([]string{"sh", "-c", `echo "it's" $HOME`}))
	assert.Equal(t, "''", ShellQuote([]string{""}))
}

func TestClassifyNamesEndpointRoomAndMessage(t *testing.T) {
	ep, room, msg := classify("POST", "/api/v1/agent/chats/R/messages/M/processing")
	assert.Equal(t, fakeband.EndpointProcessing, ep)
	assert.Equal(t, "R", room)
	assert.Equal(t, "M", msg)
	ep, room, _ = classify("POST", "/api/v1/agent/chats/R/messages")
	assert.Equal(t, fakeband.EndpointPost, ep)
	assert.Equal(t, "R", room)
	ep, _, _ = classify("GET", "/api/v1/socket/websocket")
	assert.Equal(t, fakeband.EndpointSocket, ep)
}

func TestShrinkHelpersCompactRoomsAndRelabel(t *testing.T) {
	s := &Schedule{Rooms: 3, Events: []Event{
		{Kind: Say, Room: 2, Label: "r3m4"}, {Kind: KillAfter, Endpoint: fakeband.EndpointPost}, {Kind: Say, Room: 2, Label: "r3m7"},
	}}
	c := compactRooms(s)
	require.NotNil(t, c)
	assert.Equal(t, 1, c.Rooms)
	assert.Equal(t, "r1m4", c.Events[0].Label)
	r := relabel(c)
	require.NotNil(t, r)
	assert.Equal(t, "r1m1", r.Events[0].Label)
	assert.Equal(t, "r1m2", r.Events[2].Label)
	assert.Nil(t, relabel(r))
	assert.Nil(t, compactRooms(r))
}

// agentCalls drives the fake as an agent would, in process.
type agentCalls struct {
	t    *testing.T
	band *fakeband.Band
	key  string
}

func (a agentCalls) do(method, path string, body any) {
	a.t.Helper()
	var buf bytes.Buffer
	if body != nil {
		require.NoError(a.t, json.NewEncoder(&buf).Encode(body))
	}
	req, err := http.NewRequestWithContext(context.Background(), method, a.band.BaseURL()+path, &buf)
	require.NoError(a.t, err)
	req.Header.Set("X-API-Key", a.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.band.HTTPClient().Do(req)
	require.NoError(a.t, err)
	resp.Body.Close()
	require.Less(a.t, resp.StatusCode, 300, "%s %s", method, path)
}

func (a agentCalls) reply(room, to, content string) {
	a.do("POST", "/agent/chats/"+room+"/messages", map[string]any{"message": map[string]any{
		"content": content, "mentions": []map[string]string{{"id": to}}}})
}

func (a agentCalls) mark(room, msg, kind string) {
	a.do("POST", "/agent/chats/"+room+"/messages/"+msg+"/"+kind, struct{}{})
}

// The attribution rule of the docs, on the fake's own record: a marker
// naming a message's id answers that message; a reply without one answers
// the message whose attempt the agent opened last in the room; a reply
// before any attempt answers none.
func TestRepliesAreAttributedByMarkerThenByTheLastClaim(t *testing.T) {
	band := fakeband.New(fakeband.Options{Seed: 1})
	defer band.Close()
	agent, ada := band.AddAgent("agent"), band.AddHuman("ada")
	room := band.AddRoom("r", ada, agent.ID)
	s := &sim{cfg: &settings{}, band: band, agent: agent, human: ada, rooms: []fakeband.Room{room}}
	say := func(label string) *message {
		id, err := band.Say(room.ID, ada.ID, label, agent.ID)
		require.NoError(t, err)
		m := &message{ID: id, Label: label}
		s.messages = append(s.messages, m)
		return m
	}
	a := agentCalls{t: t, band: band, key: agent.Key}
	m1, m2, m3 := say("r1m1"), say("r1m2"), say("r1m3")

	a.reply(room.ID, ada.ID, "before any claim") // answers no message
	a.mark(room.ID, m1.ID, "processing")
	a.reply(room.ID, ada.ID, "no marker") // answers m1: the last claim
	a.mark(room.ID, m1.ID, "processed")
	a.mark(room.ID, m2.ID, "processing")
	a.reply(room.ID, ada.ID, "x\n[dedup_key:k:"+m3.ID+"]") // answers m3: its marker names it
	a.mark(room.ID, m2.ID, "processed")
	a.mark(room.ID, m3.ID, "processing")
	a.mark(room.ID, m3.ID, "processed") // m3 was answered before its claim: fine
	a.reply(room.ID, ada.ID, "late")    // answers m3, again: the last claim

	tr := s.gather()
	assert.Len(t, tr.orphans[0], 1)
	assert.Equal(t, "before any claim", firstLine(bandContent(tr.orphans[0][0].Content)))
	require.Len(t, tr.answers[m1.ID], 1)
	assert.Empty(t, tr.answers[m2.ID])
	require.Len(t, tr.answers[m3.ID], 2)

	v := newJudgement()
	tr.doublePosts(v)
	tr.outcomes(v)
	assert.Equal(t, "r1m3 got 2 replies", v.Found[NoDoublePost].Reason)
	assert.Contains(t, v.Found[OneOutcome].Reason, "room 1 got a reply that answers no message")
	assert.Equal(t, 1, v.Lost, "r1m2 was processed without a reply")
}

// bandContent strips the mention marker the fake puts before a post.
func bandContent(s string) string {
	if i := strings.Index(s, "]] "); i >= 0 {
		return s[i+3:]
	}
	return s
}
