package verify

import (
	"flag"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// TestingTer is a testing.TB that wraps a *testing.T, such as a recorder
// that keeps Errorf calls instead of failing. The verifier runs every
// schedule in a testing/synctest bubble, which needs a *testing.T; it uses
// t itself when t is one, TestingT() when t has that method, and otherwise
// a private test of its own started with testing.RunTests.
type TestingTer interface {
	testing.TB
	TestingT() *testing.T
}

// withT runs f with a *testing.T for the simulation's bubbles. It reports
// false when no test could be started for f.
func withT(t testing.TB, f func(*testing.T)) bool {
	switch tt := t.(type) {
	case *testing.T:
		f(tt)
		return true
	case TestingTer:
		f(tt.TestingT())
		return true
	}
	return privateT(f)
}

// privateMu keeps private tests one at a time: they swap os.Stdout.
var privateMu sync.Mutex

// privateT runs f inside a test of its own, for a testing.TB that is no
// *testing.T (a benchmark's B, or a mock in an Example). The test's own
// progress lines are sent to the null device so that they cannot mix
// with an Example's output; f reports nothing through it.
func privateT(f func(*testing.T)) bool {
	privateMu.Lock()
	defer privateMu.Unlock()
	if flag.Lookup("test.v") == nil {
		testing.Init() // outside a test binary: give RunTests its flags
	}
	if testing.Verbose() {
		if null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0); err == nil {
			stdout := os.Stdout
			os.Stdout = null
			defer func() {
				os.Stdout = stdout
				_ = null.Close()
			}()
		}
	}
	run := ""
	if fl := flag.Lookup("test.run"); fl != nil {
		run = fl.Value.String()
	}
	// Every piece of the -run pattern matches this test, so the caller's
	// own -run cannot hide it; other patterns (-skip) match as regexps.
	match := func(pat, str string) (bool, error) {
		if pat == "" || strings.Contains(run, pat) {
			return true, nil
		}
		return regexp.MatchString(pat, str)
	}
	var once sync.Once
	ran := false
	testing.RunTests(match, []testing.InternalTest{{Name: "BandonceVerify", F: func(t *testing.T) {
		once.Do(func() { // -count=N runs it N times; once is enough
			ran = true
			f(t)
		})
	}}})
	return ran
}
