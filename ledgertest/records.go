package ledgertest

import (
	"context"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
)

// keyChecks, ackChecks, stepChecks and namespaceChecks: what one ledger
// records, it reads back, and only under the names it was recorded.
var keyChecks = []check{
	{name: "UnseenIsUnknown", run: func(t tester, s *session) {
		l := s.open()
		assertKey(t, s.ctx, l, "room-1", "never-set", bandonce.KeyUnknown)
		require.NoError(t, l.SetKey(s.ctx, "room-1", "never-set", bandonce.KeyUnknown),
			"setting a key it has no record of to KeyUnknown removes nothing and is no error")
		assertKey(t, s.ctx, l, "room-1", "never-set", bandonce.KeyUnknown)
	}},
	{name: "ReadsTheLastStateSet", run: func(t tester, s *session) {
		l := s.open()
		for _, state := range []bandonce.KeyState{
			bandonce.KeyIntent, bandonce.KeyAccepted, bandonce.KeyDuplicateDropped, bandonce.KeyIntent, bandonce.KeyUnknown,
		} {
			require.NoError(t, l.SetKey(s.ctx, "room-1", "msg:1", state), "SetKey %s", state)
			assertKey(t, s.ctx, l, "room-1", "msg:1", state)
		}
	}},
}

var ackChecks = []check{
	{name: "ReadsBackUntilCleared", run: func(t tester, s *session) {
		l := s.open()
		assertAck(t, s.ctx, l, "room-1", "m1", false)
		require.NoError(t, l.SetAckPending(s.ctx, "room-1", "m1", true))
		require.NoError(t, l.SetAckPending(s.ctx, "room-1", "m1", true), "setting it twice is no error")
		assertAck(t, s.ctx, l, "room-1", "m1", true)
		require.NoError(t, l.SetAckPending(s.ctx, "room-1", "m1", false))
		assertAck(t, s.ctx, l, "room-1", "m1", false)
		require.NoError(t, l.SetAckPending(s.ctx, "room-1", "never-set", false), "clearing what was never set is no error")
		assertAck(t, s.ctx, l, "room-1", "never-set", false)
	}},
}

var stepChecks = []check{
	{name: "ReadsTheLastResultSet", run: func(t tester, s *session) {
		l := s.open()
		assertNoStep(t, s.ctx, l, "room-1", "m1", "charge")
		require.NoError(t, l.SetStep(s.ctx, "room-1", "m1", "charge", []byte(`{"id":"ch_1"}`)))
		assertStep(t, s.ctx, l, "room-1", "m1", "charge", `{"id":"ch_1"}`)
		require.NoError(t, l.SetStep(s.ctx, "room-1", "m1", "charge", []byte("second\x00\xff")))
		assertStep(t, s.ctx, l, "room-1", "m1", "charge", "second\x00\xff") // any bytes
	}},
	{name: "AnEmptyResultIsARecord", run: func(t tester, s *session) {
		l := s.open()
		for name, result := range map[string][]byte{"nil": nil, "empty": {}} {
			require.NoError(t, l.SetStep(s.ctx, "room-1", "m1", name, result))
			assertStep(t, s.ctx, l, "room-1", "m1", name, "") // a step that returned nothing still ran
		}
	}},
	{name: "KeepsNoReferenceToTheResult", run: func(t tester, s *session) {
		l := s.open()
		result := []byte("ch_1")
		require.NoError(t, l.SetStep(s.ctx, "room-1", "m1", "charge", result))
		result[0] = 'X'
		got := assertStep(t, s.ctx, l, "room-1", "m1", "charge", "ch_1")
		if len(got) > 0 {
			got[0] = 'Y' // the handler owns what Message.Step returns
		}
		assertStep(t, s.ctx, l, "room-1", "m1", "charge", "ch_1")
	}},
}

var namespaceChecks = []check{
	{name: "KeysPerRoom", run: func(t tester, s *session) {
		l := s.open()
		require.NoError(t, l.SetKey(s.ctx, "room-a", "k", bandonce.KeyAccepted))
		require.NoError(t, l.SetKey(s.ctx, "ab", "c", bandonce.KeyIntent))
		for _, tc := range []struct {
			room, key string
			want      bandonce.KeyState
		}{
			{"room-a", "k", bandonce.KeyAccepted},
			{"room-b", "k", bandonce.KeyUnknown},
			{"ROOM-A", "k", bandonce.KeyUnknown},
			{"ab", "c", bandonce.KeyIntent},
			{"a", "bc", bandonce.KeyUnknown}, // the same bytes joined, another room
			{"abc", "", bandonce.KeyUnknown},
		} {
			assertKey(t, s.ctx, l, tc.room, tc.key, tc.want)
		}
	}},
	{name: "AckPendingPerRoomAndMessage", run: func(t tester, s *session) {
		l := s.open()
		require.NoError(t, l.SetAckPending(s.ctx, "room-a", "m", true))
		require.NoError(t, l.SetAckPending(s.ctx, "ab", "c", true))
		assertAck(t, s.ctx, l, "room-a", "m", true)
		assertAck(t, s.ctx, l, "room-b", "m", false)
		assertAck(t, s.ctx, l, "room-a", "m2", false)
		assertAck(t, s.ctx, l, "ab", "c", true)
		assertAck(t, s.ctx, l, "a", "bc", false)
	}},
	{name: "StepsPerRoomMessageAndName", run: func(t tester, s *session) {
		l := s.open()
		require.NoError(t, l.SetStep(s.ctx, "room-a", "m1", "charge", []byte("a")))
		require.NoError(t, l.SetStep(s.ctx, "room-a", "m", "1charge", []byte("b")))
		assertStep(t, s.ctx, l, "room-a", "m1", "charge", "a")
		assertStep(t, s.ctx, l, "room-a", "m", "1charge", "b") // the same bytes joined
		assertNoStep(t, s.ctx, l, "room-b", "m1", "charge")
		assertNoStep(t, s.ctx, l, "room-a", "m2", "charge")
		assertNoStep(t, s.ctx, l, "room-a", "m1", "refund")
		assertNoStep(t, s.ctx, l, "room-a", "m1c", "harge")
	}},
	{name: "KindsApart", run: func(t tester, s *session) {
		l := s.open()
		require.NoError(t, l.SetKey(s.ctx, "room-1", "m1", bandonce.KeyAccepted))
		require.NoError(t, l.SetAckPending(s.ctx, "room-1", "m2", true))
		require.NoError(t, l.SetStep(s.ctx, "room-1", "m3", "s", []byte("r")))
		assertKey(t, s.ctx, l, "room-1", "m2", bandonce.KeyUnknown)
		assertKey(t, s.ctx, l, "room-1", "m3", bandonce.KeyUnknown)
		assertKey(t, s.ctx, l, "room-1", "m3s", bandonce.KeyUnknown)
		assertAck(t, s.ctx, l, "room-1", "m1", false)
		assertAck(t, s.ctx, l, "room-1", "m3", false)
		for _, id := range []string{"m1", "m2"} {
			assertNoStep(t, s.ctx, l, "room-1", id, "")
			assertNoStep(t, s.ctx, l, "room-1", id, "s")
		}
	}},
}

var contextChecks = []check{
	{name: "EndedDoesAllOrNothing", run: func(t tester, s *session) {
		l := s.open()
		ended, cancel := context.WithCancel(s.ctx)
		cancel()

		state, err := l.Key(ended, "room-1", "k")
		if endedOrNil(t, err, "Key") {
			assert.Equal(t, bandonce.KeyUnknown, state)
		}
		pending, err := l.AckPending(ended, "room-1", "m")
		if endedOrNil(t, err, "AckPending") {
			assert.False(t, pending)
		}
		_, ok, err := l.Step(ended, "room-1", "m", "s")
		if endedOrNil(t, err, "Step") {
			assert.False(t, ok)
		}

		// Each write either did its work or failed with the context's error
		// and recorded nothing.
		keyErr := l.SetKey(ended, "room-1", "k", bandonce.KeyIntent)
		ackErr := l.SetAckPending(ended, "room-1", "m", true)
		stepErr := l.SetStep(ended, "room-1", "m", "s", []byte("r"))
		state, err = l.Key(s.ctx, "room-1", "k")
		require.NoError(t, err)
		pending, err = l.AckPending(s.ctx, "room-1", "m")
		require.NoError(t, err)
		result, ok, err := l.Step(s.ctx, "room-1", "m", "s")
		require.NoError(t, err)
		if endedOrNil(t, keyErr, "SetKey") {
			assert.Equal(t, bandonce.KeyIntent, state, "SetKey with an ended context returned nil but recorded %s", state)
		} else {
			assert.Equal(t, bandonce.KeyUnknown, state, "SetKey with an ended context failed (%v) but recorded %s", keyErr, state)
		}
		if endedOrNil(t, ackErr, "SetAckPending") {
			assert.True(t, pending, "SetAckPending with an ended context returned nil but recorded nothing")
		} else {
			assert.False(t, pending, "SetAckPending with an ended context failed (%v) but recorded it", ackErr)
		}
		if endedOrNil(t, stepErr, "SetStep") {
			assert.Equal(t, "r", string(result), "SetStep with an ended context returned nil but recorded %q (ok %v)", result, ok)
		} else {
			assert.False(t, ok, "SetStep with an ended context failed (%v) but recorded %q", stepErr, result)
		}
	}},
}

// endedOrNil reports whether a call made with an ended context succeeded,
// and fails t when its error is not the context's.
func endedOrNil(t tester, err error, call string) bool {
	t.Helper()
	if err != nil {
		assert.ErrorIs(t, err, context.Canceled, "%s with an ended context failed, and not with the context's error", call)
		return false
	}
	return true
}

func assertKey(t tester, ctx context.Context, l bandonce.Ledger, room, key string, want bandonce.KeyState) {
	t.Helper()
	got, err := l.Key(ctx, room, key)
	require.NoError(t, err, "Key(%q, %q)", room, key)
	assert.Equal(t, want, got, "Key(%q, %q)", room, key)
}

func assertAck(t tester, ctx context.Context, l bandonce.Ledger, room, messageID string, want bool) {
	t.Helper()
	got, err := l.AckPending(ctx, room, messageID)
	require.NoError(t, err, "AckPending(%q, %q)", room, messageID)
	assert.Equal(t, want, got, "AckPending(%q, %q)", room, messageID)
}

// assertStep checks that a step's record reads want, and returns what it
// read.
func assertStep(t tester, ctx context.Context, l bandonce.Ledger, room, messageID, name, want string) []byte {
	t.Helper()
	got, ok, err := l.Step(ctx, room, messageID, name)
	require.NoError(t, err, "Step(%q, %q, %q)", room, messageID, name)
	assert.True(t, ok, "Step(%q, %q, %q) has no record", room, messageID, name)
	assert.Equal(t, want, string(got), "Step(%q, %q, %q)", room, messageID, name)
	return got
}

func assertNoStep(t tester, ctx context.Context, l bandonce.Ledger, room, messageID, name string) {
	t.Helper()
	got, ok, err := l.Step(ctx, room, messageID, name)
	require.NoError(t, err, "Step(%q, %q, %q)", room, messageID, name)
	assert.False(t, ok, "Step(%q, %q, %q) has a record, %q", room, messageID, name, got)
}
