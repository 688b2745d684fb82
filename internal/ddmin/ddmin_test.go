package ddmin

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// search fails while its list holds every one of need; it records the
// candidates it was offered, one TryAll a row.
type search struct {
	best    []int
	need    []int
	budget  int
	trials  int
	offered [][][]int
}

func (s *search) Events() []int { return s.best }
func (s *search) Spent() bool   { return s.trials >= s.budget }

func (s *search) TryAll(cands [][]int) bool {
	s.offered = append(s.offered, cands)
	for _, c := range cands {
		if s.Spent() {
			return false
		}
		s.trials++
		if s.fails(c) {
			s.best = c
			return true
		}
	}
	return false
}

func (s *search) fails(list []int) bool {
	for _, n := range s.need {
		if !slices.Contains(list, n) {
			return false
		}
	}
	return true
}

func TestDropChunksFindsTheOneMinimalList(t *testing.T) {
	for _, need := range [][]int{{7}, {3, 7}, {0, 19}, {4, 5, 6}, {}} {
		t.Run(fmt.Sprint(need), func(t *testing.T) {
			s := &search{need: need, budget: 1000}
			for i := range 20 {
				s.best = append(s.best, i)
			}
			DropChunks[int](s)
			assert.Equal(t, len(need), len(s.best), "left %v", s.best)
			assert.True(t, s.fails(s.best))
			// 1-minimal: no single event can go.
			for i := range s.best {
				assert.False(t, s.fails(slices.Delete(slices.Clone(s.best), i, i+1)), "event %d could still go", s.best[i])
			}
		})
	}
}

func TestDropChunksOffersHalvesThenSmallerChunks(t *testing.T) {
	s := &search{best: []int{0, 1, 2, 3}, need: []int{0, 1, 2, 3}, budget: 100}
	DropChunks[int](s)
	require.Len(t, s.offered, 2)
	assert.Equal(t, [][]int{{2, 3}, {0, 1}}, s.offered[0], "halves first")
	assert.Equal(t, [][]int{{1, 2, 3}, {0, 2, 3}, {0, 1, 3}, {0, 1, 2}}, s.offered[1], "then single events")
}

func TestDropChunksStopsWhenTheBudgetIsSpent(t *testing.T) {
	s := &search{need: []int{5}, budget: 3}
	for i := range 64 {
		s.best = append(s.best, i)
	}
	DropChunks[int](s)
	assert.Equal(t, 3, s.trials)
	assert.Contains(t, s.best, 5)
	assert.Greater(t, len(s.best), 1, "three trials cannot reach one event")
}

// plainers for Simplify: halve a value, or take it to zero.
var plainers = []func(*int) bool{
	func(p *int) bool { return Zero(p) },
	func(p *int) bool {
		if *p > 1 {
			*p /= 2
			return true
		}
		return false
	},
}

func TestSimplifyTogetherBuildsAnEventsCandidatesFromOneList(t *testing.T) {
	// Fails while the first value is odd: zero is refused, halving 9 to 4
	// is refused too, so nothing is kept.
	s := &oddSearch{search: search{best: []int{9, 6}, budget: 100}}
	Simplify[int](s, plainers, true)
	assert.Equal(t, [][][]int{{{0, 6}, {4, 6}}, {{9, 0}, {9, 3}}}, s.offered)
	assert.Equal(t, []int{9, 0}, s.best, "the first candidate that fails is kept")
}

func TestSimplifyInTurnBuildsEachOnTheLastKept(t *testing.T) {
	s := &oddSearch{search: search{best: []int{9, 6}, budget: 100}}
	Simplify[int](s, plainers, false)
	// 6 → 0 is kept, so halving is not offered: 0 has nothing to halve.
	assert.Equal(t, [][][]int{{{0, 6}}, {{4, 6}}, {{9, 0}}}, s.offered)
	assert.Equal(t, []int{9, 0}, s.best)
}

// oddSearch fails while the first value is odd.
type oddSearch struct{ search }

func (s *oddSearch) TryAll(cands [][]int) bool {
	s.offered = append(s.offered, cands)
	for _, c := range cands {
		s.trials++
		if c[0]%2 == 1 {
			s.best = c
			return true
		}
	}
	return false
}

func TestZero(t *testing.T) {
	n, text := 3, ""
	assert.True(t, Zero(&n))
	assert.Equal(t, 0, n)
	assert.False(t, Zero(&n))
	assert.False(t, Zero(&text))
}

func TestOne(t *testing.T) {
	n := 3
	assert.True(t, One(&n))
	assert.Equal(t, 1, n)
	assert.False(t, One(&n))
	n = 0
	assert.False(t, One(&n))
	assert.Equal(t, 0, n, "a count of zero is left alone")
}

func TestRoundsRepeatsUntilNothingChanges(t *testing.T) {
	n, rounds := 10, 0
	Rounds(func() string { return fmt.Sprint(n) }, func() bool { return false }, func() {
		rounds++
		n = max(n-3, 0)
	})
	assert.Equal(t, 0, n)
	assert.Equal(t, 5, rounds, "10, 7, 4, 1, 0, then one round that changes nothing")

	rounds = 0
	Rounds(func() string { return fmt.Sprint(rounds) }, func() bool { return rounds >= 2 }, func() { rounds++ })
	assert.Equal(t, 2, rounds, "a spent budget ends the rounds")
}

func TestRoomIndex(t *testing.T) {
	index, n := RoomIndex([]bool{false, true, false, true, true})
	assert.Equal(t, []int{0, 0, 1, 1, 2}, index)
	assert.Equal(t, 3, n)
}

func TestRelabel(t *testing.T) {
	assert.Equal(t, "r1m4", Relabel("r3m4", 0))
	assert.Equal(t, "r2m1", Relabel("r2m1", 1))
	assert.Equal(t, "hello", Relabel("hello", 0))
}
