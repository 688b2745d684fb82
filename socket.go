package bandonce

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/band-once/bandonce/internal/phoenix"
)

// startSocket connects the Phoenix socket for pushes. The control topic
// is registered first, before the socket connects, so no signal can
// arrive before its handler is in place. The returned channel is closed
// once the first connection has joined its topics.
//
// The socket itself lives as long as life, which outlasts ctx (fetching)
// on a clean shutdown until the rounds have ended.
func (s *Shell) startSocket(ctx, life context.Context, agentID string) <-chan struct{} {
	connected := make(chan struct{})
	var once sync.Once
	sock := phoenix.New(phoenix.Config{
		URL:        s.cfg.socketURL,
		APIKey:     s.cfg.apiKey.Value(),
		AgentID:    agentID,
		HTTPClient: s.cfg.socketClient,
		Logger:     s.log,
		Seed:       s.jitterSeed + 2,
		OnConnected: func() {
			s.socketUp.Store(true)
			s.socketEvent(true, nil)
			once.Do(func() { close(connected) })
		},
		OnDisconnected: func(err error) {
			s.socketUp.Store(false)
			s.socketEvent(false, err)
			if ctx.Err() != nil {
				return // Run is ending: nothing to recover from
			}
			s.mu.Lock()
			sched := s.sched
			s.mu.Unlock()
			if sched != nil {
				sched.pollSoon() // the idle rooms' slow resyncs would wait for pushes that cannot come
			}
			s.log.Info("bandonce: socket disconnected; polling until it is back", "err", err)
		},
		// Pushes sent before a topic was joined (or while the socket was
		// down, or its channel crashed: the topic is joined again) reached
		// nobody, so once its join is answered a room looks at /next, a
		// stopped room as a probe, since a play may be among them, and
		// the agent's rooms are listed again.
		OnJoined: s.catchUp,
		OnJoinError: func(topic string, response json.RawMessage) {
			s.catchUp(topic)
			s.log.Warn("bandonce: Band refused a socket topic", "topic", topic, "response", string(response))
		},
	})
	sock.Join("agent_control:"+agentID, s.onControl)
	if len(s.cfg.Rooms) == 0 {
		sock.Join("agent_rooms:"+agentID, s.onRooms)
	}
	s.mu.Lock()
	s.sock = sock
	for id, r := range s.rooms {
		sock.Join("chat_room:"+id, r.onRoomEvent)
	}
	s.mu.Unlock()

	s.socketDone.Add(1)
	go func() {
		defer s.socketDone.Done()
		err := sock.Run(life)
		s.socketUp.Store(false)
		var up *phoenix.UpgradeError
		switch {
		case ctx.Err() != nil || life.Err() != nil:
		case errors.As(err, &up) && (up.Status == http.StatusUnauthorized || up.Status == http.StatusForbidden):
			s.failRun(errors.Join(ErrUnauthorized, err))
		case errors.Is(err, ErrCrossOriginRedirect):
			s.failRun(fmt.Errorf("bandonce: Band's socket URL must not redirect to another origin (check %s): %w", s.cfg.named("SocketURL"), err))
		default:
			// A conflict or a refused upgrade: control signals cannot
			// reach this shell, but messages still do through polling.
			s.log.Error("bandonce: socket gave up; serving by polling only", "err", err)
		}
	}()
	return connected
}

// catchUp makes up for the pushes a topic missed before its join was
// answered: the room of a chat_room topic looks at /next now, and the
// agent's rooms are listed again for an agent_rooms join answered after
// start began listing them (a reconnect's, a rejoin's, or the first when
// the socket came up late), so a room joined in between is found now
// rather than at the next periodic listing. A first join answered before
// the listing needs none: the listing sees every room joined before it.
func (s *Shell) catchUp(topic string) {
	if strings.HasPrefix(topic, "agent_rooms:") {
		if s.listed.Load() {
			s.relistRooms()
		}
		return
	}
	if strings.HasPrefix(topic, "agent_control:") {
		// A play may be among the signals the channel missed: every
		// stopped room probes /next (a room that is not stopped missed
		// nothing it must act on; a lost stop is Band's gate's).
		s.mu.Lock()
		rooms := make([]*room, 0, len(s.rooms))
		for _, r := range s.rooms {
			rooms = append(rooms, r)
		}
		s.mu.Unlock()
		slices.SortFunc(rooms, func(a, b *room) int { return strings.Compare(a.id, b.id) })
		for _, r := range rooms {
			if r.ctl.isStopped() {
				r.ctl.requestCatchUp()
			}
		}
		return
	}
	id, ok := strings.CutPrefix(topic, "chat_room:")
	if !ok {
		return
	}
	s.mu.Lock()
	r := s.rooms[id]
	s.mu.Unlock()
	if r != nil {
		r.ctl.requestCatchUp()
	}
}

// onRooms receives agent_rooms: rooms the agent joins or leaves.
func (s *Shell) onRooms(event string, payload json.RawMessage) {
	var p struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(payload, &p); err != nil || p.ID == "" {
		s.log.Warn("bandonce: ignoring a malformed room push", "event", event, "payload", string(payload))
		return
	}
	switch event {
	case "room_added":
		s.log.Info("bandonce: joined a room", "room", p.ID)
		s.addRoom(p.ID)
	case "room_removed":
		s.log.Info("bandonce: left a room", "room", p.ID)
		s.removeRoom(p.ID)
	}
}

// onRoomEvent wakes the room when a message arrives. The push is only a
// hint: /next stays the source of truth, so its content is not used.
func (r *room) onRoomEvent(event string, payload json.RawMessage) {
	if event != "message_created" {
		return
	}
	var p struct {
		SenderID   string `json:"sender_id"`
		SenderType string `json:"sender_type"`
	}
	if json.Unmarshal(payload, &p) == nil && p.SenderType == "Agent" && p.SenderID == r.s.agentID() {
		return // the echo of our own post
	}
	// In a stopped room a new message is also a reason to probe: if Band
	// serves it, the play that reopened the room was lost.
	r.ctl.requestProbe()
}
