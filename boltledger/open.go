package boltledger

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Options configures Open.
type Options struct {
	// AgentID is the agent this ledger belongs to. Required. A new file
	// records it; an existing file must have been created for it.
	AgentID string
	// LockTimeout is how long Open waits for the file lock before failing
	// with ErrLocked. Zero means 100 ms.
	LockTimeout time.Duration
}

const defaultLockTimeout = 100 * time.Millisecond

// fileMode keeps the ledger private to the agent's user.
const fileMode = 0o600

// Open opens the ledger at path for opts.AgentID, creating it when the path
// does not exist. The Ledger holds the file's lock until Close. Its errors
// are *OpenError; see ErrLocked, ErrCorrupt and ErrAgentMismatch.
func Open(path string, opts Options) (*Ledger, error) {
	fail := func(kind error, cause error, format string, args ...any) error {
		return &OpenError{Path: path, AgentID: opts.AgentID, Kind: kind, Reason: fmt.Sprintf(format, args...), Err: cause}
	}
	if strings.TrimSpace(opts.AgentID) == "" {
		return nil, fail(nil, nil, "cannot be opened: Options.AgentID is required: the agent's id, as Band answers GET /agent/me; "+
			"an agent configured by its environment has it in BAND_AGENT_ID, which is empty or unset (fakeband prints it with the key)")
	}
	if opts.LockTimeout < 0 {
		return nil, fail(nil, nil, "cannot be opened: Options.LockTimeout must not be negative")
	}
	timeout := cmp.Or(opts.LockTimeout, defaultLockTimeout)

	if err := createIfMissing(path, opts.AgentID, timeout); err != nil {
		return nil, fail(nil, err, "for agent %q could not be created", opts.AgentID)
	}
	db, err := openLocked(path, timeout)
	switch {
	case err == nil:
	case errors.Is(err, berrors.ErrTimeout):
		return nil, fail(ErrLocked, nil, "is in use by another process (or another Open in this one) for agent %q: no lock within %s", opts.AgentID, timeout)
	case errors.Is(err, errEmptyFile):
		return nil, fail(ErrCorrupt, nil, "for agent %q is empty: truncated, or not written by this package", opts.AgentID)
	case isDamage(err):
		return nil, fail(ErrCorrupt, err, "for agent %q is damaged or not a bbolt database", opts.AgentID)
	default:
		return nil, fail(nil, err, "for agent %q could not be opened", opts.AgentID)
	}

	l := &Ledger{db: db, path: path, pageSize: int64(db.Info().PageSize), now: time.Now}
	if err := l.checkIdentity(opts.AgentID); err != nil {
		_ = db.Close()
		var open *OpenError
		if errors.As(err, &open) {
			open.Path, open.AgentID = path, opts.AgentID
			return nil, open
		}
		var kind error // an I/O error is not damage
		if errors.Is(err, ErrCorrupt) {
			kind = ErrCorrupt // bbolt faulted on the file
		}
		return nil, fail(kind, err, "for agent %q could not be read", opts.AgentID)
	}
	return l, nil
}

// errEmptyFile stops bbolt from initialising an existing empty file, which
// would silently turn a truncated ledger into a new one.
var errEmptyFile = errors.New("empty file")

// faultError is a panic or memory fault inside bbolt, turned into an error.
type faultError struct{ value any }

func (e *faultError) Error() string { return fmt.Sprintf("bbolt failed reading it: %v", e.value) }

// isDamage reports whether a bbolt.Open error means the file's content is
// bad, as opposed to the file being unreachable. It errs towards "not
// damage": an I/O error called damage could get a good ledger deleted.
func isDamage(err error) bool {
	var fault *faultError
	return errors.As(err, &fault) ||
		errors.Is(err, berrors.ErrInvalid) ||
		errors.Is(err, berrors.ErrChecksum) ||
		errors.Is(err, berrors.ErrVersionMismatch) ||
		errors.Is(err, berrors.ErrInvalidMapping) ||
		// bbolt has no sentinel for a file shorter than its two meta pages.
		strings.Contains(err.Error(), "file size too small")
}

// openLocked opens an existing ledger file with bbolt, never creating one.
// bbolt reads a damaged file through its memory map and may panic or fault
// doing so. That is recovered here: the lock is released and the file
// closed, but the mapping bbolt made cannot be reached and stays (address
// space only, once per refused file). The lock needs its explicit unlock,
// because the mapping keeps the locked file open after the close.
func openLocked(path string, timeout time.Duration) (db *bolt.DB, err error) {
	var file *os.File
	openFile := func(name string, flag int, perm os.FileMode) (*os.File, error) {
		f, err := os.OpenFile(name, flag&^os.O_CREATE, perm)
		if err != nil {
			return nil, err
		}
		info, err := f.Stat()
		if err == nil && info.Size() == 0 {
			err = errEmptyFile
		}
		if err != nil {
			_ = f.Close()
			return nil, err
		}
		file = f
		return f, nil
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			if file != nil {
				unlock(file)
				_ = file.Close()
			}
			db, err = nil, &faultError{value: r}
		}
	}()
	return bolt.Open(path, fileMode, &bolt.Options{Timeout: timeout, OpenFile: openFile})
}

// createIfMissing builds a new ledger under a temporary name and links it
// to path, so that path only ever names a complete ledger. When another
// Open links its own first, that one wins and this one is discarded.
func createIfMissing(path, agentID string, timeout time.Duration) error {
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		return err // nil when the file exists
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+".creating-*")
	if err != nil {
		return err
	}
	tmpPath := tmp.Name()
	// Once linked the file lives on under path; on failure it is litter.
	defer func() { _ = os.Remove(tmpPath) }()
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := writeNewLedger(tmpPath, agentID, timeout); err != nil {
		return err
	}
	if err := os.Link(tmpPath, path); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return syncDir(dir)
}

// writeNewLedger initialises the empty file at path as a ledger for
// agentID, durably.
func writeNewLedger(path, agentID string, timeout time.Duration) error {
	db, err := bolt.Open(path, fileMode, &bolt.Options{Timeout: timeout})
	if err != nil {
		return err
	}
	err = db.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucket(metaBucket)
		if err != nil {
			return err
		}
		for field, value := range map[string]string{
			string(schemaField): schemaName, string(versionField): schemaVersion, string(agentField): agentID,
		} {
			if err := meta.Put([]byte(field), []byte(value)); err != nil {
				return err
			}
		}
		for _, b := range [][]byte{keysBucket, acksBucket, stepsBucket} {
			if _, err := tx.CreateBucket(b); err != nil {
				return err
			}
		}
		return nil
	})
	return errors.Join(err, db.Close())
}

// syncDir makes a new directory entry durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

// checkIdentity refuses a file that is truncated, is not a ledger, or
// belongs to another agent. Its errors are *OpenError without Path and
// AgentID, which Open fills in.
func (l *Ledger) checkIdentity(agentID string) error {
	corrupt := func(format string, args ...any) error {
		return &OpenError{Kind: ErrCorrupt, Reason: fmt.Sprintf("for agent %q is not a usable ledger: ", agentID) + fmt.Sprintf(format, args...)}
	}
	info, err := os.Stat(l.path)
	if err != nil {
		return err
	}
	return l.view(context.Background(), "check identity", func(tx *bolt.Tx) error {
		// A sound file reaches at least to its high-water page; one that
		// stops short lost pages, and reading them would fault.
		if info.Size() < tx.Size() {
			return corrupt("the file is %d bytes but its pages reach %d: truncated", info.Size(), tx.Size())
		}
		meta := tx.Bucket(metaBucket)
		if meta == nil {
			return corrupt("a bbolt database without the %s schema marker", schemaName)
		}
		if got := string(meta.Get(schemaField)); got != schemaName {
			return corrupt("schema marker %q, want %q", got, schemaName)
		}
		if got := string(meta.Get(versionField)); got != schemaVersion {
			return corrupt("schema version %q, this build reads version %s", got, schemaVersion)
		}
		if tx.Bucket(keysBucket) == nil || tx.Bucket(acksBucket) == nil {
			return corrupt("the keys or acks bucket is missing")
		}
		if owner := string(meta.Get(agentField)); owner != agentID {
			return &OpenError{Kind: ErrAgentMismatch, Reason: fmt.Sprintf("belongs to agent %q, not %q", owner, agentID)}
		}
		return nil
	})
}
