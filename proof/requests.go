package proof

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/band-once/bandonce/fakeband"
	"github.com/band-once/bandonce/internal/oracle"
)

// classify names a request's endpoint and room from its path, without
// allocating: it runs for every request.
func classify(method, path string) (fakeband.Endpoint, string) {
	_, rest, ok := strings.Cut(path, fakeband.APIPrefix+"/")
	if !ok {
		return "", ""
	}
	switch rest {
	case "socket/websocket":
		return fakeband.EndpointSocket, ""
	case "agent/me":
		return fakeband.EndpointMe, ""
	case "agent/chats":
		return fakeband.EndpointChats, ""
	}
	rest, ok = strings.CutPrefix(rest, "agent/chats/")
	if !ok {
		return "", ""
	}
	room, tail, _ := strings.Cut(rest, "/")
	switch {
	case tail == "context":
		return fakeband.EndpointContext, room
	case tail == "messages" && method == http.MethodPost:
		return fakeband.EndpointPost, room
	case tail == "messages/next":
		return fakeband.EndpointNext, room
	}
	if msg, ok := strings.CutPrefix(tail, "messages/"); ok {
		_, mark, _ := strings.Cut(msg, "/")
		switch mark {
		case "processing":
			return fakeband.EndpointProcessing, room
		case "processed":
			return fakeband.EndpointProcessed, room
		case "failed":
			return fakeband.EndpointFailed, room
		}
	}
	return "", room
}

// replyKey reads the dedup key from a reply POST's body, leaving the body
// in place for the fake. A reply without a marker has key "".
func replyKey(req *http.Request) (string, error) {
	if req.Body == nil {
		return "", nil
	}
	data, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return "", err
	}
	req.Body = io.NopCloser(bytes.NewReader(data))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }
	if key, ok := plainMarker(data); ok {
		return key, nil
	}
	var body struct {
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
	}
	if json.Unmarshal(data, &body) != nil {
		return "", nil
	}
	key, _ := oracle.MarkerKey(body.Message.Content)
	return key, nil
}

// plainMarker finds the marker in the raw JSON body without decoding it,
// when that is unambiguous: the marker closes the content string, follows
// an escaped newline, and its key needs no unescaping. Otherwise the
// caller decodes the body.
func plainMarker(data []byte) (string, bool) {
	const prefix = `\n[dedup_key:`
	i := bytes.LastIndex(data, []byte(prefix))
	if i < 0 {
		return "", false
	}
	rest := data[i+len(prefix):]
	j := bytes.IndexByte(rest, ']')
	if j <= 0 || j+1 >= len(rest) || rest[j+1] != '"' || bytes.ContainsAny(rest[:j], `\"`) {
		return "", false
	}
	key := string(rest[:j])
	if strings.TrimSpace(key) != key {
		return "", false
	}
	return key, true
}

// socketConn counts what the agent reads from one socket connection, and
// notes the correlation id of every control push in it, so the engine can
// tell whether and when a push reached the agent.
type socketConn struct {
	rwc    io.ReadWriteCloser
	l      *life
	closed atomic.Bool
	carry  []byte // the end of the last read, in case an id spans two
}

func (c *socketConn) Read(p []byte) (int, error) {
	n, err := c.rwc.Read(p)
	c.l.socketBytes.Add(int64(n))
	if n > 0 {
		c.noteRead(p[:n])
	}
	if err != nil {
		c.markClosed()
	}
	return n, err
}

// correlationField precedes a control push's id in its frame, as the fake
// encodes it (server frames are neither masked nor compressed).
var correlationField = []byte(`"correlation_id":"`)

// maxCorrelationID bounds the ids the scan looks for; the fake's are
// "ctl-" and a number.
const maxCorrelationID = 32

// noteRead looks through what the agent just read (with the end of the
// read before, in case a frame spans two) for control pushes, by their
// correlation ids, and for Band's supersede push.
func (c *socketConn) noteRead(read []byte) {
	data := append(c.carry, read...)
	if len(c.l.supersedeFrame) > 0 && bytes.Contains(data, c.l.supersedeFrame) {
		c.l.noteSupersedeHeard()
	}
	keep := min(len(data), max(len(correlationField)+maxCorrelationID, len(c.l.supersedeFrame)))
	tail := data[len(data)-keep:]
	for {
		i := bytes.Index(data, correlationField)
		if i < 0 {
			break
		}
		rest := data[i+len(correlationField):]
		j := bytes.IndexByte(rest, '"')
		if j < 0 {
			if len(rest) > maxCorrelationID {
				data = rest // not an id the fake sends; skip it
				continue
			}
			break // the id goes on in the next read
		}
		c.l.arrivals.note(string(rest[:j]), c.l)
		data = rest[j:]
	}
	c.carry = append(c.carry[:0], tail...)
}

// pushArrivals are the control pushes that reached the agent, in any of
// its lives, by correlation id.
type pushArrivals struct {
	mu   sync.Mutex
	seen map[string]arrival
}

// arrival is when a control push first reached the agent, and which life
// read it.
type arrival struct {
	life int
	at   time.Time
	tick int64
}

func (a *pushArrivals) note(id string, l *life) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.seen == nil {
		a.seen = make(map[string]arrival)
	}
	if _, ok := a.seen[id]; !ok {
		a.seen[id] = arrival{life: l.n, at: time.Now(), tick: l.order.next()}
	}
}

func (a *pushArrivals) arrived(id string) bool {
	_, ok := a.get(id)
	return ok
}

func (a *pushArrivals) get(id string) (arrival, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	got, ok := a.seen[id]
	return got, ok && id != ""
}

func (c *socketConn) Write(p []byte) (int, error) { return c.rwc.Write(p) }

func (c *socketConn) Close() error {
	c.markClosed()
	return c.rwc.Close()
}

func (c *socketConn) markClosed() {
	if c.closed.CompareAndSwap(false, true) {
		c.l.socketsOpen.Add(-1)
	}
}
