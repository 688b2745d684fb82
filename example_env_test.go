package bandonce_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/fakeband"
)

// An agent configured from its environment: here the lines `fakeband`
// prints, in the convention of Band's official SDKs (the host root in
// BAND_REST_URL); in production, ConfigFromEnv(os.Getenv).
func ExampleConfigFromEnv() {
	band := fakeband.New(fakeband.Options{})
	defer band.Close()
	agent, ada := band.AddAgent("echo"), band.AddHuman("ada")
	room := band.AddRoom("demo", ada, agent.ID)
	_, _ = band.Say(room.ID, ada.ID, "hello", agent.ID)
	base, err := band.Listen("127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	env := map[string]string{
		"BAND_API_KEY":  agent.Key,
		"BAND_AGENT_ID": agent.ID,
		"BAND_REST_URL": strings.TrimSuffix(base, "/api/v1"),
	}

	cfg, err := bandonce.ConfigFromEnv(func(name string) string { return env[name] })
	if err != nil {
		panic(err)
	}
	cfg.Handler = func(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
		return &bandonce.Reply{Content: "echo: " + m.Body(), Mentions: []string{m.SenderID}}, nil
	}
	shell, err := bandonce.New(cfg)
	if err != nil {
		panic(err)
	}
	res, err := shell.Drain(context.Background())
	fmt.Println("replied:", res.Outcomes[bandonce.Replied], err)
	fmt.Println("agent checked:", shell.AgentID() == agent.ID)

	// A variable in the wrong convention is named, with the fix.
	env["BAND_BASE_URL"], env["BAND_REST_URL"] = "http://127.0.0.1:8787", ""
	_, err = bandonce.ConfigFromEnv(func(name string) string { return env[name] })
	fmt.Println(err)
	// Output:
	// replied: 1 <nil>
	// agent checked: true
	// bandonce: BAND_BASE_URL: is a host root (http://127.0.0.1:8787); it is the REST root, with /api/v1 (http://127.0.0.1:8787/api/v1); a host root goes in BAND_REST_URL
}
