package boltledger

import (
	"context"
	"strconv"
	"testing"

	"github.com/band-once/bandonce"
)

// BenchmarkSetKey measures one synced SetKey: a new key's intent, and the
// accepted that overwrites it. written-B/op is what bbolt wrote per call.
func BenchmarkSetKey(b *testing.B) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		state bandonce.KeyState
		key   func(i int) string
	}{
		{"intent-new-key", bandonce.KeyIntent, func(i int) string { return "msg:" + strconv.Itoa(i) }},
		{"accepted-same-key", bandonce.KeyAccepted, func(int) string { return "msg:0" }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			l, _ := openNew(b)
			before := l.Stats()
			calls := 0
			for b.Loop() {
				if err := l.SetKey(ctx, "3f1e7c2a-0000-4000-8000-000000000001", tc.key(calls), tc.state); err != nil {
					b.Fatal(err)
				}
				calls++
			}
			after := l.Stats()
			b.ReportMetric(float64(after.BytesWritten-before.BytesWritten)/float64(calls), "written-B/op")
			b.ReportMetric(float64(after.Syncs-before.Syncs)/float64(calls), "syncs/op")
		})
	}
}
