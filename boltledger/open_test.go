package boltledger

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/band-once/bandonce"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

func TestOpenCreatesALedgerWithTheMarkerAndAgent(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "agent.ledger")
	l, err := Open(path, Options{AgentID: testAgent})
	require.NoError(t, err)
	require.NoError(t, l.Close())

	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary file is left behind")
	info, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())

	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	require.NoError(t, err)
	defer func() { require.NoError(t, db.Close()) }()
	require.NoError(t, db.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket(metaBucket)
		require.NotNil(t, meta)
		assert.Equal(t, schemaName, string(meta.Get(schemaField)))
		assert.Equal(t, schemaVersion, string(meta.Get(versionField)))
		assert.Equal(t, testAgent, string(meta.Get(agentField)))
		assert.NotNil(t, tx.Bucket(keysBucket))
		assert.NotNil(t, tx.Bucket(acksBucket))
		return nil
	}))
}

func TestOpenRejectsBadOptions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent.ledger")
	for _, opts := range []Options{{}, {AgentID: "  "}, {AgentID: testAgent, LockTimeout: -1}} {
		_, err := Open(path, opts)
		var open *OpenError
		require.ErrorAs(t, err, &open, "%+v", opts)
		assert.Nil(t, open.Kind)
		assert.Contains(t, err.Error(), "Options.")
	}
	_, err := os.Stat(path)
	assert.ErrorIs(t, err, os.ErrNotExist, "nothing is created on bad options")

	// An agent configured by its environment left BAND_AGENT_ID unset:
	// the error says so in the terms the user set things in.
	_, err = Open(path, Options{})
	assert.ErrorContains(t, err, "Options.AgentID is required")
	assert.ErrorContains(t, err, "BAND_AGENT_ID, which is empty or unset")
}

func TestOpenInAMissingDirectoryIsAPlainError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing", "agent.ledger")
	_, err := Open(path, Options{AgentID: testAgent})
	require.ErrorIs(t, err, os.ErrNotExist)
	assert.NotErrorIs(t, err, ErrCorrupt)
	assert.Contains(t, err.Error(), path)
}

func TestOpenForAnotherAgentFails(t *testing.T) {
	ctx := context.Background()
	l, path := openNew(t)
	require.NoError(t, l.SetKey(ctx, "room-1", "k", bandonce.KeyAccepted))
	require.NoError(t, l.Close())

	_, err := Open(path, Options{AgentID: "agent-other"})
	require.ErrorIs(t, err, ErrAgentMismatch)
	assert.Contains(t, err.Error(), path)
	assert.Contains(t, err.Error(), `"agent-other"`)
	assert.Contains(t, err.Error(), `"`+testAgent+`"`)

	reopened := openAt(t, path)
	got, err := reopened.Key(ctx, "room-1", "k")
	require.NoError(t, err)
	assert.Equal(t, bandonce.KeyAccepted, got, "the refusal changed nothing")
}

func TestSecondOpenInThisProcessFailsWithErrLocked(t *testing.T) {
	l, path := openNew(t)
	_, err := Open(path, Options{AgentID: testAgent})
	require.ErrorIs(t, err, ErrLocked)
	assert.Contains(t, err.Error(), "ledger "+path+" is in use by another process")
	assert.Contains(t, err.Error(), `for agent "`+testAgent+`"`)

	require.NoError(t, l.Close())
	again, err := Open(path, Options{AgentID: testAgent})
	require.NoError(t, err, "Close releases the lock")
	require.NoError(t, again.Close())
}

// sealedLedger writes a ledger with enough records to span many pages and
// returns its bytes.
func sealedLedger(t *testing.T) []byte {
	t.Helper()
	l, path := openNew(t)
	require.NoError(t, l.db.Update(func(tx *bolt.Tx) error {
		for i := range 3000 {
			key := recordKey("3f1e7c2a-0000-4000-8000-000000000001", fmt.Sprintf("msg:%d", i))
			if err := tx.Bucket(keysBucket).Put(key, encodeRecord(byte(bandonce.KeyAccepted), l.now())); err != nil {
				return err
			}
		}
		return nil
	}))
	require.NoError(t, l.Close())
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	return raw
}

// boltFile writes a bbolt database that fill shapes and returns its bytes.
func boltFile(t *testing.T, fill func(tx *bolt.Tx) error) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "other.db")
	db, err := bolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, db.Update(fill))
	require.NoError(t, db.Close())
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	return raw
}

func TestOpenRefusesDamagedAndForeignFiles(t *testing.T) {
	ledger := sealedLedger(t)
	pageSize := os.Getpagesize()
	rng := rand.New(rand.NewPCG(20260616, 1))
	noise := make([]byte, 64*1024)
	for i := range noise {
		noise[i] = byte(rng.Uint32())
	}
	withMeta := func(fields map[string]string, buckets ...string) []byte {
		return boltFile(t, func(tx *bolt.Tx) error {
			meta, err := tx.CreateBucket(metaBucket)
			if err != nil {
				return err
			}
			for k, v := range fields {
				if err := meta.Put([]byte(k), []byte(v)); err != nil {
					return err
				}
			}
			for _, name := range buckets {
				if _, err := tx.CreateBucket([]byte(name)); err != nil {
					return err
				}
			}
			return nil
		})
	}
	overwrite := func(from, to int, b byte) []byte {
		damaged := append([]byte(nil), ledger...)
		for i := from; i < to; i++ {
			damaged[i] = b
		}
		return damaged
	}

	cases := map[string][]byte{
		"empty file":             {},
		"text file":              []byte("this is not a ledger\n"),
		"random bytes":           noise,
		"truncated to one page":  ledger[:pageSize],
		"truncated to two pages": ledger[:2*pageSize],
		"truncated to half":      ledger[:len(ledger)/2],
		// Its freelist page is the last one: reading it faults (SIGBUS).
		"last used page cut off": ledger[:pagesInUse(t, ledger)-int64(pageSize)],
		"meta pages zeroed":      overwrite(0, 2*pageSize, 0),
		"data pages garbage":     overwrite(2*pageSize, len(ledger), 0xff),
		"bbolt without buckets":  boltFile(t, func(*bolt.Tx) error { return nil }),
		"another bbolt database": boltFile(t, func(tx *bolt.Tx) error {
			_, err := tx.CreateBucket([]byte("widgets"))
			return err
		}),
		"wrong schema marker": withMeta(map[string]string{"schema": "something/else", "version": "1", "agent": testAgent}, "keys", "acks"),
		"newer version":       withMeta(map[string]string{"schema": schemaName, "version": "2", "agent": testAgent}, "keys", "acks"),
		"no records buckets":  withMeta(map[string]string{"schema": schemaName, "version": "1", "agent": testAgent}),
	}
	for name, content := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "agent.ledger")
			require.NoError(t, os.WriteFile(path, content, 0o600))

			_, err := Open(path, Options{AgentID: testAgent})
			require.ErrorIs(t, err, ErrCorrupt)
			assert.Contains(t, err.Error(), path)
			assert.Contains(t, err.Error(), testAgent)

			after, readErr := os.ReadFile(path)
			require.NoError(t, readErr)
			assert.True(t, string(after) == string(content), "the file is left as it was")

			// A failed Open releases the lock, even after bbolt panicked.
			_, err = Open(path, Options{AgentID: testAgent})
			require.ErrorIs(t, err, ErrCorrupt)
			require.False(t, errors.Is(err, ErrLocked))
		})
	}
}

// A truncation that only cuts the file's unused tail loses nothing.
func TestOpenAcceptsAFileTrimmedToItsLastPage(t *testing.T) {
	ledger := sealedLedger(t)
	used := pagesInUse(t, ledger)
	require.Less(t, used, int64(len(ledger)), "the fixture has an unused tail")

	path := filepath.Join(t.TempDir(), "agent.ledger")
	require.NoError(t, os.WriteFile(path, ledger[:used], 0o600))
	trimmed := openAt(t, path)
	got, err := trimmed.Key(context.Background(), "3f1e7c2a-0000-4000-8000-000000000001", "msg:2999")
	require.NoError(t, err)
	assert.Equal(t, bandonce.KeyAccepted, got)
}

// pagesInUse returns how far a ledger's pages reach: its high-water mark.
func pagesInUse(t *testing.T, ledger []byte) int64 {
	t.Helper()
	path := filepath.Join(t.TempDir(), "agent.ledger")
	require.NoError(t, os.WriteFile(path, ledger, 0o600))
	l := openAt(t, path)
	var used int64
	require.NoError(t, l.db.View(func(tx *bolt.Tx) error { used = tx.Size(); return nil }))
	require.NoError(t, l.Close())
	return used
}

// Most truncations make bbolt fault while opening (the freelist sits at the
// end). After a prune, bbolt reuses low pages for the freelist and opens
// the file fine; Open's own size check must then catch the lost pages.
func TestOpenMeasuresATruncationBboltMisses(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "agent.ledger")
	require.NoError(t, os.WriteFile(path, sealedLedger(t), 0o600))
	l := openAt(t, path)
	clock := &fixedClock{at: l.now()}
	l.now = clock.now
	removed, err := l.Prune(ctx, clock.at.Add(1))
	require.NoError(t, err)
	require.Equal(t, 3000, removed)
	require.NoError(t, l.SetKey(ctx, "room-1", "k", bandonce.KeyIntent))
	require.NoError(t, l.Close())
	raw, err := os.ReadFile(path)
	require.NoError(t, err)

	used := pagesInUse(t, raw)
	cut := used - int64(os.Getpagesize())
	require.NoError(t, os.WriteFile(path, raw[:cut], 0o600))
	_, err = Open(path, Options{AgentID: testAgent})
	require.ErrorIs(t, err, ErrCorrupt)
	assert.Contains(t, err.Error(), fmt.Sprintf("the file is %d bytes but its pages reach %d: truncated", cut, used))
}
