package proof

import (
	"fmt"
	"os"
	"strconv"
	"testing"
)

func TestDebugOneReplicaSchedule(t *testing.T) {
	seed, _ := strconv.ParseInt(os.Getenv("SEED"), 10, 64)
	s := Random(seed, GenOptions{Replicas: 2})
	for _, e := range s.Events {
		fmt.Println("  ", e)
	}
	fmt.Println("skew", s.Skew)
	r := Simulate(t, s, Options{Trace: func(l string) { fmt.Println(l) }})
	fmt.Println(seed, r.Violation, r.Requests, r.Lives, r.Failovers, r.Faults)
}

func TestDebugScan(t *testing.T) {
	from, _ := strconv.ParseInt(os.Getenv("FROM"), 10, 64)
	n, _ := strconv.Atoi(os.Getenv("N"))
	seen := map[Invariant]int{}
	runEach(t, RunConfig{Workers: 2, Engine: Options{}.withDefaults()}, n, func(i int) *Schedule { return Random(from+int64(i), GenOptions{Replicas: 2}) }, func(i int, r Result) {
		for inv, v := range r.Found {
			if seen[inv] < 3 {
				seen[inv]++
				fmt.Println(from+int64(i), inv, v.Reason)
			}
		}
	})
}
