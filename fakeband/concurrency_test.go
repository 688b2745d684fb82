package fakeband_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/band-once/bandonce/fakeband"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Many clients hammering one message must still see every attempt number
// exactly once: /processing is not exclusive, but it is atomic.
func TestConcurrentAttemptsAreNumberedOnce(t *testing.T) {
	f := newFixture(t)
	msg := f.say(t, "contended")
	const workers, each = 8, 25
	numbers := make(chan int, workers*each)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				// Off the test goroutine: report and return, never FailNow.
				resp, err := f.try(http.MethodPost, f.chat("/messages/"+msg+"/processing"), f.bot.Key, nil)
				if err != nil || resp.status != http.StatusOK {
					t.Errorf("processing: %v %d %s", err, resp.status, resp.raw)
					return
				}
				var body struct {
					Data struct {
						AttemptNumber int `json:"attempt_number"`
					} `json:"data"`
				}
				if err := json.Unmarshal(resp.raw, &body); err != nil || body.Data.AttemptNumber == 0 {
					t.Errorf("processing: no attempt_number in %s (%v)", resp.raw, err)
					return
				}
				numbers <- body.Data.AttemptNumber
			}
		})
	}
	wg.Wait()
	close(numbers)
	var got []int
	for n := range numbers {
		got = append(got, n)
	}
	slices.Sort(got)
	want := make([]int, workers*each)
	for i := range want {
		want[i] = i + 1
	}
	assert.Equal(t, want, got)
	assert.Len(t, f.b.Marks(f.bot.ID, msg), workers*each)
}

func TestConcurrentPostsAreAllStoredInOneOrder(t *testing.T) {
	f := newFixture(t)
	const workers, each = 6, 20
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				// Off the test goroutine: report and return, never FailNow.
				if _, err := f.b.Say(f.room.ID, f.alice.ID, "hi", f.bot.ID); err != nil {
					t.Errorf("say: %v", err)
					return
				}
				if resp, err := f.try(http.MethodGet, f.chat("/context"), f.bot.Key, nil); err != nil || resp.status != http.StatusOK {
					t.Errorf("context: %v %d %s", err, resp.status, resp.raw)
					return
				}
			}
		})
	}
	wg.Wait()
	posts := f.b.Posts(f.room.ID)
	require.Len(t, posts, workers*each)
	for i := 1; i < len(posts); i++ {
		require.Less(t, posts[i-1].Seq, posts[i].Seq, "posts are in the global event order")
	}
}

// The room's title is encoded after the Band's lock is released; a rename
// at the same time must not race with it (run with -race).
func TestReadingARoomDoesNotRaceWithItsRename(t *testing.T) {
	b := fakeband.New(fakeband.Options{Seed: 1})
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	bot := b.AddAgent("Bot")
	c := b.HTTPClient()
	req := func(method, path, body string) {
		r, err := http.NewRequest(method, b.BaseURL()+path, strings.NewReader(body))
		require.NoError(t, err)
		r.Header.Set("X-API-Key", bot.Key)
		resp, err := c.Do(r)
		require.NoError(t, err)
		resp.Body.Close()
	}
	// The agent creates (and so owns) the room.
	r, _ := http.NewRequest(http.MethodPost, b.BaseURL()+"/agent/chats", strings.NewReader(`{"chat": {"title": "t0"}}`))
	r.Header.Set("X-API-Key", bot.Key)
	resp, err := c.Do(r)
	require.NoError(t, err)
	resp.Body.Close()
	id := b.CreatedRooms()[0].ID

	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := 0; i < 200; i++ {
			title := "a"
			if i%2 == 1 {
				title = "bb"
			}
			req(http.MethodPatch, "/agent/chats/"+id, `{"chat": {"title": "`+title+`"}}`)
		}
	}()
	go func() {
		defer wg.Done()
		for i := 0; i < 200; i++ {
			req(http.MethodGet, "/agent/chats/"+id, "")
		}
	}()
	wg.Wait()
}
