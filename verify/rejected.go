package verify

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/band-once/bandonce/fakeband"
)

// This file catches what Band refuses to take from the agent: a reply (or
// any message or event it posts) that Band answers with a final 4xx, such
// as a reply without a mention (422 mentions_required). The engine sees
// only the consequence, a message dead-lettered or left unanswered; the
// verifier names the cause with Band's own code.

// rejection is one post of the agent's that Band refused.
type rejection struct {
	life   int
	room   string
	msg    string // the message whose attempt was open in the room, if any
	what   string // "message" or "event"
	status int
	code   string
	detail string // Band's message, then its field details
}

// rejectedPost reports whether a post answered status is Band refusing
// what the agent sent, not a fault the verifier injected nor a signal:
// 401 ends the run on its own, 403 is how a stopped room answers a post
// (and the plan quota), 408 and 429 are transient.
func rejectedPost(status int) bool {
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusRequestTimeout, http.StatusTooManyRequests:
		return false
	}
	return status >= 400 && status < 500
}

// noteRejection records a post Band refused, leaving the response's body
// for the agent.
func (r *recorder) noteRejection(req *http.Request, room string, resp *http.Response, err error) {
	if err != nil || resp == nil || req.Method != http.MethodPost || !rejectedPost(resp.StatusCode) {
		return
	}
	what := ""
	switch {
	case strings.HasSuffix(req.URL.Path, "/messages"):
		what = "message"
	case strings.HasSuffix(req.URL.Path, "/events"):
		what = "event"
	default:
		return
	}
	if room == "" {
		room = postRoom(req.URL.Path)
	}
	rej := rejection{life: r.life, room: room, what: what, status: resp.StatusCode}
	if resp.Body != nil {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		_ = resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(data))
		rej.code, rej.detail = bandError(data)
	}
	o := r.o
	o.mu.Lock()
	defer o.mu.Unlock()
	rej.msg = o.open[lifeRoom{r.life, room}]
	o.rejections = append(o.rejections, rej)
}

// postRoom is the room of a POST .../agent/chats/{room}/{messages,events}.
func postRoom(path string) string {
	_, rest, ok := strings.Cut(path, fakeband.APIPrefix+"/agent/chats/")
	if !ok {
		return ""
	}
	room, _, _ := strings.Cut(rest, "/")
	return room
}

// bandError reads Band's error envelope: the code, and the message with
// the fields the details name.
func bandError(body []byte) (code, detail string) {
	var env struct {
		Error struct {
			Code    string              `json:"code"`
			Message string              `json:"message"`
			Details map[string][]string `json:"details"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &env) != nil {
		return "", strings.TrimSpace(string(body))
	}
	detail = env.Error.Message
	var fields []string
	for _, field := range sortedKeys(env.Error.Details) {
		msgs := strings.Join(env.Error.Details[field], ", ")
		if msgs == "" || msgs == detail {
			fields = append(fields, field)
		} else {
			fields = append(fields, field+": "+msgs)
		}
	}
	if len(fields) > 0 {
		detail += " (" + strings.Join(fields, "; ") + ")"
	}
	return env.Error.Code, detail
}

// rejectedByBand is a violation whenever Band refused a post: a correct
// agent sends nothing Band cannot accept, and what follows (a message
// dead-lettered, a reply missing) only shows the consequence. It comes
// before every other judgement because it names the cause.
func rejectedByBand(o *observation) *verdict {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.rejections) == 0 {
		return nil
	}
	// The first by label, so concurrent rooms report the same one.
	name := func(rej rejection) string {
		if rej.msg == "" {
			return "~" + rej.room
		}
		if l := o.labels[rej.msg]; l != "" {
			return l
		}
		return rej.msg
	}
	rej := o.rejections[0]
	for _, r := range o.rejections[1:] {
		if name(r) < name(rej) {
			rej = r
		}
	}
	answer := fmt.Sprint(rej.status)
	if rej.code != "" {
		answer += " " + rej.code
	}
	if rej.detail != "" {
		answer += ": " + rej.detail
	}
	target := "in room " + rej.room
	if rej.msg != "" {
		target = "for " + name(rej)
	}
	return &verdict{"band-rejected:" + rej.code, fmt.Sprintf(
		"Band rejected the %s the agent posted %s, answering %s; it was never posted", rej.what, target, answer)}
}
