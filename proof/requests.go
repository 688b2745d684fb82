package proof

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/band-once/bandonce/fakeband"
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
	key, _ := markerKey(body.Message.Content)
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

// markerKey reads the dedup marker on the last line of a reply. The
// oracle has its own reader rather than the shell's, so a bug there cannot
// hide itself.
func markerKey(content string) (string, bool) {
	content = strings.TrimRight(content, " \t\r\n")
	last := content
	if i := strings.LastIndexByte(content, '\n'); i >= 0 {
		last = content[i+1:]
	}
	last = strings.TrimSpace(last)
	const prefix, suffix = "[dedup_key:", "]"
	if !strings.HasPrefix(last, prefix) || !strings.HasSuffix(last, suffix) || len(last) <= len(prefix)+len(suffix) {
		return "", false
	}
	return last[len(prefix) : len(last)-len(suffix)], true
}

// socketConn counts what the agent reads from one socket connection, so
// the engine can tell whether a push reached it.
type socketConn struct {
	rwc    io.ReadWriteCloser
	l      *life
	closed atomic.Bool
}

func (c *socketConn) Read(p []byte) (int, error) {
	n, err := c.rwc.Read(p)
	c.l.socketBytes.Add(int64(n))
	if err != nil {
		c.markClosed()
	}
	return n, err
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
