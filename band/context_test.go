package band_test

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce/band"
	"github.com/band-once/bandonce/fakeband"
	"github.com/band-once/bandonce/internal/safebuf"
)

// A room whose /context cursor points at itself ends Context at once
// with a *PagingError and one warning naming the URL, not a loop that
// grows memory for ever.
func TestContextStopsOnACursorThatRepeats(t *testing.T) {
	fb := fakeband.New(fakeband.Options{})
	defer fb.Close()
	agent, ada := fb.AddAgent("echo"), fb.AddHuman("ada")
	room := fb.AddRoom("ops", ada, agent.ID)
	_, err := fb.Say(room.ID, ada.ID, "hello", agent.ID)
	require.NoError(t, err)
	fb.Inject(fakeband.Fault{Endpoint: fakeband.EndpointContext, Probability: 1, Kind: fakeband.LoopCursor})

	var logs safebuf.Buffer
	client, err := band.New(band.Config{APIKey: agent.Key, BaseURL: fb.BaseURL(), HTTPClient: fb.HTTPClient(),
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, err)
	items, err := client.Context(t.Context(), room.ID)
	assert.Nil(t, items)
	var pe *band.PagingError
	require.ErrorAs(t, err, &pe)
	require.ErrorIs(t, err, band.ErrCursorRepeated)
	assert.Equal(t, fb.BaseURL()+"/agent/chats/{id}/context", pe.URL)
	assert.Equal(t, 2, fb.Requests()[fakeband.EndpointContext])
	assert.Equal(t, 1, strings.Count(logs.String(), "level=WARN"), logs.String())
	assert.Contains(t, logs.String(), "url="+fb.BaseURL()+"/agent/chats/{id}/context")
	assert.NotContains(t, logs.String(), agent.Key)
}

// A message too large to read on its own comes back with its ids and its
// size, without its content; the rest of the room is read as usual.
func TestContextReturnsAnItemOverTheCapWithoutItsContent(t *testing.T) {
	fb := fakeband.New(fakeband.Options{})
	defer fb.Close()
	agent, ada := fb.AddAgent("echo"), fb.AddHuman("ada")
	room := fb.AddRoom("ops", ada, agent.ID)
	big, err := fb.Say(room.ID, ada.ID, strings.Repeat("z", 20_000), agent.ID)
	require.NoError(t, err)
	small, err := fb.Say(room.ID, ada.ID, "small", agent.ID)
	require.NoError(t, err)

	client, err := band.New(band.Config{APIKey: agent.Key, BaseURL: fb.BaseURL(), HTTPClient: fb.HTTPClient(), MaxResponseBytes: 10_000})
	require.NoError(t, err)
	items, err := client.Context(t.Context(), room.ID)
	require.NoError(t, err)
	require.Len(t, items, 2)
	assert.Equal(t, big, items[0].ID)
	assert.Empty(t, items[0].Content)
	assert.Greater(t, items[0].Omitted, int64(20_000))
	assert.Equal(t, small, items[1].ID)
	assert.Contains(t, items[1].Content, "small")
	assert.Zero(t, items[1].Omitted)
}
