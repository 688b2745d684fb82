package agentloop_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/agentloop"
	"github.com/band-once/bandonce/fakeband"
)

// Band's tools post through the Message's methods: a turn delivered twice
// (the first delivery failing after the loop) posts its message and its
// event once, and the participants it lists reach the model.
func TestBandsToolsPostOnceAcrossARedelivery(t *testing.T) {
	w := newWorld(t)
	m := &script{steps: []agentloop.Response{
		{ToolCalls: []agentloop.ToolCall{
			call(agentloop.ToolSendEvent, `{"type":"thought","content":"I will ask bea."}`),
			call(agentloop.ToolParticipants, `{}`),
			call(agentloop.ToolPeers, `{}`),
		}},
		{ToolCalls: []agentloop.ToolCall{call(agentloop.ToolSendMessage, `{"content":"bea, can you confirm?","mentions":["@bea"]}`)}},
		{Text: "asked bea"},
	}}
	loop := &agentloop.Loop{Model: m, Tools: agentloop.BandTools()}
	w.serve(t, func(ctx context.Context, msg *bandonce.Message) (*bandonce.Reply, error) {
		if _, err := loop.Run(ctx, msg); err != nil {
			return nil, err
		}
		if msg.Attempt == 1 {
			return nil, errors.New("crash after the loop")
		}
		return &bandonce.Reply{Content: "final", Mentions: []string{msg.SenderID}}, nil
	})
	msg := w.say(t, "ask bea")
	w.waitStatus(t, msg, fakeband.StatusProcessed)

	if posts := w.agentPosts(); len(posts) != 2 || posts[0] != "bea, can you confirm?" || posts[1] != "final" {
		t.Errorf("the agent posted %q, want the tool's message then the reply, once each", posts)
	}
	var thoughts int
	for _, e := range w.fb.ChatEvents(w.room.ID) {
		if e.SenderID == w.agent.ID && e.MessageType == "thought" {
			thoughts++
		}
	}
	if thoughts != 1 {
		t.Errorf("%d thoughts posted, want 1", thoughts)
	}
	m.mu.Lock()
	second := m.seen[1].Turns
	m.mu.Unlock()
	if listed := second[3].Text; second[3].IsError || !strings.Contains(listed, w.bea.ID) {
		t.Errorf("the participants the model read: %q", listed)
	}
	if calls, _ := m.counts(); calls != 3 {
		t.Errorf("model calls: %d, want 3", calls)
	}
}

// A Band tool's bad arguments are the model's to read.
func TestABandToolsBadArgumentsAreTheModelsToRead(t *testing.T) {
	w := newWorld(t)
	m := &script{steps: []agentloop.Response{
		{ToolCalls: []agentloop.ToolCall{
			call(agentloop.ToolSendEvent, `{"type":"error","content":"x"}`),
			call(agentloop.ToolSendMessage, `{"content":"  "}`),
			// Refused by the Message before any request, and by Band after
			// one: the model's to read too, not the end of the turn.
			call(agentloop.ToolSendEvent, `{"type":"thought","content":"`+strings.Repeat("x", 20000)+`"}`),
			call(agentloop.ToolSendMessage, `{"content":"hi","mentions":["@nobody"]}`),
		}},
		{Text: "ok"},
	}}
	loop := &agentloop.Loop{Model: m, Tools: agentloop.BandTools()}
	w.serve(t, loop.Handler())
	msg := w.say(t, "hi")
	w.waitStatus(t, msg, fakeband.StatusProcessed)
	m.mu.Lock()
	turns := m.seen[1].Turns
	m.mu.Unlock()
	if !turns[2].IsError || !strings.Contains(turns[2].Text, "not thought") || !turns[3].IsError || !strings.Contains(turns[3].Text, "blank") {
		t.Errorf("results: %+v", turns[2:])
	}
	if !turns[4].IsError || !strings.Contains(turns[4].Text, "16384") || !turns[5].IsError || !strings.Contains(turns[5].Text, "422") {
		t.Errorf("refusals: %.200v / %v, want both the model's to read", turns[4], turns[5])
	}
	if posts := w.agentPosts(); len(posts) != 1 {
		t.Errorf("posts: %q, want the reply only", posts)
	}
}
