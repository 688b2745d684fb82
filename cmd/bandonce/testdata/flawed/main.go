// Command flawed is a Band agent with one deliberate flaw, named by a flag,
// for bandonce verify's tests. It polls every room's /messages/next with
// Go's standard library, survives transient errors and exits 0 on
// SIGTERM; then:
//
//	-ack-first  marks a message processed before it posts the reply, so a
//	            crash in between loses the reply for good
//	-deaf       opens Band's socket and joins its control topic, so
//	            interrupt, stop and supersede reach it, and ignores them all
//	-tell-answered  answers, then tells the room with an error event that
//	            it gave the message up (under the Shell's notice key)
//	-quit       exits 0 on its own after its first reply (agent-lifecycle)
//	-one-only   stops polling after its first reply and idles: the rest
//	            stay pending (none-pending)
//	-hang-ack   waits a minute before each processed mark, as a call
//	            without a timeout does (quiet)
//	-no-term    ignores SIGTERM (sigterm)
//	-polite     joins the control topic and exits 0 when superseded, as
//	            Band's Python SDK does (supersede, with -supersede-exit)
//	-remember   stores a memory of each message, under a key, before its
//	            reply, at every delivery (no-double-write)
//	-fail-after-reply  answers, then marks the message failed once, as a
//	            loop that turns a failed processed mark into a failure does;
//	            served again, it is marked processed (one-outcome)
//
// Each flag breaks the one rule of bandonce verify named after it.
// Every reply carries a dedup marker; there is no guard.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/band-once/bandonce/internal/phoenix"
)

var (
	base = strings.TrimRight(os.Getenv("BAND_BASE_URL"), "/")
	key  = os.Getenv("BAND_API_KEY")
	mark = regexp.MustCompile(`@\[\[[0-9A-Fa-f-]{36}\]\]\s*`)

	ackFirst = flag.Bool("ack-first", false, "mark processed before posting the reply")
	deaf     = flag.Bool("deaf", false, "join the control topic and ignore every signal")
	tell     = flag.Bool("tell-answered", false, "post a dead-letter error event for an answered message")
	quit     = flag.Bool("quit", false, "exit 0 after the first reply")
	oneOnly  = flag.Bool("one-only", false, "stop polling after the first reply")
	hangAck  = flag.Bool("hang-ack", false, "wait a minute before each processed mark")
	noTerm   = flag.Bool("no-term", false, "ignore SIGTERM")
	polite   = flag.Bool("polite", false, "exit 0 when superseded")
	remember = flag.Bool("remember", false, "store a memory of each message at every delivery")
	failOnce = flag.Bool("fail-after-reply", false, "mark each message failed once after its reply")

	// replied is closed after the first reply, for -quit and -one-only.
	replied = make(chan struct{})
	once    sync.Once
)

func call(ctx context.Context, method, path string, body, out any) (int, error) {
	var r io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, r)
	if err != nil {
		return 0, err
	}
	req.Header.Set("X-API-Key", key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		return resp.StatusCode, fmt.Errorf("%s %s: %s", method, path, resp.Status)
	}
	if out != nil && resp.StatusCode == http.StatusOK {
		return resp.StatusCode, json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(out)
	}
	return resp.StatusCode, nil
}

type message struct {
	ID       string `json:"id"`
	Content  string `json:"content"`
	SenderID string `json:"sender_id"`
}

func handle(ctx context.Context, room string, m message) error {
	path := "/agent/chats/" + room + "/messages/" + m.ID
	if _, err := call(ctx, "POST", path+"/processing", struct{}{}, nil); err != nil {
		return err
	}
	if *failOnce && failedOnce[m.ID] {
		// Served again after the failed mark: answered already, in this
		// life, so it is only marked processed.
		_, err := call(ctx, "POST", path+"/processed", struct{}{}, nil)
		return err
	}
	if *ackFirst {
		// The flaw: the message is consumed before its reply exists.
		if _, err := call(ctx, "POST", path+"/processed", struct{}{}, nil); err != nil {
			return err
		}
	}
	if *deaf {
		time.Sleep(100 * time.Millisecond) // some work, during which a signal may come
	}
	text := strings.TrimSpace(mark.ReplaceAllString(m.Content, ""))
	if *remember {
		// The flaw: a write Band has no idempotency key for, made again
		// at every delivery without looking for the one made before.
		mem := map[string]any{"memory": map[string]any{
			"content": "asked: " + text, "thought": "to recall it", "system": "long_term", "type": "episodic",
			"segment": "user", "scope": "subject", "subject_id": m.SenderID,
			"metadata": map[string]string{"dedup_key": "flawed:mem:" + m.ID},
		}}
		if _, err := call(ctx, "POST", "/agent/memories", mem, nil); err != nil {
			return err
		}
	}
	reply := map[string]any{"message": map[string]any{
		"content":  "echo: " + text + "\n[dedup_key:flawed:" + m.ID + "]",
		"mentions": []map[string]string{{"id": m.SenderID}},
	}}
	if _, err := call(ctx, "POST", "/agent/chats/"+room+"/messages", reply, nil); err != nil {
		return err
	}
	defer once.Do(func() { close(replied) })
	if *hangAck {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Minute):
		}
	}
	if *tell {
		ev := map[string]any{"event": map[string]any{
			"content": "Sorry, I could not answer this message.", "message_type": "error",
			"metadata": map[string]any{"dedup_key": "msg:" + m.ID + ":dead-letter"},
		}}
		if _, err := call(ctx, "POST", "/agent/chats/"+room+"/events", ev, nil); err != nil {
			return err
		}
	}
	if *failOnce && !failedOnce[m.ID] {
		failedOnce[m.ID] = true
		_, err := call(ctx, "POST", path+"/failed", map[string]any{"reason": "the processed mark failed"}, nil)
		return err
	}
	if !*ackFirst {
		_, err := call(ctx, "POST", path+"/processed", struct{}{}, nil)
		return err
	}
	return nil
}

// failedOnce: the messages -fail-after-reply has marked failed, in this
// life (one goroutine polls).
var failedOnce = map[string]bool{}

// listen keeps a socket joined to the agent's control topic, and ignores
// what comes on it.
func listen(ctx context.Context) {
	var me struct {
		Data struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	for ctx.Err() == nil {
		if _, err := call(ctx, "GET", "/agent/me", nil, &me); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	sock := phoenix.New(phoenix.Config{URL: os.Getenv("BAND_WS_URL"), APIKey: key, AgentID: me.Data.ID})
	sock.Join("agent_control:"+me.Data.ID, func(event string, _ json.RawMessage) {
		if *polite && event == "supersede" {
			os.Exit(0) // another connection took over: stop, sending nothing more
		}
	})
	_ = sock.Run(ctx)
}

func poll(ctx context.Context) error {
	var chats struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if _, err := call(ctx, "GET", "/agent/chats", nil, &chats); err != nil {
		return err
	}
	for _, c := range chats.Data {
		var next struct {
			Data message `json:"data"`
		}
		status, err := call(ctx, "GET", "/agent/chats/"+c.ID+"/messages/next", nil, &next)
		if err != nil {
			return err
		}
		if status == http.StatusOK {
			if err := handle(ctx, c.ID, next.Data); err != nil {
				return err
			}
		}
	}
	return nil
}

func main() {
	flag.Parse()
	stopOn := []os.Signal{os.Interrupt, syscall.SIGTERM}
	if *noTerm {
		signal.Ignore(syscall.SIGTERM)
		stopOn = stopOn[:1]
	}
	ctx, stop := signal.NotifyContext(context.Background(), stopOn...)
	defer stop()
	if *deaf || *polite {
		done := make(chan struct{})
		go func() { defer close(done); listen(ctx) }()
		defer func() { <-done }()
	}
	for ctx.Err() == nil {
		select {
		case <-replied:
			if *quit {
				return // the flaw: done, it thought
			}
			if *oneOnly {
				<-ctx.Done() // the flaw: it idles without polling
				return
			}
		default:
		}
		if err := poll(ctx); err != nil && !errors.Is(err, context.Canceled) {
			time.Sleep(50 * time.Millisecond) // a transient error: poll again
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}
