package fakeband_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/band-once/bandonce/fakeband"
)

// agentCall sends one agent request to the Band and returns the status,
// or says the response was lost.
func agentCall(b *fakeband.Band, key, method, path, body string) string {
	req, _ := http.NewRequest(method, b.BaseURL()+path, strings.NewReader(body))
	req.Header.Set("X-API-Key", key)
	resp, err := b.HTTPClient().Do(req)
	if errors.Is(err, fakeband.ErrResponseLost) {
		return "response lost"
	}
	if err != nil {
		return "error: " + err.Error()
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return fmt.Sprint(resp.StatusCode, " ", http.StatusText(resp.StatusCode))
}

// A human asks, the agent walks the lifecycle over HTTP, and the ground
// truth shows what the platform applied.
func Example() {
	b := fakeband.New(fakeband.Options{Seed: 1})
	defer b.Close()
	alice := b.AddHuman("Alice")
	echo := b.AddAgent("Echo")
	room := b.AddRoom("support", alice, echo.ID)

	msg, _ := b.Say(room.ID, alice.ID, "ping", echo.ID)

	chat := "/agent/chats/" + room.ID
	reply := `{"message":{"content":"pong","mentions":[{"id":"` + alice.ID + `"}]}}`
	fmt.Println("next:      ", agentCall(b, echo.Key, "GET", chat+"/messages/next", ""))
	fmt.Println("processing:", agentCall(b, echo.Key, "POST", chat+"/messages/"+msg+"/processing", ""))
	fmt.Println("reply:     ", agentCall(b, echo.Key, "POST", chat+"/messages", reply))
	fmt.Println("processed: ", agentCall(b, echo.Key, "POST", chat+"/messages/"+msg+"/processed", ""))
	fmt.Println("next:      ", agentCall(b, echo.Key, "GET", chat+"/messages/next", ""))

	names := strings.NewReplacer(alice.ID, "alice", echo.ID, "echo")
	for _, p := range b.Posts(room.ID) {
		fmt.Printf("%s says %q\n", p.SenderType, names.Replace(p.Content))
	}
	fmt.Println("status:", b.Status(echo.ID, msg))
	// Output:
	// next:       200 OK
	// processing: 200 OK
	// reply:      201 Created
	// processed:  200 OK
	// next:       204 No Content
	// User says "@[[echo]] ping"
	// Agent says "@[[alice]] pong"
	// status: processed
}

// A response lost after the post was applied tempts a client to retry,
// and Band has no idempotency key: the retry is a second message.
func ExampleBand_Inject() {
	b := fakeband.New(fakeband.Options{Seed: 1})
	defer b.Close()
	alice := b.AddHuman("Alice")
	echo := b.AddAgent("Echo")
	room := b.AddRoom("support", alice, echo.ID)
	b.Inject(fakeband.Fault{Endpoint: fakeband.EndpointPost, Nth: 1, Kind: fakeband.LoseResponse})

	reply := `{"message":{"content":"pong","mentions":[{"id":"` + alice.ID + `"}]}}`
	fmt.Println(agentCall(b, echo.Key, "POST", "/agent/chats/"+room.ID+"/messages", reply))
	fmt.Println(agentCall(b, echo.Key, "POST", "/agent/chats/"+room.ID+"/messages", reply))
	fmt.Println("messages stored:", len(b.Posts(room.ID)))
	fmt.Println("faults fired:", b.FaultsFired())
	// Output:
	// response lost
	// 201 Created
	// messages stored: 2
	// faults fired: map[post/lose_response:1]
}

// While a room is stopped, /next hides the backlog and replies are
// refused; play makes the backlog actionable again, oldest first.
func ExampleBand_StopRoom() {
	b := fakeband.New(fakeband.Options{Seed: 1})
	defer b.Close()
	alice := b.AddHuman("Alice")
	echo := b.AddAgent("Echo")
	room := b.AddRoom("support", alice, echo.ID)
	next := "/agent/chats/" + room.ID + "/messages/next"

	_ = b.StopRoom(room.ID)
	_, _ = b.Say(room.ID, alice.ID, "are you there?", echo.ID)
	fmt.Println("stopped:", b.Stopped(echo.ID, room.ID), agentCall(b, echo.Key, "GET", next, ""))
	_, err := b.Say(room.ID, echo.ID, "yes", alice.ID)
	fmt.Println("reply:", err)

	_ = b.PlayRoom(room.ID)
	fmt.Println("stopped:", b.Stopped(echo.ID, room.ID), agentCall(b, echo.Key, "GET", next, ""))
	// Output:
	// stopped: true 204 No Content
	// reply: fakeband: 403 execution_stopped: agent execution is stopped in this chat
	// stopped: false 200 OK
}
