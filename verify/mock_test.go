package verify

import (
	"fmt"
	"sync"
	"testing"
)

// mockT is a testing.TB that records what the verifier reports instead of
// failing the test, as River tests its assertions. It hands the verifier
// the real *testing.T for the simulation's bubbles.
type mockT struct {
	testing.TB
	t *testing.T

	mu     sync.Mutex
	errors []string
	logs   []string
	failed bool
}

func newMockT(t *testing.T) *mockT { return &mockT{TB: t, t: t} }

func (m *mockT) TestingT() *testing.T { return m.t }

func (m *mockT) Helper() {}

func (m *mockT) Errorf(format string, args ...any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.errors = append(m.errors, fmt.Sprintf(format, args...))
	m.failed = true
}

func (m *mockT) Error(args ...any) { m.Errorf("%s", fmt.Sprint(args...)) }

func (m *mockT) Fatalf(format string, args ...any) {
	m.Errorf(format, args...)
	m.t.FailNow()
}

func (m *mockT) Fatal(args ...any) { m.Fatalf("%s", fmt.Sprint(args...)) }

func (m *mockT) Fail() {
	m.mu.Lock()
	m.failed = true
	m.mu.Unlock()
}

func (m *mockT) FailNow() {
	m.Fail()
	m.t.FailNow()
}

func (m *mockT) Failed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.failed
}

func (m *mockT) Logf(format string, args ...any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.logs = append(m.logs, fmt.Sprintf(format, args...))
}

func (m *mockT) Log(args ...any) { m.Logf("%s", fmt.Sprint(args...)) }

func (m *mockT) Errors() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.errors...)
}

func (m *mockT) Logs() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.logs...)
}
