// Package bridge turns a program or a remote HTTP endpoint into the
// Handler of a bandonce.Shell: it is what bandonce run runs. The Shell
// brings the lifecycle (claims, the dedup guard, marks, retries, control
// signals); the bridge does one message's work and makes cancellation
// real.
//
// In command mode every message runs the command once, in a process group
// of its own: the body on stdin, the message in BAND_* variables, the reply
// on stdout. It gets a minimal environment (DefaultEnv, and what
// Options.Env adds), and the agent's key only with Options.PassKey. When the Shell cancels the handler (an interrupt, a stop, a
// handler timeout, shutdown) the whole group gets SIGTERM, then SIGKILL
// after the grace; what it printed is never posted.
//
// In forward mode every message is POSTed as JSON to a URL with an
// Idempotency-Key header; cancellation aborts the request and tells the
// remote with a cancel call naming the execution, so a remote that honours
// it stops spending. A remote that ignores the call is not stopped.
//
// Each handler call is one execution, registered under an id of its own
// for as long as it runs (and, in forward mode, until its cancel call is
// done): never under its room, so a second execution in a room can never
// take the place of the first.
package bridge

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/internal/keyguard"
	"github.com/band-once/bandonce/internal/lifecycle"
)

// Options are what both modes share.
type Options struct {
	// KeyTemplate makes a message's dedup key from {message_id},
	// {room_id} and {sender_id}. Empty means bandonce.DefaultKey.
	KeyTemplate string
	// Grace is how long a cancelled command has between SIGTERM and
	// SIGKILL. Zero means 5 s.
	Grace time.Duration
	// Logger receives the bridge's logs and, in command mode, the
	// command's stderr. Nil means slog.Default().
	Logger *slog.Logger
	// Key is the agent's API key. In command mode the command never gets
	// it, nor a variable whose value holds it, unless PassKey; and a line
	// of its stderr cut short never ends in a piece of it.
	Key *keyguard.Secret
	// PassKey gives a command the agent's key as BAND_API_KEY, and
	// PassedWithKey from Environ: for a command that calls Band itself.
	// Everything it can read it can print, and a model can be talked into
	// printing it; what the Shell posts is still refused if it holds the
	// key, but a command's own calls are not watched.
	PassKey bool
	// Env names more variables of Environ a command gets besides
	// DefaultEnv; a name ending in "*" is a prefix. A Band SDK's
	// variable (BAND_*, THENVOI_*) is refused: see PassKey.
	Env []string
	// Environ is the environment commands inherit from. Nil means
	// os.Environ().
	Environ []string
}

// DefaultGrace is Options.Grace's default.
const DefaultGrace = 5 * time.Second

// Execution is one handler call in flight.
type Execution struct {
	// ID names the execution; forward mode sends it to the remote.
	ID              string
	RoomID, Message string
	Started         time.Time
}

// registry holds the executions in flight, by execution id.
type registry struct {
	mu    sync.Mutex
	execs map[string]Execution
}

func (r *registry) add(e Execution) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.execs == nil {
		r.execs = make(map[string]Execution)
	}
	r.execs[e.ID] = e
}

func (r *registry) remove(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.execs, id)
}

// InFlight lists the executions running now, oldest first.
func (r *registry) InFlight() []Execution {
	r.mu.Lock()
	out := make([]Execution, 0, len(r.execs))
	for _, e := range r.execs {
		out = append(out, e)
	}
	r.mu.Unlock()
	slices.SortFunc(out, func(a, b Execution) int { return a.Started.Compare(b.Started) })
	return out
}

func newExecution(m *bandonce.Message) Execution {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return Execution{ID: "exe_" + hex.EncodeToString(b[:]), RoomID: m.RoomID, Message: m.ID, Started: time.Now()}
}

// keyTemplate expands a dedup key template.
type keyTemplate string

var placeholders = []string{"{message_id}", "{room_id}", "{sender_id}"}

// parseKeyTemplate checks a template: only known placeholders,
// {message_id} among them (a command's reply is its message's work, and
// without the id every message of a room would share one key, all but the
// first taken for answered), and a key that can travel in a marker once
// expanded with ids as long as Band's.
func parseKeyTemplate(t string) (keyTemplate, error) {
	if t == "" {
		return "", nil
	}
	rest := t
	for _, p := range placeholders {
		rest = strings.ReplaceAll(rest, p, "")
	}
	if i := strings.IndexAny(rest, "{}"); i >= 0 {
		return "", fmt.Errorf("key template %q: unknown placeholder (want %s)", t, strings.Join(placeholders, ", "))
	}
	if !strings.Contains(t, "{message_id}") {
		return "", fmt.Errorf("key template %q: it must hold {message_id}, or every message of a room would share one key and only the first be answered", t)
	}
	const id = "00000000-0000-0000-0000-000000000000" // Band's ids are UUIDs
	sample := keyTemplate(t).expand(&bandonce.Message{ID: id, RoomID: id, SenderID: id})
	if err := lifecycle.ValidateKey(sample); err != nil {
		return "", fmt.Errorf("key template %q: %w", t, err)
	}
	return keyTemplate(t), nil
}

// expand is the message's dedup key: the template's, or the Shell's
// default key.
func (t keyTemplate) expand(m *bandonce.Message) string {
	if t == "" {
		return bandonce.DefaultKey(m.ID)
	}
	return strings.NewReplacer("{message_id}", m.ID, "{room_id}", m.RoomID, "{sender_id}", m.SenderID).Replace(string(t))
}

// reply makes the Shell's reply from the work's text: none when it is
// blank, else the text mentioning the sender, under the key.
func reply(m *bandonce.Message, text, key string, template keyTemplate) *bandonce.Reply {
	text = strings.TrimRight(text, "\r\n")
	if lifecycle.Blank(text) {
		return nil // nothing a person would see, a byte-order mark alone say
	}
	r := &bandonce.Reply{Content: text, Mentions: []string{m.SenderID}}
	if template != "" {
		r.DedupKey = key
	}
	return r
}

// errCancelled wraps a cancellation cause so the log says what stopped
// the work; errors.Is still finds the cause.
func errCancelled(what string, cause error) error {
	if cause == nil {
		cause = errors.New("cancelled")
	}
	return fmt.Errorf("%s cancelled: %w", what, cause)
}

func (o Options) withDefaults() Options {
	if o.Grace <= 0 {
		o.Grace = DefaultGrace
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}
