package verify

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// fromEnvironment applies EnvSchedules, EnvSeed and EnvCheck over the
// options. A value it cannot use is not ignored: it lands in envErrs, and
// every check then fails with it (an empty variable counts as unset), since a replay line or a longer run that
// silently fell back to the defaults would pass for the wrong reason.
func (c *config) fromEnvironment() {
	if v := os.Getenv(EnvSchedules); v != "" {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n <= 0 {
			c.envErrs = append(c.envErrs, fmt.Sprintf(
				"%s=%q is not a positive whole number: it sets how many schedules each check runs, such as %d or 500",
				EnvSchedules, v, DefaultSchedules))
		} else {
			c.schedules = n
			c.fromEnv = append(c.fromEnv, EnvSchedules+"="+v)
		}
	}
	if v := os.Getenv(EnvSeed); v != "" {
		s, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			c.envErrs = append(c.envErrs, fmt.Sprintf(
				"%s=%q is not a whole number: it sets the first schedule's seed, such as %d, as a replay line gives it",
				EnvSeed, v, DefaultSeed))
		} else {
			c.seed = s
			c.fromEnv = append(c.fromEnv, EnvSeed+"="+v)
		}
	}
	if v := os.Getenv(EnvCheck); v != "" {
		c.only = map[string]bool{}
		var unknown []string
		for _, name := range strings.Split(v, ",") {
			name = strings.TrimSpace(name)
			switch {
			case name == "":
			case defByName(name) == nil:
				unknown = append(unknown, strconv.Quote(name))
			default:
				c.only[name] = true
			}
		}
		switch {
		case len(unknown) > 0:
			c.envErrs = append(c.envErrs, fmt.Sprintf(
				"%s=%q: no check is named %s; the checks are %s (comma-separated)",
				EnvCheck, v, strings.Join(unknown, " or "), strings.Join(checkNames(), ", ")))
		case len(c.only) == 0:
			c.envErrs = append(c.envErrs, fmt.Sprintf(
				"%s=%q names no check; unset it to run them all, or name some of %s (comma-separated)",
				EnvCheck, v, strings.Join(checkNames(), ", ")))
		default:
			c.fromEnv = append(c.fromEnv, EnvCheck+"="+v)
		}
	}
}

// defByName returns the check named name, or nil.
func defByName(name string) *checkDef {
	for _, d := range allDefs {
		if d.name == name {
			return d
		}
	}
	return nil
}

// checkNames lists the checks' names, in the suite's order.
func checkNames() []string {
	names := make([]string, len(allDefs))
	for i, d := range allDefs {
		names[i] = d.name
	}
	return names
}

// envError is the one message that reports every unusable variable.
func (c *config) envError() string {
	if len(c.envErrs) == 0 {
		return ""
	}
	return "verify: the environment asks for something the verifier cannot do, so nothing ran:\n  " +
		strings.Join(c.envErrs, "\n  ")
}
