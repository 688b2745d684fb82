package bandonce_test

// How the scheduler shares its rounds: at most MaxConcurrentRooms run at
// once, the rounds talking to Band share MaxRequestsInFlight slots, and no
// room with work waits while a round's place is free.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/band-once/bandonce"
)

// Seeded schedules of many rooms on one or two rounds at once and one or
// two request slots, with handlers of different lengths. Band answers in
// no virtual time, so whenever every goroutine waits, every round runs
// its handler: the handlers running must be as many as the cap allows,
// or a room waits for a slot that was given back (a lost wake-up). Every
// message is answered exactly once and Drain ends.
func TestNoRoomWaitsWithARoundFreeAndEveryMessageIsAnsweredOnce(t *testing.T) {
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 29))
		rooms, limit, slots := 3+rng.IntN(10), 1+rng.IntN(2), 1+rng.IntN(2)
		if rng.IntN(3) == 0 {
			limit = rooms // the cap out of the way: only the slots bound the rounds
		}
		said := make([][]time.Duration, rooms) // per room, each message's handler length
		for i := range said {
			for range 1 + rng.IntN(4) {
				said[i] = append(said[i], time.Duration(rng.IntN(4))*time.Second)
			}
		}
		name := fmt.Sprintf("seed=%d/rooms=%d/limit=%d/slots=%d", seed, rooms, limit, slots)
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { checkSchedule(t, limit, slots, said) })
		})
	}
}

func checkSchedule(t *testing.T, limit, slots int, said [][]time.Duration) {
	w := newWorld(t, len(said))
	length := map[string]time.Duration{}
	left := make([]int, len(said)) // per room, messages whose handler has not returned
	roomOf := map[string]int{}
	var ids []string
	for i, msgs := range said {
		for j, d := range msgs {
			id := w.say(w.rooms[i], fmt.Sprint("m", j))
			length[id], roomOf[id] = d, i
			ids = append(ids, id)
		}
		left[i] = len(msgs)
	}
	var mu sync.Mutex
	running, calls := 0, map[string]int{}
	cfg := w.config(func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
		mu.Lock()
		running++
		calls[m.ID]++
		d := length[m.ID]
		mu.Unlock()
		time.Sleep(d)
		mu.Lock()
		running--
		left[roomOf[m.ID]]--
		mu.Unlock()
		return echo(ctx, m)
	})
	cfg.MaxConcurrentRooms, cfg.MaxRequestsInFlight = limit, slots
	cfg.PollInterval, cfg.IdleRequestInterval = time.Hour, time.Hour
	s, err := bandonce.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	wait, returned := drainIn(t, s, context.Background())
	// Every event falls on a whole second: look between them.
	for !returned() {
		mu.Lock()
		withWork := 0
		for _, n := range left {
			if n > 0 {
				withWork++
			}
		}
		if want := min(limit, withWork); running != want {
			t.Errorf("at %v: %d handlers run, %d rooms have work: want %d", time.Now(), running, withWork, want)
		}
		mu.Unlock()
		time.Sleep(500 * time.Millisecond)
	}
	res, err := wait()
	if err != nil || !res.Drained {
		t.Fatalf("Drain: %+v, %v", res, err)
	}
	if res.Outcomes[bandonce.Replied] != len(ids) {
		t.Errorf("outcomes %v, want %d replied", res.Outcomes, len(ids))
	}
	for _, id := range ids {
		if calls[id] != 1 || w.repliesTo(w.rooms[roomOf[id]], bandonce.DefaultKey(id)) != 1 {
			t.Errorf("message %s: %d handler calls, %d replies; want 1 and 1", id, calls[id],
				w.repliesTo(w.rooms[roomOf[id]], bandonce.DefaultKey(id)))
		}
	}
}
