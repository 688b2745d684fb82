package boltledger

import (
	"encoding/binary"
	"time"

	"github.com/band-once/bandonce"
)

// The file holds three top-level buckets: meta says what the file is and
// whose it is; keys and acks hold the records.
var (
	metaBucket = []byte("meta")
	keysBucket = []byte("keys")
	acksBucket = []byte("acks")

	schemaField  = []byte("schema")
	versionField = []byte("version")
	agentField   = []byte("agent")
)

// The schema marker. The version changes when the record layout does, so
// that an old build refuses a file it would misread.
const (
	schemaName    = "bandonce/boltledger"
	schemaVersion = "1"
)

// recordKey names one record of a room: the room id's length as a uvarint,
// the room id, then the key or message id. The length prefix keeps room
// "ab" key "c" apart from room "a" key "bc", whatever bytes the ids hold.
func recordKey(room, id string) []byte {
	k := make([]byte, 0, binary.MaxVarintLen64+len(room)+len(id))
	k = binary.AppendUvarint(k, uint64(len(room)))
	k = append(k, room...)
	return append(k, id...)
}

// A record's value is a tag byte (the KeyState of a key record, ackTag for
// an ack-pending record) and the time it was written, in big-endian Unix
// nanoseconds, which Prune reads.
const (
	recordLen = 1 + 8
	ackTag    = 1
)

func encodeRecord(tag byte, at time.Time) []byte {
	v := make([]byte, recordLen)
	v[0] = tag
	binary.BigEndian.PutUint64(v[1:], uint64(at.UnixNano()))
	return v
}

// decodeRecord reads a value; ok is false when it is not recordLen long.
func decodeRecord(v []byte) (tag byte, at time.Time, ok bool) {
	if len(v) != recordLen {
		return 0, time.Time{}, false
	}
	return v[0], time.Unix(0, int64(binary.BigEndian.Uint64(v[1:]))), true
}

// storedState reports whether tag is a state a key record may hold.
// KeyUnknown is never stored: it is the absence of a record.
func storedState(tag byte) bool {
	switch bandonce.KeyState(tag) {
	case bandonce.KeyIntent, bandonce.KeyAccepted, bandonce.KeyDuplicateDropped:
		return true
	}
	return false
}
