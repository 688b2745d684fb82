package bandonce

import (
	"context"
	"time"
)

// relistEvery is how many resync intervals pass between two listings of
// the agent's rooms while the socket is up. A room the agent joins is
// announced by a room_added push; the listing finds one whose push was
// lost, and it is cheap (a page per hundred rooms).
const relistEvery = 5

// watchRooms lists the agent's rooms again after every reconnect (pushes
// sent while the socket was down are never replayed), every fifth resync
// interval while the socket is up, and every resync interval without it,
// and starts serving any room it did not know. It returns when ctx ends.
func (s *Shell) watchRooms(ctx context.Context) {
	failures := 0
	for {
		wait := s.cfg.ResyncInterval
		if s.socketUp.Load() {
			wait *= relistEvery
		}
		if failures > 0 {
			wait = min(wait, s.jitter.Backoff(s.cfg.Retry.BaseDelay, s.cfg.Retry.MaxDelay, failures))
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-s.relist:
		case <-t.C:
			select { // a request that came with the timer is served by this listing
			case <-s.relist:
			default:
			}
		}
		t.Stop()
		chats, err := s.api.Chats(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if fatal := asFatal(err); fatal != nil {
				s.failRun(fatal)
				return
			}
			failures++
			s.log.Warn("bandonce: listing the agent's rooms failed; will try again", "call", "GET /agent/chats", "url", s.cfg.baseURL.String(),
				"failures", failures, "err", err)
			continue
		}
		failures = 0
		for _, c := range chats {
			if s.addRoom(c.ID) {
				s.log.Info("bandonce: found a room the agent had joined unannounced", "room", c.ID)
			}
		}
	}
}

// relistRooms asks watchRooms to list the rooms now; it never blocks.
func (s *Shell) relistRooms() {
	select {
	case s.relist <- struct{}{}:
	default:
	}
}
