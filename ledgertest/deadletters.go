package ledgertest

import (
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
)

// deadLetterChecks hold a bandonce.DeadLetterLedger to its contract; a
// ledger that is not one skips them, saying so.
var deadLetterChecks = []check{
	{name: "FreeTextReadsBackWhateverItHolds", run: func(t tester, s *session) {
		// A room member writes what they like: a NUL byte, U+FFFE, invalid
		// sequences of a ledger's own escaping.
		l := deadLetterLedger(t, s)
		d := sampleDeadLetter("room-1", "m1", 0)
		d.Content, d.SenderName, d.Reason = "nul\x00 here \uFFFE0 and \uFFFE\uFFFE", "A\x00da", "failed: \x00"
		require.NoError(t, l.AddDeadLetter(s.ctx, d))
		got, err := l.DeadLetters(s.ctx)
		require.NoError(t, err)
		require.Len(t, got, 1, "the dead letter is kept")
		assertDeadLetter(t, d, got[0])
	}},
	{name: "ReadBackAsWritten", run: func(t tester, s *session) {
		l := deadLetterLedger(t, s)
		d := sampleDeadLetter("room-1", "m1", 0)
		d.Err = assert.AnError
		require.NoError(t, l.AddDeadLetter(s.ctx, d))
		got, err := l.DeadLetters(s.ctx)
		require.NoError(t, err)
		want := sampleDeadLetter("room-1", "m1", 0)
		require.Len(t, got, 1)
		assertDeadLetter(t, want, got[0])
	}},
	{name: "OldestFirstOneAMessage", run: func(t tester, s *session) {
		l := deadLetterLedger(t, s)
		require.NoError(t, l.AddDeadLetter(s.ctx, sampleDeadLetter("room-2", "m2", 2)))
		require.NoError(t, l.AddDeadLetter(s.ctx, sampleDeadLetter("room-1", "m1", 1)))
		again := sampleDeadLetter("room-1", "m1", 3)
		again.Failures = 7
		require.NoError(t, l.AddDeadLetter(s.ctx, again), "a message given up on again replaces its record")
		require.NoError(t, l.AddDeadLetter(s.ctx, sampleDeadLetter("room-2", "m1", 0)), "the same id in another room is another record")
		got, err := l.DeadLetters(s.ctx)
		require.NoError(t, err)
		var order []string
		for _, d := range got {
			order = append(order, d.RoomID+"/"+d.MessageID)
		}
		assert.Equal(t, []string{"room-2/m1", "room-2/m2", "room-1/m1"}, order)
		assert.Equal(t, 7, got[2].Failures)
	}},
	{name: "RemovedForGood", run: func(t tester, s *session) {
		l := deadLetterLedger(t, s)
		require.NoError(t, l.AddDeadLetter(s.ctx, sampleDeadLetter("room-1", "m1", 0)))
		require.NoError(t, l.AddDeadLetter(s.ctx, sampleDeadLetter("room-1", "m2", 1)))
		require.NoError(t, l.RemoveDeadLetter(s.ctx, "room-1", "m1"))
		require.NoError(t, l.RemoveDeadLetter(s.ctx, "room-1", "m1"), "removing one that is gone is no error")
		require.NoError(t, l.RemoveDeadLetter(s.ctx, "room-9", "never"), "nor one that never was")
		got, err := l.DeadLetters(s.ctx)
		require.NoError(t, err)
		require.Len(t, got, 1)
		assert.Equal(t, "m2", got[0].MessageID)
	}},
	{name: "AcrossReopens", needsReopen: true, run: func(t tester, s *session) {
		l := deadLetterLedger(t, s)
		require.NoError(t, l.AddDeadLetter(s.ctx, sampleDeadLetter("room-1", "m1", 0)))
		require.NoError(t, l.AddDeadLetter(s.ctx, sampleDeadLetter("room-1", "m2", 1)))
		require.NoError(t, l.RemoveDeadLetter(s.ctx, "room-1", "m2"))
		reopened, ok := s.reopen(l).(bandonce.DeadLetterLedger)
		require.True(t, ok, "the reopened ledger keeps dead letters too")
		got, err := reopened.DeadLetters(s.ctx)
		require.NoError(t, err)
		require.Len(t, got, 1, "the record is durable when AddDeadLetter returns, the removal when RemoveDeadLetter does")
		assertDeadLetter(t, sampleDeadLetter("room-1", "m1", 0), got[0])
	}},
}

// deadLetterLedger opens a ledger and skips the check unless it keeps
// dead letters.
func deadLetterLedger(t tester, s *session) bandonce.DeadLetterLedger {
	l, ok := s.open().(bandonce.DeadLetterLedger)
	if !ok {
		t.(interface{ Skip(...any) }).Skip("the ledger is not a bandonce.DeadLetterLedger: it keeps no dead letters")
	}
	return l
}

// sampleDeadLetter is a dead letter with every field set; n orders At.
func sampleDeadLetter(room, id string, n int) bandonce.DeadLetter {
	return bandonce.DeadLetter{
		RoomID: room, MessageID: id, SenderID: "human-1", SenderName: "Ada", SenderType: "User",
		Content: "@[[agent-1]] where is order 17? ünïcode ✓", Failures: 3,
		Reason: "dead-lettered after 3 failure(s): connection refused",
		At:     time.Date(2026, 12, 1, 20, 4, n, 500_000, time.UTC),
	}
}

func assertDeadLetter(t tester, want, got bandonce.DeadLetter) {
	// To the microsecond, PostgreSQL's precision.
	assert.True(t, want.At.Truncate(time.Microsecond).Equal(got.At.Truncate(time.Microsecond)), "At: want %s, got %s", want.At, got.At)
	want.At, got.At = time.Time{}, time.Time{}
	assert.Equal(t, want, got, "every field but Err reads back")
}
