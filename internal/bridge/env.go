package bridge

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
)

// DefaultEnv names the variables of bandonce run's own environment that a
// command gets when Options.Env adds none: what a program needs to run,
// find its tools and print in the user's language, and nothing that holds
// a credential. LC_* is a prefix: every locale variable.
var DefaultEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TMPDIR", "TZ", "LANG", "LC_*", "TERM"}

// PassedWithKey are the variables a command gets from bandonce run's own
// environment only with Options.PassKey: the agent's key, and where Band
// is, for a command that calls Band itself.
var PassedWithKey = []string{"BAND_API_KEY", "BAND_AGENT_ID", "BAND_BASE_URL", "BAND_REST_URL", "BAND_WS_URL"}

// ErrKeyVariable is wrapped by NewCommand's error for an Options.Env
// entry that would hand the command a Band SDK's variable (BAND_* or
// THENVOI_*): the key goes to a command only with Options.PassKey.
var ErrKeyVariable = errors.New("the agent's key and Band's URLs reach a command only with -pass-key")

// envFilter decides which of bandonce run's variables a command gets.
type envFilter struct {
	names    []string // exact names
	prefixes []string // from patterns ending in *
}

// parseEnv checks Options.Env: names of variables, or prefixes ending in
// "*", never a Band SDK's (which a prefix never matches either).
func parseEnv(extra []string) (envFilter, error) {
	var f envFilter
	for _, p := range slices.Concat(DefaultEnv, extra) {
		name, prefix := strings.CutSuffix(p, "*")
		switch {
		case name == "" || strings.ContainsAny(name, "=*\x00"):
			return f, fmt.Errorf("environment variable %q: want a NAME, or a PREFIX* of names", p)
		case bandVariable(name):
			return f, fmt.Errorf("environment variable %q: %w", p, ErrKeyVariable)
		case prefix:
			f.prefixes = append(f.prefixes, name)
		default:
			f.names = append(f.names, name)
		}
	}
	return f, nil
}

// bandVariable reports whether name is one Band's SDKs read.
func bandVariable(name string) bool {
	n := strings.ToUpper(name)
	return strings.HasPrefix(n, "BAND_") || strings.HasPrefix(n, "THENVOI_")
}

func (f envFilter) allows(name string) bool {
	return !bandVariable(name) && (slices.Contains(f.names, name) ||
		slices.ContainsFunc(f.prefixes, func(p string) bool { return strings.HasPrefix(name, p) }))
}

// baseEnv is what a command inherits from environ (nil means
// os.Environ()): the variables the filter allows, none whose value holds
// the key unless passKey, and with passKey the PassedWithKey variables.
func (c *Command) baseEnv() []string {
	environ := c.opts.Environ
	if environ == nil {
		environ = os.Environ()
	}
	var env []string
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		switch {
		case c.opts.PassKey && slices.Contains(PassedWithKey, name):
			env = append(env, kv)
		case !c.env.allows(name):
		case !c.opts.PassKey && c.opts.Key.In(value):
			// A copy of the key under another name (a .env file loaded
			// whole, a wrapper's own variable) stays behind too.
		default:
			env = append(env, kv)
		}
	}
	if c.opts.PassKey && c.opts.Key.Value() != "" {
		env = append(env, "BAND_API_KEY="+c.opts.Key.Value())
	}
	return env
}
