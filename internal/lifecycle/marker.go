package lifecycle

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The dedup key travels as the last line of a posted reply, in band-once
// 0.1's format, so rooms shared with Python band-once agents dedup across
// both.
const (
	markerPrefix = "[dedup_key:"
	markerSuffix = "]"
	// MaxKeyLen bounds a dedup key; a reply's marker should stay a
	// footnote, not a payload.
	MaxKeyLen = 256
)

// MetadataKey is the member of an event's metadata that carries its dedup
// key: events have structured metadata, so the key need not show in their
// text.
const MetadataKey = "dedup_key"

// ReservedPrefix begins the names the shell gives its own ledger records
// (an agent-API write's key and result): no dedup key or step name may
// begin with it, so none can be mistaken for one of them.
const ReservedPrefix = "bandonce:"

// RecordName is the name the shell's ledger records of a kind of effect
// other than a message take: an event's key ("event"), or an agent-API
// write's ("memory", "task", "comment", "room"), in a kind of its own so
// that one natural key may name an effect of each kind. A name too long
// for MaxKeyLen holds a digest of the key instead, and so does the name
// of a key that looks like one ("sha256:..."), so no key's name is
// another's digest.
func RecordName(kind, key string) string {
	const digest = "sha256:"
	name := ReservedPrefix + kind + ":" + key
	if len(name) <= MaxKeyLen && !strings.HasPrefix(key, digest) {
		return name
	}
	sum := sha256.Sum256([]byte(key))
	return ReservedPrefix + kind + ":" + digest + hex.EncodeToString(sum[:])
}

// ErrBadKey is wrapped by ValidateKey's errors.
var ErrBadKey = errors.New("invalid dedup key")

// ValidateKey reports whether key can travel in a marker and be read back
// exactly, and names nothing of the shell's own: non-empty, valid UTF-8,
// one line without a NUL byte, at most MaxKeyLen bytes, not beginning with
// ReservedPrefix.
func ValidateKey(key string) error {
	switch {
	case key == "":
		return errors.Join(ErrBadKey, errors.New("empty"))
	case len(key) > MaxKeyLen:
		return errors.Join(ErrBadKey, errors.New("longer than 256 bytes"))
	case !utf8.ValidString(key):
		return errors.Join(ErrBadKey, errors.New("not valid UTF-8"))
	case strings.ContainsAny(key, "\r\n"):
		return errors.Join(ErrBadKey, errors.New("contains a line break"))
	case strings.ContainsRune(key, 0):
		// PostgreSQL's text cannot hold it: a durable ledger could never
		// record the key, and its room would wait on it for good.
		return errors.Join(ErrBadKey, errors.New("contains a NUL byte"))
	case strings.TrimSpace(key) != key:
		return errors.Join(ErrBadKey, errors.New("has leading or trailing space"))
	case strings.HasPrefix(key, ReservedPrefix):
		return errors.Join(ErrBadKey, errors.New("begins with "+strconv.Quote(ReservedPrefix)+", which the shell keeps for its own records"))
	}
	return nil
}

// AppendMarker returns content with the key's marker as its last line.
func AppendMarker(content, key string) string {
	return strings.TrimRight(content, "\r\n") + "\n" + markerPrefix + key + markerSuffix
}

// ParseMarker returns the key of the marker on content's last line. Only
// an exact marker counts: a key quoted inside other text, or a marker that
// is not the last line, is not one.
func ParseMarker(content string) (key string, ok bool) {
	content = strings.TrimRight(content, "\r\n \t")
	last := content
	if i := strings.LastIndexByte(content, '\n'); i >= 0 {
		last = content[i+1:]
	}
	last = strings.TrimSpace(last)
	if !strings.HasPrefix(last, markerPrefix) || !strings.HasSuffix(last, markerSuffix) {
		return "", false
	}
	key = last[len(markerPrefix) : len(last)-len(markerSuffix)]
	if ValidateKey(key) != nil {
		return "", false
	}
	return key, true
}
