package fakeband

import (
	"fmt"
	"testing"
)

// TestUUIDsAreTheFormattedOnes holds uuid to the format it replaced,
// so that a seed still gives the ids it gave.
func TestUUIDsAreTheFormattedOnes(t *testing.T) {
	for _, seed := range []uint64{0, 1, 777, 1 << 63, ^uint64(0)} {
		g, want := ids{seed: seed}, ids{seed: seed}
		for range 1000 {
			got := g.uuid()
			want.n++
			head, tail := mix64(want.seed+want.n), mix64(want.seed^0x9e3779b97f4a7c15)
			w := fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x",
				uint32(head>>32), uint16(tail>>48), uint16(tail>>32)&0xfff, uint16(tail>>16)&0xfff, want.n&0xffffffffffff)
			if got != w {
				t.Fatalf("seed %d, id %d: %q, want %q", seed, want.n, got, w)
			}
		}
	}
	g := ids{seed: 5, n: 1<<48 - 2}
	if a, b := g.uuid(), g.uuid(); a[24:] != "ffffffffffff" || b[24:] != "000000000000" {
		t.Fatalf("the counter's group wraps as %%012x of n&0xffffffffffff: %q, %q", a, b)
	}
}
