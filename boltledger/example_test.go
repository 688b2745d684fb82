package boltledger_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/boltledger"
)

// A ledger outlives the process: an intent recorded before a crash is
// there after the restart, so the shell knows to read the room first.
func Example() {
	dir, err := os.MkdirTemp("", "boltledger-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = os.RemoveAll(dir) }()
	path := filepath.Join(dir, "agent.ledger")
	ctx := context.Background()

	ledger, err := boltledger.Open(path, boltledger.Options{AgentID: "agent-1"})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := ledger.SetKey(ctx, "room-1", bandonce.DefaultKey("m-42"), bandonce.KeyIntent); err != nil {
		fmt.Println(err)
	}
	_ = ledger.Close() // as a crash would, short of the post

	restarted, err := boltledger.Open(path, boltledger.Options{AgentID: "agent-1"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = restarted.Close() }()
	state, err := restarted.Key(ctx, "room-1", bandonce.DefaultKey("m-42"))
	fmt.Println(state, err)

	// While it is open, nobody else can write it.
	_, err = boltledger.Open(path, boltledger.Options{AgentID: "agent-1"})
	fmt.Println(errors.Is(err, boltledger.ErrLocked))
	// Output:
	// intent <nil>
	// true
}
