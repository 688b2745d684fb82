package lifecycle

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMarkerRoundTrip(t *testing.T) {
	for _, key := range []string{"msg:1", "echo:5f0c", "draft:nis2:inc-8842:round-1", "ключ", "a]b"} {
		content := AppendMarker("hello\n", key)
		got, ok := ParseMarker(content)
		require.True(t, ok, key)
		assert.Equal(t, key, got)
	}
}

func TestParseMarkerIsExact(t *testing.T) {
	cases := map[string]string{
		"quoted mid-text":        "someone wrote [dedup_key:work:k1] earlier\nthanks",
		"not the last line":      "[dedup_key:work:k1]\nmore text",
		"no marker":              "plain reply",
		"empty key":              "x\n[dedup_key:]",
		"prefix of another key":  "x\n[dedup_key:work:k1",
		"inline with other text": "x\nsee [dedup_key:work:k1]",
	}
	for name, content := range cases {
		_, ok := ParseMarker(content)
		assert.False(t, ok, name)
	}
	key, ok := ParseMarker("x\n[dedup_key:work:k10]")
	require.True(t, ok)
	assert.NotEqual(t, "work:k1", key, "a longer key must not match a shorter one")
}

func TestValidateKey(t *testing.T) {
	assert.NoError(t, ValidateKey("echo:1"))
	assert.NoError(t, ValidateKey("order:bandonce:1"), "the shell's prefix only counts at the start")
	for _, bad := range []string{"", " x", "x ", "a\nb", "a\x00b", string([]byte{0xff}), string(make([]byte, MaxKeyLen+1)), "bandonce:memory:k"} {
		assert.ErrorIs(t, ValidateKey(bad), ErrBadKey, "%q", bad)
	}
}

func TestGuardSkipsTheReadOnlyWhenNothingCanBeFound(t *testing.T) {
	cases := []struct {
		name string
		f    GuardFacts
		want GuardStep
	}{
		{"in the room, by the ledger", GuardFacts{Ledger: InRoom, Attempt: 3}, DropDuplicate},
		{"intent without outcome", GuardFacts{Ledger: Intent, Durable: true, Attempt: 1, DefaultKey: true}, ReadRoom},
		{"first attempt, default key", GuardFacts{Attempt: 1, DefaultKey: true}, PostNow},
		{"redelivery, default key", GuardFacts{Attempt: 2, DefaultKey: true}, ReadRoom},
		{"first attempt, natural key", GuardFacts{Attempt: 1}, ReadRoom},
		{"durable ledger, unknown natural key, checked in this life", GuardFacts{Durable: true, Checked: true, Attempt: 4}, PostNow},
		{"durable ledger, unknown natural key, not yet checked", GuardFacts{Durable: true, Attempt: 1}, CheckLedger},
		{"durable ledger, redelivery, not yet checked", GuardFacts{Durable: true, Attempt: 2, DefaultKey: true}, CheckLedger},
		{"durable ledger, first attempt, default key: no check needed", GuardFacts{Durable: true, Attempt: 1, DefaultKey: true}, PostNow},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, Guard(c.f), c.name)
	}
}

func TestDecide(t *testing.T) {
	boom := errors.New("boom")
	cases := []struct {
		name string
		r    Result
		want Fate
	}{
		{"reply", Result{HasReply: true, MaxAttempt: 3}, FatePost},
		{"no reply", Result{MaxAttempt: 3}, FateConsume},
		{"first failure", Result{Err: boom, MaxAttempt: 3}, FateFail},
		{"last failure", Result{Err: boom, Failures: 2, MaxAttempt: 3}, FateDeadLetter},
		{"permanent", Result{Err: boom, Permanent: true, MaxAttempt: 3}, FateDeadLetter},
		{"interrupt drops a reply", Result{Abort: AbortInterrupt, HasReply: true, MaxAttempt: 3}, FateConsumeInterrupted},
		{"interrupt is no failure", Result{Abort: AbortInterrupt, Err: boom, Failures: 2, MaxAttempt: 3}, FateConsumeInterrupted},
		{"stop leaves it", Result{Abort: AbortStop, Err: boom, MaxAttempt: 3}, FateLeave},
		{"shutdown leaves it", Result{Abort: AbortShutdown, HasReply: true, MaxAttempt: 3}, FateLeave},
		{"supersede leaves it", Result{Abort: AbortSupersede, MaxAttempt: 3}, FateLeave},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, Decide(c.r), c.name)
	}
}

func TestJitterStaysUnderTheCeilingAndRepeatsForASeed(t *testing.T) {
	a, b := NewJitter(42), NewJitter(42)
	base, max := 100*time.Millisecond, 2*time.Second
	for n := range 40 {
		c := Ceiling(base, max, n)
		assert.LessOrEqual(t, c, max)
		wa, wb := a.Backoff(base, max, n), b.Backoff(base, max, n)
		assert.Equal(t, wa, wb)
		assert.GreaterOrEqual(t, wa, time.Duration(0))
		assert.LessOrEqual(t, wa, c)
	}
	assert.Equal(t, 800*time.Millisecond, Ceiling(base, max, 3))
	assert.Equal(t, max, Ceiling(base, max, 63), "no overflow for large n")
}

func FuzzParseMarker(f *testing.F) {
	for _, s := range []string{"x\n[dedup_key:k]", "[dedup_key:a]b]", "", "\n\n", "[dedup_key:\n]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, content string) {
		key, ok := ParseMarker(content)
		if !ok {
			return
		}
		if err := ValidateKey(key); err != nil {
			t.Fatalf("parsed an invalid key %q: %v", key, err)
		}
		again, ok := ParseMarker(AppendMarker("body", key))
		if !ok || again != key {
			t.Fatalf("round trip of %q gave %q, %v", key, again, ok)
		}
	})
}

// A record's name is the shell's own, of its kind, and never too long for
// a ledger: no valid key is one, two kinds never share one, and a long key
// is named by its digest.
func TestRecordNamesAreOfTheirKindAndBounded(t *testing.T) {
	long := strings.Repeat("k", MaxKeyLen)
	for _, key := range []string{"order-17", long} {
		ev, mem := RecordName("event", key), RecordName("memory", key)
		assert.NotEqual(t, ev, mem)
		assert.ErrorIs(t, ValidateKey(ev), ErrBadKey, "no key can take a record's name")
		assert.LessOrEqual(t, len(ev), MaxKeyLen)
		assert.LessOrEqual(t, len(mem), MaxKeyLen)
	}
	assert.Equal(t, "bandonce:event:order-17", RecordName("event", "order-17"))
	assert.NotEqual(t, RecordName("event", long), RecordName("event", long+"x"), "digests tell long keys apart")
	sum := sha256.Sum256([]byte(long))
	lookalike := "sha256:" + hex.EncodeToString(sum[:])
	require.NoError(t, ValidateKey(lookalike))
	assert.NotEqual(t, RecordName("event", long), RecordName("event", lookalike), "a key shaped like a digest is not one")
}
