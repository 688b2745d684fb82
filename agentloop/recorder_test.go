package agentloop_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// recorder is a testing.TB that keeps the verifier's errors instead of
// failing the test, and hands it the real *testing.T for its bubbles.
type recorder struct {
	testing.TB
	t *testing.T

	mu     sync.Mutex
	errors []string
}

func (r *recorder) TestingT() *testing.T { return r.t }
func (r *recorder) Helper()              {}
func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}
func (r *recorder) Error(args ...any) { r.Errorf("%s", fmt.Sprint(args...)) }
func (r *recorder) Fail()             {}
func (r *recorder) Failed() bool      { return false }

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
