package fakeband_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce/fakeband"
)

const supportScenario = `{
  "seed": 7,
  "humans": [{"name": "ada"}, {"name": "bob"}],
  "agents": [{"name": "echo"}, {"name": "Helper Bot"}],
  "rooms": [
    {"title": "support", "owner": "ada", "members": ["echo", "bob"]},
    {"title": "ops", "members": ["echo", "Helper Bot"]}
  ],
  "script": [
    {"room": "support", "from": "bob", "text": "hello"},
    {"room": "support", "text": "anyone?", "mentions": ["echo", "bob"]},
    {"room": "ops", "from": "helper bot", "text": "status?"}
  ],
  "faults": {"request": [{"endpoint": "post", "kind": "lose_response", "nth": 1}]}
}`

func TestScenarioAppliesItsCastScriptAndFaults(t *testing.T) {
	scn, err := fakeband.ParseScenario([]byte(supportScenario))
	require.NoError(t, err)
	assert.Equal(t, int64(7), scn.Seed)
	b := fakeband.New(fakeband.Options{Seed: scn.Seed})
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	cast, err := scn.Apply(b)
	require.NoError(t, err)

	require.Len(t, cast.Humans, 2)
	require.Len(t, cast.Agents, 2)
	assert.Equal(t, "Helper Bot", cast.Agents[1].Name)
	assert.Equal(t, "owner/helper-bot", cast.Agents[1].Handle)
	ada, bob, echo, helper := cast.Humans[0], cast.Humans[1], cast.Agents[0], cast.Agents[1]
	require.Len(t, cast.Rooms, 2)
	support, ops := cast.Rooms[0], cast.Rooms[1]
	assert.Equal(t, "support", support.Title)
	assert.Equal(t, ada.ID, support.OwnerID)
	assert.Equal(t, []string{ada.ID, echo.ID, bob.ID}, support.MemberIDs)
	assert.Equal(t, cast.Owner.ID, ops.OwnerID, "no owner means the operator")
	assert.Equal(t, []string{cast.Owner.ID, echo.ID, helper.ID}, ops.MemberIDs)

	require.Len(t, cast.Script, 3)
	posts := b.Posts(support.ID)
	require.Len(t, posts, 2)
	assert.Equal(t, bob.ID, posts[0].SenderID)
	assert.Equal(t, []string{echo.ID}, posts[0].Mentions, "every agent of the room but the sender")
	assert.Equal(t, ada.ID, posts[1].SenderID, "the room's owner by default")
	assert.Equal(t, []string{echo.ID, bob.ID}, posts[1].Mentions)
	opsPosts := b.Posts(ops.ID)
	require.Len(t, opsPosts, 1)
	assert.Equal(t, helper.ID, opsPosts[0].SenderID, "names are case-insensitive")
	assert.Equal(t, []string{echo.ID}, opsPosts[0].Mentions)
	assert.Equal(t, fakeband.StatusDelivered, b.Status(echo.ID, cast.Script[0]))

	// The fault came after the script: the agent's first post loses its answer.
	f := &fixture{b: b, c: b.HTTPClient(), bot: echo, room: support.Room}
	_, err = f.try(http.MethodPost, f.chat("/messages"), echo.Key, post("hi", map[string]any{"id": bob.ID}))
	require.ErrorIs(t, err, fakeband.ErrResponseLost)
	assert.Len(t, b.Posts(support.ID), 3, "applied, then lost")
}

func TestScenarioIsReproducibleForASeed(t *testing.T) {
	keys := func() []string {
		scn, err := fakeband.ParseScenario([]byte(supportScenario))
		require.NoError(t, err)
		b := fakeband.New(fakeband.Options{Seed: scn.Seed})
		defer b.Close()
		cast, err := scn.Apply(b)
		require.NoError(t, err)
		return []string{cast.Owner.Key, cast.Humans[0].Key, cast.Agents[0].Key, cast.Agents[0].ID, cast.Rooms[0].ID, cast.Script[0]}
	}
	assert.Equal(t, keys(), keys())
}

func TestDefaultScenario(t *testing.T) {
	scn := fakeband.DefaultScenario()
	require.NoError(t, scn.Validate())
	b := fakeband.New(fakeband.Options{Seed: scn.Seed})
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	cast, err := scn.Apply(b)
	require.NoError(t, err)
	require.Len(t, cast.Agents, 1)
	assert.Equal(t, "echo", cast.Agents[0].Name)
	require.Len(t, cast.Rooms, 1)
	assert.Equal(t, "demo", cast.Rooms[0].Title)
	assert.Equal(t, []string{cast.Humans[0].ID, cast.Agents[0].ID}, cast.Rooms[0].MemberIDs)
	assert.Empty(t, cast.Script)
}

func TestScenarioErrorsSayWhereAndWhat(t *testing.T) {
	for name, tc := range map[string]struct {
		doc  string
		want []string // each a line of the error
	}{
		"no agent": {`{"humans": [{"name": "ada"}]}`, []string{"scenario: agents: at least one agent is required"}},
		"blank and duplicate names": {`{"humans": [{"name": " "}, {"name": "Echo"}], "agents": [{"name": "echo"}]}`, []string{
			"scenario: humans[0].name: a name is required",
			`scenario: agents[0].name: "echo" is already the name of a human (names are case-insensitive)`,
		}},
		"the operator's name": {`{"humans": [{"name": "owner"}], "agents": [{"name": "a"}]}`, []string{
			`scenario: humans[0].name: "owner" is the operator, who is always there; pick another name`,
		}},
		"rooms": {`{"humans": [{"name": "ada"}], "agents": [{"name": "echo"}], "rooms": [
			{"title": "r", "owner": "echo", "members": ["zed", "ada", "ada"]},
			{"title": "r"}, {"title": ""}]}`, []string{
			`scenario: rooms[0].owner: "echo" is an agent, not a human`,
			`scenario: rooms[0].members[0]: no human or agent is named "zed"`,
			`scenario: rooms[0].members[2]: "ada" is listed twice`,
			`scenario: rooms[1].title: another room is already titled "r"`,
			"scenario: rooms[2].title: a title is required",
		}},
		"script": {`{"humans": [{"name": "ada"}, {"name": "bob"}], "agents": [{"name": "echo"}], "rooms": [
			{"title": "r", "owner": "ada", "members": ["echo"]}, {"title": "empty", "owner": "ada"}], "script": [
			{"room": "nowhere", "text": "x"},
			{"room": "r", "from": "bob", "text": "x"},
			{"room": "r", "text": " "},
			{"room": "r", "text": "x", "mentions": ["bob", "ada", "echo", "ECHO"]},
			{"room": "empty", "text": "x"}]}`, []string{
			`scenario: script[0].room: no room is titled "nowhere"`,
			`scenario: script[1].from: "bob" is not in room "r"`,
			"scenario: script[2].text: the text is blank",
			`scenario: script[3].mentions[0]: "bob" is not in room "r"`,
			"scenario: script[3].mentions[1]: the sender cannot mention itself",
			`scenario: script[3].mentions[3]: "ECHO" is mentioned twice`,
			`scenario: script[4].mentions: room "empty" has no agent besides the sender to mention; list whom to mention`,
		}},
		"faults": {`{"agents": [{"name": "a"}], "faults": {"request": [{"kind": "delay", "nth": 1}]}}`, []string{
			"scenario: faults.request[0]: kind delay needs a positive delay",
		}},
		"unknown field": {`{"agents": [{"name": "a"}], "room": []}`, []string{`scenario: json: unknown field "room"`}},
		"syntax": {"{\n  \"agents\": [\n    {\"name\": \"a\"},\n  ]\n}", []string{
			"scenario: invalid JSON at line 4, column 3: invalid character ']' looking for beginning of value",
		}},
		"wrong type":    {`{"seed": "seven", "agents": [{"name": "a"}]}`, []string{"scenario: line 1, column 16: seed must be a whole number, not string"}},
		"not an object": {`[]`, []string{"scenario: line 1, column 1: the scenario must be an object, not array"}},
		"a fault not an object": {`{"agents": [{"name": "a"}], "faults": {"request": [5]}}`, []string{
			"scenario: faults.request[0]: the fault must be an object, not number",
		}},
		"truncated":     {`{"agents": [`, []string{"scenario: the file ends before the scenario object does"}},
		"trailing data": {`{"agents": [{"name": "a"}]} {}`, []string{"scenario: data after the scenario object"}},
	} {
		_, err := fakeband.ParseScenario([]byte(tc.doc))
		require.Error(t, err, name)
		assert.Equal(t, tc.want, strings.Split(err.Error(), "\n"), name)
		var se *fakeband.ScenarioError
		assert.True(t, errors.As(err, &se), "%s: a *ScenarioError", name)
	}
}

func TestScenarioFaultErrorsUnwrapToErrBadFault(t *testing.T) {
	scn := &fakeband.Scenario{
		Agents: []fakeband.ScenarioAgent{{Name: "a"}},
		Faults: fakeband.FaultPlan{Socket: []fakeband.SocketFault{{Kind: fakeband.LosePush}}},
	}
	err := scn.Validate()
	require.ErrorIs(t, err, fakeband.ErrBadFault)
	assert.Contains(t, err.Error(), "scenario: faults.socket[0]: set nth")
	b := fakeband.New(fakeband.Options{})
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	_, err = scn.Apply(b)
	assert.ErrorIs(t, err, fakeband.ErrBadFault, "Apply validates first")
}
